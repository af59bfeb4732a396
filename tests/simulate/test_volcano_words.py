"""Volcano's words in ``stromboli simulate --output json`` (issue 16): the final state holds
the pods' reasons, the PodGroups' conditions, minResources and events, and the queues' status
as Volcano writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from stromboli.core.cli import main

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: node-0}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: small}
spec: {weight: 1, capability: {cpu: "2"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: idle}
spec: {weight: 1}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: solo}
spec:
  queue: default
  tasks:
    - name: main
      replicas: 1
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: toobig}
spec:
  queue: small
  tasks:
    - name: worker
      replicas: 3
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: gang}
spec: {minMember: 3, queue: default}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: huge}
spec: {minMember: 1, queue: default, minResources: {cpu: "100"}}
"""

GANG_POD = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: gang-{i}
  annotations: {{scheduling.k8s.io/group-name: gang}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1", memory: 3Gi}}}}}}]
"""

GANG_SENTENCE = (
    "pod group is not ready, 3 Pending, 3 minAvailable; Pending: 1 Unschedulable, 2 Schedulable"
)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("words") / "cluster.yaml"
    path.write_text(CLUSTER + "".join(GANG_POD.format(i=i) for i in range(3)))
    result = CliRunner().invoke(
        main, ["simulate", str(path), "--max-time", "20s", "--output", "json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def objects(state: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == kind}


def events(
    state: dict[str, Any], name_prefix: str, reason: str, kind: str = "PodGroup"
) -> list[tuple[str, str]]:
    return [
        (e["type"], e["message"])
        for e in objects(state, "Event").values()
        if e["involvedObject"]["name"].startswith(name_prefix)
        and e["involvedObject"]["kind"] == kind
        and e["reason"] == reason
    ]


def podgroup(state: dict[str, Any], prefix: str) -> dict[str, Any]:
    (found,) = [pg for name, pg in objects(state, "PodGroup").items() if name.startswith(prefix)]
    return found


def test_gang_member_refused_by_its_queue_leads_with_volcanos_sentence(
    state: dict[str, Any],
) -> None:
    messages = {}
    for name, obj in objects(state, "Pod").items():
        if name.startswith("gang-"):
            (scheduled,) = [c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled"]
            messages[name] = (scheduled["reason"], scheduled["message"])
    refused = [m for m in messages.values() if m[1].startswith(f"{GANG_SENTENCE}; queue ")]
    assert refused == [
        (
            "Unschedulable",
            f"{GANG_SENTENCE}; queue default has not enough resources left for the task",
        )
    ]
    assert sorted(r for r, _ in messages.values()) == [
        "Schedulable",
        "Schedulable",
        "Unschedulable",
    ]
    assert ("Warning", refused[0][1]) in events(state, "gang-", "FailedScheduling", "Pod")


def test_podgroup_events(state: dict[str, Any]) -> None:
    assert events(state, "gang", "Unschedulable") == [
        ("Warning", f"3/3 tasks in gang unschedulable: {GANG_SENTENCE}")
    ]
    assert events(state, "solo-", "Scheduled") == [("Normal", "pod group is ready")]


def test_vcjob_group_before_its_pods_stays_pending_without_condition(
    state: dict[str, Any],
) -> None:
    assert podgroup(state, "toobig-")["status"] == {"phase": "Pending"}
    assert (
        "Warning",
        "0/0 tasks in gang unschedulable: pod group is not ready, 3 minAvailable",
    ) in (events(state, "toobig-", "Unschedulable"))
    assert not [e for e in objects(state, "Event").values() if e["reason"] == "PodGroupPending"]


def test_one_pod_job_carries_only_scheduled_without_message(state: dict[str, Any]) -> None:
    conditions = podgroup(state, "solo-")["status"]["conditions"]
    assert [(c["type"], c["reason"]) for c in conditions] == [
        ("Scheduled", "tasks in gang are ready to be scheduled")
    ]
    assert "message" not in conditions[0]


def test_enqueue_refusals(state: dict[str, Any]) -> None:
    assert ("Normal", "queue resource quota insufficient: insufficient cpu") in events(
        state, "toobig-", "Unschedulable"
    )
    assert ("Normal", "resource in cluster is overused: overused cpu") in events(
        state, "huge", "Unschedulable"
    )


def test_min_resources_are_the_gangs_quota_usage(state: dict[str, Any]) -> None:
    assert podgroup(state, "toobig-")["spec"]["minResources"] == {
        "count/pods": "3",
        "cpu": "3",
        "memory": "3Gi",
        "pods": "3",
        "requests.cpu": "3",
        "requests.memory": "3Gi",
    }


def test_queue_status(state: dict[str, Any]) -> None:
    queues = objects(state, "Queue")
    assert queues["idle"]["status"] == {
        "allocated": {"cpu": "0", "memory": "0"},
        "reservation": {},
        "state": "Open",
    }
    # solo's pod and the gang's two placed-then-undone members: only solo's pod holds a node.
    assert queues["default"]["status"]["allocated"] == {"cpu": "1", "memory": "1Gi", "pods": "1"}
    assert queues["default"]["status"]["reservation"] == {}


def test_a_job_of_two_billion_pods_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(
        CLUSTER.split("---")[0]
        + """---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: huge}
spec:
  minAvailable: 1
  tasks:
    - name: w
      replicas: 2147483647
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""
    )
    result = CliRunner().invoke(main, ["simulate", str(path), "--max-time", "5s", "-o", "json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert not [o for o in listed["items"] if o["kind"] in ("Job", "Pod", "PodGroup")]
    (rejected,) = [o for o in listed["items"] if o["kind"] == "Event"]
    assert rejected["reason"] == "AdmissionRejected"
    assert "spec.tasks[0].replicas: Invalid value: 2147483647" in rejected["message"]
