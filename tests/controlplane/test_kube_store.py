"""The Kubernetes store against a real API server (etcd + kube-apiserver + kwok).

The first tests need no server: the rate limiter's arithmetic, kubeconfig loading, error
mapping and the watch line parser. The rest run on the session's control plane, or on a private
one when they restart the API server or need etcd compaction to provoke ``410 Gone``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stromboli.core.api.crds import build_crds
from stromboli.core.clock import SystemClock
from stromboli.core.cluster import ratelimit
from stromboli.core.cluster.errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    GoneError,
    InvalidError,
    NotFoundError,
    TooManyRequestsError,
    UnsupportedMediaTypeError,
)
from stromboli.core.cluster.kube import KubeConfig, KubeConfigError, KubeStore, UnreachableError
from stromboli.core.cluster.kubehttp import error_from_response
from stromboli.core.cluster.kubewatch import KubeWatch
from stromboli.core.cluster.ratelimit import TokenBucket
from stromboli.core.cluster.store import WatchEvent, WatchStream
from stromboli.core.devcluster import CertificateAuthority, ControlPlane, free_port
from stromboli.core.events import EventRecorder
from stromboli.core.informer import Informer

QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
NOBODY = "stromboli-test-nobody"


# --- offline: rate limiter --------------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_allows_a_burst_then_spaces_requests_by_one_over_qps() -> None:
    clock = FakeTime()
    bucket = TokenBucket(qps=10, burst=5, monotonic=clock)
    assert [bucket.reserve() for _ in range(5)] == [0.0] * 5
    # The next reservations queue up behind each other, 1/qps apart.
    assert [round(bucket.reserve(), 6) for _ in range(3)] == [0.1, 0.2, 0.3]
    assert bucket.tokens() == pytest.approx(-3.0)
    clock.now += 0.3  # the refill has paid the three reservations back
    assert bucket.tokens() == pytest.approx(0.0)
    assert bucket.reserve() == pytest.approx(0.1)


def test_rate_limiter_refill_never_exceeds_burst() -> None:
    clock = FakeTime()
    bucket = TokenBucket(qps=2000, burst=2000, monotonic=clock)
    for _ in range(2000):
        assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(1 / 2000)
    clock.now += 3600  # an idle hour buys one burst, not 7.2 million requests
    assert bucket.tokens() == 2000
    assert sum(bucket.reserve() == 0.0 for _ in range(2001)) == 2000


def test_rate_limiter_unlimited_and_invalid_settings() -> None:
    clock = FakeTime()
    for qps in (0, -1, float("inf")):
        bucket = TokenBucket(qps=qps, burst=1, monotonic=clock)
        assert bucket.unlimited
        assert all(bucket.reserve() == 0.0 for _ in range(10_000))
    with pytest.raises(ValueError, match="burst must be at least 1"):
        TokenBucket(qps=1, burst=0, monotonic=clock)


async def test_rate_limiter_acquire_sleeps_for_the_reservation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def fake_sleep(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr(ratelimit.asyncio, "sleep", fake_sleep)
    bucket = TokenBucket(qps=4, burst=2, monotonic=FakeTime())
    for _ in range(4):
        await bucket.acquire()
    assert slept == [pytest.approx(0.25), pytest.approx(0.5)]


# --- offline: kubeconfig ------------------------------------------------------------------------


def write_kubeconfig(
    path: Path, server: str, user: dict[str, Any], ca: bytes | None = None
) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "ns1"}}],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_with_relative_certificate_files(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    keys = ca.issue_client("someone").write(tmp_path / "pki", "someone")
    ca.write(tmp_path / "pki")
    path = write_kubeconfig(
        tmp_path / "config",
        "https://127.0.0.1:6443",
        {"client-certificate": "pki/someone.crt", "client-key": "pki/someone.key"},
    )
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority"] = "pki/ca.crt"
    path.write_text(yaml.safe_dump(doc))

    config = KubeConfig.load(path)
    assert config.server == "https://127.0.0.1:6443"
    assert config.namespace == "ns1"
    assert config.cert_data == keys.cert_pem and config.ca_data == ca.cert_pem
    assert config.auth_headers() == {}
    ctx = config.ssl_context()
    assert not isinstance(ctx, bool) and ctx.check_hostname
    moved = config.with_server("10.0.0.1:443")
    assert moved.server == "https://10.0.0.1:443" and moved.cert_data == config.cert_data


def test_kubeconfig_environment_merges_files_first_one_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_kubeconfig(tmp_path / "a", "https://first:1", {"token": "t-first"})
    second = write_kubeconfig(tmp_path / "b", "https://second:2", {"token": "t-second"})
    doc = yaml.safe_load(second.read_text())
    doc["contexts"].append({"name": "other", "context": {"cluster": "c", "user": "u"}})
    second.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{first}:{second}")

    config = KubeConfig.load()
    assert config.server == "https://first:1"
    assert config.auth_headers() == {"Authorization": "Bearer t-first"}
    # A context only the second file defines still resolves, with the first file's cluster.
    assert KubeConfig.load(context="other").server == "https://first:1"
    assert KubeConfig.load(context="other").namespace == "default"

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(KubeConfigError, match="none of those files exists"):
        KubeConfig.load()


def test_kubeconfig_exec_plugin_with_an_unknown_api_version_names_the_field(
    tmp_path: Path,
) -> None:
    # Exec plugins are run (tests/cluster/test_kubeconfig_exec.py); a bad section is refused.
    path = write_kubeconfig(
        tmp_path / "config", "https://x:1", {"exec": {"command": "aws", "apiVersion": "v1"}}
    )
    with pytest.raises(KubeConfigError, match=r"user 'u': exec.apiVersion is 'v1'"):
        KubeConfig.load(path)


def test_in_cluster_config_reads_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "8443")
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok-1\n")
    (sa / "namespace").write_text("volcano-system")
    (sa / "ca.crt").write_bytes(CertificateAuthority().cert_pem)
    config = KubeConfig.in_cluster(sa)
    assert config.server == "https://[fd00::1]:8443"
    assert config.namespace == "volcano-system"
    clock = FakeTime()
    assert config.auth_headers(clock) == {"Authorization": "Bearer tok-1"}
    (sa / "token").write_text("tok-2")  # rotated by the kubelet
    assert config.auth_headers(clock) == {"Authorization": "Bearer tok-1"}
    clock.now += 61
    assert config.auth_headers(clock) == {"Authorization": "Bearer tok-2"}
    with pytest.raises(KubeConfigError, match="is missing"):
        KubeConfig.in_cluster(tmp_path / "nowhere")


# --- offline: error mapping and the watch parser --------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (404, "NotFound", NotFoundError),
        (409, "AlreadyExists", AlreadyExistsError),
        (409, "Conflict", ConflictError),
        (410, "Expired", GoneError),
        (410, "Gone", GoneError),
        (422, "Invalid", InvalidError),
        (429, "TooManyRequests", TooManyRequestsError),
        (400, "SomethingNew", BadRequestError),  # unknown reason: by code
    ],
)
def test_status_bodies_map_to_the_memory_stores_errors(
    code: int, reason: str, expected: type[ApiError]
) -> None:
    import orjson

    body = orjson.dumps(
        {"kind": "Status", "apiVersion": "v1", "code": code, "reason": reason, "message": "why"}
    )
    error = error_from_response(code, body, "HTTP reason")
    assert type(error) is expected
    assert error.code == code and error.message == "why"


def test_non_status_error_bodies_keep_code_and_text() -> None:
    error = error_from_response(403, b"forbidden by a proxy\n", "Forbidden")
    assert type(error) is ApiError
    assert (error.code, error.reason, error.message) == (403, "Forbidden", "forbidden by a proxy")
    assert type(error_from_response(404, b"", "Not Found")) is NotFoundError


class NoTransport:
    """A transport a watch never uses in the parser tests (no event loop is running)."""


def parser_watch() -> KubeWatch:
    async def never() -> Any:
        raise AssertionError("not called")

    return KubeWatch(
        NoTransport(),  # type: ignore[arg-type]
        never,
        never,
        None,
        "5",
        timeout_seconds=300,
        max_backoff=1,
    )


def test_watch_parser_raises_gone_for_a_recorded_expired_line() -> None:
    """The exact line kube-apiserver 1.36 sent for a compacted version (recorded)."""
    line = (
        b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},'
        b'"status":"Failure","message":"The resourceVersion for the provided watch is too old.",'
        b'"reason":"Expired","code":410}}'
    )
    watch = parser_watch()
    with pytest.raises(GoneError, match="too old"):
        watch._handle(line)


def test_watch_parser_tracks_versions_through_bookmarks() -> None:
    watch = parser_watch()
    assert watch._handle(
        b'{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":'
        b'{"name":"a","resourceVersion":"7","managedFields":[{"manager":"x"}]}}}'
    )
    assert watch.resource_version == "7"
    assert watch._handle(
        b'{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1",'
        b'"metadata":{"resourceVersion":"12"}}}'
    )
    assert watch.resource_version == "12"
    events = watch.drain()
    assert [e.type for e in events] == ["ADDED", "BOOKMARK"]
    assert "managedFields" not in events[0].object["metadata"]
    assert watch.drain() == []


# --- on the control plane ------------------------------------------------------------------------


def new_store(cp: ControlPlane, **options: Any) -> KubeStore:
    return KubeStore(KubeConfig.load(cp.kubeconfig_path), **options)


@pytest.fixture(scope="module")
def volcano_crds(control_plane: ControlPlane) -> None:
    """Volcano's CRDs (generated from our models), installed once through the store itself:
    CustomResourceDefinition is not in the kind registry, so this goes through discovery."""

    async def install() -> None:
        store = new_store(control_plane)
        try:
            for crd in build_crds():
                with contextlib.suppress(AlreadyExistsError):
                    await store.create(crd)
            for crd in build_crds():
                await eventually(
                    lambda name=crd["metadata"]["name"]: established(store, name),
                    what=f"CRD {crd['metadata']['name']} Established",
                )
        finally:
            await store.close()

    asyncio.run(install())


async def established(store: KubeStore, name: str) -> bool:
    crd = await store.get(*CRD, name)
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in crd.get("status", {}).get("conditions", ())
    )


async def eventually(
    check: Callable[[], Awaitable[Any]], *, what: str, timeout: float = 60, interval: float = 0.2
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        try:
            last = await check()
            if last:
                return last
        except ApiError as err:
            last = err
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}; last: {last!r:.1000}")
        await asyncio.sleep(interval)


@pytest.fixture
async def store(control_plane: ControlPlane) -> AsyncIterator[KubeStore]:
    kube = new_store(control_plane)
    yield kube
    await kube.close()


#: The ConfigMap kube-controller-manager's root-CA publisher puts in every namespace.
ROOT_CA = "kube-root-ca.crt"


@pytest.fixture
async def namespace(store: KubeStore) -> str:
    name = f"ks-{uuid.uuid4().hex[:8]}"
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # Made before the test starts, so that it never shows up in the middle of a watch.
    await eventually(_exists(store, ROOT_CA, name), what=f"{name}/{ROOT_CA}")
    return name


def _exists(store: KubeStore, config_map: str, namespace: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        try:
            await store.get("v1", "ConfigMap", config_map, namespace)
        except NotFoundError:
            return False
        return True

    return check


def queue(name: str, weight: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": QUEUE[0],
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": True},
    }


def podgroup(name: str, namespace: str, min_member: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": PODGROUP[0],
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def pod(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "schedulerName": NOBODY,  # nobody else schedules it: the tests bind it
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/sleep:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def configmap(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"k": "v"},
    }


async def next_event(stream: WatchStream, timeout: float = 30) -> WatchEvent:
    """The next non-bookmark event."""
    async with asyncio.timeout(timeout):
        while True:
            event = await anext(stream)
            if event.type != "BOOKMARK":
                return event


async def test_queue_crud_and_status_subresource(volcano_crds: None, store: KubeStore) -> None:
    name = f"q-{uuid.uuid4().hex[:8]}"
    created = await store.create(queue(name, weight=3) | {"status": {"state": "Closed"}})
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    assert "status" not in created or created["status"].get("state") != "Closed"
    with pytest.raises(AlreadyExistsError):
        await store.create(queue(name))

    # Status through its subresource: the spec sent along is ignored.
    with_status = created | {"status": {"state": "Open"}, "spec": {"weight": 99}}
    updated = await store.update_status(with_status)
    assert updated["status"]["state"] == "Open" and updated["spec"]["weight"] == 3
    # A whole-object update ignores status, keeps it, and bumps the generation for spec.
    spec_change = updated | {"spec": {**updated["spec"], "weight": 5}, "status": {"state": "X"}}
    again = await store.update(spec_change)
    assert again["spec"]["weight"] == 5 and again["status"]["state"] == "Open"
    assert again["metadata"]["generation"] == created["metadata"]["generation"] + 1
    # The first version is stale now.
    with pytest.raises(ConflictError, match="has been modified"):
        await store.update_status(created | {"status": {"state": "Closed"}})

    listed = await store.list(*QUEUE)
    mine = [q for q in listed.items if q["metadata"]["name"] == name]
    assert mine and mine[0]["kind"] == "Queue" and mine[0]["apiVersion"] == QUEUE[0]
    assert int(listed.resource_version) >= int(again["metadata"]["resourceVersion"])

    # Cluster-scoped: a namespace passed along is ignored, as by the memory store.
    assert (await store.get(*QUEUE, name, namespace="anything"))["spec"]["weight"] == 5
    await store.delete(*QUEUE, name)
    with pytest.raises(NotFoundError, match="not found"):
        await store.get(*QUEUE, name)
    with pytest.raises(NotFoundError):
        await store.delete(*QUEUE, name)


async def test_podgroup_status_is_a_whole_object_update_with_conflict_retry(
    volcano_crds: None, store: KubeStore, namespace: str
) -> None:
    created = await store.create(podgroup("pg", namespace))
    # Volcano's PodGroup CRD has no status subresource.
    with pytest.raises(NotFoundError, match="no status subresource"):
        await store.update_status(created | {"status": {"phase": "Running"}})

    # Someone else writes first; our stale update conflicts; re-read and retry wins.
    other = await store.update(created | {"status": {"phase": "Pending"}})
    assert other["status"]["phase"] == "Pending"
    attempts = 0
    stale = created
    while True:
        attempts += 1
        try:
            stale["status"] = {"phase": "Running", "running": 2}
            written = await store.update(stale)
            break
        except ConflictError:
            stale = await store.get(*PODGROUP, "pg", namespace)
    assert attempts == 2
    assert written["status"] == {"phase": "Running", "running": 2}
    assert (await store.get(*PODGROUP, "pg", namespace))["status"]["phase"] == "Running"


async def test_write_errors_match_the_memory_store(store: KubeStore, namespace: str) -> None:
    with pytest.raises(InvalidError, match=r"spec\.containers"):
        await store.create(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": namespace}}
        )
    with pytest.raises(BadRequestError, match="apiVersion and kind"):
        await store.create({"metadata": {"name": "x"}})
    with pytest.raises(NotFoundError, match='kind "Widget" is not registered'):
        await store.get("widgets.example.com/v1", "Widget", "x")
    with pytest.raises(NotFoundError, match="not found"):
        await store.get("v1", "ConfigMap", "missing", namespace)
    with pytest.raises(UnsupportedMediaTypeError):
        await store.patch("v1", "ConfigMap", "x", {}, namespace, patch_type="strategic")  # type: ignore[arg-type]
    with pytest.raises(BadRequestError, match="merge patch must be"):
        await store.patch("v1", "ConfigMap", "x", [], namespace)


async def test_list_pages_and_selectors(store: KubeStore, namespace: str) -> None:
    paging = new_store_like(store, list_page_size=3)
    try:
        for i in range(8):
            await store.create(configmap(f"cm-{i}", namespace, parity=str(i % 2)))
        listed = await paging.list("v1", "ConfigMap", namespace)
        names = sorted(o["metadata"]["name"] for o in listed.items)
        assert names == [*(f"cm-{i}" for i in range(8)), ROOT_CA]  # three pages, nothing lost
        assert all(o["kind"] == "ConfigMap" and o["apiVersion"] == "v1" for o in listed.items)
        assert all("managedFields" not in o["metadata"] for o in listed.items)
        odd = await paging.list("v1", "ConfigMap", namespace, label_selector="parity=1")
        assert sorted(o["metadata"]["name"] for o in odd.items) == ["cm-1", "cm-3", "cm-5", "cm-7"]
        one = await store.list("v1", "ConfigMap", namespace, field_selector="metadata.name=cm-4")
        assert [o["metadata"]["name"] for o in one.items] == ["cm-4"]
        with pytest.raises(BadRequestError):
            await store.list("v1", "ConfigMap", namespace, label_selector="a in (")
        # get returns the object whole, managedFields included.
        assert (
            "managedFields" in (await store.get("v1", "ConfigMap", "cm-0", namespace))["metadata"]
        )
    finally:
        await paging.close()


async def test_cached_list_is_one_request_from_the_watch_cache_and_a_watch_resumes_it(
    store: KubeStore, namespace: str
) -> None:
    """An informer's first list (``cached``) asks for resourceVersion=0: the server answers
    from its watch cache in one response whatever the page size, and its version starts a
    watch that misses nothing created after it."""
    paging = new_store_like(store, list_page_size=3)
    sent: list[dict[str, str]] = []
    real = paging.transport.request

    async def counted(method: str, path: str, **options: Any) -> Any:
        if method == "GET" and path.endswith("/configmaps"):
            sent.append(dict(options.get("params") or {}))
        return await real(method, path, **options)

    paging.transport.request = counted  # type: ignore[method-assign]
    try:
        for i in range(8):
            await store.create(configmap(f"cm-{i}", namespace))
        listed = await paging.list("v1", "ConfigMap", namespace, cached=True)
        assert sent == [{"resourceVersion": "0"}]  # no limit, no continue: one request
        names = {o["metadata"]["name"] for o in listed.items}
        assert names <= {*(f"cm-{i}" for i in range(8)), ROOT_CA}
        assert all(
            o["kind"] == "ConfigMap" and "managedFields" not in o["metadata"] for o in listed.items
        )
        stream = paging.watch("v1", "ConfigMap", namespace, listed.resource_version)
        try:
            await store.create(configmap("after", namespace))
            seen = set(names)
            while "after" not in seen:
                seen.add((await next_event(stream)).object["metadata"]["name"])
            # A list that may be stale still reaches every object once the watch caught up.
            assert {*(f"cm-{i}" for i in range(8)), "after"} <= seen
        finally:
            await stream.aclose()
        sent.clear()
        await paging.list("v1", "ConfigMap", namespace)
        assert [page.get("limit") for page in sent] == ["3", "3", "3", "3"]
        assert all("resourceVersion" not in page for page in sent)  # consistent reads
    finally:
        await paging.close()


def ref(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": meta["name"],
        "uid": meta["uid"],
        "blockOwnerDeletion": True,  # what a foreground deletion of the owner waits for
    }


def _deleting(store: KubeStore, name: str, namespace: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        obj = await store.get("v1", "ConfigMap", name, namespace)
        return bool(obj["metadata"].get("deletionTimestamp"))

    return check


def _gone(store: KubeStore, name: str, namespace: str) -> Callable[[], Awaitable[bool]]:
    return lambda: _negate(_exists(store, name, namespace))


async def _negate(check: Callable[[], Awaitable[bool]]) -> bool:
    return not await check()


def _unowned(
    store: KubeStore, name: str, namespace: str
) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    async def check() -> dict[str, Any] | None:
        obj = await store.get("v1", "ConfigMap", name, namespace)
        return None if obj["metadata"].get("ownerReferences") else obj

    return check


def new_store_like(store: KubeStore, **options: Any) -> KubeStore:
    return KubeStore(store.config, **options)


async def test_merge_and_json_patches(volcano_crds: None, store: KubeStore, namespace: str) -> None:
    await store.create(configmap("p", namespace) | {"data": {"a": "1", "b": "2"}})
    merged = await store.patch("v1", "ConfigMap", "p", {"data": {"a": None, "c": "3"}}, namespace)
    assert merged["data"] == {"b": "2", "c": "3"}
    ops = [
        {"op": "test", "path": "/data/b", "value": "2"},
        {"op": "replace", "path": "/data/b", "value": "20"},
        {"op": "add", "path": "/metadata/labels", "value": {"patched": "yes"}},
    ]
    patched = await store.patch("v1", "ConfigMap", "p", ops, namespace, patch_type="json")
    assert patched["data"]["b"] == "20" and patched["metadata"]["labels"] == {"patched": "yes"}
    with pytest.raises(InvalidError):
        await store.patch(
            "v1",
            "ConfigMap",
            "p",
            [{"op": "test", "path": "/data/b", "value": "nope"}],
            namespace,
            patch_type="json",
        )
    # The status subresource of a Queue through a merge patch.
    name = f"q-{uuid.uuid4().hex[:8]}"
    await store.create(queue(name))
    state = await store.patch(*QUEUE, name, {"status": {"state": "Closed"}}, subresource="status")
    assert state["status"]["state"] == "Closed"
    ignored = await store.patch(*QUEUE, name, {"status": {"state": "Open"}})
    assert ignored["status"]["state"] == "Closed"  # the main resource ignores status
    await store.delete(*QUEUE, name)


async def test_delete_propagation_reaches_the_server(store: KubeStore, namespace: str) -> None:
    owner = await store.create(configmap("fg", namespace))
    # A dependent that its own finalizer holds: the garbage collector marks it, and the owner
    # waits, marked, with the finalizer a foreground deletion adds, until the dependent goes.
    held = configmap("fg-child", namespace)
    held["metadata"] |= {"finalizers": ["stromboli.test/hold"], "ownerReferences": [ref(owner)]}
    await store.create(held)
    await store.delete("v1", "ConfigMap", "fg", namespace, propagation="Foreground")
    marked = await store.get("v1", "ConfigMap", "fg", namespace)
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    await eventually(
        _deleting(store, "fg-child", namespace), what="the garbage collector to delete fg-child"
    )
    assert (await store.get("v1", "ConfigMap", "fg", namespace))["metadata"]["deletionTimestamp"]
    await store.patch("v1", "ConfigMap", "fg-child", {"metadata": {"finalizers": None}}, namespace)
    await eventually(_gone(store, "fg", namespace), what="fg deleted once fg-child is gone")
    # Orphan: the dependent stays, without its owner.
    owner = await store.create(configmap("orphaner", namespace))
    await store.create(
        configmap("orphan", namespace)
        | {"metadata": {"name": "orphan", "namespace": namespace, "ownerReferences": [ref(owner)]}}
    )
    await store.delete("v1", "ConfigMap", "orphaner", namespace, propagation="Orphan")
    await eventually(_gone(store, "orphaner", namespace), what="orphaner deleted")
    orphan = await eventually(
        _unowned(store, "orphan", namespace), what="the garbage collector to orphan it"
    )
    assert not orphan["metadata"].get("deletionTimestamp")
    await store.create(configmap("bg", namespace))
    await store.delete("v1", "ConfigMap", "bg", namespace, propagation="Background")
    with pytest.raises(NotFoundError):
        await store.get("v1", "ConfigMap", "bg", namespace)


async def test_bind_pod_to_a_kwok_node_and_see_it_running(store: KubeStore, namespace: str) -> None:
    created = await store.create(pod("p1", namespace))
    with pytest.raises(ConflictError, match="Precondition failed: UID"):
        await store.bind(namespace, "p1", "kwok-node-0", pod_uid=str(uuid.uuid4()))
    await store.bind(namespace, "p1", "kwok-node-0", pod_uid=created["metadata"]["uid"])
    with pytest.raises(ConflictError, match="already assigned"):
        await store.bind(namespace, "p1", "kwok-node-1")
    with pytest.raises(NotFoundError):
        await store.bind(namespace, "missing", "kwok-node-0")

    async def running() -> dict[str, Any] | None:
        p = await store.get("v1", "Pod", "p1", namespace)
        return p if p["status"].get("phase") == "Running" else None

    p = await eventually(running, what="pod p1 Running on kwok-node-0")
    assert p["spec"]["nodeName"] == "kwok-node-0"
    conditions = {c["type"]: c["status"] for c in p["status"]["conditions"]}
    assert conditions["PodScheduled"] == "True" and conditions["Ready"] == "True"


async def test_evict_honours_a_disruption_budget(store: KubeStore, namespace: str) -> None:
    await store.create(pod("victim", namespace, labels={"app": "db"}))
    await store.bind(namespace, "victim", "kwok-node-1")
    await eventually(
        lambda: pod_phase_is(store, namespace, "victim", "Running"), what="victim Running"
    )
    await store.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        }
    )

    # The disruption controller works the budget's status out from the pods.
    async def budget(allowed: int) -> None:
        async def computed() -> bool:
            current = await store.get("policy/v1", "PodDisruptionBudget", "db", namespace)
            status = current.get("status") or {}
            return (
                status.get("observedGeneration") == current["metadata"]["generation"]
                and status.get("disruptionsAllowed") == allowed
            )

        await eventually(computed, what=f"budget db to allow {allowed} disruption(s)")

    await budget(0)
    with pytest.raises(TooManyRequestsError, match="disruption budget") as err:
        await store.evict(namespace, "victim")
    assert err.value.code == 429
    assert (await store.get("v1", "Pod", "victim", namespace))["metadata"].get(
        "deletionTimestamp"
    ) is None

    await store.patch(
        "policy/v1", "PodDisruptionBudget", "db", {"spec": {"minAvailable": 0}}, namespace
    )
    await budget(1)
    await store.evict(namespace, "victim")

    async def gone() -> bool:
        try:
            p = await store.get("v1", "Pod", "victim", namespace)
        except NotFoundError:
            return True
        return bool(p["metadata"].get("deletionTimestamp"))

    await eventually(gone, what="the evicted pod to be deleted")
    with pytest.raises(NotFoundError):
        await store.evict(namespace, "never-existed")


async def pod_phase_is(store: KubeStore, namespace: str, name: str, phase: str) -> bool:
    return (await store.get("v1", "Pod", name, namespace))["status"].get("phase") == phase


async def test_watch_resumes_from_a_version_across_server_timeouts(
    control_plane: ControlPlane, store: KubeStore, namespace: str
) -> None:
    await store.create(configmap("before", namespace))
    listed = await store.list("v1", "ConfigMap", namespace)
    # The server ends each watch request after 2s; the stream must resume invisibly.
    short = new_store(control_plane, watch_timeout=2)
    stream = short.watch("v1", "ConfigMap", namespace, resource_version=listed.resource_version)
    try:
        expected: list[tuple[str, str]] = []
        for i in range(4):
            await store.create(configmap(f"c{i}", namespace))
            await store.patch("v1", "ConfigMap", f"c{i}", {"data": {"i": str(i)}}, namespace)
            expected += [("ADDED", f"c{i}"), ("MODIFIED", f"c{i}")]
            await asyncio.sleep(1.5)  # across at least one server-side timeout in all
        await store.delete("v1", "ConfigMap", "before", namespace)
        expected.append(("DELETED", "before"))
        seen = [(e.type, e.object["metadata"]["name"]) for e in await take(stream, len(expected))]
        assert seen == expected  # in order, none lost, none repeated
        assert stream.connects >= 2  # type: ignore[attr-defined]
        assert int(stream.resource_version) > int(listed.resource_version)  # type: ignore[attr-defined]
    finally:
        await stream.aclose()
        await short.close()


async def take(stream: WatchStream, count: int, timeout: float = 30) -> list[WatchEvent]:
    return [await next_event(stream, timeout) for _ in range(count)]


async def test_watch_surfaces_bookmarks(
    control_plane: ControlPlane, store: KubeStore, namespace: str
) -> None:
    """A change elsewhere moves the kind's version on without an event for this namespace; the
    server says so with a bookmark (shortly before its timeout), and the stream resumes there."""
    other = f"{namespace}-other"
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}})
    listed = await store.list("v1", "ConfigMap", namespace)
    short = new_store(control_plane, watch_timeout=4)
    try:
        async with short.watch("v1", "ConfigMap", namespace, listed.resource_version) as stream:

            async def connected() -> bool:
                return stream.connects > 0  # type: ignore[attr-defined]

            # The server only bookmarks progress made while the watch is open.
            await eventually(connected, what="the watch to connect", interval=0.02)
            elsewhere = await store.create(configmap("elsewhere", other))
            async with asyncio.timeout(30):
                event = await anext(stream)
            assert event.type == "BOOKMARK"
            version = event.object["metadata"]["resourceVersion"]
            assert int(version) >= int(elsewhere["metadata"]["resourceVersion"])
            assert stream.resource_version == version  # type: ignore[attr-defined]
    finally:
        await short.close()


async def test_watch_without_version_lists_first_and_drains(
    store: KubeStore, namespace: str
) -> None:
    for name in ("a", "b"):
        await store.create(configmap(name, namespace))
    listing = new_store_like(store)
    sent: list[dict[str, str]] = []
    real = listing.transport.request

    async def recorded(method: str, path: str, **options: Any) -> Any:
        if method == "GET" and path.endswith("/configmaps"):
            sent.append(dict(options.get("params") or {}))
        return await real(method, path, **options)

    listing.transport.request = recorded  # type: ignore[method-assign]
    stream = listing.watch("v1", "ConfigMap", namespace)
    try:

        async def drained() -> list[WatchEvent]:
            return stream.drain()

        first = await eventually(drained, what="the initial ADDED events", interval=0.05)
        events = list(first)
        while len(events) < 3:
            events += await eventually(drained, what="more ADDED events", interval=0.05)
        assert sorted((e.type, e.object["metadata"]["name"]) for e in events) == [
            ("ADDED", "a"),
            ("ADDED", "b"),
            ("ADDED", ROOT_CA),
        ]
        assert stream.drain() == []  # nothing more yet, and no waiting
        await store.create(configmap("c", namespace))
        live = await eventually(drained, what="the live ADDED event", interval=0.05)
        assert [(e.type, e.object["metadata"]["name"]) for e in live] == [("ADDED", "c")]
        # The stream's own first list came from the watch cache: one request, no pages.
        assert sent == [{"resourceVersion": "0"}]
    finally:
        await stream.aclose()
        await listing.close()
    assert await anext(stream, None) is None  # a closed stream ends


async def test_informer_follows_the_kube_store_in_run_and_pump_modes(
    store: KubeStore, namespace: str
) -> None:
    seen: list[tuple[str, str]] = []

    def handler(kind: tuple[str, str], event_type: str, obj: dict) -> None:
        if obj["metadata"].get("namespace") == namespace:
            seen.append((event_type, obj["metadata"]["name"]))

    await store.create(configmap("old", namespace))
    informer = Informer(store, [("v1", "ConfigMap")], handler)
    await informer.start()
    assert ("ADDED", "old") in seen
    runner = asyncio.create_task(informer.run())
    try:
        await store.create(configmap("new", namespace))
        await store.delete("v1", "ConfigMap", "old", namespace)

        async def caught_up() -> bool:
            return ("DELETED", "old") in seen

        await eventually(caught_up, what="the informer to see the deletion")
        assert seen.index(("ADDED", "new")) < seen.index(("DELETED", "old"))
    finally:
        runner.cancel()
        await asyncio.wait([runner])
        await informer.stop()

    # Step-driven: pump() applies what the streams received, without waiting.
    seen.clear()
    pumped = Informer(store, [("v1", "ConfigMap")], handler)
    await pumped.start()
    try:
        await store.create(configmap("pumped", namespace))

        async def pumped_in() -> bool:
            await pumped.pump()
            return ("ADDED", "pumped") in seen

        await eventually(pumped_in, what="pump() to deliver the event", interval=0.05)
    finally:
        await pumped.stop()


async def test_events_are_recorded_and_aggregated(store: KubeStore, namespace: str) -> None:
    target = await store.create(pod("ev", namespace))
    recorder = EventRecorder(store, SystemClock(), "stromboli-test")
    ref = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "ev",
        "namespace": namespace,
        "uid": target["metadata"]["uid"],
    }
    for _ in range(3):
        await recorder.record(ref, "Warning", "FailedScheduling", "0/3 nodes are available")
    await recorder.record(ref, "Normal", "Scheduled", "Successfully assigned")
    events = (await store.list("v1", "Event", namespace)).items
    by_reason = {e["reason"]: e for e in events}
    assert set(by_reason) == {"FailedScheduling", "Scheduled"}
    assert by_reason["FailedScheduling"]["count"] == 3
    assert by_reason["Scheduled"]["count"] == 1
    assert by_reason["Scheduled"]["involvedObject"]["uid"] == target["metadata"]["uid"]


async def test_requests_pass_through_the_rate_limiter(
    control_plane: ControlPlane, namespace: str
) -> None:
    slow = new_store(control_plane, qps=0.001, burst=50)  # refills one token in 1000s
    try:
        before = slow.limiter.tokens()
        for i in range(5):
            await slow.create(configmap(f"rl{i}", namespace))
        await slow.list("v1", "ConfigMap", namespace)
        assert slow.limiter.tokens() == pytest.approx(before - 6, abs=0.01)
    finally:
        await slow.close()


async def test_bearer_token_and_in_cluster_authentication(
    control_plane: ControlPlane,
    store: KubeStore,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await store.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "sched", "namespace": namespace},
        }
    )
    # RBAC kinds are not in the registry: these go through discovery.
    rbac = "rbac.authorization.k8s.io/v1"
    await store.create(
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "read-configmaps", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        }
    )
    await store.create(
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "sched-reads", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "read-configmaps",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "sched", "namespace": namespace}],
        }
    )
    token = control_plane.client.post(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/sched/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    admin = KubeConfig.load(control_plane.kubeconfig_path)
    as_sa = KubeConfig(server=admin.server, ca_data=admin.ca_data, token=token)
    sa_store = KubeStore(as_sa)
    try:
        # RBAC takes effect when the API server's informers see the binding.
        listed = await eventually(
            lambda: sa_store.list("v1", "ConfigMap", namespace), what="the Role to apply"
        )
        assert listed.resource_version
        with pytest.raises(ApiError) as err:
            await sa_store.list("v1", "Node")
        assert err.value.code == 403 and err.value.reason == "Forbidden"
    finally:
        await sa_store.close()

    sa_dir = tmp_path / "sa"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(token)
    (sa_dir / "ca.crt").write_bytes(admin.ca_data or b"")
    (sa_dir / "namespace").write_text(namespace)
    host, port = admin.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    in_cluster = KubeStore(KubeConfig.in_cluster(sa_dir))
    try:
        listed = await in_cluster.list("v1", "ConfigMap", in_cluster.config.namespace)
        assert listed.resource_version
    finally:
        await in_cluster.close()

    bad = KubeStore(KubeConfig(server=admin.server, ca_data=admin.ca_data, token="not-a-token"))
    try:
        with pytest.raises(ApiError) as err:
            await bad.list("v1", "ConfigMap", namespace)
        assert err.value.code == 401
    finally:
        await bad.close()


async def test_unreachable_server_is_an_api_error(control_plane: ControlPlane) -> None:
    admin = KubeConfig.load(control_plane.kubeconfig_path)
    nowhere = KubeStore(admin.with_server(f"https://127.0.0.1:{free_port()}"))
    try:
        with pytest.raises(UnreachableError, match="cannot connect") as err:
            await nowhere.get("v1", "Namespace", "default")
        assert err.value.code == 503
    finally:
        await nowhere.close()


# --- private control planes: restarts and compaction ----------------------------------------


def restart_apiserver(cp: ControlPlane) -> None:
    """Kill kube-apiserver (a crash: connections just break) and start it again on the same
    port, then wait until it is ready."""
    import os
    import signal
    import time

    from stromboli.core.devcluster import KubeAPIError

    component = cp.components["kube-apiserver"]
    assert component.pid is not None
    os.killpg(component.pid, signal.SIGKILL)
    component.stop()  # reaps it
    component.start()
    deadline = time.monotonic() + 120
    while True:
        component.check_alive()
        try:
            if cp.client.get("/readyz") == "ok":
                return
        except (KubeAPIError, OSError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"kube-apiserver did not come back:\n{component.tail(40)}")
        time.sleep(0.25)


async def test_watch_survives_an_api_server_restart(control_plane: ControlPlane) -> None:
    """While the API server is down the stream retries with backoff, then resumes from its last
    version: the consumer sees every event once and no error.

    The watch cache is off on this server so that the resumed watch is served from etcd's
    history; a restarted watch cache starts its history at the restart and may answer ``410``
    instead (the informer then lists again, which the second half checks)."""
    with ControlPlane(
        control_plane.binaries, nodes=0, apiserver_args=["--watch-cache=false"]
    ) as cp:
        store = new_store(cp, watch_max_backoff=1)
        seen: list[tuple[str, str]] = []
        informer = Informer(
            store,
            [("v1", "ConfigMap")],
            lambda kind, event_type, obj: seen.append((event_type, obj["metadata"]["name"])),
        )
        try:
            await store.create(configmap("a", "default"))
            listed = await store.list("v1", "ConfigMap", "default")
            stream = store.watch("v1", "ConfigMap", "default", listed.resource_version)
            await informer.start()
            runner = asyncio.create_task(informer.run())
            await store.create(configmap("b", "default"))
            event = await next_event(stream)
            assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "b")

            await asyncio.to_thread(restart_apiserver, cp)
            await store.patch("v1", "ConfigMap", "a", {"data": {"after": "restart"}}, "default")
            await store.create(configmap("c", "default"))
            events = await take(stream, 2, timeout=60)
            assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
                ("MODIFIED", "a"),
                ("ADDED", "c"),
            ]
            assert stream.connects >= 2  # type: ignore[attr-defined]
            await stream.aclose()

            async def informer_caught_up() -> bool:
                return ("ADDED", "c") in seen

            await eventually(informer_caught_up, what="the informer to see c after the restart")
            assert ("MODIFIED", "a") in seen or seen.count(("ADDED", "a")) == 2
            runner.cancel()
            await asyncio.wait([runner])
        finally:
            await informer.stop()
            await store.close()


async def test_watch_from_a_compacted_version_raises_gone(control_plane: ControlPlane) -> None:
    """Without the watch cache, watches read etcd, whose history the API server compacts every
    second here; an old version then gets ``410 Expired`` from the server itself."""
    args = ["--watch-cache=false", "--etcd-compaction-interval=1s"]
    with ControlPlane(control_plane.binaries, nodes=0, apiserver_args=args) as cp:
        store = new_store(cp)
        try:
            first = await store.create(configmap("v0", "default"))
            old = first["metadata"]["resourceVersion"]

            async def gone() -> bool:
                await store.create(configmap(f"v-{uuid.uuid4().hex[:6]}", "default"))
                stream = store.watch("v1", "ConfigMap", "default", resource_version=old)
                try:
                    async with asyncio.timeout(2):
                        while True:
                            await anext(stream)
                except GoneError:
                    return True
                except TimeoutError:
                    return False  # not compacted yet: history replayed, then silence
                finally:
                    await stream.aclose()

            await eventually(gone, what="410 Gone for a compacted version", timeout=60)

            # What an informer does next: list again and watch from there.
            listed = await store.list("v1", "ConfigMap", "default")
            async with store.watch("v1", "ConfigMap", "default", listed.resource_version) as fresh:
                await store.create(configmap("after", "default"))
                event = await next_event(fresh)
                assert (event.type, event.object["metadata"]["name"]) == ("ADDED", "after")
        finally:
            await store.close()
