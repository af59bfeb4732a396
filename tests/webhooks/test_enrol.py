"""``/pods/mutate`` enrolment through the server: owners from the watch-fed cache or a
bounded fetch, the gang from the adapters, resource groups, and the registration's scope."""

from __future__ import annotations

import asyncio
import base64
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from stromboli.core.admission.resourcegroups import ResourceGroup
from stromboli.core.api.registry import KindInfo, kind_info
from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.patch import json_patch
from stromboli.webhooks.owners import WATCHED, OwnerCache, Ref, controller_ref
from stromboli.webhooks.registration import (
    ClientTarget,
    resource_group_condition,
    webhook_configuration,
)
from stromboli.webhooks.server import APP_CACHE, admission_app
from stromboli.webhooks.services import SERVICES, AdmissionOptions

GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
TASK = "volcano.sh/task-spec"
MIN = "scheduling.volcano.sh/group-min-member"
PYTORCH = KindInfo("kubeflow.org/v1", "PyTorchJob", "pytorchjobs", True, True)


def kinds(api_version: str, kind: str) -> KindInfo | None:
    return PYTORCH if kind == "PyTorchJob" else kind_info(api_version, kind)


async def namespace(store: MemoryStore, name: str, **labels: str) -> None:
    await store.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
    )


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore(SystemClock(), kinds=kinds)
    await namespace(memory, "team", **{"stromboli.dev/enroll": "true"})
    await namespace(memory, "plain")
    await namespace(memory, "kube-system", **{"stromboli.dev/enroll": "true"})
    return memory


async def serve(store: MemoryStore, options: AdmissionOptions) -> AsyncIterator[TestClient]:
    app = admission_app([SERVICES["/pods/mutate"]], store, options)
    async with TestClient(TestServer(app)) as test_client:
        owners = app[APP_CACHE].owners
        for _ in range(200):
            if owners.listed == set(WATCHED):
                break
            await asyncio.sleep(0.01)
        yield test_client


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[TestClient]:
    async for test_client in serve(store, AdmissionOptions()):
        yield test_client


def owners_of(client: TestClient) -> OwnerCache:
    return client.server.app[APP_CACHE].owners


async def replicaset(store: MemoryStore, name: str = "web-1", ns: str = "team", **notes: str):
    return await store.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": ns,
                "annotations": notes,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "web",
                        "uid": "deploy-uid",
                        "controller": True,
                    }
                ],
            },
            "spec": {"selector": {}, "template": {}},
        }
    )


def ref_to(obj: dict, controller: bool = True) -> dict:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
    }


def pod(ns: str = "team", owner: dict | None = None, **labels: str) -> dict:
    meta: dict[str, Any] = {"generateName": "p-", "namespace": ns, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def review(obj: dict) -> dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": obj["metadata"]["namespace"],
            "object": obj,
        },
    }


async def mutated(client: TestClient, obj: dict) -> dict:
    response = await client.post("/pods/mutate", data=orjson.dumps(review(obj)))
    assert response.status == 200, await response.text()
    answer = (await response.json())["response"]
    assert answer["allowed"] is True, answer
    if "patch" not in answer:
        return obj
    return json_patch(obj, orjson.loads(base64.b64decode(answer["patch"])))


def notes(obj: dict) -> dict:
    return obj["metadata"].get("annotations") or {}


async def until(condition, what: str) -> None:
    for _ in range(300):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


async def test_a_deployment_pod_is_enrolled_from_its_watched_replicaset(
    store: MemoryStore, client: TestClient
) -> None:
    rs = await replicaset(store, **{MIN: "3", QUEUE: "web-q"})
    owners = owners_of(client)
    await until(lambda: owners.records == 1, "the ReplicaSet never reached the cache")
    out = await mutated(client, pod(owner=ref_to(rs)))
    assert out["spec"]["schedulerName"] == "volcano"
    assert notes(out) == {
        GROUP: f"podgroup-{rs['metadata']['uid']}",
        MIN: "3",
        QUEUE: "web-q",
    }
    assert owners.fetches == 0  # the watch had it


async def test_pods_outside_enrolled_namespaces_and_in_kube_system_are_unchanged(
    store: MemoryStore, client: TestClient
) -> None:
    for ns in ("plain", "kube-system"):
        rs = await replicaset(store, name=f"rs-{ns}", ns=ns)
        body = pod(ns, owner=ref_to(rs))
        assert await mutated(client, body) == body


async def test_an_owner_the_watch_has_not_delivered_is_fetched_once(store: MemoryStore) -> None:
    options = AdmissionOptions()
    async for client in serve(store, options):
        owners = owners_of(client)
        owners.max_records = 0  # the watch keeps nothing: every owner must be fetched
        rs = await replicaset(store, **{MIN: "2"})
        for _ in range(3):
            out = await mutated(client, pod(owner=ref_to(rs)))
            assert notes(out)[MIN] == "2"
        assert owners.fetches == 1 and owners.over_limit >= 1


async def test_an_owner_that_cannot_be_read_still_names_the_group(client: TestClient) -> None:
    ghost = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "gone",
        "uid": "gone-uid",
        "controller": True,
    }
    out = await mutated(client, pod(owner=ghost))
    assert notes(out) == {GROUP: "podgroup-gone-uid", QUEUE: "default"}
    assert owners_of(client).fetch_failures == 1
    await mutated(client, pod(owner=ghost))
    assert owners_of(client).fetch_failures == 1  # the miss is remembered


async def test_a_namesake_of_the_owner_is_not_read_as_the_owner(
    store: MemoryStore, client: TestClient
) -> None:
    await replicaset(store, **{MIN: "5"})
    owners = owners_of(client)
    await until(lambda: owners.records == 1, "the ReplicaSet never reached the cache")
    old = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-1",
        "uid": "an-older-uid",
        "controller": True,
    }
    out = await mutated(client, pod(owner=old))
    assert notes(out) == {GROUP: "podgroup-an-older-uid", QUEUE: "default"}


async def test_a_pytorchjob_pod_joins_the_jobs_podgroup_with_its_role_and_queue(
    store: MemoryStore, client: TestClient
) -> None:
    template = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    job = await store.create(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "train", "namespace": "team"},
            "spec": {
                "runPolicy": {"schedulingPolicy": {"queue": "research"}},
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template},
                    "Worker": {"replicas": 2, "template": template},
                },
            },
        }
    )
    labels = {
        "training.kubeflow.org/job-name": "train",
        "training.kubeflow.org/replica-type": "worker",
    }
    out = await mutated(client, pod(owner=ref_to(job), **labels))
    assert notes(out) == {GROUP: "train", TASK: "worker", QUEUE: "research"}
    assert out["spec"]["schedulerName"] == "volcano"


async def test_an_unreadable_framework_owner_gives_the_adapters_name(client: TestClient) -> None:
    ref = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "missing",
        "uid": "u",
        "controller": True,
    }
    out = await mutated(client, pod(owner=ref))
    assert notes(out)[GROUP] == "missing"


async def test_a_resource_group_enrols_pods_of_a_namespace_not_enrolled(
    store: MemoryStore,
) -> None:
    group = ResourceGroup("gpu", "namespace", ("plain",), "volcano", {"pool": "gpu"})
    async for client in serve(store, AdmissionOptions(resource_groups=(group,))):
        rs = await replicaset(store, ns="plain")
        out = await mutated(client, pod("plain", owner=ref_to(rs)))
        assert out["spec"]["nodeSelector"] == {"pool": "gpu"}
        assert notes(out)[GROUP] == f"podgroup-{rs['metadata']['uid']}"


async def test_exempt_namespaces_include_the_servers_own(store: MemoryStore) -> None:
    await namespace(store, "volcano-system", **{"stromboli.dev/enroll": "true"})
    options = AdmissionOptions(exempt_namespaces=frozenset({"kube-system", "volcano-system"}))
    async for client in serve(store, options):
        body = pod("volcano-system")
        assert await mutated(client, body) == body


# --- the cache itself ---------------------------------------------------------------------------


async def test_deleted_owners_leave_the_cache_and_the_bound_holds(store: MemoryStore) -> None:
    owners = OwnerCache(store, max_records=2)
    await owners.start()
    try:
        for i in range(4):
            await replicaset(store, name=f"rs-{i}")
        await until(lambda: owners.over_limit == 2, "the bound was not applied")
        assert owners.records == 2
        await store.delete("apps/v1", "ReplicaSet", "rs-0", "team")
        await until(lambda: owners.records == 1, "a deleted owner stayed")
    finally:
        await owners.stop()


async def test_an_owner_cycle_ends(store: MemoryStore) -> None:
    owners = OwnerCache(store)
    await owners.start()
    try:
        a = await replicaset(store, name="a")
        b = await replicaset(store, name="b")
        for this, other in ((a, b), (b, a)):
            this["metadata"]["ownerReferences"] = [ref_to(other)]
            await store.update(this)
        await until(
            lambda: all(
                (r := owners.lookup("team", Ref("apps/v1", "ReplicaSet", n, u))) is not None
                and r.controller is not None
                and r.controller.kind == "ReplicaSet"
                for n, u in (("a", a["metadata"]["uid"]), ("b", b["metadata"]["uid"]))
            ),
            "the cycle never reached the cache",
        )
        lineage = await asyncio.to_thread(owners.lineage, pod(owner=ref_to(a)), "team")
        assert [o.name for o in lineage.owners] == ["a", "b"]
    finally:
        await owners.stop()


async def test_a_lookup_on_the_loop_never_blocks_on_itself(store: MemoryStore) -> None:
    owners = OwnerCache(store)
    await owners.start()
    try:
        ref = Ref("apps/v1", "ReplicaSet", "nowhere", "u")
        assert owners.lookup("team", ref) is None  # on the loop: no fetch, no deadlock
        assert owners.fetches == 0
        assert threading.current_thread() is threading.main_thread()
    finally:
        await owners.stop()


@pytest.mark.parametrize(
    "refs",
    [
        None,
        "x",
        [1],
        [{"controller": True, "kind": "ReplicaSet"}],
        [{"controller": "true", "apiVersion": "a", "kind": "b", "name": "c", "uid": "d"}],
    ],
)
def test_unreadable_owner_references_are_no_controller(refs: Any) -> None:
    assert controller_ref({"metadata": {"ownerReferences": refs}}) is None


# --- registration -------------------------------------------------------------------------------


def test_resource_groups_widen_only_the_mutating_pod_webhook() -> None:
    groups = (
        ResourceGroup("a", "namespace", ("ml", "o'brien")),
        ResourceGroup("b", "annotation", ("team: x",)),
        ResourceGroup("c"),
    )
    condition = resource_group_condition(groups)
    assert "request.namespace in ['ml', 'o\\'brien']" in condition
    assert "object.metadata.annotations['team'] == 'x'" in condition
    assert "object.metadata.annotations['volcano.sh/resource-group'] == 'c'" in condition
    target = ClientTarget(url="https://127.0.0.1:9443", resource_groups=groups)
    mutate = webhook_configuration(SERVICES["/pods/mutate"], target, b"ca")
    validate = webhook_configuration(SERVICES["/pods/validate"], target, b"ca")
    assert condition in mutate["webhooks"][0]["matchConditions"][0]["expression"]
    assert "request.namespace" not in validate["webhooks"][0]["matchConditions"][0]["expression"]
    assert resource_group_condition(()) == ""
