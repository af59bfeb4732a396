"""Each model: defaults as the CRD has them, camelCase aliases, and what it rejects."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from stromboli.core.api.constants import (
    ConcurrencyPolicy,
    DequeueStrategy,
    Event,
    JobPhase,
    NetworkTopologyMode,
    PodGroupPhase,
)
from stromboli.core.api.models import (
    Command,
    CronJob,
    HyperNode,
    Job,
    JobFlow,
    JobTemplate,
    Node,
    Numatopology,
    ObjectMeta,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
    ResourceQuota,
)
from stromboli.core.api.models.batch import JobSpec, TaskSpec
from stromboli.core.api.models.scheduling import NetworkTopologySpec, QueueSpec

from . import samples


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def locs(error: ValidationError) -> list[str]:
    return [".".join(str(part) for part in item["loc"]) for item in error.errors()]


def meta(name: str = "x") -> dict[str, Any]:
    return {"name": name}


# --- Round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "sample"),
    [
        (Queue, samples.QUEUE),
        (PodGroup, samples.PODGROUP),
        (Job, samples.JOB),
        (CronJob, samples.CRONJOB),
        (Command, samples.COMMAND),
        (JobTemplate, samples.JOBTEMPLATE),
        (JobFlow, samples.JOBFLOW),
        (HyperNode, samples.HYPERNODE),
        (Numatopology, samples.NUMATOPOLOGY),
        (Pod, samples.POD),
        (Node, samples.NODE),
        (PriorityClass, samples.PRIORITY_CLASS),
        (ResourceQuota, samples.RESOURCE_QUOTA),
    ],
)
def test_round_trip_keeps_every_given_field(model: Any, sample: dict[str, Any]) -> None:
    out = dump(model.model_validate(copy.deepcopy(sample)))
    assert _contains(out, sample), out
    again = dump(model.model_validate(out))
    assert again == out


def _contains(big: Any, small: Any) -> bool:
    """Whether everything in ``small`` is in ``big`` (defaults may add to ``big``)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            key in big and _contains(big[key], value) for key, value in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(big) == len(small)
            and all(_contains(b, s) for b, s in zip(big, small, strict=True))
        )
    return big == small


def test_snake_case_and_camel_case_both_accepted() -> None:
    by_alias = PodGroup.model_validate({"metadata": meta(), "spec": {"minMember": 2}})
    by_name = PodGroup.model_validate({"metadata": meta(), "spec": {"min_member": 2}})
    assert by_alias.spec.min_member == by_name.spec.min_member == 2


def test_dump_uses_camel_case() -> None:
    out = dump(PodGroup(metadata=ObjectMeta(name="pg"), spec={"min_member": 1}))
    assert out["spec"]["minMember"] == 1
    assert "min_member" not in out["spec"]


def test_special_aliases() -> None:
    pg = PodGroup.model_validate(samples.PODGROUP)
    assert pg.status is not None and pg.status.conditions is not None
    assert pg.status.conditions[0].transition_id == "0b1c"
    assert "transitionID" in dump(pg)["status"]["conditions"][0]
    flow = JobFlow.model_validate(samples.JOBFLOW)
    assert flow.status is not None and flow.status.un_know_jobs == []
    assert dump(flow)["status"]["unKnowJobs"] == []
    pod = Pod.model_validate(samples.POD)
    assert pod.spec.containers[0].ports is not None
    assert pod.spec.containers[0].ports[0].host_ip == "0.0.0.0"


def test_constructed_objects_carry_api_version_and_kind() -> None:
    queue = Queue(metadata=ObjectMeta(name="q"))
    assert dump(queue)["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert dump(queue)["kind"] == "Queue"


def test_wrong_kind_for_model_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        Queue.model_validate({"kind": "PodGroup", "metadata": meta()})
    assert "kind" in locs(info.value)


# --- Defaults ------------------------------------------------------------------------------------


def test_queue_defaults() -> None:
    queue = Queue.model_validate({"metadata": meta()})
    assert queue.spec.weight == 1
    assert queue.spec.dequeue_strategy is DequeueStrategy.TRAVERSE
    assert queue.spec.reclaimable is None  # the webhook, not the CRD, sets it
    assert dump(queue)["spec"] == {"weight": 1, "dequeueStrategy": "traverse"}


def test_podgroup_defaults() -> None:
    pg = PodGroup.model_validate({"metadata": meta(), "spec": {"minMember": 1}})
    assert pg.spec.queue == "default"
    assert pg.spec.min_member == 1
    assert "status" not in dump(pg)


def test_podgroup_without_spec_gets_default_queue() -> None:
    assert dump(PodGroup.model_validate({"metadata": meta()}))["spec"] == {"queue": "default"}


def test_network_topology_mode_defaults_to_hard() -> None:
    assert NetworkTopologySpec().mode is NetworkTopologyMode.HARD
    pg = PodGroup.model_validate({"metadata": meta(), "spec": {"networkTopology": {}}})
    assert dump(pg)["spec"]["networkTopology"] == {"mode": "hard"}


def test_network_topology_absent_stays_absent() -> None:
    assert "networkTopology" not in dump(PodGroup.model_validate({"metadata": meta()}))["spec"]


def test_subgroup_policy_defaults() -> None:
    pg = PodGroup.model_validate({"metadata": meta(), "spec": {"subGroupPolicy": [{"name": "a"}]}})
    assert dump(pg)["spec"]["subGroupPolicy"] == [
        {"name": "a", "subGroupSize": 1, "minSubGroups": 0}
    ]


def test_job_defaults() -> None:
    job = Job.model_validate({"metadata": meta(), "spec": {"tasks": [{"replicas": 1}]}})
    assert job.spec.queue == "default"
    assert job.spec.max_retry == 3
    assert job.spec.min_available is None  # the webhook computes it
    assert job.spec.scheduler_name is None


def test_partition_policy_defaults() -> None:
    task = TaskSpec.model_validate({"partitionPolicy": {"totalPartitions": 2, "partitionSize": 3}})
    assert task.partition_policy is not None
    assert task.partition_policy.min_partitions == 0


def test_cronjob_defaults() -> None:
    cron = CronJob.model_validate(
        {"metadata": meta(), "spec": {"schedule": "* * * * *", "jobTemplate": {}}}
    )
    assert cron.spec.concurrency_policy is ConcurrencyPolicy.ALLOW
    assert cron.spec.suspend is False
    assert cron.spec.successful_jobs_history_limit == 3
    assert cron.spec.failed_jobs_history_limit == 1


def test_enums_parse_to_members() -> None:
    pg = PodGroup.model_validate(samples.PODGROUP)
    assert pg.status is not None and pg.status.phase is PodGroupPhase.RUNNING
    job = Job.model_validate(samples.JOB)
    assert job.status is not None and job.status.state is not None
    assert job.status.state.phase is JobPhase.RUNNING
    assert job.spec.policies is not None and job.spec.policies[0].event is Event.POD_EVICTED


# --- Rejections ----------------------------------------------------------------------------------


def test_typo_in_spec_is_rejected_with_its_path() -> None:
    with pytest.raises(ValidationError) as info:
        PodGroup.model_validate({"metadata": meta(), "spec": {"minMembr": 2}})
    assert locs(info.value) == ["spec.minMembr"]
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_typo_at_top_level_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        Queue.model_validate({"metadata": meta(), "sepc": {}})
    assert locs(info.value) == ["sepc"]


def test_typo_deep_in_job_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        Job.model_validate({"metadata": meta(), "spec": {"tasks": [{"replica": 2}]}})
    assert locs(info.value) == ["spec.tasks.0.replica"]


def test_pod_template_is_free_form() -> None:
    template = {"spec": {"anything": {"goes": [1, None]}}, "metadata": {"creationTimestamp": None}}
    job = Job.model_validate({"metadata": meta(), "spec": {"tasks": [{"template": template}]}})
    assert dump(job)["spec"]["tasks"][0]["template"] == template


def test_core_objects_keep_unknown_fields() -> None:
    out = dump(Pod.model_validate(samples.POD))
    assert out["spec"]["hostNetwork"] is False
    assert out["metadata"]["managedFields"] == [{"manager": "kubectl"}]
    assert dump(Node.model_validate(samples.NODE))["spec"]["podCIDR"] == "10.0.0.0/24"


@pytest.mark.parametrize(
    ("model", "obj", "loc"),
    [
        (Queue, {"spec": {"capability": {"cpu": "abc"}}}, "spec.capability.cpu"),
        (
            Queue,
            {"spec": {"guarantee": {"resource": {"memory": "1GB"}}}},
            "spec.guarantee.resource.memory",
        ),
        (Queue, {"status": {"allocated": {"cpu": "x"}}}, "status.allocated.cpu"),
        (PodGroup, {"spec": {"minResources": {"cpu": True}}}, "spec.minResources.cpu"),
        (Node, {"status": {"allocatable": {"pods": "lots"}}}, "status.allocatable.pods"),
        (ResourceQuota, {"spec": {"hard": {"requests.cpu": "?"}}}, "spec.hard.requests.cpu"),
    ],
)
def test_bad_quantity_names_the_path(model: Any, obj: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate({"metadata": meta(), **obj})
    assert locs(info.value) == [loc]
    assert "is not a valid quantity" in info.value.errors()[0]["msg"]


def test_bad_quantity_in_pod_container() -> None:
    pod = copy.deepcopy(samples.POD)
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1 core"
    with pytest.raises(ValidationError) as info:
        Pod.model_validate(pod)
    assert locs(info.value) == ["spec.containers.0.resources.requests.cpu"]


def test_quantities_are_kept_as_written() -> None:
    queue = Queue.model_validate(
        {"metadata": meta(), "spec": {"capability": {"cpu": 4, "mem": "1.5Gi"}}}
    )
    assert dump(queue)["spec"]["capability"] == {"cpu": 4, "mem": "1.5Gi"}


@pytest.mark.parametrize(
    ("obj", "loc"),
    [
        ({"spec": {"weight": 0}}, "spec.weight"),
        ({"spec": {"weight": 65536}}, "spec.weight"),
        ({"spec": {"priority": -1}}, "spec.priority"),
        ({"spec": {"weight": "2"}}, "spec.weight"),
        ({"spec": {"weight": True}}, "spec.weight"),
        ({"spec": {"reclaimable": "yes"}}, "spec.reclaimable"),
        ({"spec": {"parent": "Has_Caps"}}, "spec.parent"),
        ({"spec": {"type": "x" * 254}}, "spec.type"),
        ({"spec": {"dequeueStrategy": "lifo"}}, "spec.dequeueStrategy"),
        ({"status": {"state": "Half-open"}}, "status.state"),
    ],
)
def test_queue_rejects(obj: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        Queue.model_validate({"metadata": meta(), **obj})
    assert locs(info.value) == [loc]


def test_queue_weight_bounds_accepted() -> None:
    assert QueueSpec(weight=1).weight == 1
    assert QueueSpec(weight=65535).weight == 65535


@pytest.mark.parametrize(
    ("spec", "loc"),
    [
        ({"minMember": -1}, "spec.minMember"),
        ({"queue": "Q"}, "spec.queue"),
        ({"queue": "a" * 254}, "spec.queue"),
        ({"priorityClassName": "p" * 254}, "spec.priorityClassName"),
        ({"networkTopology": {"mode": "medium"}}, "spec.networkTopology.mode"),
        (
            {"networkTopology": {"highestTierAllowed": -1}},
            "spec.networkTopology.highestTierAllowed",
        ),
        ({"subGroupPolicy": [{"subGroupSize": 0}]}, "spec.subGroupPolicy.0.subGroupSize"),
        ({"subGroupPolicy": [{"minSubGroups": -1}]}, "spec.subGroupPolicy.0.minSubGroups"),
        ({"minTaskMember": {"ps": "one"}}, "spec.minTaskMember.ps"),
    ],
)
def test_podgroup_rejects(spec: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        PodGroup.model_validate({"metadata": meta(), "spec": spec})
    assert locs(info.value) == [loc]


def test_podgroup_accepts_empty_queue_for_webhook_defaulting() -> None:
    assert PodGroup.model_validate({"metadata": meta(), "spec": {"queue": ""}}).spec.queue == ""


@pytest.mark.parametrize(
    ("spec", "loc"),
    [
        ({"minAvailable": -1}, "spec.minAvailable"),
        ({"maxRetry": -1}, "spec.maxRetry"),
        ({"ttlSecondsAfterFinished": -5}, "spec.ttlSecondsAfterFinished"),
        ({"minSuccess": 0}, "spec.minSuccess"),
        ({"tasks": []}, "spec.tasks"),
        ({"tasks": [{"replicas": -1}]}, "spec.tasks.0.replicas"),
        ({"tasks": [{"name": "Bad_Name"}]}, "spec.tasks.0.name"),
        ({"tasks": [{"name": "a" * 64}]}, "spec.tasks.0.name"),
        ({"tasks": [{"topologyPolicy": "numa"}]}, "spec.tasks.0.topologyPolicy"),
        ({"tasks": [{"dependsOn": {"iteration": "some"}}]}, "spec.tasks.0.dependsOn.iteration"),
        (
            {"tasks": [{"partitionPolicy": {"totalPartitions": 0, "partitionSize": 1}}]},
            "spec.tasks.0.partitionPolicy.totalPartitions",
        ),
        (
            {"tasks": [{"partitionPolicy": {"totalPartitions": 1}}]},
            "spec.tasks.0.partitionPolicy.partitionSize",
        ),
        ({"tasks": [{"template": "pod"}]}, "spec.tasks.0.template"),
        ({"policies": [{"event": "PodExploded"}]}, "spec.policies.0.event"),
        ({"policies": [{"events": ["PodFailed", "Nope"]}]}, "spec.policies.0.events.1"),
        ({"policies": [{"timeout": "ten minutes"}]}, "spec.policies.0.timeout"),
        ({"volumes": [{"volumeClaimName": "x"}]}, "spec.volumes.0.mountPath"),
        ({"volumes": [{"mountPath": "/a:b"}]}, "spec.volumes.0.mountPath"),
        ({"schedulerName": "s" * 64}, "spec.schedulerName"),
        ({"queue": "Upper"}, "spec.queue"),
        ({"priorityClassName": "not valid"}, "spec.priorityClassName"),
        ({"plugins": {"ssh": "yes"}}, "spec.plugins.ssh"),
        ({"runningEstimate": "1 hour"}, "spec.runningEstimate"),
    ],
)
def test_job_rejects(spec: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        Job.model_validate({"metadata": meta(), "spec": spec})
    assert locs(info.value) == [loc]


@pytest.mark.parametrize("duration", ["0", "10s", "1h30m", "1.5h", "300ms", "2us", "-1m", "1h0m0s"])
def test_durations_accepted(duration: str) -> None:
    assert JobSpec.model_validate({"runningEstimate": duration}).running_estimate == duration


def test_job_accepts_empty_task_name_and_queue_for_webhook_defaulting() -> None:
    job = Job.model_validate({"metadata": meta(), "spec": {"queue": "", "tasks": [{"name": ""}]}})
    assert job.spec.queue == ""


@pytest.mark.parametrize(
    ("spec", "loc"),
    [
        ({"jobTemplate": {}}, "spec.schedule"),
        ({"schedule": "@daily"}, "spec.jobTemplate"),
        (
            {"schedule": "@daily", "jobTemplate": {}, "concurrencyPolicy": "Sometimes"},
            "spec.concurrencyPolicy",
        ),
        (
            {"schedule": "@daily", "jobTemplate": {}, "successfulJobsHistoryLimit": -1},
            "spec.successfulJobsHistoryLimit",
        ),
        (
            {"schedule": "@daily", "jobTemplate": {"spec": {"tasks": [{"replicaz": 1}]}}},
            "spec.jobTemplate.spec.tasks.0.replicaz",
        ),
    ],
)
def test_cronjob_rejects(spec: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        CronJob.model_validate({"metadata": meta(), "spec": spec})
    assert locs(info.value) == [loc]


def test_command_has_top_level_fields_only() -> None:
    command = Command.model_validate(samples.COMMAND)
    assert command.action == "AbortJob"
    assert command.target is not None and command.target.name == "mpi-job"
    with pytest.raises(ValidationError) as info:
        Command.model_validate({**samples.COMMAND, "spec": {}})
    assert locs(info.value) == ["spec"]


def test_command_target_needs_kind_and_name() -> None:
    with pytest.raises(ValidationError) as info:
        Command.model_validate({"metadata": meta(), "target": {"apiVersion": "v1", "kind": "Job"}})
    assert locs(info.value) == ["target.name"]


@pytest.mark.parametrize(
    ("spec", "loc"),
    [
        ({"flows": [{"name": ""}]}, "spec.flows.0.name"),
        ({"flows": [{}]}, "spec.flows.0.name"),
        ({"jobRetainPolicy": "keep"}, "spec.jobRetainPolicy"),
        ({"flows": [{"name": "a", "patch": {"spec": {}}}]}, "spec.flows.0.patch.spec"),
        (
            {
                "flows": [
                    {"name": "a", "dependsOn": {"probe": {"tcpSocketList": [{"port": 70000}]}}}
                ]
            },
            "spec.flows.0.dependsOn.probe.tcpSocketList.0.port",
        ),
        (
            {"flows": [{"name": "a", "dependsOn": {"probe": {"tcpSocketList": [{}]}}}]},
            "spec.flows.0.dependsOn.probe.tcpSocketList.0.port",
        ),
    ],
)
def test_jobflow_rejects(spec: dict[str, Any], loc: str) -> None:
    with pytest.raises(ValidationError) as info:
        JobFlow.model_validate({"metadata": meta(), "spec": spec})
    assert locs(info.value) == [loc]


def test_jobflow_patch_carries_a_job_spec() -> None:
    flow = JobFlow.model_validate(samples.JOBFLOW)
    assert flow.spec.flows is not None
    patch = flow.spec.flows[1].patch
    assert patch is not None and patch.job_spec is not None
    assert patch.job_spec.min_available == 1
    assert patch.job_spec.max_retry == 3


def _hypernode(members: list[dict[str, Any]], tier: int = 1) -> dict[str, Any]:
    return {"metadata": meta(), "spec": {"tier": tier, "members": members}}


@pytest.mark.parametrize(
    ("members", "loc", "message"),
    [
        ([], "spec.members", "at least 1"),
        ([{"type": "Node", "selector": {}}], "spec.members.0.selector", "must have one of"),
        (
            [
                {
                    "type": "Node",
                    "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}},
                }
            ],
            "spec.members.0.selector",
            "more than one selector",
        ),
        (
            [{"type": "Node", "selector": {"exactMatch": {}}}],
            "spec.members.0.selector.exactMatch.name",
            "required",
        ),
        (
            [{"type": "Node", "selector": {"exactMatch": {"name": "UP"}}}],
            "spec.members.0.selector.exactMatch.name",
            "DNS-1123",
        ),
        (
            [{"type": "Node", "selector": {"regexMatch": {"pattern": ""}}}],
            "spec.members.0.selector.regexMatch.pattern",
            "at least 1",
        ),
        (
            [{"type": "Rack", "selector": {"exactMatch": {"name": "a"}}}],
            "spec.members.0.type",
            "Node",
        ),
        (
            [{"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"a": "b"}}}}],
            "spec.members.0",
            "only select members of type Node",
        ),
    ],
)
def test_hypernode_rejects(members: list[dict[str, Any]], loc: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        HyperNode.model_validate(_hypernode(members))
    assert locs(info.value) == [loc]
    assert message in info.value.errors()[0]["msg"]


def test_hypernode_tier_required_and_non_negative() -> None:
    with pytest.raises(ValidationError) as info:
        HyperNode.model_validate({"metadata": meta(), "spec": {"members": []}})
    assert set(locs(info.value)) == {"spec.tier", "spec.members"}
    with pytest.raises(ValidationError) as info:
        HyperNode.model_validate(
            _hypernode([{"type": "Node", "selector": {"exactMatch": {"name": "a"}}}], tier=-1)
        )
    assert locs(info.value) == ["spec.tier"]


def test_numatopology_rejects_bad_cpu_detail() -> None:
    with pytest.raises(ValidationError) as info:
        Numatopology.model_validate(
            {"metadata": meta(), "spec": {"cpuDetail": {"0": {"numa": "zero"}}}}
        )
    assert locs(info.value) == ["spec.cpuDetail.0.numa"]


# --- Metadata ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "pg-1", "node-1.example.com", "0abc"])
def test_valid_names(name: str) -> None:
    assert Queue.model_validate({"metadata": meta(name)}).metadata.name == name


@pytest.mark.parametrize("name", ["", "A", "-a", "a-", "a_b", "a..b", "x" * 254])
def test_invalid_names(name: str) -> None:
    with pytest.raises(ValidationError) as info:
        Queue.model_validate({"metadata": {"name": name, "generateName": "g-"}})
    assert locs(info.value) == ["metadata.name"]


def test_name_or_generate_name_required() -> None:
    with pytest.raises(ValidationError, match=r"metadata\.name is required"):
        PodGroup.model_validate({"spec": {}})
    with pytest.raises(ValidationError, match=r"metadata\.name is required"):
        Pod.model_validate({"metadata": {"namespace": "a"}, "spec": {"containers": []}})
    assert PodGroup.model_validate({"metadata": {"generateName": "pg-"}}).metadata.name is None


def test_namespace_must_be_a_label() -> None:
    with pytest.raises(ValidationError) as info:
        PodGroup.model_validate({"metadata": {"name": "a", "namespace": "a.b"}})
    assert locs(info.value) == ["metadata.namespace"]


def test_annotation_values_must_be_strings() -> None:
    with pytest.raises(ValidationError) as info:
        Pod.model_validate(
            {
                "metadata": {"name": "p", "annotations": {"volcano.sh/preemptable": True}},
                "spec": {"containers": [{"name": "c"}]},
            }
        )
    assert locs(info.value) == ["metadata.annotations.volcano.sh/preemptable"]


def test_yaml_timestamps_become_rfc3339_strings() -> None:
    stamp = datetime(1970, 1, 1, 0, 1, 30, tzinfo=UTC)
    pg = PodGroup.model_validate({"metadata": {"name": "a", "creationTimestamp": stamp}})
    assert pg.metadata.creation_timestamp == "1970-01-01T00:01:30Z"
    naive = datetime(1970, 1, 1, 0, 0, 5)
    node = Node.model_validate({"metadata": {"name": "n", "creationTimestamp": naive}})
    assert node.metadata.creation_timestamp == "1970-01-01T00:00:05Z"


def test_owner_references() -> None:
    pg = PodGroup.model_validate(
        {
            "metadata": {
                "name": "a",
                "ownerReferences": [
                    {
                        "apiVersion": "batch.volcano.sh/v1alpha1",
                        "kind": "Job",
                        "name": "j",
                        "uid": "u",
                        "controller": True,
                    }
                ],
            }
        }
    )
    assert pg.metadata.owner_references is not None
    assert pg.metadata.owner_references[0].controller is True


# --- Core objects --------------------------------------------------------------------------------


def test_pod_fields_the_scheduler_reads() -> None:
    pod = Pod.model_validate(samples.POD)
    assert pod.spec.node_name == "node-1"
    assert pod.spec.scheduler_name == "volcano"
    assert pod.spec.priority == 100
    assert pod.spec.overhead == {"cpu": "100m"}
    assert pod.spec.init_containers is not None
    assert pod.spec.init_containers[0].resources is not None
    assert pod.spec.tolerations is not None and pod.spec.tolerations[0].effect == "NoSchedule"
    assert pod.spec.topology_spread_constraints is not None
    assert pod.spec.topology_spread_constraints[0].max_skew == 1
    assert pod.status is not None and pod.status.phase == "Running"


def test_pod_needs_spec_and_container_names() -> None:
    with pytest.raises(ValidationError) as info:
        Pod.model_validate({"metadata": meta()})
    assert locs(info.value) == ["spec"]
    with pytest.raises(ValidationError) as info:
        Pod.model_validate({"metadata": meta(), "spec": {"containers": [{"image": "x"}]}})
    assert locs(info.value) == ["spec.containers.0.name"]


def test_pod_host_port_must_be_an_integer() -> None:
    pod = copy.deepcopy(samples.POD)
    pod["spec"]["containers"][0]["ports"][0]["hostPort"] = "2222"
    with pytest.raises(ValidationError) as info:
        Pod.model_validate(pod)
    assert locs(info.value) == ["spec.containers.0.ports.0.hostPort"]


def test_node_taints_and_unschedulable() -> None:
    node = Node.model_validate(samples.NODE)
    assert node.spec is not None and node.spec.taints is not None
    assert node.spec.taints[0].key == "gpu"
    with pytest.raises(ValidationError) as info:
        Node.model_validate({"metadata": meta(), "spec": {"taints": [{"key": "a"}]}})
    assert locs(info.value) == ["spec.taints.0.effect"]
    with pytest.raises(ValidationError) as info:
        Node.model_validate({"metadata": meta(), "spec": {"unschedulable": "true"}})
    assert locs(info.value) == ["spec.unschedulable"]


def test_priority_class_value_required() -> None:
    assert PriorityClass.model_validate(samples.PRIORITY_CLASS).value == 1000
    with pytest.raises(ValidationError) as info:
        PriorityClass.model_validate({"metadata": meta()})
    assert locs(info.value) == ["value"]


def test_plugin_without_arguments_becomes_empty_list() -> None:
    job = Job.model_validate({"metadata": meta(), "spec": {"plugins": {"env": None, "svc": []}}})
    assert job.spec.plugins == {"env": [], "svc": []}
