"""The wire strings must match Volcano's exactly: a one-letter slip breaks compatibility."""

from __future__ import annotations

import pytest

from stromboli.core.api import constants as c


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (c.GROUP_NAME_ANNOTATION, "scheduling.k8s.io/group-name"),
        (c.VOLCANO_GROUP_NAME_ANNOTATION, "scheduling.volcano.sh/group-name"),
        (c.GROUP_MIN_MEMBER_ANNOTATION, "scheduling.volcano.sh/group-min-member"),
        (c.QUEUE_NAME_ANNOTATION_KEY, "scheduling.volcano.sh/queue-name"),
        (c.QUEUE_ALLOCATION_GATE_KEY, "scheduling.volcano.sh/queue-allocation-gate"),
        (c.QUEUE_NAME_KEY, "volcano.sh/queue-name"),
        (c.TASK_SPEC_KEY, "volcano.sh/task-spec"),
        (c.TASK_INDEX_KEY, "volcano.sh/task-index"),
        (c.JOB_NAME_KEY, "volcano.sh/job-name"),
        (c.JOB_VERSION_KEY, "volcano.sh/job-version"),
        (c.TEMPLATE_UID_KEY, "volcano.sh/template-uid"),
        (c.PREEMPTABLE_KEY, "volcano.sh/preemptable"),
        (c.NUMA_TOPOLOGY_POLICY_KEY, "volcano.sh/numa-topology-policy"),
        (c.JDB_MIN_AVAILABLE_KEY, "volcano.sh/jdb-min-available"),
        (c.JDB_MAX_UNAVAILABLE_KEY, "volcano.sh/jdb-max-unavailable"),
        (c.JOB_ALLOCATED_HYPERNODE_KEY, "volcano.sh/job-allocated-hypernode"),
        (c.NODEGROUP_NAME_KEY, "volcano.sh/nodegroup-name"),
        (c.TASK_TOPOLOGY_ANTI_AFFINITY_KEY, "volcano.sh/task-topology-anti-affinity"),
        (c.CRONJOB_SCHEDULED_TIMESTAMP_KEY, "volcano.sh/cronjob-scheduled-timestamp"),
        (c.SCHEDULING_V1BETA1, "scheduling.volcano.sh/v1beta1"),
        (c.BATCH_V1ALPHA1, "batch.volcano.sh/v1alpha1"),
        (c.BUS_V1ALPHA1, "bus.volcano.sh/v1alpha1"),
        (c.FLOW_V1ALPHA1, "flow.volcano.sh/v1alpha1"),
        (c.TOPOLOGY_V1ALPHA1, "topology.volcano.sh/v1alpha1"),
        (c.NODEINFO_V1ALPHA1, "nodeinfo.volcano.sh/v1alpha1"),
        (c.DEFAULT_SCHEDULER_NAME, "volcano"),
        (c.DEFAULT_QUEUE, "default"),
        (c.ROOT_QUEUE, "root"),
        (c.SIM_SUBMIT_AT_ANNOTATION, "sim.stromboli.dev/submit-at"),
    ],
)
def test_wire_strings(value: str, expected: str) -> None:
    assert value == expected


def test_annotation_keys_are_unique() -> None:
    keys = [
        value
        for name, value in vars(c).items()
        if name.isupper() and isinstance(value, str) and "/" in value and "." in value
    ]
    duplicated = {key for key in keys if keys.count(key) > 1}
    assert not duplicated


def test_podgroup_phases() -> None:
    assert [p.value for p in c.PodGroupPhase] == [
        "Pending",
        "Running",
        "Unknown",
        "Inqueue",
        "Completed",
    ]


def test_queue_states() -> None:
    assert {s.value for s in c.QueueState} == {"Open", "Closed", "Closing", "Unknown"}


def test_job_phases() -> None:
    assert {p.value for p in c.JobPhase} == {
        "Pending",
        "Aborting",
        "Aborted",
        "Running",
        "Restarting",
        "Completing",
        "Completed",
        "Terminating",
        "Terminated",
        "Failed",
    }


def test_strenum_members_equal_raw_strings() -> None:
    assert c.PodGroupPhase.INQUEUE == "Inqueue"
    assert c.Event.ANY == "*"
    assert f"{c.Action.RESTART_JOB}" == "RestartJob"


def test_user_actions_and_events_are_subsets() -> None:
    assert set(c.Action) - c.USER_ACTIONS == {
        c.Action.SYNC_JOB,
        c.Action.ENQUEUE_JOB,
        c.Action.SYNC_QUEUE,
        c.Action.OPEN_QUEUE,
        c.Action.CLOSE_QUEUE,
    }
    assert set(c.Event) - c.USER_EVENTS == {
        c.Event.OUT_OF_SYNC,
        c.Event.COMMAND_ISSUED,
        c.Event.POD_RUNNING,
    }


def test_condition_types_and_reasons() -> None:
    assert {t.value for t in c.PodGroupConditionType} == {"Unschedulable", "Scheduled"}
    assert c.PodGroupConditionReason.NOT_ENOUGH_RESOURCES == "NotEnoughResources"
    assert c.PodGroupConditionReason.NOT_ENOUGH_PODS_OF_TASK == "NotEnoughPodsOfTask"
    assert c.PODGROUP_READY_DETAIL == "pod group is ready"


def test_small_enums() -> None:
    assert [m.value for m in c.NetworkTopologyMode] == ["hard", "soft"]
    assert [m.value for m in c.ConcurrencyPolicy] == ["Allow", "Forbid", "Replace"]
    assert c.NumaTopologyPolicy.SINGLE_NUMA_NODE == "single-numa-node"
    assert {m.value for m in c.JobPlugin} == {
        "env",
        "svc",
        "ssh",
        "tensorflow",
        "mpi",
        "pytorch",
        "ray",
        "hcclrank",
    }
    assert {m.value for m in c.JobFlowPhase} == {
        "Succeed",
        "Terminating",
        "Failed",
        "Running",
        "Pending",
    }
