"""The report's answers beyond times: why jobs that never started wait, who evicted whom and
why, and how many jobs JobFlows and CronJobs made — in the text report and the HTML page."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from stromboli.core.scheduler.framework.outcome import EvictionRecord
from stromboli.core.simulate.engine import Simulation, SimulationResult
from stromboli.core.simulate.html import render_html
from stromboli.core.simulate.jobs import figures
from stromboli.core.simulate.loader import load
from stromboli.core.simulate.outcomes import group_evictions, made_jobs, waiting_jobs
from stromboli.core.simulate.output import as_list
from stromboli.core.simulate.report import print_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

HELD = """\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 1, capability: {cpu: "10"}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: first}
spec:
  schedulerName: volcano
  queue: research
  minAvailable: 1
  tasks:
  - replicas: 1
    name: worker
    template:
      spec:
        containers: [{name: main, image: busybox, resources: {requests: {cpu: "8"}}}]
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: second, annotations: {sim.stromboli.dev/submit-at: 5s}}
spec:
  schedulerName: volcano
  queue: research
  minAvailable: 1
  tasks:
  - replicas: 1
    name: worker
    template:
      spec:
        containers: [{name: main, image: busybox, resources: {requests: {cpu: "4"}}}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: too-big}
spec: {minMember: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: too-big-0
  annotations: {scheduling.k8s.io/group-name: too-big}
spec:
  schedulerName: volcano
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "20"}}}]
"""


async def simulate(files: list[Path], conf: Path | None = None) -> tuple[SimulationResult, dict]:
    result = await Simulation(load([str(f) for f in files]), conf).run()
    return result, await as_list(result.store)


def report(result: SimulationResult, final: dict) -> str:
    out = io.StringIO()
    print_report(result, final, Console(file=out, width=300, color_system=None))
    return out.getvalue()


async def test_every_job_that_never_started_has_its_reason(tmp_path: Path) -> None:
    source = tmp_path / "held.yaml"
    source.write_text(HELD)
    result, final = await simulate([source])
    found = waiting_jobs(result, final, figures(result, final).jobs)
    assert found.total == 2
    waiting = {w.label: w for w in found.jobs}
    assert set(waiting) == {"default/second", "default/too-big"}
    assert waiting["default/second"].stage == "enqueue"
    assert waiting["default/second"].reason == (
        "held at enqueue by queue capability: queue research holds 8 cpu; with this job's "
        "minResources (4 cpu) it would hold 12 cpu, over its capability of 10 cpu by 2 cpu"
    )
    assert waiting["default/too-big"].stage == "allocate"
    assert waiting["default/too-big"].reason.startswith(
        "gang short of room: 0/1 members fit; 1 needs 12 cpu more on any node"
    )
    text = report(result, final)
    assert "Jobs that never started (2 jobs)" in text
    assert "over its capability of 10 cpu by 2 cpu" in text
    page = render_html(result, final)
    assert "<h2>Jobs that never started (2)</h2>" in page
    assert "over its capability of 10 cpu by 2 cpu" in page
    first = waiting_jobs(result, final, figures(result, final).jobs, limit=1)
    assert first.total == 2 and [w.label for w in first.jobs] == ["default/too-big"]


async def test_evictions_say_who_evicted_whom_and_why() -> None:
    result, final = await simulate([EXAMPLES / "reclaim.yaml"], EXAMPLES / "preempt-conf.yaml")
    [group] = group_evictions(result.scheduler.recent_evictions)
    assert group.victim_job == "default/batch-job" and group.victim_queue == "batch"
    assert group.preemptor_job == "default/team-gang" and group.preemptor_queue == "team"
    assert group.reason == "reclaim" and len(group.pods) == 4
    lines = report(result, final).splitlines()
    [row] = [line for line in lines if "of default/batch-job (queue batch)" in line]
    assert "20s" in row and "default/team-gang (queue team)" in row and "reclaim" in row
    assert "Evictions (4 pods)" in "\n".join(lines)
    page = render_html(result, final)
    assert "<h2>Evictions (4 pods)</h2>" in page
    assert "<td>default/team-gang (queue team)</td><td>reclaim</td>" in page


def test_evictions_of_one_job_for_another_fold_into_one_row() -> None:
    records = [
        EvictionRecord(
            "1970-01-01T00:00:10Z", "ns/a-0", "ns/a", "q1", "preempt", "ns/b-0", "ns/b", "q1"
        ),
        EvictionRecord(
            "1970-01-01T00:00:11Z", "ns/a-1", "ns/a", "q1", "preempt", "ns/b-1", "ns/b", "q1"
        ),
        EvictionRecord("1970-01-01T00:00:12Z", "ns/a-2", "ns/a", "q1", "shuffle"),
    ]
    groups = group_evictions(records)
    assert [(g.preemptor_job, g.reason, g.pods, g.first_at) for g in groups] == [
        ("ns/b", "preempt", ["ns/a-0", "ns/a-1"], "1970-01-01T00:00:10Z"),
        ("", "shuffle", ["ns/a-2"], "1970-01-01T00:00:12Z"),
    ]


async def test_jobs_made_by_jobflows_and_cronjobs_are_counted() -> None:
    result, final = await simulate([EXAMPLES / "jobflow.yaml"])
    [flow] = made_jobs(final)
    assert (flow.kind, flow.owner, flow.count) == ("JobFlow", "default/pipeline", 3)
    result, final = await simulate([EXAMPLES / "cronjob.yaml"])
    [cron] = made_jobs(final)
    assert cron.kind == "CronJob" and cron.owner == "default/report"
    assert cron.count > len(cron.stored) > 0  # runs past the history limit were deleted
    text = report(result, final)
    [row] = [line for line in text.splitlines() if line.strip().startswith("CronJob")]
    assert row.split() == ["CronJob", "default/report", str(cron.count), str(len(cron.stored))]
    assert "<td>CronJob</td><td>default/report</td>" in render_html(result, final)


def test_a_final_state_without_makers_counts_nothing() -> None:
    assert made_jobs({"items": []}) == []
    assert (
        made_jobs(
            {
                "items": [
                    {
                        "kind": "Job",
                        "apiVersion": "batch/v1",
                        "metadata": {
                            "name": "x",
                            "ownerReferences": [
                                {"kind": "CronJob", "name": "c", "controller": True}
                            ],
                        },
                    }
                ]
            }
        )
        == []
    )  # a batch/v1 Job is Kubernetes' own, not a vcjob


def test_a_long_eviction_list_is_cut_with_a_count() -> None:
    from stromboli.core.simulate.report import MAX_JOB_ROWS, evictions_table

    records = [
        EvictionRecord("1970-01-01T00:00:10Z", f"ns/v{i}-0", f"ns/v{i}", "q", "preempt")
        for i in range(MAX_JOB_ROWS + 3)
    ]
    table = evictions_table(group_evictions(records))
    assert table.row_count == MAX_JOB_ROWS
    assert str(table.caption).startswith("... and 3 more rows")
