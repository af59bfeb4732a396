"""Job admission rules (reference §6 Job mutate/validate; §9 admission and jobp checklists)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stromboli.core.admission.job import (
    MIN_AVAILABLE_OVER_REPLICAS,
    NO_TASKS,
    UPDATE_ADDS_TASKS,
    UPDATE_OTHER_FIELDS,
    admission_message,
    pod_template_problems,
    qualified_name_problems,
    tasks_form_dag,
    validate_job_create,
    validate_job_update,
    validate_policies,
)
from stromboli.core.admission.mutate import mutate_job

# --- builders ------------------------------------------------------------------------------------


def container(name: str = "nginx", cpu: str = "1", **extra: Any) -> dict:
    return {
        "name": name,
        "image": "nginx",
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": cpu}},
        **extra,
    }


def task(name: str | None = "task", replicas: int = 1, **extra: Any) -> dict:
    spec = {"containers": [container()], "restartPolicy": "Never"}
    spec.update(extra.pop("pod", {}))
    out: dict = {"replicas": replicas, "template": {"spec": spec}, **extra}
    if name is not None:
        out["name"] = name
    return out


def job(*tasks: dict, name: str = "test-job", **spec: Any) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"tasks": list(tasks) if tasks else [task()], **spec},
    }


def queue(name: str, state: str | None = "Open", parent: str | None = None) -> dict:
    q: dict = {"metadata": {"name": name}, "spec": {"weight": 1}}
    if parent:
        q["spec"]["parent"] = parent
    if state:
        q["status"] = {"state": state}
    return q


QUEUES = {name: queue(name) for name in ("root", "default")}


def admit(j: dict, queues: dict | None = None) -> list[str]:
    """What the API server would do: mutate, then validate."""
    return validate_job_create(mutate_job(j), QUEUES if queues is None else queues)


def rejected(j: dict, text: str, queues: dict | None = None) -> None:
    errors = admit(j, queues)
    assert any(text in e for e in errors), errors


# --- mutate (§6 Job mutate; admission "Job mutate") ---------------------------------------------


def test_mutate_default_queue() -> None:
    assert mutate_job(job())["spec"]["queue"] == "default"


def test_mutate_default_scheduler() -> None:
    assert mutate_job(job())["spec"]["schedulerName"] == "volcano"
    assert mutate_job(job(), "my-sched")["spec"]["schedulerName"] == "my-sched"


def test_mutate_default_max_retry() -> None:
    out = mutate_job(job())
    assert out["spec"]["maxRetry"] == 3
    assert out["spec"]["tasks"][0]["maxRetry"] == 3


def test_mutate_task_names() -> None:
    """jobp "Job mutate check": unnamed tasks become default0, default1."""
    out = mutate_job(job(task(None), task(None)))
    assert [t["name"] for t in out["spec"]["tasks"]] == ["default0", "default1"]


def test_mutate_default_min_available() -> None:
    out = mutate_job(job(task("a", 2), task("b", 3)))
    assert [t["minAvailable"] for t in out["spec"]["tasks"]] == [2, 3]
    assert out["spec"]["minAvailable"] == 5


def test_mutate_min_available_from_task_min_available() -> None:
    out = mutate_job(job(task("a", 4, minAvailable=1), task("b", 2)))
    assert out["spec"]["minAvailable"] == 3


def test_mutate_min_available_from_partitions() -> None:
    policy = {"totalPartitions": 4, "partitionSize": 2, "minPartitions": 3}
    out = mutate_job(job(task("a", 8, partitionPolicy=policy)))
    assert out["spec"]["tasks"][0]["minAvailable"] == 6


def test_mutate_partitions_without_min_partitions_use_replicas() -> None:
    policy = {"totalPartitions": 4, "partitionSize": 2}
    out = mutate_job(job(task("a", 8, partitionPolicy=policy)))
    assert out["spec"]["tasks"][0]["minAvailable"] == 8


def test_mutate_host_network_dns_policy() -> None:
    out = mutate_job(job(task("a", pod={"hostNetwork": True})))
    assert out["spec"]["tasks"][0]["template"]["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"


def test_mutate_keeps_dns_policy() -> None:
    out = mutate_job(job(task("a", pod={"hostNetwork": True, "dnsPolicy": "Default"})))
    assert out["spec"]["tasks"][0]["template"]["spec"]["dnsPolicy"] == "Default"


@pytest.mark.parametrize("plugin", ["tensorflow", "mpi", "pytorch", "ray"])
def test_mutate_adds_svc(plugin: str) -> None:
    out = mutate_job(job(task("master"), plugins={plugin: []}))
    assert out["spec"]["plugins"]["svc"] == []


def test_mutate_adds_ssh_for_mpi_only() -> None:
    assert "ssh" in mutate_job(job(task("master"), plugins={"mpi": []}))["spec"]["plugins"]
    assert "ssh" not in mutate_job(job(plugins={"pytorch": []}))["spec"]["plugins"]


def test_mutate_does_not_override_plugins() -> None:
    plugins = {"mpi": ["--port=5000"], "svc": ["--disable-network-policy"], "ssh": ["--ssh-port=2"]}
    out = mutate_job(job(task("master"), plugins=copy.deepcopy(plugins)))
    assert out["spec"]["plugins"] == plugins


def test_mutate_without_plugins_adds_none() -> None:
    assert "plugins" not in mutate_job(job())["spec"]


def test_mutate_preserves_set_values() -> None:
    j = job(
        task("a", 3, minAvailable=2, maxRetry=5),
        queue="q1",
        schedulerName="other",
        maxRetry=7,
        minAvailable=1,
    )
    out = mutate_job(j)
    assert out["spec"]["queue"] == "q1"
    assert out["spec"]["schedulerName"] == "other"
    assert out["spec"]["maxRetry"] == 7
    assert out["spec"]["minAvailable"] == 1
    assert out["spec"]["tasks"][0]["minAvailable"] == 2
    assert out["spec"]["tasks"][0]["maxRetry"] == 5


def test_mutate_leaves_its_argument_alone() -> None:
    j = job(task(None))
    before = copy.deepcopy(j)
    mutate_job(j)
    assert j == before


# --- validate create: accepted jobs -------------------------------------------------------------


def test_valid_job_is_allowed() -> None:
    assert admit(job()) == []


def test_privileged_container_is_allowed() -> None:
    j = job(task("t", 2, pod={"containers": [container(securityContext={"privileged": True})]}))
    assert admit(j) == []


def test_dag_dependencies_are_allowed() -> None:
    j = job(
        task("a"), task("b", dependsOn={"name": ["a"]}), task("c", dependsOn={"name": ["a", "b"]})
    )
    assert admit(j) == []


def test_job_without_queue_field_uses_default_queue() -> None:
    assert admit(job(queue=None)) == []


# --- validate create: schema layer (minimums, names) --------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "low"),
    [("minAvailable", -1, 0), ("maxRetry", -1, 0), ("ttlSecondsAfterFinished", -1, 0)],
)
def test_negative_job_numbers(field: str, value: int, low: int) -> None:
    errors = validate_job_create(job(**{field: value}), QUEUES)
    assert (
        f"spec.{field}: Invalid value: {value}: spec.{field} in body should be greater than "
        f"or equal to {low}"
    ) in errors


def test_negative_replicas() -> None:
    errors = validate_job_create(job(task("t", -1)), QUEUES)
    assert any("spec.tasks[0].replicas" in e and "greater than or equal to 0" in e for e in errors)


def test_negative_task_min_available() -> None:
    errors = validate_job_create(job(task("t", 1, minAvailable=-1)), QUEUES)
    assert any("spec.tasks[0].minAvailable" in e for e in errors)


def test_task_name_must_be_dns_label() -> None:
    errors = validate_job_create(job(task("Task_1")), QUEUES)
    assert any("spec.tasks[0].name" in e and "should match" in e for e in errors)


def test_empty_mount_path_schema_message() -> None:
    errors = validate_job_create(job(volumes=[{"mountPath": ""}]), QUEUES)
    assert any("spec.volumes[0].mountPath" in e and "at least 1 chars long" in e for e in errors)


def test_schema_layer_can_be_left_out() -> None:
    errors = validate_job_create(job(maxRetry=-1), QUEUES, schema=False)
    assert errors == []


# --- validate create: webhook messages ----------------------------------------------------------


def test_no_tasks() -> None:
    j = job()
    j["spec"]["tasks"] = []
    assert validate_job_create(j, QUEUES) == [NO_TASKS]


def test_mpi_master_missing() -> None:
    assert admit(job(task("worker"), plugins={"mpi": []})) == [
        "The specified mpi master task was not found"
    ]


def test_mpi_custom_master_found() -> None:
    assert admit(job(task("launcher"), plugins={"mpi": ["--master=launcher"]})) == []


def test_tier_conflict() -> None:
    topology = {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "rack"}
    rejected(job(networkTopology=topology), "must not specify 'highestTierAllowed' and")


def test_task_min_available_greater_than_replicas() -> None:
    assert "'minAvailable' is greater than 'replicas' in task: t, job: test-job" in admit(
        job(task("t", 1, minAvailable=2))
    )


def test_duplicate_task_names() -> None:
    assert "duplicated task name test" in admit(job(task("test"), task("test")))


def test_job_min_available_greater_than_replicas() -> None:
    assert MIN_AVAILABLE_OVER_REPLICAS in admit(job(task("t", 1), minAvailable=2))


def test_illegal_plugin() -> None:
    assert "unable to find job plugin: big_plugin" in admit(job(plugins={"big_plugin": []}))


def test_pod_name_not_qualified() -> None:
    j = job(task("t" * 60), name="j" * 10)
    rejected(j, f"create pod with name {'j' * 10}-{'t' * 60}-0 validate failed [name part must")


def test_job_name_not_qualified() -> None:
    errors = admit(job(name="-bad-"))
    assert any(e.startswith("create job with name -bad- validate failed [") for e in errors)


def test_invalid_cpu_unit() -> None:
    errors = admit(job(task("t", 3, pod={"containers": [container(cpu="-1")]})))
    assert any(e.startswith("spec.task[0].") and "requests[cpu]" in e for e in errors), errors


def test_invalid_memory_unit() -> None:
    c = container()
    c["resources"]["requests"] = {"memory": "-1"}
    errors = admit(job(task("t", 3, pod={"containers": [c]})))
    assert any("requests[memory]" in e and "greater than or equal to 0" in e for e in errors)


def test_request_above_limit() -> None:
    c = container()
    c["resources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    rejected(job(task("t", pod={"containers": [c]})), "must be less than or equal to cpu limit")


def test_template_without_containers() -> None:
    rejected(job(task("t", pod={"containers": []})), "template.spec.containers: Required value")


def test_container_without_image() -> None:
    c = container()
    del c["image"]
    rejected(job(task("t", pod={"containers": [c]})), "containers[0].image: Required value")


def test_bad_restart_policy() -> None:
    rejected(job(task("t", pod={"restartPolicy": "Sometimes"})), 'Unsupported value: "Sometimes"')


def test_mount_of_undeclared_volume() -> None:
    c = container(volumeMounts=[{"name": "data", "mountPath": "/data"}])
    rejected(job(task("t", pod={"containers": [c]})), 'volumeMounts[0].name: Not found: "data"')


def test_duplicate_container_names() -> None:
    rejected(job(task("t", pod={"containers": [container(), container()]})), "Duplicate value")


def test_topology_policy_needs_integer_cpu() -> None:
    j = job(
        task("t", topologyPolicy="single-numa-node", pod={"containers": [container(cpu="500m")]})
    )
    assert "the cpu request isn't an integer in spec.task[0] container[0]." in admit(j)


def test_topology_policy_with_integer_cpu_is_fine() -> None:
    assert admit(job(task("t", topologyPolicy="best-effort"))) == []


def test_topology_policy_none_skips_cpu_check() -> None:
    j = job(task("t", topologyPolicy="none", pod={"containers": [container(cpu="500m")]}))
    assert admit(j) == []


# --- policies ------------------------------------------------------------------------------------


def test_duplicate_policy_event() -> None:
    policies = [
        {"event": "PodFailed", "action": "AbortJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]
    rejected(job(policies=policies), "duplicate event PodFailed across different policy")


def test_policy_event_with_exit_code() -> None:
    policies = [{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}]
    rejected(job(policies=policies), "must not specify event and exitCode simultaneously")


def test_policy_without_event_or_exit_code() -> None:
    rejected(
        job(policies=[{"action": "AbortJob"}]), "either event and exitCode should be specified"
    )


def test_invalid_policy_event() -> None:
    rejected(job(policies=[{"event": "PodRunning", "action": "AbortJob"}]), "invalid policy event")


def test_invalid_policy_action() -> None:
    rejected(job(policies=[{"event": "PodFailed", "action": "SyncJob"}]), "invalid policy action")


def test_zero_exit_code() -> None:
    rejected(job(policies=[{"exitCode": 0, "action": "AbortJob"}]), "0 is not a valid error code")


def test_duplicate_exit_code() -> None:
    policies = [{"exitCode": 3, "action": "AbortJob"}, {"exitCode": 3, "action": "RestartJob"}]
    rejected(job(policies=policies), "duplicate exitCode 3")


def test_any_event_with_others() -> None:
    policies = [
        {"event": "*", "action": "AbortJob"},
        {"event": "PodFailed", "action": "RestartJob"},
    ]
    rejected(job(policies=policies), "if there's * here, no other policy should be here")


def test_policy_errors_list_valid_events_and_actions() -> None:
    (message,) = validate_policies([{"action": "AbortJob"}], "spec.policies")
    assert message.endswith(
        "valid events are [* PodFailed PodEvicted PodPending Unknown TaskCompleted TaskFailed "
        "JobUpdated], valid actions are [AbortJob RestartJob RestartTask RestartPod "
        "RestartPartition TerminateJob CompleteJob ResumeJob]"
    )


def test_task_level_policies_are_checked() -> None:
    rejected(job(task("t", policies=[{"exitCode": 0, "action": "AbortJob"}])), "0 is not a valid")


def test_valid_policies_pass() -> None:
    policies = [
        {"events": ["PodEvicted", "PodFailed"], "action": "TerminateJob"},
        {"exitCode": 3, "action": "RestartJob"},
        {"event": "TaskCompleted", "action": "CompleteJob", "timeout": "5m"},
    ]
    assert admit(job(policies=policies)) == []


def test_event_and_events_with_the_same_value_count_once() -> None:
    assert (
        admit(job(policies=[{"event": "PodFailed", "events": ["PodFailed"], "action": "AbortJob"}]))
        == []
    )


# --- partitions ----------------------------------------------------------------------------------


TOTAL_ZERO = {"totalPartitions": 0, "partitionSize": 2}
SIZE_ZERO = {"totalPartitions": 2, "partitionSize": 0}
TWO_BY_TWO = {"totalPartitions": 2, "partitionSize": 2}
ONE_OF_TWO = {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}


@pytest.mark.parametrize(
    ("replicas", "policy", "minimum", "message"),
    [
        (4, TOTAL_ZERO, None, "'TotalPartitions' must be greater than 0"),
        (4, SIZE_ZERO, None, "'PartitionSize' must be greater than 0"),
        (5, TWO_BY_TWO, None, "'Replicas' are not equal to TotalPartitions*PartitionSize"),
        (4, ONE_OF_TWO, 4, "'MinAvailable' is not equal to MinPartitions*PartitionSize"),
    ],
)
def test_partition_policy(replicas: int, policy: dict, minimum: int | None, message: str) -> None:
    extra = {"minAvailable": minimum} if minimum is not None else {}
    errors = admit(job(task("t", replicas, partitionPolicy=policy, **extra)))
    assert f"{message} in task: t, job: test-job" in errors


def test_valid_partition_policy() -> None:
    policy = {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}
    assert admit(job(task("t", 4, partitionPolicy=policy))) == []


def test_partition_tier_conflict() -> None:
    policy = {
        "totalPartitions": 1,
        "partitionSize": 1,
        "networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"},
    }
    rejected(job(task("t", 1, partitionPolicy=policy)), "in networkTopology simultaneously")


# --- volumes -------------------------------------------------------------------------------------


def test_invalid_volume_mount() -> None:
    assert "mountPath is required" in admit(job(volumes=[{"mountPath": ""}]))


def test_duplicate_mount_path() -> None:
    volumes = [
        {"mountPath": "/var", "volumeClaimName": "a"},
        {"mountPath": "/var", "volumeClaimName": "b"},
    ]
    assert "duplicated mountPath: /var" in admit(job(volumes=volumes))


def test_volume_without_claim() -> None:
    errors = admit(job(volumes=[{"mountPath": "/var"}]))
    assert "either VolumeClaim or VolumeClaimName must be specified" in errors


def test_volume_with_both_claims() -> None:
    volumes = [{"mountPath": "/var", "volumeClaimName": "a", "volumeClaim": {"resources": {}}}]
    rejected(job(volumes=volumes), "conflict: If you want to use an existing PVC")


def test_invalid_claim_name() -> None:
    rejected(
        job(volumes=[{"mountPath": "/var", "volumeClaimName": "Bad_Name"}]),
        "invalid VolumeClaimName Bad_Name",
    )


def test_valid_volumes() -> None:
    volumes = [
        {"mountPath": "/a", "volumeClaimName": "pvc-a"},
        {"mountPath": "/b", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}},
    ]
    assert admit(job(volumes=volumes)) == []


# --- queues --------------------------------------------------------------------------------------


def test_unknown_queue() -> None:
    assert 'unable to find job queue: queue.scheduling.volcano.sh "fakeQueue" not found' in admit(
        job(queue="fakeQueue")
    )


def test_closed_queue() -> None:
    queues = {**QUEUES, "q1": queue("q1", "Closed")}
    assert "can only submit job to queue with state `Open`, queue `q1` status is `Closed`" in admit(
        job(queue="q1"), queues
    )


def test_root_queue() -> None:
    assert "can not submit job to root queue" in admit(job(queue="root"))


def test_non_leaf_queue() -> None:
    queues = {**QUEUES, "q1": queue("q1", parent="root"), "q11": queue("q11", parent="q1")}
    assert "can only submit job to leaf queue, queue `q1` has 1 child queues" in admit(
        job(queue="q1"), queues
    )
    assert admit(job(queue="q11"), queues) == []


# --- dependencies --------------------------------------------------------------------------------


def test_dependency_cycle() -> None:
    j = job(task("a", dependsOn={"name": ["b"]}), task("b", dependsOn={"name": ["a"]}))
    assert (
        "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG)"
        in admit(j)
    )


def test_tasks_form_dag() -> None:
    assert tasks_form_dag([{"name": "a"}, {"name": "b", "dependsOn": {"name": ["a"]}}])
    assert not tasks_form_dag([{"name": "a", "dependsOn": {"name": ["a"]}}])


# --- helpers -------------------------------------------------------------------------------------


def test_qualified_name() -> None:
    assert qualified_name_problems("my.name-1") == []
    assert qualified_name_problems("x" * 64) == ["name part must be no more than 63 characters"]
    assert qualified_name_problems("") == ["name part must be non-empty"]


def test_pod_template_problems_clean_template() -> None:
    assert pod_template_problems({"spec": {"containers": [container()]}}) == []


def test_admission_message_joins() -> None:
    assert admission_message(["a;", " b"]) == "a; b"


# --- update --------------------------------------------------------------------------------------

BASE = mutate_job(job(task("a", 2), task("b", 2)))


def updated(**changes: Any) -> dict:
    new = copy.deepcopy(BASE)
    for key, value in changes.items():
        new["spec"][key] = value
    return new


def test_update_min_available_and_replicas_allowed() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["minAvailable"] = 3
    new["spec"]["tasks"][0]["replicas"] = 4
    new["spec"]["tasks"][0]["minAvailable"] = 3
    new["spec"]["priorityClassName"] = "high"
    assert validate_job_update(BASE, new) == []


def test_update_unchanged_allowed() -> None:
    assert validate_job_update(BASE, copy.deepcopy(BASE)) == []


def test_update_min_available_above_replicas() -> None:
    assert validate_job_update(BASE, updated(minAvailable=5)) == [
        "job 'minAvailable' must not be greater than total replicas"
    ]


def test_update_negative_min_available() -> None:
    assert validate_job_update(BASE, updated(minAvailable=-1)) == [
        "job 'minAvailable' must be >= 0"
    ]


def test_update_negative_replicas() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["tasks"][1]["replicas"] = -1
    assert validate_job_update(BASE, new) == ["'replicas' must be >= 0 in task: b"]


def test_update_task_min_available_checks() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["tasks"][0]["minAvailable"] = -1
    assert validate_job_update(BASE, new) == ["'minAvailable' must be >= 0 in task: a"]
    new["spec"]["tasks"][0]["minAvailable"] = 3
    assert validate_job_update(BASE, new) == ["'minAvailable' must be <= 'replicas' in task: a"]


def test_update_tier_conflict() -> None:
    topology = {"highestTierAllowed": 1, "highestTierName": "x"}
    assert (
        "in networkTopology simultaneously"
        in validate_job_update(BASE, updated(networkTopology=topology))[0]
    )


def test_update_adding_tasks() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["tasks"].append(mutate_job(job(task("c")))["spec"]["tasks"][0])
    assert validate_job_update(BASE, new) == [UPDATE_ADDS_TASKS]


def test_update_changing_queue() -> None:
    assert validate_job_update(BASE, updated(queue="other")) == [UPDATE_OTHER_FIELDS]


def test_update_changing_template() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"] = "busybox"
    assert validate_job_update(BASE, new) == [UPDATE_OTHER_FIELDS]


def test_update_ignores_generated_claim_names() -> None:
    old = mutate_job(job(volumes=[{"mountPath": "/d", "volumeClaim": {"accessModes": ["RWO"]}}]))
    new = copy.deepcopy(old)
    new["spec"]["volumes"][0]["volumeClaimName"] = "test-job-pvc-abcdefabcdef"
    assert validate_job_update(old, new) == []


def test_update_treats_equal_quantities_and_empty_fields_alike() -> None:
    new = copy.deepcopy(BASE)
    new["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = (
        "1000m"
    )
    new["spec"]["policies"] = []
    assert validate_job_update(BASE, new) == []


def test_update_message_text() -> None:
    assert UPDATE_OTHER_FIELDS == (
        "job updates may not change fields other than `minAvailable`, "
        "`tasks[*].replicas under spec` and `PriorityClassName`"
    )
