"""The adapters' live handlers (``integrations/live.py``) on the in-memory store: PodGroups
made, followed, adopted and made again; bad objects warned about and nothing else held up;
task roles given to pods; only installed kinds followed, only enrolled namespaces served."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.integrations.kinds import CONVERTED, FRAMEWORK_KINDS, with_framework_kinds
from stromboli.integrations.live import PODGROUP, REASON, FrameworkController, followed_changes

from .kit import GROUP_NAME, TASK_SPEC, obj, template

POD = ("v1", "Pod")
EVENT = ("v1", "Event")
PYTORCH = ("kubeflow.org/v1", "PyTorchJob")
ENROLL = {"stromboli.dev/enroll": "true"}


def pytorchjob(name: str = "train", workers: int = 2, cpu: str = "1", **meta: Any) -> dict:
    spec = {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template()},
            "Worker": {"replicas": workers, "template": template(cpu=cpu)},
        }
    }
    made = obj(*PYTORCH, name, spec, **meta)
    del made["metadata"]["uid"]  # the store gives one
    return made


def namespace(name: str = "ns", labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


async def cluster(kinds: list[tuple[str, str]] | None = None) -> tuple[MemoryStore, Any]:
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds(kinds), seed=0)
    await store.create(namespace("ns", ENROLL))
    await store.create(namespace("plain"))
    adapters = FrameworkController(store)
    await adapters.prepare()
    await adapters.informer.start()
    return store, adapters


async def groups(store: MemoryStore, ns: str = "ns") -> dict[str, dict]:
    return {g["metadata"]["name"]: g for g in (await store.list(*PODGROUP, ns)).items}


async def warnings(store: MemoryStore, ns: str = "ns") -> list[dict]:
    return [e for e in (await store.list(*EVENT, ns)).items if e["reason"] == REASON]


async def test_a_pytorchjob_gets_its_podgroup_owned_by_it() -> None:
    store, adapters = await cluster()
    job = await store.create(pytorchjob(annotations={"scheduling.volcano.sh/queue-name": "q"}))
    await adapters.pump()
    group = (await groups(store))["train"]
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"] == {"cpu": "3", "memory": "6Gi"}
    assert group["spec"]["queue"] == "default"  # the job's annotation is copied, not read
    assert group["metadata"]["labels"] == {"stromboli.dev/adapter": "kubeflow-training-operator"}
    [owner] = group["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "train",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    # Deleting the owner takes the PodGroup with it (the garbage collector).
    await store.delete(*PYTORCH, "train", "ns")
    await adapters.pump()
    assert await groups(store) == {}


async def test_priority_class_and_queue_from_the_scheduling_policy() -> None:
    store, adapters = await cluster()
    job = pytorchjob()
    job["spec"]["runPolicy"] = {
        "schedulingPolicy": {"queue": "team-a", "priorityClass": "high", "minAvailable": 2}
    }
    await store.create(job)
    await adapters.pump()
    spec = (await groups(store))["train"]["spec"]
    assert (spec["queue"], spec["priorityClassName"], spec["minMember"]) == ("team-a", "high", 2)


async def test_replicas_scaled_updates_min_member_and_resources_only() -> None:
    store, adapters = await cluster()
    await store.create(pytorchjob(workers=2))
    await adapters.pump()
    before = (await groups(store))["train"]
    job = await store.get(*PYTORCH, "train", "ns")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 5
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = template(cpu="2", memory=None)
    await store.update(job)
    await adapters.pump()
    after = (await groups(store))["train"]
    assert after["spec"]["minMember"] == 6
    # memory: only the master's 2Gi now; the workers ask for none.
    assert after["spec"]["minResources"] == {"cpu": "11", "memory": "2Gi"}
    assert after["spec"]["queue"] == before["spec"]["queue"]
    assert adapters.updated == 1
    # Nothing changed since: no write.
    version = after["metadata"]["resourceVersion"]
    await store.update(await store.get(*PYTORCH, "train", "ns"))
    await adapters.pump()
    assert (await groups(store))["train"]["metadata"]["resourceVersion"] == version
    assert adapters.updated == 1


async def test_a_podgroup_the_operator_made_is_adopted_untouched() -> None:
    store, adapters = await cluster()
    job = await store.create(pytorchjob())
    made = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "name": "train",
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"minMember": 1, "queue": "operator-queue"},
    }
    stored = await store.create(made)
    await adapters.pump()
    after = (await groups(store))["train"]
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert after["spec"] == {"minMember": 1, "queue": "operator-queue"}
    assert "labels" not in after["metadata"]
    assert adapters.created == adapters.updated == 0


async def test_a_podgroup_of_another_owner_is_not_taken_and_the_job_is_told() -> None:
    store, adapters = await cluster()
    other = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ns"},
        "spec": {"minMember": 7},
    }
    await store.create(other)
    await store.create(pytorchjob())
    await adapters.pump()
    assert (await groups(store))["train"]["spec"]["minMember"] == 7
    [event] = await warnings(store)
    assert event["involvedObject"]["kind"] == "PyTorchJob"
    assert "PodGroup train already exists" in event["message"]


@pytest.mark.parametrize(
    ("breakage", "field"),
    [
        (
            lambda spec: spec["pytorchReplicaSpecs"].update(Chief={"replicas": 1}),
            "spec.pytorchReplicaSpecs.Chief",
        ),
        (
            lambda spec: spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
                "resources"
            ]["requests"].update(cpu="-3"),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu",
        ),
        (
            lambda spec: spec["pytorchReplicaSpecs"]["Worker"].pop("template"),
            "spec.pytorchReplicaSpecs.Worker.template",
        ),
    ],
    ids=["unknown-replica-type", "bad-quantity", "missing-template"],
)
async def test_a_bad_object_gets_a_warning_naming_the_field_and_others_go_on(
    breakage: Any, field: str
) -> None:
    store, adapters = await cluster()
    bad = pytorchjob("bad")
    breakage(bad["spec"])
    await store.create(bad)
    await store.create(pytorchjob("good"))
    await adapters.pump()
    assert set(await groups(store)) == {"good"}
    [event] = await warnings(store)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "bad"
    assert event["involvedObject"]["kind"] == "PyTorchJob"
    assert field in event["message"], event["message"]
    # Reconciled again (a resync) without a change: no second event, no count bumped.
    adapters._mark((*PYTORCH, "ns", "bad"))
    await adapters.pump()
    [again] = await warnings(store)
    assert again.get("count", 1) == event.get("count", 1)
    # Corrected: the gang follows.
    fixed = await store.get(*PYTORCH, "bad", "ns")
    fixed["spec"] = pytorchjob("bad")["spec"]
    await store.update(fixed)
    await adapters.pump()
    assert set(await groups(store)) == {"good", "bad"}


async def test_huge_documents_and_wrong_types_never_stop_the_controller() -> None:
    store, adapters = await cluster()
    job = pytorchjob("wide")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2**31 - 1
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] = template(cpu="1E18")
    await store.create(job)
    odd = pytorchjob("odd")
    odd["spec"]["pytorchReplicaSpecs"] = ["not", "a", "map"]
    await store.create(odd)
    await store.create(pytorchjob("fine"))
    await adapters.pump()
    assert set(await groups(store)) == {"fine"}
    assert {e["involvedObject"]["name"] for e in await warnings(store)} == {"wide", "odd"}


async def test_only_enrolled_namespaces_get_podgroups_from_us() -> None:
    store, adapters = await cluster()
    await store.create(pytorchjob(namespace="plain"))
    await adapters.pump()
    assert await groups(store, "plain") == {}
    ns = await store.get("v1", "Namespace", "plain")
    ns["metadata"]["labels"] = ENROLL
    await store.update(ns)
    await adapters.pump()
    assert set(await groups(store, "plain")) == {"train"}


async def test_a_podgroup_of_ours_deleted_while_its_owner_lives_is_made_again() -> None:
    store, adapters = await cluster()
    await store.create(pytorchjob())
    await adapters.pump()
    await store.delete(*PODGROUP, "train", "ns")
    await adapters.pump()
    assert (await groups(store))["train"]["spec"]["minMember"] == 3
    assert adapters.created == 2


def enrolled_pod(name: str, labels: dict[str, str], group: str, **annotations: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": labels,
            "annotations": {GROUP_NAME: group, **annotations},
        },
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "i"}]},
    }


async def test_pods_enrolled_without_a_role_get_their_task_spec() -> None:
    store, adapters = await cluster()
    await store.create(pytorchjob())
    # The training operator's labels (pkg/controller.v1/common/pod.go: replica-type lowercased).
    labels = {
        "training.kubeflow.org/job-name": "train",
        "training.kubeflow.org/replica-type": "worker",
    }
    pod = await store.create(enrolled_pod("train-worker-0", labels, "train"))
    kept = await store.create(
        enrolled_pod("train-worker-1", labels, "train", **{TASK_SPEC: "mine"})
    )
    stranger = await store.create(enrolled_pod("x", {"app": "x"}, "train"))
    for made in (pod, kept, stranger):
        adapters.seen(POD, "ADDED", made)
    await adapters.pump()
    annotations = (await store.get(*POD, "train-worker-0", "ns"))["metadata"]["annotations"]
    assert annotations[TASK_SPEC] == "worker"
    assert (await store.get(*POD, "train-worker-1", "ns"))["metadata"]["annotations"][
        TASK_SPEC
    ] == "mine"
    assert TASK_SPEC not in (await store.get(*POD, "x", "ns"))["metadata"]["annotations"]
    assert adapters.pods_labelled == 1


async def test_a_spark_submit_driver_pod_is_the_root_of_its_gang() -> None:
    store, adapters = await cluster()
    labels = {"spark-app-selector": "spark-123", "spark-role": "driver"}
    driver = enrolled_pod("pi-driver", labels, "spark-123-podgroup")
    driver["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    driver = await store.create(driver)
    adapters.seen(POD, "ADDED", driver)
    await adapters.pump()
    group = (await groups(store))["spark-123-podgroup"]
    assert group["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    assert group["metadata"]["ownerReferences"][0]["uid"] == driver["metadata"]["uid"]
    assert group["spec"]["minResources"] == {"cpu": "1", "memory": "1Gi"}


async def test_a_leaderworkerset_group_follows_its_leader_pod() -> None:
    store, adapters = await cluster()
    lws_spec = {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template()}}
    made = obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "serve", lws_spec)
    del made["metadata"]["uid"]
    await store.create(made)
    await adapters.pump()
    assert await groups(store) == {}  # no leader yet
    # The leader's labels as LWS sets them (pkg/controllers/leaderworkerset_controller.go).
    labels = {
        "leaderworkerset.sigs.k8s.io/name": "serve",
        "leaderworkerset.sigs.k8s.io/group-index": "0",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
        "leaderworkerset.sigs.k8s.io/template-revision-hash": "abc",
    }
    leader = await store.create(enrolled_pod("serve-0", labels, "serve-0-abc"))
    adapters.seen(POD, "ADDED", leader)
    await adapters.pump()
    group = (await groups(store))["serve-0-abc"]
    assert group["spec"]["minMember"] == 3
    assert group["metadata"]["ownerReferences"][0]["name"] == "serve-0"


async def test_a_rayjob_gets_one_gang_and_its_cluster_none_of_its_own() -> None:
    store, adapters = await cluster()
    cluster_spec = {
        "headGroupSpec": {"template": template()},
        "workerGroupSpecs": [{"groupName": "small", "replicas": 2, "template": template()}],
    }
    job = obj("ray.io/v1", "RayJob", "pi", {"rayClusterSpec": cluster_spec})
    del job["metadata"]["uid"]
    await store.create(job)
    await adapters.pump()
    group = (await groups(store))["ray-pi-pg"]
    assert group["spec"]["minMember"] == 3  # head + 2 workers; the submitter is not a member


async def test_kinds_not_installed_are_skipped_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="stromboli.integrations")
    store, adapters = await cluster([PYTORCH])
    assert adapters.served_kinds == {PYTORCH}
    lines = [r.getMessage() for r in caplog.records if "not installed" in r.getMessage()]
    assert len(lines) == 1 and "RayCluster (ray.io/v1)" in lines[0]
    await store.create(pytorchjob())
    await adapters.pump()
    assert set(await groups(store)) == {"train"}


async def test_both_mpijob_versions_served_follow_the_mpi_operators_only() -> None:
    _, adapters = await cluster()
    assert ("kubeflow.org/v2beta1", "MPIJob") in adapters.served_kinds
    assert ("kubeflow.org/v1", "MPIJob") not in adapters.served_kinds


def test_the_kind_table_matches_the_registry() -> None:
    from stromboli.integrations.registry import adapter_for

    assert all(adapter_for(i.api_version, i.kind) is not None for i in CONVERTED)
    assert len({(i.api_version, i.kind) for i in FRAMEWORK_KINDS}) == len(FRAMEWORK_KINDS)


# --- the followed fields -----------------------------------------------------------------------

quantities = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]),
    st.integers(0, 10**6).map(str),
)


def merge(target: dict, patch: dict) -> dict:
    """RFC 7386 merge patch, as the API server applies it."""
    result = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = value
    return result


@given(st.integers(0, 100), quantities, st.integers(0, 100), quantities)
def test_the_patch_brings_exactly_the_followed_fields(
    have_min: int, have_res: dict, want_min: int, want_res: dict
) -> None:
    stored = {"spec": {"minMember": have_min, "minResources": have_res, "queue": "kept"}}
    wanted = {"spec": {"minMember": want_min, "minResources": want_res, "queue": "other"}}
    changes = followed_changes(stored, wanted)
    patched = merge(stored, {"spec": changes})
    assert patched["spec"]["minMember"] == want_min
    assert patched["spec"].get("minResources", {}) == want_res
    assert patched["spec"]["queue"] == "kept"
    assert followed_changes(patched, wanted) == {}


def test_quantities_are_compared_by_value() -> None:
    stored = {"spec": {"minMember": 1, "minResources": {"cpu": "1000m", "memory": "1Gi"}}}
    wanted = {"spec": {"minMember": 1, "minResources": {"cpu": "1", "memory": "1024Mi"}}}
    assert followed_changes(stored, wanted) == {}


async def test_deleted_objects_leave_nothing_behind() -> None:
    """A long-running controller must not grow with the objects it has seen come and go."""
    store, adapters = await cluster()
    for n in range(20):
        await store.create(pytorchjob(f"job-{n}"))
    bad = pytorchjob("bad", cpu="-1")
    await store.create(bad)
    await adapters.pump()
    assert len(await groups(store)) == 20
    for n in range(20):
        await store.delete(*PYTORCH, f"job-{n}", "ns")
    await store.delete(*PYTORCH, "bad", "ns")
    await adapters.pump()
    assert await groups(store) == {}  # the garbage collector's part
    state = (adapters._conversions, adapters._group_owner, adapters._owned_groups)
    assert state == ({}, {}, {})
    assert adapters._reported == {} and adapters._dirty == {}
    assert adapters._objects.get(PYTORCH) == {}
