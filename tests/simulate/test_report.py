"""The simulation report: per-job, per-queue and utilisation figures, and why pods wait."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from stromboli.core.simulate.engine import Simulation, SimulationResult
from stromboli.core.simulate.jobs import (
    PendingPod,
    figures,
    format_duration,
    format_elapsed,
    format_pods,
    group_pending,
    pending_pods,
    percentile,
    time_weighted_mean,
)
from stromboli.core.simulate.loader import load
from stromboli.core.simulate.output import as_list
from stromboli.core.simulate.report import print_report

# The scheduler configuration is spelled out so that the test does not depend on which
# plugins Volcano's default configuration needs.
CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: proportion}]
"""


def _node(name: str) -> str:
    return f"""\
apiVersion: v1
kind: Node
metadata: {{name: {name}}}
status: {{allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}}}
"""


def _queue(name: str, weight: int) -> str:
    return f"""\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: {name}}}
spec: {{weight: {weight}}}
"""


def _podgroup(name: str, queue: str, members: int, submit_at: str = "0s") -> str:
    return f"""\
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}, annotations: {{sim.stromboli.dev/submit-at: {submit_at}}}}}
spec: {{minMember: {members}, queue: {queue}}}
"""


def _pod(name: str, cpu: str, annotations: dict[str, str]) -> str:
    notes = ", ".join(f"{key}: {value}" for key, value in annotations.items())
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{{notes}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}]
"""


def scenario() -> str:
    """Two 4-cpu nodes; queues research (weight 3) and batch (weight 1).

    ``warmup`` (batch, 2 × 3 cpu, 60s) starts at once; ``train`` (research, a gang of 4 × 1.5
    cpu, 2m) arrives at 10s and must wait for warmup to finish at 60s; ``huge`` (batch, 16 cpu)
    can never fit.
    """
    docs = [_node("n1"), _node("n2"), _queue("research", 3), _queue("batch", 1)]
    docs.append(_podgroup("warmup", "batch", 2))
    docs.append(_podgroup("train", "research", 4, "10s"))
    for i in range(2):
        docs.append(
            _pod(
                f"warmup-{i}",
                "3",
                {"scheduling.k8s.io/group-name": "warmup", "sim.stromboli.dev/runtime": "60s"},
            )
        )
    for i in range(4):
        docs.append(
            _pod(
                f"train-{i}",
                "1500m",
                {
                    "scheduling.k8s.io/group-name": "train",
                    "sim.stromboli.dev/runtime": "2m",
                    "sim.stromboli.dev/submit-at": "10s",
                },
            )
        )
    docs.append(_pod("huge", "16", {"scheduling.volcano.sh/queue-name": "batch"}))
    return "---\n".join(docs)


async def simulate(tmp_path: Path) -> tuple[SimulationResult, dict]:
    (tmp_path / "sim.yaml").write_text(scenario())
    (tmp_path / "conf.yaml").write_text(CONF)
    result = await Simulation(load([str(tmp_path / "sim.yaml")]), tmp_path / "conf.yaml").run()
    return result, await as_list(result.store)


# -- figures from a run ---------------------------------------------------------------------------


async def test_job_wait_and_run_times(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    jobs = {job.label: job for job in figures(result, final).jobs}
    assert set(jobs) == {"default/warmup", "default/train", "default/huge"}

    warmup, train, huge = jobs["default/warmup"], jobs["default/train"], jobs["default/huge"]
    assert (warmup.submit, warmup.start, warmup.end) == (0.0, 0.0, 60.0)
    assert (warmup.wait, warmup.run) == (0.0, 60.0)
    assert warmup.queue == "batch"
    assert warmup.phase == "Completed"
    assert warmup.pods == {"Succeeded": 2}

    # The gang arrives at 10s and waits for warmup's cpu to come free at 60s.
    assert train.submit == 10.0
    assert train.start == 60.0
    assert train.wait == 50.0
    assert train.run == 120.0
    assert train.queue == "research"
    assert train.phase == "Completed"
    assert train.pods == {"Succeeded": 4}

    # The pod's own PodGroup is named after its uid; the job is labelled after the pod.
    assert huge.name.startswith("podgroup-")
    assert huge.owner_kind == "Pod"
    assert huge.start is None and huge.wait is None and huge.run is None
    assert huge.pods == {"Pending": 1}
    assert huge.waited(result.end_time) == result.end_time
    assert huge.ran(result.end_time) is None


async def test_queue_summary(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    queues = {q.name: q for q in figures(result, final).queues}
    assert set(queues) == {"research", "batch"}  # root and the empty default queue left out

    research, batch = queues["research"], queues["batch"]
    assert (research.weight, batch.weight) == (3, 1)
    assert (research.jobs, research.started, research.waiting) == (1, 1, 0)
    assert (batch.jobs, batch.started, batch.waiting) == (2, 1, 1)
    assert research.mean_wait == 50.0 and research.p95_wait == 50.0
    assert batch.mean_wait == 0.0
    # Each queue held three quarters of the cpu at some point; nothing is held at the end.
    assert research.held_peak == pytest.approx(0.75)
    assert batch.held_peak == pytest.approx(0.75)
    assert research.held_end == 0.0 and batch.held_end == 0.0
    assert 0.0 < research.held_mean < 0.75
    # Weight 3 against 1: research deserves the larger share while both compete.
    assert research.deserved_mean > batch.deserved_mean


async def test_utilisation(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    use = figures(result, final).utilisation
    assert use.span == result.end_time - result.timeline[0].time
    assert use.cpu_peak == pytest.approx(0.75)  # 6 of 8 cpu, first warmup then train
    assert use.memory_peak == pytest.approx(0.25)  # 4 × 1Gi of 16Gi
    assert 0.5 < use.cpu_mean <= 0.75
    assert use.memory_mean < use.cpu_mean
    assert use.running_peak == 4
    assert use.pending_peak >= 5  # the gang of four and the huge pod, before warmup ended


async def test_pending_pods_have_reasons(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    pending = figures(result, final).pending
    assert [p.name for p in pending] == ["huge"]
    assert pending[0].queue == "batch"
    assert pending[0].reason
    assert pending[0].reason != "no scheduling decision recorded"


# -- the printed report -----------------------------------------------------------------------


async def test_print_report(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    out = io.StringIO()
    print_report(result, final, Console(file=out, width=100, color_system=None))
    text = out.getvalue()
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert lines[0].startswith(f"Simulated {format_duration(result.end_time)} of virtual time")
    assert f"in {result.cycles} cycles" in text
    assert f"{result.pods_bound} pods bound" in text
    train = next(line for line in lines if "default/train" in line)
    assert "research" in train and "Completed" in train and "4 ok" in train
    assert "50s" in train and "2m" in train
    huge = next(line for line in lines if line.lstrip().startswith("default/huge"))
    assert f"≥{format_duration(result.end_time)}" in huge
    assert "Why pending (1 pod)" in text
    reason = pending_pods(final)[0].reason
    assert reason.split()[0] in text[text.index("Why pending") :]
    assert "75%" in text  # peak cpu


async def test_print_report_without_jobs(tmp_path: Path) -> None:
    (tmp_path / "sim.yaml").write_text(_node("n1"))
    (tmp_path / "conf.yaml").write_text(CONF)
    result = await Simulation(load([str(tmp_path / "sim.yaml")]), tmp_path / "conf.yaml").run()
    out = io.StringIO()
    print_report(result, await as_list(result.store), Console(file=out, width=100))
    assert "No jobs (PodGroups) were submitted." in out.getvalue()
    assert "No pod is left pending." in out.getvalue()


# -- pure helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0s"),
        (45, "45s"),
        (90, "1m30s"),
        (120, "2m"),
        (3600, "1h"),
        (3661, "1h1m1s"),
        (90000, "25h"),
        (1.5, "1.5s"),
    ],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


def test_format_elapsed() -> None:
    assert format_elapsed(0.0157) == "15.7ms"
    assert format_elapsed(0.0000042) == "4µs"
    assert format_elapsed(2.5) == "2.5s"
    assert format_elapsed(90) == "1m30s"


def test_format_pods_in_fixed_order() -> None:
    assert format_pods({"Pending": 1, "Running": 2}) == "2 run 1 pend"
    assert format_pods({"Failed": 1, "Succeeded": 3}) == "3 ok 1 fail"
    assert format_pods({}) == "0"


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 0.95) == 19.0
    assert percentile(values, 0.5) == 10.0
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([], 0.95) is None


def test_time_weighted_mean_holds_each_value_until_the_next_sample() -> None:
    # 1.0 for 10s, then 0.0 for 30s: a quarter on average, not the plain mean of a half.
    assert time_weighted_mean([0.0, 10.0, 40.0], [1.0, 0.0, 0.0]) == 0.25
    assert time_weighted_mean([5.0], [0.4]) == 0.4
    assert time_weighted_mean([], []) == 0.0


def test_group_pending_counts_identical_reasons() -> None:
    pods = [PendingPod("ns", f"p{i}", "ns/g", "q", "gang") for i in range(3)]
    pods.append(PendingPod("ns", "solo", "ns/s", "q", "0/2 nodes are unavailable"))
    groups = group_pending(pods)
    assert [(g.reason, g.count) for g in groups] == [
        ("gang", 3),
        ("0/2 nodes are unavailable", 1),
    ]
    assert groups[0].pods == ["ns/p0", "ns/p1", "ns/p2"]


def _pending_pod(name: str, group: str, conditions: list[dict] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {},
        "status": {"phase": "Pending", "conditions": conditions or []},
    }


def test_pending_reason_falls_back_to_the_podgroup_then_events() -> None:
    final = {
        "kind": "List",
        "items": [
            {
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "team"},
                "spec": {"queue": "q1"},
                "status": {
                    "phase": "Inqueue",
                    "conditions": [
                        {"type": "Unschedulable", "status": "True", "message": "gang says no"}
                    ],
                },
            },
            {
                "kind": "PodGroup",
                "metadata": {"name": "h", "namespace": "team"},
                "spec": {"queue": "q2"},
                "status": {"phase": "Inqueue"},
            },
            {
                "kind": "PodGroup",
                "metadata": {"name": "i", "namespace": "team"},
                "spec": {},
                "status": {"phase": "Pending"},
            },
            _pending_pod(
                "own",
                "g",
                [{"type": "PodScheduled", "status": "False", "message": "0/2 nodes fit"}],
            ),
            _pending_pod("from-group", "g"),
            _pending_pod("from-event", "h"),
            _pending_pod("not-admitted", "i"),
            {
                "kind": "Pod",
                "metadata": {"name": "bound", "namespace": "team"},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Pending"},
            },
            {
                "kind": "Event",
                "involvedObject": {"kind": "Pod", "name": "from-event", "namespace": "team"},
                "reason": "FailedScheduling",
                "message": "an event says why",
                "lastTimestamp": "1970-01-01T00:00:05Z",
            },
        ],
    }
    reasons = {p.name: (p.queue, p.reason) for p in pending_pods(final)}
    assert reasons == {
        "own": ("q1", "0/2 nodes fit"),
        "from-group": ("q1", "gang says no"),
        "from-event": ("q2", "an event says why"),
        "not-admitted": ("default", "PodGroup i is Pending: not yet admitted to its queue"),
    }
