"""Kubeflow training-operator v1, MPI operator v2 and Trainer v2 conversions (golden cases)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stromboli.integrations.common import Context, apply_mutation
from stromboli.integrations.kubeflow.mpi import MPIJobAdapter
from stromboli.integrations.kubeflow.trainer import TrainJobAdapter
from stromboli.integrations.kubeflow.training import TrainingOperatorAdapter

from .kit import (
    GROUP_NAME,
    TASK_SPEC,
    convert,
    obj,
    only_group,
    operator_made,
    raises_field,
    roles,
    stored,
    template,
)

V1 = TrainingOperatorAdapter()
MPI = MPIJobAdapter()
TRAINER = TrainJobAdapter()


def pytorchjob(
    name: str = "train", master: int = 1, workers: int = 2, **run_policy: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": master, "template": template()},
            "Worker": {"replicas": workers, "template": template()},
        }
    }
    if run_policy:
        spec["runPolicy"] = run_policy
    return obj("kubeflow.org/v1", "PyTorchJob", name, spec)


# --- training-operator v1 ----------------------------------------------------------------------


def test_golden_pytorchjob() -> None:
    """integrations.md §9.1: Master×1 + Worker×2 of 1 cpu / 2Gi, no schedulingPolicy."""
    result = convert(V1, pytorchjob())
    group = only_group(result)
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["kind"] == "PodGroup"
    assert group["metadata"]["name"] == "train"
    assert group["metadata"]["namespace"] == "ns"
    [owner] = group["metadata"]["ownerReferences"]
    assert owner["kind"] == "PyTorchJob" and owner["name"] == "train"
    assert owner["controller"] is True and owner["uid"] == "uid-train"
    assert group["spec"] == {
        "minMember": 3,
        "queue": "default",
        "minResources": {"cpu": "3", "memory": "6Gi"},
    }
    assert roles(result) == {
        "master": {GROUP_NAME: "train", TASK_SPEC: "master"},
        "worker": {GROUP_NAME: "train", TASK_SPEC: "worker"},
    }
    pod = {
        "metadata": {
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/job-name": "train",
            }
        },
        "spec": {},
    }
    mutated = apply_mutation(pod, result.mutation_for(pod))
    assert mutated["spec"]["schedulerName"] == "volcano"
    assert mutated["metadata"]["annotations"] == {GROUP_NAME: "train", TASK_SPEC: "worker"}


def test_scheduler_name_of_the_user_is_kept_for_v1_jobs() -> None:
    result = convert(V1, pytorchjob())
    pod = {
        "metadata": {
            "labels": {
                "training.kubeflow.org/replica-type": "master",
                "training.kubeflow.org/job-name": "train",
            }
        },
        "spec": {"schedulerName": "my-scheduler"},
    }
    assert apply_mutation(pod, result.mutation_for(pod))["spec"]["schedulerName"] == "my-scheduler"
    pod["spec"]["schedulerName"] = "default-scheduler"
    assert apply_mutation(pod, result.mutation_for(pod))["spec"]["schedulerName"] == "volcano"


def test_tfjob_sums_all_replica_types() -> None:
    job = obj(
        "kubeflow.org/v1",
        "TFJob",
        "tf",
        {
            "tfReplicaSpecs": {
                "PS": {"replicas": 2, "template": template("500m", "1Gi")},
                "Worker": {"replicas": 4, "template": template("2", "4Gi")},
                "Chief": {"template": template("1", "1Gi")},  # replicas default to 1
            }
        },
    )
    result = convert(V1, job)
    assert only_group(result)["spec"]["minMember"] == 7
    assert only_group(result)["spec"]["minResources"] == {"cpu": "10", "memory": "19Gi"}
    assert set(roles(result)) == {"ps", "worker", "chief"}


def test_min_available_takes_the_highest_priority_pods_first() -> None:
    job = obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        "p",
        {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": template("4", "8Gi", priorityClassName="high"),
                },
                "Worker": {
                    "replicas": 8,
                    "template": template("1", "1Gi", priorityClassName="low"),
                },
            },
            "runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
        },
    )
    context = Context(priority_classes={"high": 1000, "low": 10})
    spec = only_group(convert(V1, job, context))["spec"]
    assert spec["minMember"] == 3
    assert spec["minResources"] == {"cpu": "6", "memory": "10Gi"}  # master + 2 workers
    # Reversed priorities: the first three pods are all workers.
    context = Context(priority_classes={"high": 1, "low": 1000})
    spec = only_group(convert(V1, job, context))["spec"]
    assert spec["minResources"] == {"cpu": "3", "memory": "3Gi"}


def test_limits_count_only_for_a_container_without_any_requests() -> None:
    job = pytorchjob(workers=0)
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    assert only_group(convert(V1, job))["spec"]["minResources"] == {"cpu": "1"}
    container["resources"] = {"limits": {"cpu": "2", "memory": "4Gi"}}
    assert only_group(convert(V1, job))["spec"]["minResources"] == {"cpu": "2", "memory": "4Gi"}


def test_scheduling_policy_fields() -> None:
    job = pytorchjob(
        schedulingPolicy={
            "queue": "research",
            "priorityClass": "urgent",
            "minResources": {"cpu": "100", "nvidia.com/gpu": "8"},
        }
    )
    spec = only_group(convert(V1, job))["spec"]
    assert spec == {
        "minMember": 3,
        "queue": "research",
        "priorityClassName": "urgent",
        "minResources": {"cpu": "100", "nvidia.com/gpu": "8"},
    }


def test_queue_annotation_of_the_job_is_copied_but_not_read() -> None:
    job = pytorchjob()
    job["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "q9", "team": "a"}
    group = only_group(convert(V1, job))
    assert group["spec"]["queue"] == "default"
    assert group["metadata"]["annotations"] == {
        "scheduling.volcano.sh/queue-name": "q9",
        "team": "a",
    }


def test_queue_of_a_stored_podgroup_is_kept_when_the_policy_names_none() -> None:
    first = only_group(convert(V1, pytorchjob()))
    context = Context(existing={"train": stored(first, queue="picked")})
    assert only_group(convert(V1, pytorchjob(), context))["spec"]["queue"] == "picked"
    job = pytorchjob(schedulingPolicy={"queue": "explicit"})
    assert only_group(convert(V1, job, context))["spec"]["queue"] == "explicit"


def test_replica_change_recomputes_the_podgroup() -> None:
    first = only_group(convert(V1, pytorchjob(workers=2)))
    context = Context(existing={"train": first})
    group = only_group(convert(V1, pytorchjob(workers=5), context))
    assert group["spec"]["minMember"] == 6
    assert group["spec"]["minResources"] == {"cpu": "6", "memory": "12Gi"}


def test_podgroup_made_by_the_operator_is_adopted() -> None:
    made = operator_made(only_group(convert(V1, pytorchjob())))
    result = convert(V1, pytorchjob(), Context(existing={"train": made}))
    assert result.podgroups == () and result.adopted == ("train",)
    assert roles(result)["worker"][GROUP_NAME] == "train"


def test_podgroup_of_another_owner_is_a_conflict() -> None:
    other = operator_made(only_group(convert(V1, pytorchjob())))
    other["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    message = raises_field(V1, pytorchjob(), "metadata.name", Context(existing={"train": other}))
    assert "PyTorchJob ns/train" in message and "already exists" in message


def test_suspended_and_finished_jobs_have_no_podgroup() -> None:
    assert convert(V1, pytorchjob(suspend=True)).podgroups == ()
    job = pytorchjob()
    job["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    assert convert(V1, job).podgroups == ()


@pytest.mark.parametrize(
    ("kind", "field", "types"),
    [
        ("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker")),
        ("PaddleJob", "paddleReplicaSpecs", ("Master", "Worker")),
        ("JAXJob", "jaxReplicaSpecs", ("Worker",)),
        ("MPIJob", "mpiReplicaSpecs", ("Launcher", "Worker")),
    ],
)
def test_every_v1_kind(kind: str, field: str, types: tuple[str, ...]) -> None:
    job = obj(
        "kubeflow.org/v1",
        kind,
        "j",
        {field: {t: {"replicas": 2, "template": template()} for t in types}},
    )
    result = convert(V1, job)
    assert only_group(result)["spec"]["minMember"] == 2 * len(types)
    assert set(roles(result)) == {t.lower() for t in types}


def test_bad_v1_jobs_name_the_field() -> None:
    job = pytorchjob()
    job["spec"]["pytorchReplicaSpecs"]["Launcher"] = {"replicas": 1, "template": template()}
    assert "unknown replica type" in raises_field(V1, job, "spec.pytorchReplicaSpecs.Launcher")
    job = pytorchjob()
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    raises_field(V1, job, "spec.pytorchReplicaSpecs.Worker.template")
    job = pytorchjob()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "resources"
    ] = {"requests": {"cpu": "lots"}}
    raises_field(
        V1,
        job,
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu",
    )
    job = pytorchjob(workers=-1)
    raises_field(V1, job, "spec.pytorchReplicaSpecs.Worker.replicas")
    job = pytorchjob()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "2"
    raises_field(V1, job, "spec.pytorchReplicaSpecs.Worker.replicas")


def test_huge_totals_are_refused_not_overflowed() -> None:
    job = pytorchjob(workers=2**31 - 1)
    raises_field(V1, job, "spec.pytorchReplicaSpecs.Worker.replicas")  # Σ exceeds int32
    job = pytorchjob(master=0, workers=2**31 - 1)
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = template("9e15", "1Gi")
    message = raises_field(V1, job, "spec.runPolicy.schedulingPolicy.minResources")
    assert "largest quantity" in message


def test_network_topology_from_volcano_annotations() -> None:
    job = pytorchjob()
    job["metadata"]["annotations"] = {
        "volcano.sh/network-topology-mode": "soft",
        "volcano.sh/network-topology-highest-tier": "2",
    }
    spec = only_group(convert(V1, job))["spec"]
    assert spec["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}
    job["metadata"]["annotations"]["volcano.sh/network-topology-mode"] = "tight"
    raises_field(V1, job, "metadata.annotations[volcano.sh/network-topology-mode]")


# --- MPI operator v2 ---------------------------------------------------------------------------


def mpijob(
    workers: int = 4, annotations: dict[str, str] | None = None, **policy: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": template("1", "1Gi")},
            "Worker": {"replicas": workers, "template": template("2", "4Gi")},
        }
    }
    if policy:
        spec["runPolicy"] = {"schedulingPolicy": policy}
    return obj("kubeflow.org/v2beta1", "MPIJob", "mpi", spec, annotations=annotations)


def test_mpijob_v2_defaults() -> None:
    result = convert(MPI, mpijob())
    group = only_group(result)
    assert group["metadata"]["name"] == "mpi"
    assert "annotations" not in group["metadata"]
    assert group["spec"] == {
        "minMember": 5,
        "queue": "default",
        "minResources": {"cpu": "9", "memory": "17Gi"},
    }
    assert roles(result) == {
        "launcher": {GROUP_NAME: "mpi", TASK_SPEC: "launcher"},
        "worker": {GROUP_NAME: "mpi", TASK_SPEC: "worker"},
    }
    pod = {
        "metadata": {
            "labels": {
                "training.kubeflow.org/job-role": "worker",
                "training.kubeflow.org/job-name": "mpi",
            }
        },
        "spec": {"schedulerName": "other"},
    }
    assert apply_mutation(pod, result.mutation_for(pod))["spec"]["schedulerName"] == "volcano"


def test_mpijob_v2_queue_and_priority_precedence() -> None:
    job = mpijob(annotations={"scheduling.volcano.sh/queue-name": "from-annotation"})
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["priorityClassName"] = "w"
    spec = only_group(convert(MPI, job))["spec"]
    assert spec["queue"] == "from-annotation" and spec["priorityClassName"] == "w"
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["priorityClassName"] = "l"
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "explicit"}}
    spec = only_group(convert(MPI, job))["spec"]
    assert spec["queue"] == "explicit" and spec["priorityClassName"] == "l"
    job["spec"]["runPolicy"]["schedulingPolicy"]["priorityClass"] = "p"
    assert only_group(convert(MPI, job))["spec"]["priorityClassName"] == "p"


def test_mpijob_v2_min_available_counts_the_launcher_first() -> None:
    spec = only_group(convert(MPI, mpijob(minAvailable=2)))["spec"]
    assert spec["minMember"] == 2
    assert spec["minResources"] == {"cpu": "3", "memory": "5Gi"}  # launcher + one worker


def test_mpijob_v2_needs_a_launcher() -> None:
    job = mpijob()
    del job["spec"]["mpiReplicaSpecs"]["Launcher"]
    raises_field(MPI, job, "spec.mpiReplicaSpecs.Launcher")


# --- Trainer v2 --------------------------------------------------------------------------------


def runtime(
    *jobs: tuple[str, int, dict[str, Any]], volcano: dict[str, Any] | None = None, **meta: Any
) -> dict[str, Any]:
    replicated = [
        {
            "name": name,
            "replicas": 1,
            "template": {"spec": {"parallelism": pods, "completions": pods, "template": tmpl}},
        }
        for name, pods, tmpl in jobs
    ]
    spec: dict[str, Any] = {"template": {"spec": {"replicatedJobs": replicated}}}
    if meta:
        spec["template"]["metadata"] = meta
    if volcano is not None:
        spec["podGroupPolicy"] = {"volcano": volcano}
    result = obj("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "torch", spec)
    del result["metadata"]["namespace"]
    return result


def trainjob(num_nodes: int | None = 4, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"runtimeRef": {"name": "torch"}, **spec}
    if num_nodes is not None:
        body["trainer"] = {"numNodes": num_nodes}
    return obj("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", body)


def test_golden_trainjob() -> None:
    """integrations.md §9.1: node ×4 of 1 cpu / 2Gi, queue from the TrainJob's annotations."""
    job = trainjob(annotations={"scheduling.volcano.sh/queue-name": "q3"})
    context = Context(related=[runtime(("node", 1, template("1", "2Gi")))])
    result = convert(TRAINER, job, context)
    group = only_group(result)
    assert group["metadata"]["name"] == "tj"
    [owner] = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "TrainJob",
        "tj",
        True,
        True,
    )
    assert group["spec"] == {
        "minMember": 4,
        "queue": "q3",
        "minResources": {"cpu": "4", "memory": "8Gi"},
    }
    assert roles(result) == {"node": {GROUP_NAME: "tj", TASK_SPEC: "node"}}


def test_trainjob_counts_initializers_and_uses_pod_requests() -> None:
    init = template(
        "1",
        "1Gi",
        initContainers=[
            {
                "name": "fetch",
                "image": "x",
                "resources": {"requests": {"cpu": "3", "memory": "1Gi"}},
            }
        ],
    )
    node = template("2", "4Gi", overhead={"cpu": "100m"})
    node["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}  # no request
    context = Context(related=[runtime(("dataset-initializer", 1, init), ("node", 1, node))])
    spec = only_group(convert(TRAINER, trainjob(2), context))["spec"]
    assert spec["minMember"] == 3
    # initializer: max(init 3 cpu, app 1 cpu) = 3; nodes: 2 × (2 cpu + 100m); limits unused.
    assert spec["minResources"] == {"cpu": "7200m", "memory": "9Gi"}


def test_trainjob_priority_from_the_last_template_and_queue_from_runtime() -> None:
    context = Context(
        related=[
            runtime(
                ("model-initializer", 1, template(priorityClassName="first")),
                ("node", 1, template(priorityClassName="last")),
                annotations={"scheduling.volcano.sh/queue-name": "runtime-q"},
            )
        ]
    )
    spec = only_group(convert(TRAINER, trainjob(1), context))["spec"]
    assert spec["priorityClassName"] == "last" and spec["queue"] == "runtime-q"
    job = trainjob(1, annotations={"scheduling.volcano.sh/queue-name": ""})
    raises_field(TRAINER, job, "spec.annotations[scheduling.volcano.sh/queue-name]", context)


def test_trainjob_with_volcano_policy_is_left_to_trainer() -> None:
    rt = runtime(
        ("node", 1, template()),
        volcano={"networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
    )
    result = convert(TRAINER, trainjob(), Context(related=[rt]))
    assert result.podgroups == () and roles(result)["node"][GROUP_NAME] == "tj"
    ours = only_group(
        convert(TRAINER, trainjob(), Context(related=[runtime(("node", 1, template()))]))
    )
    made = operator_made(ours)
    result = convert(TRAINER, trainjob(), Context(related=[rt], existing={"tj": made}))
    assert result.podgroups == () and result.adopted == ("tj",)


def test_trainjob_network_topology_needs_a_tier() -> None:
    rt = runtime(("node", 1, template()), volcano={"networkTopology": {"mode": "hard"}})
    raises_field(
        TRAINER,
        trainjob(),
        "runtime.spec.podGroupPolicy.volcano.networkTopology.highestTierAllowed",
        Context(related=[rt]),
    )


def test_trainjob_podgroup_is_built_once_unless_suspended() -> None:
    context = Context(related=[runtime(("node", 1, template("1", "2Gi")))])
    first = only_group(convert(TRAINER, trainjob(4), context))
    later = Context(related=context.related, existing={"tj": first})
    assert only_group(convert(TRAINER, trainjob(8), later))["spec"]["minMember"] == 4
    assert only_group(convert(TRAINER, trainjob(8, suspend=True), later))["spec"]["minMember"] == 8


def test_trainjob_runtime_must_exist() -> None:
    message = raises_field(TRAINER, trainjob(), "spec.runtimeRef", Context())
    assert "ClusterTrainingRuntime torch was not found" in message


def test_inputs_are_not_modified() -> None:
    job = pytorchjob()
    before = copy.deepcopy(job)
    V1.convert(job)
    assert job == before
