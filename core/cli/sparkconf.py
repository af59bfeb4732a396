"""``stromboli spark-conf``: the ``--conf`` flags and templates a native spark-submit needs.

The rules live in :mod:`stromboli.integrations.spark.submitconf`; this module only reads the
flags, writes the files and prints the confs (stdout carries nothing else, so that the output
can be pasted or read by a script; the files written are listed on stderr).
"""

from __future__ import annotations

from pathlib import Path

import click

from stromboli.core.api.constants import DEFAULT_SCHEDULER_NAME
from stromboli.integrations.spark.submitconf import (
    DEFAULT_OVERHEAD_FACTOR,
    Mode,
    SparkConfError,
    SparkConfOptions,
    flag_lines,
    plan,
    properties,
)

FORMATS = ("flags", "properties")


@click.command("spark-conf")
@click.option("--queue", required=True, help="Volcano queue the application runs in.")
@click.option(
    "--mode",
    type=click.Choice([m.value for m in Mode]),
    default=Mode.VOLCANO_FEATURE_STEP.value,
    show_default=True,
    help="volcano-feature-step: Spark's VolcanoFeatureStep makes the PodGroup (Spark >= 3.3 "
    "with -Pvolcano; the PyPI pyspark has it). enrol: our controller groups the pods.",
)
@click.option(
    "--min-executors",
    type=int,
    default=0,
    show_default=True,
    help="Executors whose room the PodGroup reserves before the driver starts.",
)
@click.option("--priority-class", default=None, help="PriorityClass of the pods and the group.")
@click.option("--scheduler-name", default=DEFAULT_SCHEDULER_NAME, show_default=True)
@click.option("--namespace", default=None, help="Emit spark.kubernetes.namespace too.")
@click.option(
    "--group-name",
    default=None,
    help="enrol only: pods join this PodGroup; apply the podgroup.yaml written before submitting.",
)
@click.option("--driver-cores", type=int, default=1, show_default=True)
@click.option("--driver-memory", default="1g", show_default=True, help="JVM size (512m, 2g).")
@click.option("--executor-cores", type=int, default=1, show_default=True)
@click.option("--executor-memory", default="1g", show_default=True, help="JVM size (512m, 2g).")
@click.option(
    "--memory-overhead-factor",
    type=float,
    default=DEFAULT_OVERHEAD_FACTOR,
    show_default=True,
    help="Spark's memoryOverheadFactor (Spark uses 0.4 for PySpark apps when it is unset).",
)
@click.option(
    "--inline-podgroup",
    is_flag=True,
    help="Pass the PodGroup template as podGroupTemplateJson (Spark >= 4.2), not as a file.",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("stromboli-spark"),
    show_default=True,
    help="Where the pod templates, the PodGroup template and a properties file are written.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="flags",
    show_default=True,
    help="flags: --conf lines for a shell; properties: for spark-submit --properties-file.",
)
def spark_conf(
    queue: str,
    mode: str,
    min_executors: int,
    priority_class: str | None,
    scheduler_name: str,
    namespace: str | None,
    group_name: str | None,
    driver_cores: int,
    driver_memory: str,
    executor_cores: int,
    executor_memory: str,
    memory_overhead_factor: float,
    inline_podgroup: bool,
    output_dir: Path,
    output_format: str,
) -> None:
    """Print the --conf flags and write the templates that run spark-submit under Stromboli."""
    options = SparkConfOptions(
        queue=queue,
        mode=Mode(mode),
        scheduler_name=scheduler_name,
        namespace=namespace,
        priority_class=priority_class,
        group_name=group_name,
        min_executors=min_executors,
        driver_cores=driver_cores,
        driver_memory=driver_memory,
        executor_cores=executor_cores,
        executor_memory=executor_memory,
        memory_overhead_factor=memory_overhead_factor,
        inline_podgroup=inline_podgroup,
    )
    directory = output_dir.resolve()
    try:
        result = plan(options, directory)
    except SparkConfError as err:
        raise click.BadParameter(err.message, param_hint=f"'{err.field}'") from None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in result.files.items():
            (directory / name).write_text(text, encoding="utf-8")
    except OSError as err:
        raise click.ClickException(f"cannot write the templates into {directory}: {err}") from None
    for name in result.files:
        click.echo(f"wrote {directory / name}", err=True)
    if group_name:
        click.echo(
            f"create the PodGroup first: kubectl apply -f {directory / 'podgroup.yaml'}", err=True
        )
    text = properties(result.conf) if output_format == "properties" else flag_lines(result.conf)
    click.echo(text, nl=False)
