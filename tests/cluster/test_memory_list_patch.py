"""Listing with selectors, and patching through the store (merge, JSON, status)."""

from __future__ import annotations

import pytest

from stromboli.core.cluster.errors import (
    BadRequestError,
    ConflictError,
    InvalidError,
    NotFoundError,
    UnsupportedMediaTypeError,
)
from stromboli.core.cluster.memory import MemoryStore

from .objects import configmap, pod, queue

Q = "scheduling.volcano.sh/v1beta1"


async def listed(store: MemoryStore, **kwargs: str) -> list[str]:
    result = await store.list("v1", "Pod", **kwargs)
    return [o["metadata"]["name"] for o in result.items]


@pytest.fixture
async def pods(store: MemoryStore) -> MemoryStore:
    await store.create(pod("web-1", labels={"app": "web", "tier": "front"}))
    await store.create(pod("web-2", namespace="other", labels={"app": "web"}))
    await store.create(pod("db-1", labels={"app": "db"}))
    await store.create(pod("bare"))
    await store.bind("default", "web-1", "node-a")
    return store


async def test_list_all_namespaces(pods: MemoryStore) -> None:
    assert sorted(await listed(pods)) == ["bare", "db-1", "web-1", "web-2"]


async def test_list_one_namespace(pods: MemoryStore) -> None:
    assert await listed(pods, namespace="other") == ["web-2"]


async def test_list_empty_namespace(pods: MemoryStore) -> None:
    assert await listed(pods, namespace="nobody") == []


async def test_list_creation_order(pods: MemoryStore) -> None:
    assert await listed(pods, namespace="default") == ["web-1", "db-1", "bare"]


async def test_list_resource_version_is_latest(pods: MemoryStore) -> None:
    assert (await pods.list("v1", "Pod")).resource_version == pods.resource_version


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-1", "web-2"]),
        ("app!=web", ["db-1", "bare"]),
        ("app in (web,db)", ["web-1", "web-2", "db-1"]),
        ("app notin (web)", ["db-1", "bare"]),
        ("app", ["web-1", "web-2", "db-1"]),
        ("!app", ["bare"]),
        ("app=web,tier=front", ["web-1"]),
    ],
)
async def test_list_label_selector(pods: MemoryStore, selector: str, expected: list[str]) -> None:
    assert sorted(await listed(pods, label_selector=selector)) == sorted(expected)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=node-a", ["web-1"]),
        ("spec.nodeName=", ["web-2", "db-1", "bare"]),
        ("metadata.name=db-1", ["db-1"]),
        ("metadata.namespace!=default", ["web-2"]),
        ("status.phase=Pending", ["web-1", "web-2", "db-1", "bare"]),
    ],
)
async def test_list_field_selector(pods: MemoryStore, selector: str, expected: list[str]) -> None:
    assert sorted(await listed(pods, field_selector=selector)) == sorted(expected)


async def test_list_both_selectors(pods: MemoryStore) -> None:
    names = await listed(pods, label_selector="app=web", field_selector="spec.nodeName=")
    assert names == ["web-2"]


async def test_list_bad_selector_bad_request(pods: MemoryStore) -> None:
    with pytest.raises(BadRequestError):
        await pods.list("v1", "Pod", label_selector="app in ()")
    with pytest.raises(BadRequestError):
        await pods.list("v1", "Pod", field_selector="nonsense")


async def test_list_unknown_kind(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError):
        await store.list("example.com/v1", "Widget")


async def test_list_cluster_scoped_ignores_namespace(store: MemoryStore) -> None:
    await store.create(queue("a"))
    await store.create(queue("b"))
    result = await store.list(Q, "Queue", namespace="whatever")
    assert [q["metadata"]["name"] for q in result.items] == ["a", "b"]


async def test_label_change_moves_object_between_selections(store: MemoryStore) -> None:
    created = await store.create(pod("a", labels={"app": "web"}))
    created["metadata"]["labels"] = {"app": "db"}
    await store.update(created)
    assert await listed(store, label_selector="app=web") == []
    assert await listed(store, label_selector="app=db") == ["a"]


# --- patch ------------------------------------------------------------------------------------


async def test_merge_patch_labels(store: MemoryStore) -> None:
    await store.create(pod("a", labels={"keep": "1", "drop": "2"}))
    patched = await store.patch(
        "v1", "Pod", "a", {"metadata": {"labels": {"drop": None, "new": "3"}}}, "default"
    )
    assert patched["metadata"]["labels"] == {"keep": "1", "new": "3"}
    assert (await listed(store, label_selector="new=3")) == ["a"]


async def test_merge_patch_bumps_version_and_generation(store: MemoryStore) -> None:
    created = await store.create(queue("q"))
    patched = await store.patch(Q, "Queue", "q", {"spec": {"weight": 4}})
    assert patched["spec"]["weight"] == 4
    assert patched["metadata"]["generation"] == 2
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_json_patch(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    patched = await store.patch(
        "v1",
        "ConfigMap",
        "c",
        [
            {"op": "test", "path": "/data/k", "value": "v"},
            {"op": "replace", "path": "/data/k", "value": "w"},
            {"op": "add", "path": "/data/n", "value": "1"},
        ],
        "default",
        patch_type="json",
    )
    assert patched["data"] == {"k": "w", "n": "1"}


async def test_failed_json_patch_is_invalid_and_changes_nothing(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    with pytest.raises(InvalidError, match="test failed"):
        await store.patch(
            "v1",
            "ConfigMap",
            "c",
            [
                {"op": "replace", "path": "/data/k", "value": "w"},
                {"op": "test", "path": "/data/k", "value": "nope"},
            ],
            "default",
            patch_type="json",
        )
    assert (await store.get("v1", "ConfigMap", "c")) == created


async def test_patch_with_stale_version_conflicts(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    await store.patch("v1", "ConfigMap", "c", {"data": {"k": "1"}}, "default")
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    with pytest.raises(ConflictError):
        await store.patch("v1", "ConfigMap", "c", {**stale, "data": {"k": "2"}}, "default")


async def test_patch_main_resource_ignores_status(store: MemoryStore) -> None:
    await store.create(pod("a"))
    patched = await store.patch("v1", "Pod", "a", {"status": {"phase": "Running"}}, "default")
    assert patched["status"]["phase"] == "Pending"


async def test_patch_status_subresource(store: MemoryStore) -> None:
    await store.create(pod("a"))
    patched = await store.patch(
        "v1",
        "Pod",
        "a",
        {"status": {"phase": "Running"}, "metadata": {"labels": {"x": "y"}}},
        "default",
        subresource="status",
    )
    assert patched["status"]["phase"] == "Running"
    assert "labels" not in patched["metadata"]


async def test_json_patch_status_subresource(store: MemoryStore) -> None:
    await store.create(queue("q"))
    patched = await store.patch(
        Q,
        "Queue",
        "q",
        [{"op": "add", "path": "/status", "value": {"state": "Open"}}],
        patch_type="json",
        subresource="status",
    )
    assert patched["status"] == {"state": "Open"}


async def test_noop_patch_writes_nothing(store: MemoryStore) -> None:
    created = await store.create(configmap("c"))
    await store.patch("v1", "ConfigMap", "c", {"data": {"k": "v"}}, "default")
    assert store.resource_version == created["metadata"]["resourceVersion"]


async def test_patch_cannot_rename(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    with pytest.raises(BadRequestError, match="name cannot change"):
        await store.patch("v1", "ConfigMap", "c", {"metadata": {"name": "d"}}, "default")


async def test_patch_cannot_move_namespace(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    with pytest.raises(BadRequestError, match="namespace cannot change"):
        await store.patch("v1", "ConfigMap", "c", {"metadata": {"namespace": "x"}}, "default")


async def test_patch_cannot_change_kind(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    with pytest.raises(BadRequestError):
        await store.patch("v1", "ConfigMap", "c", {"kind": "Secret"}, "default")


async def test_patch_unknown_type(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    with pytest.raises(UnsupportedMediaTypeError):
        await store.patch("v1", "ConfigMap", "c", {}, "default", patch_type="strategic")  # type: ignore[arg-type]


async def test_merge_patch_must_be_object(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    with pytest.raises(BadRequestError):
        await store.patch("v1", "ConfigMap", "c", ["x"], "default")


async def test_patch_unknown_subresource(store: MemoryStore) -> None:
    await store.create(pod("a"))
    with pytest.raises(NotFoundError):
        await store.patch("v1", "Pod", "a", {}, "default", subresource="scale")  # type: ignore[arg-type]


async def test_patch_missing_object(store: MemoryStore) -> None:
    with pytest.raises(NotFoundError):
        await store.patch("v1", "ConfigMap", "ghost", {"data": {}}, "default")


async def test_patch_does_not_alias_patch_document(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    document = {"data": {"k": "patched"}}
    await store.patch("v1", "ConfigMap", "c", document, "default")
    document["data"]["k"] = "mutated later"
    assert (await store.get("v1", "ConfigMap", "c"))["data"] == {"k": "patched"}


async def test_patched_labels_validated(store: MemoryStore) -> None:
    await store.create(configmap("c"))
    with pytest.raises(InvalidError):
        await store.patch("v1", "ConfigMap", "c", {"metadata": {"labels": {"n": 1}}}, "default")
