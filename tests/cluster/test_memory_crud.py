"""MemoryStore create/get/update/list: server-set fields, versions, conflicts, validation."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import (
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    InvalidError,
    NotFoundError,
)
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import ClusterStore

from .objects import configmap, pod, queue

PG = "scheduling.volcano.sh/v1beta1"


def test_memory_store_is_a_cluster_store(store: MemoryStore) -> None:
    assert isinstance(store, ClusterStore)


async def test_create_sets_server_fields(store: MemoryStore, clock: VirtualClock) -> None:
    clock.advance(75)
    created = await store.create(pod("a"))
    md = created["metadata"]
    assert uuid.UUID(md["uid"]).version == 4
    assert md["creationTimestamp"] == "1970-01-01T00:01:15Z"
    assert md["generation"] == 1
    assert md["resourceVersion"] == "1"
    assert md["namespace"] == "default"


async def test_create_ignores_client_set_server_fields(store: MemoryStore) -> None:
    obj = pod("a", uid="mine", resourceVersion="99", deletionTimestamp="2000-01-01T00:00:00Z")
    md = (await store.create(obj))["metadata"]
    assert md["uid"] != "mine"
    assert md["resourceVersion"] == "1"
    assert "deletionTimestamp" not in md


async def test_create_does_not_mutate_input(store: MemoryStore) -> None:
    obj = pod("a")
    before = repr(obj)
    await store.create(obj)
    assert repr(obj) == before


async def test_namespace_defaults_to_default(store: MemoryStore) -> None:
    obj = pod("a")
    del obj["metadata"]["namespace"]
    created = await store.create(obj)
    assert created["metadata"]["namespace"] == "default"
    assert (await store.get("v1", "Pod", "a"))["metadata"]["uid"] == created["metadata"]["uid"]


async def test_cluster_scoped_drops_namespace(store: MemoryStore) -> None:
    obj = queue("q")
    obj["metadata"]["namespace"] = "ignored"
    created = await store.create(obj)
    assert "namespace" not in created["metadata"]
    assert (await store.get(PG, "Queue", "q", namespace="whatever"))["metadata"]["name"] == "q"


async def test_resource_version_increases_globally(store: MemoryStore) -> None:
    versions = [
        int((await store.create(pod("a")))["metadata"]["resourceVersion"]),
        int((await store.create(queue("q")))["metadata"]["resourceVersion"]),
        int((await store.create(configmap("c")))["metadata"]["resourceVersion"]),
    ]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3
    assert store.resource_version == str(versions[-1])


async def test_resource_version_is_a_string(store: MemoryStore) -> None:
    assert isinstance((await store.create(pod("a")))["metadata"]["resourceVersion"], str)


async def test_uids_unique(store: MemoryStore) -> None:
    uids = {(await store.create(pod(f"p{i}")))["metadata"]["uid"] for i in range(50)}
    assert len(uids) == 50


async def test_seed_makes_uids_reproducible() -> None:
    first = await MemoryStore(VirtualClock(), seed=3).create(pod("a"))
    second = await MemoryStore(VirtualClock(), seed=3).create(pod("a"))
    assert first["metadata"]["uid"] == second["metadata"]["uid"]


async def test_duplicate_create_already_exists(store: MemoryStore) -> None:
    await store.create(pod("a"))
    with pytest.raises(AlreadyExistsError, match='pods "a" already exists'):
        await store.create(pod("a"))


async def test_same_name_in_other_namespace_is_fine(store: MemoryStore) -> None:
    await store.create(pod("a", namespace="one"))
    await store.create(pod("a", namespace="two"))
    assert len((await store.list("v1", "Pod")).items) == 2


async def test_same_name_other_kind_is_fine(store: MemoryStore) -> None:
    await store.create(pod("a"))
    await store.create(configmap("a"))


async def test_get_missing_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError, match='pods "nope" not found'):
        await store.get("v1", "Pod", "nope", "default")


async def test_get_wrong_namespace_not_found(store: MemoryStore) -> None:
    await store.create(pod("a", namespace="one"))
    with pytest.raises(NotFoundError):
        await store.get("v1", "Pod", "a", "two")


async def test_not_found_message_names_group(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError, match=r'queues\.scheduling\.volcano\.sh "q" not found'):
        await store.get(PG, "Queue", "q")


async def test_unknown_kind_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError, match="Widget"):
        await store.get("example.com/v1", "Widget", "w")


async def test_custom_kind_resolver(clock: VirtualClock) -> None:
    from stromboli.core.api.registry import KindInfo

    widget = KindInfo("example.com/v1", "Widget", "widgets", False, False)
    custom = MemoryStore(clock, kinds=lambda av, k: widget if k == "Widget" else None)
    created = await custom.create(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    )
    assert "namespace" not in created["metadata"]


async def test_returned_objects_do_not_alias_store(store: MemoryStore) -> None:
    created = await store.create(pod("a", labels={"app": "x"}))
    created["metadata"]["labels"]["app"] = "changed"
    fetched = await store.get("v1", "Pod", "a", "default")
    assert fetched["metadata"]["labels"]["app"] == "x"
    fetched["spec"]["containers"].clear()
    assert (await store.get("v1", "Pod", "a", "default"))["spec"]["containers"]


async def test_input_mutation_after_create_does_not_leak(store: MemoryStore) -> None:
    obj = pod("a", labels={"app": "x"})
    await store.create(obj)
    obj["metadata"]["labels"]["app"] = "changed"
    obj["spec"]["containers"].append({"name": "extra"})
    fetched = await store.get("v1", "Pod", "a", "default")
    assert fetched["metadata"]["labels"]["app"] == "x"
    assert len(fetched["spec"]["containers"]) == 1
    assert (await store.list("v1", "Pod", label_selector="app=x")).items


async def test_listed_objects_do_not_alias_store(store: MemoryStore) -> None:
    await store.create(pod("a"))
    listed = (await store.list("v1", "Pod")).items
    listed[0]["metadata"]["name"] = "zzz"
    assert (await store.list("v1", "Pod")).items[0]["metadata"]["name"] == "a"


# --- generateName -----------------------------------------------------------------------------


async def test_generate_name(store: MemoryStore) -> None:
    obj = pod("")
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "worker-"
    name = (await store.create(obj))["metadata"]["name"]
    assert re.fullmatch(r"worker-[a-z0-9]{5}", name)
    assert (await store.get("v1", "Pod", name, "default"))["metadata"]["generateName"] == "worker-"


async def test_generate_name_unique(store: MemoryStore) -> None:
    names = set()
    for _ in range(200):
        obj = pod("", generateName="w-")
        names.add((await store.create(obj))["metadata"]["name"])
    assert len(names) == 200


async def test_generate_name_retries_on_collision(clock: VirtualClock) -> None:
    probe = MemoryStore(clock, seed=11)
    first = (await probe.create(pod("", generateName="x-")))["metadata"]["name"]
    replay = MemoryStore(clock, seed=11)
    await replay.create(pod(first))  # occupy the name the generator will pick first
    second = (await replay.create(pod("", generateName="x-")))["metadata"]["name"]
    assert second != first
    assert second.startswith("x-")


async def test_generate_name_long_prefix_truncated(store: MemoryStore) -> None:
    name = (await store.create(pod("", generateName="a" * 80)))["metadata"]["name"]
    assert len(name) == 63


async def test_name_required(store: MemoryStore) -> None:
    obj = pod("")
    with pytest.raises(InvalidError, match="name or generateName is required"):
        await store.create(obj)


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Upper", "under_score", "-lead", "trail-", "a" * 254])
async def test_invalid_names(store: MemoryStore, name: str) -> None:
    with pytest.raises(InvalidError, match=r"metadata\.name"):
        await store.create(pod(name))


async def test_namespace_name_is_dns_label(store: MemoryStore) -> None:
    with pytest.raises(InvalidError):
        await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}})


async def test_integer_label_rejected(store: MemoryStore) -> None:
    with pytest.raises(InvalidError, match="quote numbers"):
        await store.create(pod("a", labels={"version": 1}))  # type: ignore[dict-item]


async def test_bad_label_key_rejected(store: MemoryStore) -> None:
    with pytest.raises(InvalidError, match=r"metadata\.labels"):
        await store.create(pod("a", labels={"bad key": "x"}))


async def test_non_string_annotation_rejected(store: MemoryStore) -> None:
    with pytest.raises(InvalidError, match=r"metadata\.annotations"):
        await store.create(pod("a", annotations={"replicas": 3}))


async def test_owner_reference_needs_uid(store: MemoryStore) -> None:
    refs = [{"apiVersion": "v1", "kind": "Pod", "name": "x"}]
    with pytest.raises(InvalidError, match="ownerReferences"):
        await store.create(pod("a", ownerReferences=refs))


async def test_missing_kind_bad_request(store: MemoryStore) -> None:
    with pytest.raises(BadRequestError, match="apiVersion and kind"):
        await store.create({"metadata": {"name": "x"}})


async def test_not_json_serializable_invalid(store: MemoryStore) -> None:
    obj = pod("a")
    obj["spec"]["weird"] = object()
    with pytest.raises(InvalidError, match="JSON"):
        await store.create(obj)
    assert store.resource_version == "0"


async def test_yaml_datetimes_become_rfc3339(store: MemoryStore) -> None:
    from datetime import UTC, datetime

    obj = configmap("c")
    obj["data"] = {"when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)}
    created = await store.create(obj)
    assert created["data"]["when"] == "2024-01-02T03:04:05Z"


# --- update and optimistic concurrency --------------------------------------------------------


async def test_update_bumps_resource_version(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    created["data"] = {"k": "new"}
    updated = await store.update(created)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert updated["data"] == {"k": "new"}


async def test_update_with_stale_version_conflicts(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    fresh = dict(created, data={"k": "first"})
    await store.update(fresh)
    stale = dict(created, data={"k": "second"})
    with pytest.raises(ConflictError, match="the object has been modified"):
        await store.update(stale)
    assert (await store.get("v1", "ConfigMap", "c"))["data"] == {"k": "first"}


async def test_conflict_message_names_resource(store: MemoryStore) -> None:
    created = await store.create(queue("q"))
    created["metadata"]["resourceVersion"] = "12345"
    with pytest.raises(ConflictError) as caught:
        await store.update(created)
    assert caught.value.message.startswith(
        'Operation cannot be fulfilled on queues.scheduling.volcano.sh "q": '
    )
    assert caught.value.code == 409


async def test_update_without_version_is_unconditional(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    await store.update(dict(created, data={"k": "1"}))
    blind = dict(created, data={"k": "2"})
    blind["metadata"] = {k: v for k, v in created["metadata"].items() if k != "resourceVersion"}
    assert (await store.update(blind))["data"] == {"k": "2"}


async def test_update_with_other_uid_conflicts(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    await store.delete("v1", "ConfigMap", "c")
    await store.create(configmap("c"))
    created["metadata"].pop("resourceVersion")
    with pytest.raises(ConflictError, match="re-created"):
        await store.update(created)


async def test_update_missing_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError):
        await store.update(configmap("ghost"))


async def test_update_keeps_server_fields(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    changed = dict(created, data={"k": "x"})
    changed["metadata"] = dict(
        created["metadata"],
        uid=created["metadata"]["uid"],
        creationTimestamp="2000-01-01T00:00:00Z",
    )
    updated = await store.update(changed)
    assert updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]


async def test_noop_update_writes_nothing(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    again = await store.update(created)
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert store.resource_version == created["metadata"]["resourceVersion"]


async def test_noop_update_ignores_key_order(store: MemoryStore) -> None:
    created = await store.create(configmap("c", labels={"a": "1", "b": "2"}))
    reordered: dict[str, Any] = dict(reversed(list(created.items())))
    reordered["metadata"] = dict(reversed(list(created["metadata"].items())))
    await store.update(reordered)
    assert store.resource_version == created["metadata"]["resourceVersion"]


# --- generation -------------------------------------------------------------------------------


async def test_generation_bumps_on_spec_change(store: MemoryStore) -> None:
    created = await store.create(queue("q"))
    created["spec"]["weight"] = 5
    assert (await store.update(created))["metadata"]["generation"] == 2


async def test_generation_unchanged_on_metadata_change(store: MemoryStore) -> None:
    created = await store.create(queue("q"))
    created["metadata"]["labels"] = {"team": "a"}
    updated = await store.update(created)
    assert updated["metadata"]["generation"] == 1
    assert updated["metadata"]["labels"] == {"team": "a"}


async def test_generation_unchanged_on_status_update(store: MemoryStore) -> None:
    created = await store.create(queue("q"))
    created["status"] = {"state": "Open"}
    assert (await store.update_status(created))["metadata"]["generation"] == 1


async def test_client_cannot_set_generation(store: MemoryStore) -> None:
    created = await store.create(queue("q"))
    created["metadata"]["generation"] = 40
    assert (await store.update(created))["metadata"]["generation"] == 1


# --- status subresource -----------------------------------------------------------------------


async def test_create_drops_status_for_status_subresource(store: MemoryStore) -> None:
    obj = queue("q")
    obj["status"] = {"state": "Closed"}
    assert "status" not in await store.create(obj)


async def test_create_keeps_status_without_subresource(store: MemoryStore) -> None:
    obj = {
        "apiVersion": PG,
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": 1},
        "status": {"phase": "Pending"},
    }
    assert (await store.create(obj))["status"] == {"phase": "Pending"}


async def test_create_keeps_node_status(store: MemoryStore) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4"}},
    }
    assert (await store.create(node))["status"]["allocatable"] == {"cpu": "4"}


async def test_pod_status_defaults_to_pending(store: MemoryStore) -> None:
    assert (await store.create(pod("a")))["status"] == {"phase": "Pending"}


async def test_pod_status_reset_on_create(store: MemoryStore) -> None:
    obj = pod("a")
    obj["status"] = {"phase": "Running"}
    assert (await store.create(obj))["status"]["phase"] == "Pending"


async def test_gated_pod_gets_condition(store: MemoryStore) -> None:
    obj = pod("a")
    obj["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    conditions = (await store.create(obj))["status"]["conditions"]
    assert conditions[0]["type"] == "PodScheduled"
    assert conditions[0]["reason"] == "SchedulingGated"


async def test_namespace_starts_active(store: MemoryStore) -> None:
    ns = await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}})
    assert ns["status"] == {"phase": "Active"}


async def test_update_ignores_status_changes(store: MemoryStore) -> None:
    created = await store.create(pod("a"))
    created["status"] = {"phase": "Running"}
    created["metadata"]["labels"] = {"x": "y"}
    updated = await store.update(created)
    assert updated["status"]["phase"] == "Pending"
    assert updated["metadata"]["labels"] == {"x": "y"}


async def test_update_status_changes_only_status(store: MemoryStore) -> None:
    created = await store.create(pod("a"))
    created["status"] = {"phase": "Running"}
    created["metadata"]["labels"] = {"x": "y"}
    created["spec"]["nodeName"] = "sneaky"
    updated = await store.update_status(created)
    assert updated["status"]["phase"] == "Running"
    assert "labels" not in updated["metadata"]
    assert "nodeName" not in updated["spec"]


async def test_update_status_stale_conflicts(store: MemoryStore) -> None:
    created = await store.create(pod("a"))
    await store.update_status(dict(created, status={"phase": "Running"}))
    with pytest.raises(ConflictError):
        await store.update_status(dict(created, status={"phase": "Failed"}))


async def test_update_status_without_subresource_not_found(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    with pytest.raises(NotFoundError, match="status subresource"):
        await store.update_status(created)


async def test_update_without_subresource_changes_status(store: MemoryStore) -> None:
    obj = {
        "apiVersion": PG,
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": 1},
    }
    created = await store.create(obj)
    created["status"] = {"phase": "Running"}
    assert (await store.update(created))["status"] == {"phase": "Running"}


async def test_noop_status_update_writes_nothing(store: MemoryStore) -> None:
    created = await store.create(pod("a"))
    before = store.resource_version
    await store.update_status(created)
    assert store.resource_version == before
