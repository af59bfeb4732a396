"""Deletion: garbage collection through ownerReferences, orphaning, foreground, finalizers."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import BadRequestError, InvalidError, NotFoundError
from stromboli.core.cluster.memory import MemoryStore

from .objects import configmap, next_event, owner_ref, pod

JOB = "batch.volcano.sh/v1alpha1"


def vcjob(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": JOB,
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", **metadata},
        "spec": {"minAvailable": 1, "tasks": []},
    }


async def names(store: MemoryStore, kind: str = "Pod", api_version: str = "v1") -> list[str]:
    return [o["metadata"]["name"] for o in (await store.list(api_version, kind)).items]


async def exists(store: MemoryStore, api_version: str, kind: str, name: str) -> bool:
    try:
        await store.get(api_version, kind, name, "default")
    except NotFoundError:
        return False
    return True


async def test_delete_removes(store: MemoryStore) -> None:
    await store.create(pod("a"))
    await store.delete("v1", "Pod", "a", "default")
    assert not await exists(store, "v1", "Pod", "a")


async def test_delete_missing_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError):
        await store.delete("v1", "Pod", "ghost", "default")


async def test_delete_bumps_resource_version(store: MemoryStore) -> None:
    await store.create(pod("a"))
    before = int(store.resource_version)
    await store.delete("v1", "Pod", "a", "default")
    assert int(store.resource_version) == before + 1


async def test_recreate_after_delete_gets_new_uid(store: MemoryStore) -> None:
    first = await store.create(pod("a"))
    await store.delete("v1", "Pod", "a", "default")
    second = await store.create(pod("a"))
    assert first["metadata"]["uid"] != second["metadata"]["uid"]


async def test_bad_propagation(store: MemoryStore) -> None:
    await store.create(pod("a"))
    with pytest.raises(BadRequestError):
        await store.delete("v1", "Pod", "a", "default", propagation="Sideways")  # type: ignore[arg-type]


# --- garbage collection -----------------------------------------------------------------------


async def test_background_deletes_dependents(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    for index in range(3):
        await store.create(pod(f"j-{index}", ownerReferences=[owner_ref(job)]))
    await store.create(pod("unrelated"))
    await store.delete(JOB, "Job", "j", "default")
    assert await names(store) == ["unrelated"]


async def test_gc_cascades_through_levels(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    cm = await store.create(configmap("j-cm", ownerReferences=[owner_ref(job)]))
    await store.create(pod("grandchild", ownerReferences=[owner_ref(cm)]))
    await store.delete(JOB, "Job", "j", "default")
    assert await names(store) == []
    assert await names(store, "ConfigMap") == []


async def test_gc_events_follow_the_owner(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    await store.create(pod("child", ownerReferences=[owner_ref(job)]))
    pods = store.watch("v1", "Pod", resource_version=store.resource_version)
    jobs = store.watch(JOB, "Job", resource_version=store.resource_version)
    await store.delete(JOB, "Job", "j", "default")
    job_event = await next_event(jobs)
    pod_event = await next_event(pods)
    assert (job_event.type, pod_event.type) == ("DELETED", "DELETED")
    assert int(job_event.object["metadata"]["resourceVersion"]) < int(
        pod_event.object["metadata"]["resourceVersion"]
    )
    await pods.aclose()
    await jobs.aclose()


async def test_dependent_with_another_live_owner_survives(store: MemoryStore) -> None:
    first = await store.create(vcjob("one"))
    second = await store.create(vcjob("two"))
    await store.create(pod("shared", ownerReferences=[owner_ref(first), owner_ref(second)]))
    await store.delete(JOB, "Job", "one", "default")
    survivor = await store.get("v1", "Pod", "shared", "default")
    assert [r["name"] for r in survivor["metadata"]["ownerReferences"]] == ["two"]
    await store.delete(JOB, "Job", "two", "default")
    assert await names(store) == []


async def test_owner_reference_added_by_update_is_honoured(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    child = await store.create(pod("adopted"))
    child["metadata"]["ownerReferences"] = [owner_ref(job)]
    await store.update(child)
    await store.delete(JOB, "Job", "j", "default")
    assert await names(store) == []


async def test_owner_reference_removed_by_update_releases(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    child = await store.create(pod("released", ownerReferences=[owner_ref(job)]))
    del child["metadata"]["ownerReferences"]
    await store.update(child)
    await store.delete(JOB, "Job", "j", "default")
    assert await names(store) == ["released"]


async def test_orphan_keeps_dependents_without_reference(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    other = await store.create(vcjob("k"))
    await store.create(pod("child", ownerReferences=[owner_ref(job), owner_ref(other)]))
    await store.delete(JOB, "Job", "j", "default", propagation="Orphan")
    child = await store.get("v1", "Pod", "child", "default")
    assert [r["name"] for r in child["metadata"]["ownerReferences"]] == ["k"]
    assert not await exists(store, JOB, "Job", "j")


async def test_orphan_removes_last_reference_entirely(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    await store.create(pod("child", ownerReferences=[owner_ref(job)]))
    await store.delete(JOB, "Job", "j", "default", propagation="Orphan")
    child = await store.get("v1", "Pod", "child", "default")
    assert "ownerReferences" not in child["metadata"]


async def test_orphaned_dependent_survives_a_new_owner_of_same_name(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    await store.create(pod("child", ownerReferences=[owner_ref(job)]))
    await store.delete(JOB, "Job", "j", "default", propagation="Orphan")
    await store.create(vcjob("j"))
    await store.delete(JOB, "Job", "j", "default")
    assert await names(store) == ["child"]


async def test_foreground_deletes_dependents_first(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    await store.create(pod("child", ownerReferences=[owner_ref(job)]))
    start = store.resource_version
    jobs = store.watch(JOB, "Job", resource_version=start)
    pods = store.watch("v1", "Pod", resource_version=start)
    await store.delete(JOB, "Job", "j", "default", propagation="Foreground")
    marked, released, deleted = [await next_event(jobs) for _ in range(3)]
    child_deleted = await next_event(pods)
    await jobs.aclose()
    await pods.aclose()
    assert [marked.type, released.type, deleted.type] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert marked.object["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert marked.object["metadata"]["deletionTimestamp"]
    assert not released.object["metadata"].get("finalizers")
    assert child_deleted.type == "DELETED"

    def version(event: Any) -> int:
        return int(event.object["metadata"]["resourceVersion"])

    assert version(marked) < version(child_deleted) < version(deleted)
    assert await names(store) == []


async def test_foreground_waits_for_finalized_dependent(store: MemoryStore) -> None:
    job = await store.create(vcjob("j"))
    await store.create(
        pod("child", ownerReferences=[owner_ref(job)], finalizers=["example.com/hold"])
    )
    await store.delete(JOB, "Job", "j", "default", propagation="Foreground")
    owner = await store.get(JOB, "Job", "j", "default")
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]
    child = await store.get("v1", "Pod", "child", "default")
    assert child["metadata"]["deletionTimestamp"]
    child["metadata"]["finalizers"] = []
    await store.update(child)
    assert await names(store) == []
    assert not await exists(store, JOB, "Job", "j")


async def test_foreground_without_dependents_deletes_at_once(store: MemoryStore) -> None:
    await store.create(vcjob("j"))
    await store.delete(JOB, "Job", "j", "default", propagation="Foreground")
    assert not await exists(store, JOB, "Job", "j")


async def test_namespace_deletion_removes_contents(store: MemoryStore) -> None:
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    await store.create(pod("a", namespace="team"))
    await store.create(configmap("c", namespace="team"))
    await store.create(pod("b", namespace="other"))
    await store.delete("v1", "Namespace", "team")
    assert await names(store) == ["b"]
    assert await names(store, "ConfigMap") == []


# --- finalizers -------------------------------------------------------------------------------


async def test_finalizer_defers_deletion(store: MemoryStore, clock: VirtualClock) -> None:
    await store.create(configmap("c", finalizers=["example.com/cleanup"]))
    clock.advance(30)
    await store.delete("v1", "ConfigMap", "c", "default")
    marked = await store.get("v1", "ConfigMap", "c", "default")
    assert marked["metadata"]["deletionTimestamp"] == "1970-01-01T00:00:30Z"
    assert marked["metadata"]["finalizers"] == ["example.com/cleanup"]


async def test_emptying_finalizers_completes_deletion(store: MemoryStore) -> None:
    await store.create(configmap("c", finalizers=["a/x", "b/y"]))
    await store.delete("v1", "ConfigMap", "c", "default")
    marked = await store.get("v1", "ConfigMap", "c", "default")
    marked["metadata"]["finalizers"] = ["b/y"]
    marked = await store.update(marked)
    assert await exists(store, "v1", "ConfigMap", "c")
    marked["metadata"]["finalizers"] = []
    await store.update(marked)
    assert not await exists(store, "v1", "ConfigMap", "c")


async def test_finalizer_removal_by_patch_completes_deletion(store: MemoryStore) -> None:
    await store.create(configmap("c", finalizers=["a/x"]))
    await store.delete("v1", "ConfigMap", "c", "default")
    await store.patch("v1", "ConfigMap", "c", {"metadata": {"finalizers": None}}, "default")
    assert not await exists(store, "v1", "ConfigMap", "c")


async def test_finalizer_removal_emits_modified_then_deleted(store: MemoryStore) -> None:
    await store.create(configmap("c", finalizers=["a/x"]))
    await store.delete("v1", "ConfigMap", "c", "default")
    marked = await store.get("v1", "ConfigMap", "c", "default")
    async with store.watch("v1", "ConfigMap", resource_version=store.resource_version) as watch:
        marked["metadata"]["finalizers"] = []
        await store.update(marked)
        events = [await next_event(watch), await next_event(watch)]
    assert [e.type for e in events] == ["MODIFIED", "DELETED"]


async def test_second_delete_is_harmless(store: MemoryStore) -> None:
    await store.create(configmap("c", finalizers=["a/x"]))
    await store.delete("v1", "ConfigMap", "c", "default")
    before = store.resource_version
    await store.delete("v1", "ConfigMap", "c", "default")
    assert store.resource_version == before


async def test_deletion_timestamp_cannot_be_cleared(store: MemoryStore) -> None:
    await store.create(configmap("c", finalizers=["a/x"]))
    await store.delete("v1", "ConfigMap", "c", "default")
    marked = await store.get("v1", "ConfigMap", "c", "default")
    del marked["metadata"]["deletionTimestamp"]
    marked["data"] = {"k": "changed"}
    updated = await store.update(marked)
    assert updated["metadata"]["deletionTimestamp"]


async def test_no_new_finalizers_while_deleting(store: MemoryStore) -> None:
    await store.create(configmap("c", finalizers=["a/x"]))
    await store.delete("v1", "ConfigMap", "c", "default")
    marked = await store.get("v1", "ConfigMap", "c", "default")
    marked["metadata"]["finalizers"] = ["a/x", "b/new"]
    with pytest.raises(InvalidError, match="no new finalizers"):
        await store.update(marked)


async def test_owner_with_finalizer_keeps_dependents_until_gone(store: MemoryStore) -> None:
    job = await store.create(vcjob("j", finalizers=["a/x"]))
    await store.create(pod("child", ownerReferences=[owner_ref(job)]))
    await store.delete(JOB, "Job", "j", "default")
    assert await names(store) == ["child"]
    await store.patch(JOB, "Job", "j", {"metadata": {"finalizers": []}}, "default")
    assert await names(store) == []
