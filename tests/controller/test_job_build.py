"""PodGroup and pod builders (reference §5.1, §2): names, labels, annotations, minResources."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.core.api import constants as k
from stromboli.core.controller.job import build
from stromboli.core.controller.job.spec import JobSpecError, parse_job

from .jobkit import task, vcjob


def stored(job: dict[str, Any], uid: str = "u-1") -> dict[str, Any]:
    job["metadata"].update(uid=uid, generation=1)
    return job


def view_of(job: dict[str, Any]):
    return parse_job(job)


def no_priority(_name: str) -> int | None:
    return None


def test_podgroup_is_named_after_the_job_and_its_uid() -> None:
    job = stored(vcjob("train", task("worker", 3), queue="research", priorityClassName="high"))
    pg = build.build_podgroup(job, view_of(job), no_priority)
    assert pg["metadata"]["name"] == "train-u-1"
    assert pg["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "train",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pg["spec"] == {
        "minMember": 3,
        "minTaskMember": {"worker": 3},
        "queue": "research",
        # Volcano's quota usage of the gang's pods, so ResourceQuota checks see them.
        "minResources": {
            "count/pods": "3",
            "cpu": "3",
            "memory": "3Gi",
            "pods": "3",
            "requests.cpu": "3",
            "requests.memory": "3Gi",
        },
        "priorityClassName": "high",
    }


def test_podgroup_copies_job_labels_annotations_and_topology() -> None:
    job = stored(
        vcjob(
            "j",
            metadata={"labels": {"team": "a"}, "annotations": {k.PREEMPTABLE_KEY: "true"}},
            networkTopology={"mode": "hard", "highestTierAllowed": 2},
        )
    )
    pg = build.build_podgroup(job, view_of(job), no_priority)
    assert pg["metadata"]["labels"] == {"team": "a"}
    assert pg["metadata"]["annotations"] == {k.PREEMPTABLE_KEY: "true"}
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}


def test_partitioned_tasks_become_subgroups() -> None:
    partitioned = task(
        "worker",
        8,
        partitionPolicy={
            "totalPartitions": 4,
            "partitionSize": 2,
            "minPartitions": 2,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        },
    )
    job = stored(vcjob("j", partitioned))
    view = view_of(job)
    spec = build.podgroup_spec(view, no_priority)
    assert spec["minTaskMember"] == {"worker": 4}  # minPartitions × partitionSize
    assert spec["subGroupPolicy"] == [
        {
            "name": "worker",
            "subGroupSize": 2,
            "minSubGroups": 2,
            "labelSelector": {"matchLabels": {k.TASK_SPEC_KEY: "worker"}},
            "matchLabelKeys": [k.PARTITION_ID_KEY],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        }
    ]
    pod = build.build_pod(job, view, view.tasks[0], 5, version=0, retry_count=0)
    assert pod["metadata"]["labels"][k.PARTITION_ID_KEY] == "2"


# --- minResources --------------------------------------------------------------------------


def quota_of(cpu: str, memory: str, pods: str) -> dict[str, str]:
    """Volcano's minResources of pods asking cpu and memory: each also as ``requests.*``, and
    the pods counted twice (``pods``, ``count/pods``)."""
    return {
        "count/pods": pods,
        "cpu": cpu,
        "memory": memory,
        "pods": pods,
        "requests.cpu": cpu,
        "requests.memory": memory,
    }


def test_min_resources_sum_the_task_minimums() -> None:
    job = stored(
        vcjob(
            "j",
            task("master", 1, cpu="4"),
            task("worker", 4, cpu="1", min_available=2),
        )
    )
    assert build.min_resources(view_of(job), no_priority) == quota_of("6", "3Gi", "3")


def test_min_resources_are_topped_up_to_the_job_minimum() -> None:
    job = stored(
        vcjob(
            "j",
            task("master", 1, cpu="4"),
            task("worker", 4, cpu="1", min_available=2),
            minAvailable=5,
        )
    )
    # 1 master + 2 workers from the minimums, then 2 more workers from the spare replicas.
    assert build.min_resources(view_of(job), no_priority) == quota_of("8", "5Gi", "5")


def test_min_resources_below_task_minimums_take_the_first_pods_by_priority() -> None:
    low = task("low", 2, cpu="1")
    high = task("high", 2, cpu="3")
    high["template"]["spec"]["priorityClassName"] = "important"
    job = stored(vcjob("j", low, high, minAvailable=3))
    priorities = {"important": 1000}.get
    # The two high-priority pods (3 cpu each) first, then one low one.
    assert build.min_resources(view_of(job), priorities) == quota_of("7", "3Gi", "3")


def test_podgroup_drift_patches_only_what_changed() -> None:
    job = stored(vcjob("j", task("worker", 2)))
    view = view_of(job)
    wanted = build.podgroup_spec(view, no_priority)
    assert build.podgroup_drift(wanted, wanted) == {}
    current = {**wanted, "minMember": 1, "minTaskMember": {"worker": 1}}
    assert build.podgroup_drift(current, wanted) == {
        "minMember": 2,
        "minResources": wanted["minResources"],
        "minTaskMember": {"worker": 2},
    }


# --- pods ----------------------------------------------------------------------------------


def test_pod_carries_every_volcano_label_and_annotation() -> None:
    worker = task("worker", 2, topologyPolicy="best-effort")
    worker["template"]["metadata"]["labels"] = {"app": "x"}
    job = stored(
        vcjob(
            "train",
            worker,
            queue="q1",
            priorityClassName="high",
            metadata={
                "annotations": {
                    k.PREEMPTABLE_KEY: "true",
                    k.COOLDOWN_TIME_KEY: "600s",
                    k.REVOCABLE_ZONE_KEY: "*",
                    k.JDB_MIN_AVAILABLE_KEY: "1",
                    k.JDB_MAX_UNAVAILABLE_KEY: "1",
                    "other": "not copied",
                },
                "labels": {k.PREEMPTABLE_KEY: "true", "team": "not copied"},
            },
        )
    )
    view = view_of(job)
    pod = build.build_pod(job, view, view.tasks[0], 1, version=3, retry_count=2)
    meta = pod["metadata"]
    assert meta["name"] == "train-worker-1"
    assert meta["ownerReferences"][0]["kind"] == "Job"
    assert meta["annotations"] == {
        k.TASK_INDEX_KEY: "1",
        k.TASK_SPEC_KEY: "worker",
        k.GROUP_NAME_ANNOTATION: "train-u-1",
        k.JOB_NAME_KEY: "train",
        k.QUEUE_NAME_KEY: "q1",
        k.JOB_VERSION_KEY: "3",
        k.TEMPLATE_UID_KEY: "train-worker",
        k.JOB_RETRY_COUNT_KEY: "2",
        k.NUMA_TOPOLOGY_POLICY_KEY: "best-effort",
        k.PREEMPTABLE_KEY: "true",
        k.COOLDOWN_TIME_KEY: "600s",
        k.REVOCABLE_ZONE_KEY: "*",
        k.JDB_MIN_AVAILABLE_KEY: "1",  # min-available wins over max-unavailable
    }
    assert meta["labels"] == {
        "app": "x",
        k.TASK_INDEX_KEY: "1",
        k.JOB_NAME_KEY: "train",
        k.TASK_SPEC_KEY: "worker",
        k.JOB_NAMESPACE_KEY: "default",
        k.QUEUE_NAME_KEY: "q1",
        k.PREEMPTABLE_KEY: "true",
    }
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["spec"]["priorityClassName"] == "high"


def test_pod_template_scheduler_and_priority_win_over_the_jobs() -> None:
    worker = task("worker", 1)
    worker["template"]["spec"].update(schedulerName="other", priorityClassName="own")
    job = stored(vcjob("j", worker, priorityClassName="high"))
    view = view_of(job)
    pod = build.build_pod(job, view, view.tasks[0], 0, version=0, retry_count=0)
    assert (pod["spec"]["schedulerName"], pod["spec"]["priorityClassName"]) == ("other", "own")


def test_sim_annotations_of_the_template_reach_the_pod() -> None:
    job = stored(vcjob("j", task("worker", 1, runtime="30s", exit_code=2)))
    view = view_of(job)
    pod = build.build_pod(job, view, view.tasks[0], 0, version=0, retry_count=0)
    assert pod["metadata"]["annotations"][k.SIM_RUNTIME_ANNOTATION] == "30s"
    assert pod["metadata"]["annotations"][k.SIM_EXIT_CODE_ANNOTATION] == "2"


def test_job_volumes_are_mounted_in_every_container() -> None:
    worker = task("worker", 1)
    worker["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    job = stored(
        vcjob(
            "j",
            worker,
            volumes=[
                {"mountPath": "/data", "volumeClaimName": "data"},
                {"mountPath": "/again", "volumeClaimName": "data"},
            ],
        )
    )
    view = view_of(job)
    pod = build.build_pod(job, view, view.tasks[0], 0, version=0, retry_count=0)
    volume = build.volume_name("j", "u-1", "data")
    assert volume.startswith("j-") and len(volume) == len("j-") + 12
    assert pod["spec"]["volumes"] == [
        {"name": volume, "persistentVolumeClaim": {"claimName": "data"}}
    ]
    for container in pod["spec"]["containers"]:
        assert container["volumeMounts"] == [{"mountPath": "/data", "name": volume}]


def test_generated_names_are_stable_and_distinct() -> None:
    first = build.pvc_name("j", "u-1", 0)
    assert first == build.pvc_name("j", "u-1", 0)
    assert first.startswith("j-pvc-") and len(first) == len("j-pvc-") + 12
    assert first != build.pvc_name("j", "u-1", 1) != build.pvc_name("j", "u-2", 0)
    assert first != build.pvc_name("j", "u-1", 0, attempt=1)


# --- malformed specs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda j: j["spec"].update(tasks=[]), "spec.tasks"),
        (lambda j: j["spec"]["tasks"][0].pop("template"), "spec.tasks[0].template"),
        (
            lambda j: j["spec"]["tasks"][0]["template"]["spec"].update(containers=[]),
            "spec.tasks[0].template.spec.containers",
        ),
        (
            lambda j: j["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"][
                "requests"
            ].update(cpu="lots"),
            "spec.tasks[0].template",
        ),
        (lambda j: j["spec"]["tasks"].append(task("worker", 1)), "spec.tasks[1].name"),
        (lambda j: j["spec"]["tasks"][0].update(replicas="two"), "spec.tasks[0].replicas"),
        (
            lambda j: j["spec"]["tasks"][0].update(dependsOn={"name": ["ghost"]}),
            "spec.tasks[0].dependsOn.name",
        ),
        (
            lambda j: j["spec"].update(policies=[{"event": "PodFailed", "action": "Explode"}]),
            "spec.policies[0].action",
        ),
        (
            lambda j: j["spec"]["tasks"][0].update(policies=[{"event": "PodFailed"}]),
            "spec.tasks[0].policies[0].action",
        ),
        (
            lambda j: j["spec"].update(policies=[{"exitCode": 3, "action": "SyncJob"}]),
            "spec.policies[0].action",
        ),
    ],
)
def test_malformed_jobs_name_the_field(change, field: str) -> None:
    job = stored(vcjob("j", task("worker", 1)))
    change(job)
    with pytest.raises(JobSpecError) as caught:
        parse_job(job)
    assert caught.value.field == field
    assert str(caught.value).startswith(field)
