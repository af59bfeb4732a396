"""``stromboli spark-conf`` and its rules (``integrations/spark/submitconf.py``): the confs, the
pod and PodGroup templates, Spark's sizing arithmetic, refusals naming the flag, the
properties file read back as Java reads it. The real spark-submit runs in
``tests/controlplane/test_spark_submit_live.py``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api.registry import validate_object
from stromboli.core.cli import main
from stromboli.integrations.spark.submitconf import (
    DRIVER_TEMPLATE,
    EXECUTOR_TEMPLATE,
    FEATURE_STEP,
    PODGROUP_MANIFEST,
    PODGROUP_TEMPLATE,
    PROPERTIES_FILE,
    Mode,
    SparkConfError,
    SparkConfOptions,
    conf_flags,
    flag_lines,
    min_resources,
    plan,
    pod_size,
    properties,
)

OUT = PurePosixPath("/out")


def confs(options: SparkConfOptions) -> dict[str, str]:
    return dict(plan(options, OUT).conf)


def loaded(options: SparkConfOptions, name: str) -> dict[str, Any]:
    return yaml.safe_load(plan(options, OUT).files[name])


# --- the two modes ------------------------------------------------------------------------------


def test_feature_step_mode_confs() -> None:
    conf = confs(SparkConfOptions(queue="q1", min_executors=2))
    assert conf == {
        "spark.kubernetes.scheduler.name": "volcano",
        "spark.kubernetes.driver.podTemplateFile": "/out/driver-pod-template.yaml",
        "spark.kubernetes.executor.podTemplateFile": "/out/executor-pod-template.yaml",
        "spark.kubernetes.driver.pod.featureSteps": FEATURE_STEP,
        "spark.kubernetes.executor.pod.featureSteps": FEATURE_STEP,
        "spark.kubernetes.scheduler.volcano.podGroupTemplateFile": "/out/podgroup-template.yaml",
        "spark.driver.cores": "1",
        "spark.driver.memory": "1024m",
        "spark.driver.memoryOverheadFactor": "0.1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "1024m",
        "spark.executor.memoryOverheadFactor": "0.1",
        "spark.executor.instances": "2",
    }
    assert FEATURE_STEP == "org.apache.spark.deploy.k8s.features.VolcanoFeatureStep"


def test_feature_step_podgroup_template() -> None:
    options = SparkConfOptions(queue="q1", min_executors=2, priority_class="high")
    template = loaded(options, PODGROUP_TEMPLATE)
    # Spark names the group <app id>-podgroup itself: the template has no name to overwrite.
    assert template == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "spec": {
            "minMember": 1,
            "queue": "q1",
            "minResources": {"cpu": "3", "memory": "4224Mi"},
            "priorityClassName": "high",
        },
    }
    assert PODGROUP_MANIFEST not in plan(options, OUT).files


def test_templates_carry_scheduler_queue_role_priority() -> None:
    options = SparkConfOptions(queue="q1", priority_class="high", scheduler_name="stromboli")
    driver = loaded(options, DRIVER_TEMPLATE)
    executor = loaded(options, EXECUTOR_TEMPLATE)
    assert driver == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": {
                "scheduling.volcano.sh/queue-name": "q1",
                "volcano.sh/task-spec": "driver",
            },
            "labels": {"volcano.sh/queue-name": "q1"},
        },
        "spec": {"schedulerName": "stromboli", "priorityClassName": "high"},
    }
    assert executor["metadata"]["annotations"]["volcano.sh/task-spec"] == "executor"
    assert "scheduling.k8s.io/group-name" not in executor["metadata"]["annotations"]
    # No containers: Spark builds its own on the template (the live test submits these).
    assert "containers" not in driver["spec"]


def test_long_queue_name_is_not_a_label() -> None:
    queue = "a" * 64
    driver = loaded(SparkConfOptions(queue=queue), DRIVER_TEMPLATE)
    assert "labels" not in driver["metadata"]
    assert driver["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == queue


def test_enrol_mode_has_no_feature_step_and_no_group() -> None:
    options = SparkConfOptions(queue="q1", mode=Mode.ENROL)
    result = plan(options, OUT)
    conf = dict(result.conf)
    assert not any("featureSteps" in key or "volcano" in key for key in conf)
    assert conf["spark.kubernetes.scheduler.name"] == "volcano"
    assert set(result.files) == {DRIVER_TEMPLATE, EXECUTOR_TEMPLATE, PROPERTIES_FILE}
    driver = yaml.safe_load(result.files[DRIVER_TEMPLATE])
    assert "scheduling.k8s.io/group-name" not in driver["metadata"]["annotations"]


def test_enrol_mode_with_a_named_group() -> None:
    options = SparkConfOptions(
        queue="q1", mode=Mode.ENROL, group_name="etl", namespace="data", min_executors=1
    )
    result = plan(options, OUT)
    for name in (DRIVER_TEMPLATE, EXECUTOR_TEMPLATE):
        pod = yaml.safe_load(result.files[name])
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "etl"
    group = yaml.safe_load(result.files[PODGROUP_MANIFEST])
    assert group == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "etl", "namespace": "data"},
        "spec": {"minMember": 1, "queue": "q1", "minResources": {"cpu": "2", "memory": "2816Mi"}},
    }
    validate_object(group)
    assert dict(result.conf)["spark.kubernetes.namespace"] == "data"


def test_inline_template_is_json_and_writes_no_file() -> None:
    options = SparkConfOptions(queue="q1", inline_podgroup=True)
    result = plan(options, OUT)
    conf = dict(result.conf)
    assert "spark.kubernetes.scheduler.volcano.podGroupTemplateFile" not in conf
    inline = json.loads(conf["spark.kubernetes.scheduler.volcano.podGroupTemplateJson"])
    assert inline == {"spec": result.podgroup_spec}
    assert PODGROUP_TEMPLATE not in result.files


# --- Spark's sizes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "factor", "request_mib"),
    [
        ("1g", 0.1, 1024 + 384),  # 10% is 102 MiB: the 384 MiB floor wins
        ("10g", 0.1, 10240 + 1024),
        ("2g", 0.4, 2048 + 819),  # PySpark's factor; Spark truncates 819.2
        ("512", 0.1, 512 + 384),  # a bare number is MiB, as Spark reads its memory confs
        ("1500k", 0.1, 1 + 384),  # Spark counts whole MiB, rounding down
        ("4096M", 0.1, 4096 + 409),
        ("1t", 0.1, 1048576 + 104857),
    ],
)
def test_pod_size_follows_spark(memory: str, factor: float, request_mib: int) -> None:
    assert pod_size(1, memory, factor, "--driver-memory").request_mib == request_mib


def test_min_resources_driver_plus_executors() -> None:
    base = SparkConfOptions(queue="q", driver_cores=2, driver_memory="4g")
    assert min_resources(base) == {"cpu": "2", "memory": "4505Mi"}  # 4096 + 409
    many = replace(base, min_executors=10, executor_cores=3, executor_memory="2g")
    assert min_resources(many) == {"cpu": "32", "memory": f"{4505 + 10 * 2432}Mi"}


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "flag"),
    [
        ({"queue": ""}, "--queue"),
        ({"queue": "Q1"}, "--queue"),
        ({"queue": "q" * 254}, "--queue"),
        ({"scheduler_name": "my scheduler"}, "--scheduler-name"),
        ({"namespace": "a.b"}, "--namespace"),
        ({"priority_class": "-high"}, "--priority-class"),
        ({"group_name": "etl"}, "--group-name"),  # feature step names the group itself
        ({"mode": Mode.ENROL, "group_name": "ETL"}, "--group-name"),
        ({"mode": Mode.ENROL, "inline_podgroup": True}, "--inline-podgroup"),
        ({"min_executors": -1}, "--min-executors"),
        ({"min_executors": 10**9}, "--min-executors"),
        ({"min_executors": True}, "--min-executors"),
        ({"driver_cores": 0}, "--driver-cores"),
        ({"executor_cores": 2000}, "--executor-cores"),
        ({"driver_memory": "1Gi"}, "--driver-memory"),
        ({"driver_memory": "512k"}, "--driver-memory"),  # under 1 MiB
        ({"executor_memory": "-1g"}, "--executor-memory"),
        ({"executor_memory": "9" * 15 + "p"}, "--executor-memory"),
        ({"min_executors": 100_000, "executor_memory": "100t"}, "--min-executors"),
        ({"memory_overhead_factor": 0.0}, "--memory-overhead-factor"),
        ({"memory_overhead_factor": float("inf")}, "--memory-overhead-factor"),
        ({"memory_overhead_factor": float("nan")}, "--memory-overhead-factor"),
        ({"memory_overhead_factor": 11.0}, "--memory-overhead-factor"),
    ],
)
def test_refusals_name_the_flag(change: dict[str, Any], flag: str) -> None:
    with pytest.raises(SparkConfError) as caught:
        plan(replace(SparkConfOptions(queue="q1"), **change), OUT)
    assert caught.value.field == flag
    assert str(caught.value).startswith(f"{flag}: ")


_text = st.text(max_size=300)


@settings(max_examples=300, deadline=None)
@given(
    queue=_text,
    memory=st.one_of(_text, st.from_regex(r"\A[0-9]{1,17}[kmgtpb]{0,2}\Z")),
    executors=st.integers(-(2**64), 2**64),
    cores=st.integers(-(2**40), 2**40),
    factor=st.floats(allow_nan=True, allow_infinity=True),
    mode=st.sampled_from(list(Mode)),
    group=st.one_of(st.none(), _text),
)
def test_any_input_is_a_plan_or_a_named_refusal(
    queue: str,
    memory: str,
    executors: int,
    cores: int,
    factor: float,
    mode: Mode,
    group: str | None,
) -> None:
    options = SparkConfOptions(
        queue=queue,
        mode=mode,
        group_name=group,
        min_executors=executors,
        executor_cores=cores,
        executor_memory=memory,
        memory_overhead_factor=factor,
    )
    try:
        result = plan(options, OUT)
    except SparkConfError as err:
        assert err.field.startswith("--")
        return
    for name, text in result.files.items():
        if name.endswith(".yaml"):
            assert isinstance(yaml.safe_load(text), dict)
    assert read_properties(result.files[PROPERTIES_FILE]) == dict(result.conf)


# --- rendering ----------------------------------------------------------------------------------


def read_properties(text: str) -> dict[str, str]:
    """``java.util.Properties.load`` for the one-line entries we write: leading blanks
    skipped, ``#``/``!`` comments, the key up to an unescaped ``=``, ``:`` or blank, one
    separator and the blanks around it, backslash escapes (``\\t \\n \\r \\f \\uXXXX``, else
    the character itself)."""
    out: dict[str, str] = {}
    blanks = " \t\f"
    for line in text.split("\n"):
        i = 0
        while i < len(line) and line[i] in blanks:
            i += 1
        if i == len(line) or line[i] in "#!":
            continue
        key, i = _read(line, i, stop=" \t\f=:")
        while i < len(line) and line[i] in blanks:
            i += 1
        if i < len(line) and line[i] in "=:":
            i += 1
        while i < len(line) and line[i] in blanks:
            i += 1
        value, _ = _read(line, i, stop="")
        out[key] = value
    return out


def _read(line: str, i: int, stop: str) -> tuple[str, int]:
    chars = []
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            nxt = line[i + 1]
            if nxt == "u":
                chars.append(chr(int(line[i + 2 : i + 6], 16)))
                i += 6
                continue
            chars.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        if char in stop:
            break
        chars.append(char)
        i += 1
    return "".join(chars), i


@settings(max_examples=500, deadline=None)
@given(value=st.text(max_size=60))
def test_properties_read_back_as_written(value: str) -> None:
    conf = [("spark.a", value), ("spark.b", "x")]
    assert read_properties(properties(conf)) == dict(conf)


def test_properties_escapes() -> None:
    text = properties([("k", " =lead\\back\nline#")])
    assert text == "k=\\ =lead\\\\back\\nline#\n"


def test_flag_lines_quote_for_the_shell() -> None:
    conf = [("spark.a", "plain"), ("spark.b", '{"x": 1}')]
    assert flag_lines(conf) == "--conf spark.a=plain\n--conf 'spark.b={\"x\": 1}'\n"
    assert conf_flags(conf) == ["--conf", "spark.a=plain", "--conf", 'spark.b={"x": 1}']


# --- the command ---------------------------------------------------------------------------------


def test_cli_writes_templates_and_prints_confs(tmp_path: Path) -> None:
    out = tmp_path / "spark"
    result = CliRunner().invoke(
        main,
        ["spark-conf", "--queue", "q1", "--min-executors", "2", "--output-dir", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "--conf spark.kubernetes.scheduler.name=volcano"
    assert f"--conf spark.kubernetes.driver.podTemplateFile={out / DRIVER_TEMPLATE}" in (
        result.stdout.splitlines()
    )
    assert "wrote" not in result.stdout  # the list of files goes to stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [DRIVER_TEMPLATE, EXECUTOR_TEMPLATE, PODGROUP_TEMPLATE, PROPERTIES_FILE]
    )
    template = yaml.safe_load((out / PODGROUP_TEMPLATE).read_text())
    assert template["spec"]["minResources"] == {"cpu": "3", "memory": "4224Mi"}
    props = read_properties((out / PROPERTIES_FILE).read_text())
    assert props["spark.executor.instances"] == "2"


def test_cli_properties_format(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            *("spark-conf", "--queue", "q1", "--mode", "enrol"),
            *("--format", "properties", "--output-dir", str(tmp_path)),
        ],
    )
    assert result.exit_code == 0, result.output
    assert read_properties(result.stdout)["spark.kubernetes.scheduler.name"] == "volcano"


def test_cli_refusal_names_the_flag(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["spark-conf", "--queue", "q1", "--executor-memory", "2Gi", "--output-dir", str(tmp_path)],
    )
    assert result.exit_code == 2
    assert "'--executor-memory'" in result.output and "not a JVM size" in result.output
    assert not list(tmp_path.iterdir())  # nothing written


def test_cli_unwritable_output_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(
        main, ["spark-conf", "--queue", "q1", "--output-dir", str(blocker / "sub")]
    )
    assert result.exit_code == 1
    assert "cannot write the templates" in result.output
