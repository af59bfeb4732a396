"""What the scheduler reads from a pod: requests, status, priority, role and flags."""

from __future__ import annotations

import pytest

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.build import task_info_from
from stromboli.core.scheduler.api.pod import pod_index, pod_requests, task_priority
from stromboli.core.scheduler.api.status import (
    ALLOCATED_STATUS,
    COMPLETED_STATUS,
    PREEMPTABLE_STATUS,
    SCHEDULED_STATUS,
    TaskStatus,
    status_from_pod,
)

from .builders import container, pod


def cpu_of(pod_dict: dict) -> tuple[float, float]:
    running, scheduling = pod_requests(pod_dict)
    return running.milli_cpu, scheduling.milli_cpu


# -- requests --------------------------------------------------------------------------------


def test_requests_sum_app_containers() -> None:
    p = pod("p", containers=[container("1", "1Gi"), container("500m", "1Gi", name="b")])
    running, scheduling = pod_requests(p)
    assert running.milli_cpu == 1500
    assert running.memory == 2 * 2**30
    assert scheduling == running


def test_pod_without_requests_is_empty() -> None:
    running, scheduling = pod_requests(pod("p"))
    assert running.amounts == {}
    assert scheduling.amounts == {}


def test_largest_init_container_sets_the_scheduling_request() -> None:
    p = pod(
        "p",
        containers=[container("1"), container("1", name="b")],
        init_containers=[container("4", name="i1"), container("3", name="i2")],
    )
    assert cpu_of(p) == (2000, 4000)


def test_init_containers_below_app_total_change_nothing() -> None:
    p = pod(
        "p", containers=[container("2", "1Gi")], init_containers=[container("1", "4Gi", name="i")]
    )
    running, scheduling = pod_requests(p)
    assert running.milli_cpu == 2000
    # Per resource maximum: cpu from the app, memory from the init container.
    assert scheduling.milli_cpu == 2000
    assert scheduling.memory == 4 * 2**30


def test_sidecar_counts_in_running_and_in_later_init_containers() -> None:
    p = pod(
        "p",
        containers=[container("1")],
        init_containers=[
            container("2", name="before"),
            container("500m", name="sidecar", restart_policy="Always"),
            container("2", name="after"),
        ],
    )
    running, scheduling = pod_requests(p)
    # The sidecar keeps running next to the app containers.
    assert running.milli_cpu == 1500
    # "after" runs with the sidecar already started: 2 + 0.5; "before" runs alone: 2.
    assert scheduling.milli_cpu == 2500


def test_overhead_is_added_to_the_scheduling_request() -> None:
    p = pod("p", containers=[container("1", "1Gi")])
    p["spec"]["overhead"] = {"cpu": "250m", "memory": "64Mi"}
    _, scheduling = pod_requests(p)
    assert scheduling.milli_cpu == 1250
    assert scheduling.memory == 2**30 + 64 * 2**20


def test_overhead_is_added_after_the_init_maximum() -> None:
    p = pod("p", containers=[container("1")], init_containers=[container("3", name="i")])
    p["spec"]["overhead"] = {"cpu": "100m"}
    assert cpu_of(p)[1] == 3100


def test_limits_stand_in_for_missing_requests() -> None:
    p = pod("p", containers=[container(limits={"cpu": "2", "memory": "1Gi"})])
    running, _ = pod_requests(p)
    assert running.milli_cpu == 2000
    assert running.memory == 2**30


def test_limit_defaults_only_the_resource_without_a_request() -> None:
    # Kubernetes defaults each missing request from its limit, resource by resource.
    p = pod("p", containers=[container("500m", limits={"cpu": "2", "memory": "1Gi"})])
    running, _ = pod_requests(p)
    assert running.milli_cpu == 500
    assert running.memory == 2**30


def test_extended_resources_are_requests_too() -> None:
    p = pod("p", containers=[container("1", extra={"nvidia.com/gpu": "2"})])
    running, _ = pod_requests(p)
    assert running.get("nvidia.com/gpu") == 2


def test_bad_quantity_names_the_container_field() -> None:
    p = pod("p", containers=[container("lots")])
    with pytest.raises(ValueError, match=r"spec\.containers\[0\]\.resources\.requests\.cpu"):
        pod_requests(p)


# -- status ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "node_name", "deleting", "expected"),
    [
        ("Running", "n1", False, TaskStatus.RUNNING),
        ("Running", "n1", True, TaskStatus.RELEASING),
        ("Pending", None, False, TaskStatus.PENDING),
        ("Pending", "n1", False, TaskStatus.BOUND),
        ("Pending", None, True, TaskStatus.RELEASING),
        ("Pending", "n1", True, TaskStatus.RELEASING),
        ("Succeeded", "n1", False, TaskStatus.SUCCEEDED),
        ("Failed", "n1", False, TaskStatus.FAILED),
        ("Unknown", "n1", False, TaskStatus.UNKNOWN),
    ],
)
def test_status_from_pod(
    phase: str, node_name: str | None, deleting: bool, expected: TaskStatus
) -> None:
    p = pod("p", phase=phase, node_name=node_name, deleting=deleting)
    assert status_from_pod(p) == expected


def test_pod_without_status_is_pending() -> None:
    p = pod("p")
    p.pop("status", None)
    assert status_from_pod(p) == TaskStatus.PENDING


def test_status_groups() -> None:
    assert {s for s in TaskStatus if s & ALLOCATED_STATUS} == {
        TaskStatus.BOUND,
        TaskStatus.BINDING,
        TaskStatus.RUNNING,
        TaskStatus.ALLOCATED,
    }
    assert {s for s in TaskStatus if s & PREEMPTABLE_STATUS} == {
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
    }
    assert {s for s in TaskStatus if s & SCHEDULED_STATUS} == {
        TaskStatus.RUNNING,
        TaskStatus.BOUND,
        TaskStatus.FAILED,
        TaskStatus.SUCCEEDED,
    }
    assert {s for s in TaskStatus if s & COMPLETED_STATUS} == {
        TaskStatus.FAILED,
        TaskStatus.SUCCEEDED,
    }


def test_status_labels_match_volcano_names() -> None:
    assert TaskStatus.PENDING.label == "Pending"
    assert TaskStatus.PIPELINED.label == "Pipelined"
    assert TaskStatus.RELEASING.label == "Releasing"


# -- priority, index, flags ------------------------------------------------------------------


def test_task_priority_defaults_to_one() -> None:
    assert task_priority(pod("p")) == 1


def test_task_priority_from_spec() -> None:
    assert task_priority(pod("p", priority=100)) == 100


def test_task_priority_annotation_overrides_spec() -> None:
    p = pod("p", priority=100, annotations={k.TASK_PRIORITY_KEY: "7"})
    assert task_priority(p) == 7


@pytest.mark.parametrize(
    ("name", "index"), [("job-worker-3", 3), ("job-worker-12", 12), ("solo", -1), ("a-b", -1)]
)
def test_pod_index_from_name_suffix(name: str, index: int) -> None:
    assert pod_index(name) == index


def test_task_info_from_pod() -> None:
    p = pod(
        "job-ps-2",
        uid="u1",
        cpu="1",
        memory="1Gi",
        role="ps",
        node_name="n1",
        phase="Running",
        created="1970-01-01T00:00:05Z",
    )
    t = task_info_from(p, "default/job")
    assert t.uid == "u1"
    assert t.job_id == "default/job"
    assert t.role == "ps"
    assert t.status == TaskStatus.RUNNING
    assert t.node_name == "n1"
    assert t.index == 2
    assert t.creation == "1970-01-01T00:00:05Z"
    assert t.resreq.milli_cpu == 1000
    assert t.preemptable is True
    assert t.best_effort is False
    assert t.key == "default/job-ps-2"


def test_role_from_label_when_no_annotation() -> None:
    p = pod("p", uid="u", labels={k.TASK_SPEC_KEY: "worker"})
    assert task_info_from(p, "j").role == "worker"


def test_best_effort_means_no_requests() -> None:
    assert task_info_from(pod("p", uid="u"), "j").best_effort
    assert not task_info_from(pod("p", uid="u", memory="1Mi"), "j").best_effort


def test_preemptable_annotation_false() -> None:
    p = pod("p", uid="u", annotations={k.PREEMPTABLE_KEY: "false"})
    assert task_info_from(p, "j").preemptable is False


def test_scheduling_gates_mark_the_task_gated() -> None:
    p = pod("p", uid="u")
    p["spec"]["schedulingGates"] = [{"name": "wait"}]
    assert task_info_from(p, "j").gated


def test_pods_that_place_alike_share_a_shape() -> None:
    a = task_info_from(pod("a", uid="a", cpu="1"), "j")
    b = task_info_from(pod("b", uid="b", cpu="1"), "j")
    c = task_info_from(pod("c", uid="c", cpu="2"), "j")
    assert a.shape == b.shape
    assert a.shape != c.shape


def test_uid_defaults_to_namespaced_name() -> None:
    assert task_info_from(pod("p", namespace="ns"), "j").uid == "ns/p"
