"""Pod binding (pods/binding) and eviction (pods/eviction) with PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import (
    ConflictError,
    InternalError,
    InvalidError,
    NotFoundError,
    TooManyRequestsError,
)
from stromboli.core.cluster.memory import MemoryStore

from .objects import next_event, pod


async def running(store: MemoryStore, name: str, labels: dict[str, str]) -> dict[str, Any]:
    await store.create(pod(name, labels=labels))
    await store.bind("default", name, "n1")
    current = await store.get("v1", "Pod", name, "default")
    return await store.update_status(dict(current, status={"phase": "Running"}))


async def budget(
    store: MemoryStore,
    name: str,
    selector: dict[str, Any] | None,
    allowed: int | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minAvailable": 1}
    if selector is not None:
        spec["selector"] = selector
    created = await store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }
    )
    if allowed is None:
        return created
    return await store.update_status(dict(created, status={"disruptionsAllowed": allowed}))


async def gone(store: MemoryStore, name: str) -> bool:
    try:
        await store.get("v1", "Pod", name, "default")
    except NotFoundError:
        return True
    return False


# --- bind -------------------------------------------------------------------------------------


async def test_bind_sets_node_name(store: MemoryStore) -> None:
    await store.create(pod("a"))
    await store.bind("default", "a", "node-1")
    bound = await store.get("v1", "Pod", "a", "default")
    assert bound["spec"]["nodeName"] == "node-1"


async def test_bind_adds_scheduled_condition(store: MemoryStore, clock: VirtualClock) -> None:
    await store.create(pod("a"))
    clock.advance(5)
    await store.bind("default", "a", "node-1")
    (condition,) = (await store.get("v1", "Pod", "a", "default"))["status"]["conditions"]
    assert condition["type"] == "PodScheduled"
    assert condition["status"] == "True"
    assert condition["lastTransitionTime"] == "1970-01-01T00:00:05Z"


async def test_bind_replaces_unschedulable_condition(store: MemoryStore) -> None:
    created = await store.create(pod("a"))
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    ready = {"type": "Ready", "status": "False"}
    await store.update_status(
        dict(created, status={"phase": "Pending", "conditions": [unschedulable, ready]})
    )
    await store.bind("default", "a", "node-1")
    conditions = (await store.get("v1", "Pod", "a", "default"))["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [
        ("PodScheduled", "True"),
        ("Ready", "False"),
    ]


async def test_bind_keeps_phase_pending(store: MemoryStore) -> None:
    await store.create(pod("a"))
    await store.bind("default", "a", "node-1")
    assert (await store.get("v1", "Pod", "a", "default"))["status"]["phase"] == "Pending"


async def test_bind_is_a_modified_event(store: MemoryStore) -> None:
    await store.create(pod("a"))
    async with store.watch("v1", "Pod", resource_version=store.resource_version) as watch:
        await store.bind("default", "a", "node-1")
        event = await next_event(watch)
    assert event.type == "MODIFIED"
    assert event.object["spec"]["nodeName"] == "node-1"


async def test_bind_twice_conflicts(store: MemoryStore) -> None:
    await store.create(pod("a"))
    await store.bind("default", "a", "node-1")
    with pytest.raises(ConflictError, match='already assigned to node "node-1"') as caught:
        await store.bind("default", "a", "node-2")
    assert caught.value.code == 409
    assert (await store.get("v1", "Pod", "a", "default"))["spec"]["nodeName"] == "node-1"


async def test_bind_prebound_pod_conflicts(store: MemoryStore) -> None:
    obj = pod("a")
    obj["spec"]["nodeName"] = "fixed"
    await store.create(obj)
    with pytest.raises(ConflictError):
        await store.bind("default", "a", "node-2")


async def test_bind_missing_pod_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError):
        await store.bind("default", "ghost", "node-1")


async def test_bind_with_matching_uid(store: MemoryStore) -> None:
    created = await store.create(pod("a"))
    await store.bind("default", "a", "node-1", pod_uid=created["metadata"]["uid"])
    assert (await store.get("v1", "Pod", "a", "default"))["spec"]["nodeName"] == "node-1"


async def test_bind_with_stale_uid_conflicts(store: MemoryStore) -> None:
    old = await store.create(pod("a"))
    await store.delete("v1", "Pod", "a", "default")
    await store.create(pod("a"))
    with pytest.raises(ConflictError, match="re-created"):
        await store.bind("default", "a", "node-1", pod_uid=old["metadata"]["uid"])


async def test_bind_deleting_pod_conflicts(store: MemoryStore) -> None:
    await store.create(pod("a", finalizers=["example.com/hold"]))
    await store.delete("v1", "Pod", "a", "default")
    with pytest.raises(ConflictError, match="being deleted"):
        await store.bind("default", "a", "node-1")


async def test_bind_needs_node_name(store: MemoryStore) -> None:
    await store.create(pod("a"))
    with pytest.raises(InvalidError):
        await store.bind("default", "a", "")


# --- evict ------------------------------------------------------------------------------------


async def test_evict_without_budget_deletes(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    await store.evict("default", "a")
    assert await gone(store, "a")


async def test_evict_blocked_by_exhausted_budget(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    await budget(store, "web-pdb", {"matchLabels": {"app": "web"}}, allowed=0)
    with pytest.raises(TooManyRequestsError) as caught:
        await store.evict("default", "a")
    assert caught.value.code == 429
    assert "web-pdb" in caught.value.message
    assert not await gone(store, "a")


async def test_budget_without_status_blocks(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    await budget(store, "web-pdb", {"matchLabels": {"app": "web"}}, allowed=None)
    with pytest.raises(TooManyRequestsError):
        await store.evict("default", "a")


async def test_evict_allowed_by_budget_spends_it(store: MemoryStore, clock: VirtualClock) -> None:
    await running(store, "a", {"app": "web"})
    await running(store, "b", {"app": "web"})
    await budget(store, "web-pdb", {"matchLabels": {"app": "web"}}, allowed=1)
    clock.advance(7)
    await store.evict("default", "a")
    assert await gone(store, "a")
    pdb = await store.get("policy/v1", "PodDisruptionBudget", "web-pdb", "default")
    assert pdb["status"]["disruptionsAllowed"] == 0
    assert pdb["status"]["disruptedPods"] == {"a": "1970-01-01T00:00:07Z"}
    with pytest.raises(TooManyRequestsError):
        await store.evict("default", "b")
    assert not await gone(store, "b")


async def test_budget_with_other_selector_ignored(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    await budget(store, "db-pdb", {"matchLabels": {"app": "db"}}, allowed=0)
    await store.evict("default", "a")
    assert await gone(store, "a")


async def test_budget_in_other_namespace_ignored(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    created = await store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "p", "namespace": "elsewhere"},
            "spec": {"selector": {}},
        }
    )
    assert created["metadata"]["namespace"] == "elsewhere"
    await store.evict("default", "a")
    assert await gone(store, "a")


async def test_empty_selector_budget_covers_all_pods(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    await budget(store, "all", {}, allowed=0)
    with pytest.raises(TooManyRequestsError):
        await store.evict("default", "a")


async def test_budget_without_selector_covers_nothing(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    await budget(store, "none", None, allowed=0)
    await store.evict("default", "a")
    assert await gone(store, "a")


async def test_budget_match_expressions(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web", "tier": "front"})
    selector = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}
    await budget(store, "front", selector, allowed=0)
    with pytest.raises(TooManyRequestsError):
        await store.evict("default", "a")


async def test_pending_pod_ignores_budget(store: MemoryStore) -> None:
    await store.create(pod("a", labels={"app": "web"}))
    await budget(store, "web-pdb", {"matchLabels": {"app": "web"}}, allowed=0)
    await store.evict("default", "a")
    assert await gone(store, "a")


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
async def test_finished_pod_ignores_budget(store: MemoryStore, phase: str) -> None:
    current = await running(store, "a", {"app": "web"})
    await store.update_status(dict(current, status={"phase": phase}))
    await budget(store, "web-pdb", {"matchLabels": {"app": "web"}}, allowed=0)
    await store.evict("default", "a")
    assert await gone(store, "a")


async def test_two_matching_budgets_refused(store: MemoryStore) -> None:
    await running(store, "a", {"app": "web"})
    await budget(store, "one", {"matchLabels": {"app": "web"}}, allowed=1)
    await budget(store, "two", {}, allowed=1)
    with pytest.raises(InternalError, match="more than one"):
        await store.evict("default", "a")
    assert not await gone(store, "a")


async def test_evict_missing_pod_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError):
        await store.evict("default", "ghost")


async def test_evict_pod_with_finalizer_marks_it(store: MemoryStore) -> None:
    await store.create(pod("a", finalizers=["example.com/hold"]))
    await store.evict("default", "a")
    assert (await store.get("v1", "Pod", "a", "default"))["metadata"]["deletionTimestamp"]
