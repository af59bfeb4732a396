"""A CronJob firing every minute cannot keep the simulator running: each CronJob makes at most
``max_cron_runs`` jobs, then it is suspended and the run ends with a note."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.simulate.engine import DEFAULT_MAX_CRON_RUNS, Simulation
from stromboli.core.simulate.loader import load

EVERY_MINUTE = """apiVersion: v1
kind: Node
metadata: {name: node-0}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 100
  jobTemplate:
    spec:
      minAvailable: 1
      tasks:
        - name: main
          replicas: 1
          template:
            metadata:
              annotations: {sim.stromboli.dev/runtime: 30s}
            spec:
              restartPolicy: Never
              containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def write(tmp_path: Path) -> Path:
    path = tmp_path / "cron.yaml"
    path.write_text(EVERY_MINUTE)
    return path


async def test_every_minute_cronjob_is_suspended_after_its_runs(tmp_path: Path) -> None:
    simulation = Simulation(load([write(tmp_path)]), max_cron_runs=7)
    result = await simulation.run()
    assert not result.hit_max_time
    jobs = await result.store.list("batch.volcano.sh/v1alpha1", "Job")
    assert len(jobs.items) == 7
    cronjob = await result.store.get("batch.volcano.sh/v1alpha1", "CronJob", "tick", "default")
    assert cronjob["spec"]["suspend"] is True
    assert result.notes == [
        "CronJob default/tick: suspended at 420s after 7 runs (the simulator's limit; change it "
        "with --max-cron-runs)"
    ]
    # Nothing but the stopped timer was left: the run ends once the last job has finished.
    assert result.end_time < 420 + 120


def test_default_cap_is_well_below_a_month_of_minutes() -> None:
    assert DEFAULT_MAX_CRON_RUNS * 10 <= 30 * 24 * 60


def test_command_prints_the_note(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["simulate", "--max-cron-runs", "3", "-o", "json", str(write(tmp_path))]
    )
    assert result.exit_code == 0, result.output
    assert "note: CronJob default/tick: suspended at 180s after 3 runs" in result.output
