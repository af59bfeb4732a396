"""``stromboli explain job/NAME | podgroup/NAME | queue/NAME`` on simulated input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: Queue ``research`` may hold 30 cpu; ``first`` takes 24, so ``second`` (8 more) waits at
#: enqueue; ``gang`` in the default queue has 3 members of 12 cpu for two 16-cpu nodes.
CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 1, capability: {cpu: "24", memory: 48Gi}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: first}
spec:
  schedulerName: volcano
  queue: research
  minAvailable: 2
  tasks:
  - replicas: 2
    name: worker
    template:
      spec:
        containers: [{name: main, image: busybox, resources: {requests: {cpu: "12", memory: 8Gi}}}]
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: second, annotations: {sim.stromboli.dev/submit-at: 5s}}
spec:
  schedulerName: volcano
  queue: research
  minAvailable: 2
  tasks:
  - replicas: 2
    name: worker
    template:
      spec:
        containers: [{name: main, image: busybox, resources: {requests: {cpu: "4", memory: 8Gi}}}]
"""

GANG = """\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: gang}
spec: {minMember: 3}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata:
  name: gang-{i}
  annotations: {{scheduling.k8s.io/group-name: gang}}
spec:
  schedulerName: volcano
  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "12"}}}}}}]
"""
    for i in range(3)
)


def explain(*args: str) -> Result:
    return CliRunner().invoke(main, ["explain", *args], terminal_width=200)


@pytest.fixture
def cluster(tmp_path: Path) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return str(path)


@pytest.fixture
def gang(tmp_path: Path) -> str:
    path = tmp_path / "gang.yaml"
    path.write_text(GANG)
    return str(path)


def test_a_job_stuck_at_enqueue_names_the_gate_and_its_numbers(cluster: str) -> None:
    result = explain("job/second", "--simulate", cluster)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("Job default/second (PodGroup second-")
    assert "phase Pending, queue research, minMember 2, 0 pods" in lines[0]
    assert lines[1] == (
        "Why: held at enqueue by queue capability: queue research holds 24 cpu, 16Gi memory; "
        "with this job's minResources (8 cpu, 16Gi memory) it would hold 32 cpu, 32Gi memory, "
        "over its capability of 24 cpu by 8 cpu"
    )
    assert "  overcommit: admits: " in result.output
    assert "  queue capability (proportion): holds: " in result.output


def test_the_same_job_as_json(cluster: str) -> None:
    result = explain("job/second", "--simulate", cluster, "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["job"] == "default/second"
    assert document["stage"] == "enqueue"
    held = [g for g in document["gates"] if g["verdict"] == "holds"]
    assert [g["gate"] for g in held] == ["queue capability"]
    assert document["reason"].startswith("held at enqueue by queue capability")


def test_a_queue_at_capability_says_what_it_holds_and_who_waits(cluster: str) -> None:
    result = explain("queue/research", "--simulate", cluster)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Why: queue research (Open, weight 1) holds 24 cpu, 16Gi memory; deserved 24 cpu, "
        "16Gi memory, capability 24 cpu, 48Gi memory: at capability on cpu",
        "Waiting: 1 Pending at enqueue (default/second)",
        "Running: 1 (default/first)",
        "Amounts from the proportion plugin of this session.",
    ]


def test_a_gang_short_of_room_counts_its_members(gang: str) -> None:
    result = explain("podgroup/gang", "--simulate", gang)
    assert result.exit_code == 0, result.output
    assert (
        "Why: gang short of room: 2/3 members fit; 1 needs 8 cpu more on any node "
        "(closest: node-a has 4 cpu free; each asks 12 cpu)"
    ) in result.output
    assert "Pods that fit now:" in result.output and "Pods that fit nowhere:" in result.output


def test_a_running_job_does_not_wait(cluster: str) -> None:
    result = explain("vcjob/first", "--simulate", cluster)
    assert result.exit_code == 0, result.output
    assert "Why: no pod waits: 2 of 2 placed or finished" in result.output


def test_the_pod_explanation_still_answers_and_has_json(gang: str) -> None:
    result = explain("pod/gang-2", "--simulate", gang, "-o", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["pod"] == "default/gang-2"
    # On its own (nothing of its gang placed) the pod fits either node.
    assert sorted(n["node"] for n in document["feasible"]) == ["node-a", "node-b"]
    assert document["infeasible"] == [] and document["node"] is None


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("job/ghost", "vcjob default/ghost does not exist"),
        ("podgroup/ghost", "podgroup default/ghost does not exist"),
        ("queue/ghost", "queue ghost does not exist"),
        ("ghost", "pod default/ghost is not one the scheduler follows"),
    ],
)
def test_an_object_that_does_not_exist_is_an_error_naming_it(
    cluster: str, target: str, message: str
) -> None:
    result = explain(target, "--simulate", cluster)
    assert result.exit_code == 1
    assert message in result.output


def test_an_unknown_kind_is_a_usage_error(cluster: str) -> None:
    result = explain("deployment/web", "--simulate", cluster)
    assert result.exit_code == 2
    assert "expected NAME, pod/NAME, job/NAME, podgroup/NAME or queue/NAME" in result.output


def test_the_gang_waits_example_explains_after_the_run() -> None:
    result = explain("podgroup/big-gang", "--simulate", str(EXAMPLES / "gang-waits.yaml"))
    assert result.exit_code == 0, result.output
    assert "Why: no pod waits" in result.output


def test_the_why_pending_example_answers_for_each_thing_that_waits() -> None:
    example = str(EXAMPLES / "why-pending.yaml")
    job = explain("job/second", "--simulate", example)
    assert job.exit_code == 0, job.output
    assert "Why: held at enqueue by queue capability: queue research holds 24 cpu" in job.output
    assert "over its capability of 30 cpu by 2 cpu" in job.output
    gang = explain("podgroup/train", "--simulate", example)
    assert gang.exit_code == 0, gang.output
    assert re.search(
        r"Why: gang short of room: 1/3 members fit; 2 need 8 cpu more on any node "
        r"\(closest: node-[ab] has 4 cpu free; each asks 12 cpu\)",
        gang.output,
    ), gang.output
    queue = explain("queue/research", "--simulate", example)
    assert "Waiting: 1 Pending at enqueue (default/second)" in queue.output
    report = CliRunner().invoke(main, ["simulate", example], terminal_width=300)
    assert report.exit_code == 0, report.output
    assert "Jobs that never started (2 jobs)" in report.output
    assert "gang short of room: 1/3 members fit" in report.output


#: A plain pod (it names no PodGroup) asking for more cpu than the one node has.
PLAIN_POD = """\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: huge}
spec:
  schedulerName: volcano
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "8"}}}]
"""


@pytest.mark.parametrize(("mode", "in_memory"), [("memory", True), ("object", False)])
def test_explain_simulates_in_the_plain_pod_groups_mode_given(
    tmp_path: Path, mode: str, in_memory: bool
) -> None:
    path = tmp_path / "plain.yaml"
    path.write_text(PLAIN_POD)
    args = ["explain", "pod/huge", "--simulate", str(path), f"--plain-pod-groups={mode}"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "Insufficient cpu" in result.output
    # memory: the scheduler's own one-pod group; object: the PodGroup the controller made.
    assert ("(in memory)" in result.output) is in_memory
    assert "PodGroup default/podgroup-" in result.output
