"""``stromboli simulate --metrics FILE``: the scheduler's metrics at the end of a run, in the
Prometheus text format, parsed back with prometheus_client's own parser."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from stromboli.core.cli import main
from stromboli.core.scheduler.metrics import SchedulerMetrics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def snapshot(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the file by (name, sorted labels)."""
    samples = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_preemption_example_writes_its_metrics(tmp_path: Path) -> None:
    out = tmp_path / "metrics.prom"
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(EXAMPLES / "preemption.yaml"),
            "--scheduler-conf",
            str(EXAMPLES / "preempt-conf.yaml"),
            "--metrics",
            str(out),
            "--output",
            "json",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    orjson.loads(result.stdout)  # the JSON on stdout is untouched by the metrics file
    samples = snapshot(out)

    def value(name: str, **labels: str) -> float | None:
        return samples.get((name, tuple(sorted(labels.items()))))

    # The example: 8 batch pods, then an urgent gang of 2 that preempt makes room for by
    # evicting two batch pods in one statement.
    assert value("volcano_schedule_attempts_total", result="scheduled") == 10
    assert value("volcano_eviction_transactions_total", action="preempt") == 1
    assert value("volcano_eviction_transactions_total", action="reclaim") == 0
    assert value("stromboli_evicted_pods_total", action="preempt") == 2
    assert (value("volcano_total_preemption_attempts") or 0) >= 1
    cycles = value("volcano_e2e_scheduling_latency_milliseconds_count")
    assert cycles is not None and cycles > 1
    assert value("stromboli_pods_placed_per_cycle_count") == cycles
    assert value("stromboli_pods_placed_per_cycle_sum") == 10
    assert value("volcano_action_scheduling_latency_milliseconds_count", action="preempt") == cycles
    # The urgent gang waited one virtual second from its creation at t=30s.
    job = {"job_name": "urgent", "queue": "default", "job_namespace": "default"}
    assert value("volcano_e2e_job_scheduling_start_time", **job) == 30
    assert value("volcano_e2e_job_scheduling_duration", **job) == 1000
    assert value("volcano_queue_weight", queue_name="default") == 1
    # Everything in the file is something the scheduler registers.
    registered = SchedulerMetrics().series_names()
    assert {name for name, _labels in samples} <= registered


def test_metrics_to_an_unwritable_path_is_a_clear_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "metrics.prom"
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(EXAMPLES / "gang-waits.yaml"),
            "--metrics",
            str(target),
            "--output",
            "json",
            "--no-progress",
        ],
    )
    assert result.exit_code != 0
    assert "--metrics" in result.output
    assert str(target) in result.output
