"""Fuzzing the admission server: random and hostile AdmissionReviews through every service.

Whatever arrives (random JSON, wrong types, deep documents, huge strings, quantities such as
``1e100000000``, ``1e309``, negatives and full-width digits), the server answers each request
with an AdmissionReview for its uid or a 4xx, never a 500 from a crash, and within a bounded
time (a request that hangs fails the test through the client's timeout, a hang guard and not
a speed check). The server runs once for the module on its own event loop thread, over plain
HTTP on 127.0.0.1 (TLS is covered in test_server.py), and the examples are posted to it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.webhooks.server import admission_app
from stromboli.webhooks.services import SERVICES, AdmissionOptions

PATHS = sorted(SERVICES)
ANSWER_TIMEOUT = 30.0
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
GVK = {
    "Job": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "Queue": ("scheduling.volcano.sh", "v1beta1", "queues"),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "Pod": ("", "v1", "pods"),
}
KIND_OF_PATH = {path: SERVICES[path].kind for path in PATHS}


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    """The admission app on its own loop in a thread, for the whole module."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def serve() -> None:
        store = MemoryStore(SystemClock())
        for name in ("root", "default"):
            queue = await store.create(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": name},
                    "spec": {"weight": 1},
                }
            )
            queue["status"] = {"state": "Open"}
            await store.update_status(queue)
        app = admission_app(list(SERVICES.values()), store, AdmissionOptions())
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        box["stop"] = asyncio.Event()
        ready.set()
        await box["stop"].wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(60), "the admission app did not start"
    yield box["port"]
    loop.call_soon_threadsafe(box["stop"].set)
    thread.join(30)


def post(port: int, path: str, body: bytes) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_TIMEOUT)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def check(port: int, path: str, body: bytes, uid: Any = None) -> dict | None:
    """Post and check the contract; returns the AdmissionReview response when there is one.
    With ``uid`` the body is a well-formed review, which must get an AdmissionReview back."""
    status, answer = post(port, path, body)
    assert status != 500, answer[:2000]
    assert status in ((200,) if uid is not None else (200, 400, 413)), (status, answer[:2000])
    if status != 200:
        return None
    review = json.loads(answer)
    assert review["kind"] == "AdmissionReview"
    response = review["response"]
    if uid is not None:
        assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    if not response["allowed"]:
        assert response["status"]["code"] in (400, 500)
        assert isinstance(response["status"]["message"], str)
    return response


def envelope(path: str, obj: Any, operation: str = "CREATE", old: Any = None) -> dict:
    group, version, resource = GVK[KIND_OF_PATH[path]]
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": KIND_OF_PATH[path]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": operation,
        "name": "fuzz",
        "namespace": "default",
        "object": obj,
        "oldObject": old,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


# --- strategies -------------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)
hostile_quantities = st.sampled_from(
    [
        "1e100000000",
        "-1e100000000",
        "1e-100000000",
        "1e309",
        "1E308",
        "-1",
        "-500m",
        "0",
        "１２３",
        "٣",
        "9" * 5000,
        "9" * 30 + "Ei",
        "1.",
        ".5",
        "",
        " 1",
        "1e",
        "NaN",
        "Infinity",
        "0x10",
        "1_000",
    ]
)
quantities = hostile_quantities | st.integers(min_value=-(2**80), max_value=2**80) | scalars
resources = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "ephemeral-storage", "x"]),
    quantities,
    max_size=4,
)


@st.composite
def containers(draw: st.DrawFn) -> dict:
    return {
        "name": draw(st.text(min_size=0, max_size=10)),
        "image": "busybox",
        "resources": {"requests": draw(resources), "limits": draw(resources)},
    }


@st.composite
def pods(draw: st.DrawFn) -> dict:
    annotations = draw(
        st.dictionaries(
            st.sampled_from(
                ["volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable", "a"]
            ),
            st.text(max_size=12) | st.sampled_from(["1", "0", "-1", "50%", "100%", "9" * 5000]),
            max_size=2,
        )
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "annotations": annotations},
        "spec": {
            "schedulerName": draw(st.sampled_from(["volcano", "default-scheduler", ""])),
            "containers": draw(st.lists(containers(), max_size=3)),
        },
    }


@st.composite
def jobs(draw: st.DrawFn) -> dict:
    tasks = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.text(max_size=10),
                    "replicas": st.integers(-5, 10) | scalars,
                    "minAvailable": st.integers(-5, 10) | scalars,
                    "template": st.builds(
                        lambda cs: {"spec": {"containers": cs}}, st.lists(containers(), max_size=2)
                    ),
                }
            ),
            max_size=3,
        )
    )
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": draw(st.text(max_size=20)), "namespace": "default"},
        "spec": {
            "queue": draw(st.sampled_from(["default", "root", "nope", ""]) | scalars),
            "minAvailable": draw(st.integers(-3, 10) | scalars),
            "maxRetry": draw(st.integers(-3, 10) | scalars),
            "tasks": tasks,
            "plugins": draw(st.sampled_from([{}, {"mpi": []}, {"svc": ["x"]}]) | json_values),
        },
    }


@st.composite
def queues(draw: st.DrawFn) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": draw(st.text(max_size=20)), "annotations": draw(json_values)},
        "spec": {
            "weight": draw(st.integers(-5, 2**40) | scalars),
            "capability": draw(resources),
            "deserved": draw(resources),
            "guarantee": {"resource": draw(resources)},
            "parent": draw(st.sampled_from(["root", "default", "q", ""]) | scalars),
            "reclaimable": draw(scalars),
        },
    }


@st.composite
def podgroups(draw: st.DrawFn) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": draw(st.text(max_size=10))},
        "spec": {
            "minMember": draw(st.integers(-3, 10) | scalars),
            "queue": draw(st.sampled_from(["default", "nope"]) | scalars),
            "minResources": draw(resources),
            "networkTopology": draw(json_values),
        },
    }


OBJECTS = {"Pod": pods(), "Job": jobs(), "Queue": queues(), "PodGroup": podgroups()}


def _mangle(obj: dict, data: st.DataObject) -> dict:
    """Replace one field (top level or in spec/metadata) by random JSON: wrong types."""
    where = data.draw(st.sampled_from(["", "spec", "metadata"]))
    target = obj.get(where) if where else obj
    if isinstance(target, dict) and target:
        key = data.draw(st.sampled_from(sorted(target)))
        target[key] = data.draw(json_values)
    return obj


# --- the fuzz tests -------------------------------------------------------------------------


@SETTINGS
@given(data=st.data())
def test_well_formed_reviews_of_hostile_objects(port: int, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(PATHS))
    obj = data.draw(OBJECTS[KIND_OF_PATH[path]])
    if data.draw(st.booleans()):
        obj = _mangle(obj, data)
    operation = data.draw(st.sampled_from((*SERVICES[path].operations, "CONNECT")))
    old = data.draw(st.none() | OBJECTS[KIND_OF_PATH[path]]) if operation != "CREATE" else None
    body = envelope(path, None if operation == "DELETE" else obj, operation, old)
    check(port, path, json.dumps(body).encode(), body["request"]["uid"])


@SETTINGS
@given(data=st.data())
def test_reviews_with_random_fields(port: int, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(PATHS))
    body = envelope(path, data.draw(json_values))
    request = body["request"]
    for key in data.draw(st.lists(st.sampled_from(sorted(request)), max_size=3)):
        request[key] = data.draw(json_values)
    if data.draw(st.booleans()):
        body[data.draw(st.sampled_from(["apiVersion", "kind", "request"]))] = data.draw(json_values)
    check(port, path, json.dumps(body).encode())


@SETTINGS
@given(
    path=st.sampled_from(PATHS),
    body=st.binary(max_size=200) | json_values.map(json.dumps).map(str.encode),
)
def test_arbitrary_bodies(port: int, path: str, body: bytes) -> None:
    check(port, path, body)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("depth", [200, 1000, 5000])
def test_deep_documents(port: int, path: str, depth: int) -> None:
    deep: Any = "leaf"
    for _ in range(depth):
        deep = {"d": [deep]} if depth <= 1000 else {"d": deep}
    obj = {"apiVersion": "x", "kind": KIND_OF_PATH[path], "metadata": {"name": "d"}, "spec": deep}
    text = json.dumps(envelope(path, obj)) if depth <= 400 else None
    if text is None:  # beyond the json module's own recursion: write it by hand
        text = (
            '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": '
            '{"uid": "u", "kind": {"kind": "' + KIND_OF_PATH[path] + '"}, "resource": {}, '
            '"operation": "CREATE", "object": {"spec": '
            + '{"d": ' * depth
            + "1"
            + "}" * depth
            + "}}}"
        )
    check(port, path, text.encode())


@pytest.mark.parametrize("path", PATHS)
def test_huge_strings(port: int, path: str) -> None:
    huge = "\n\x1b[2J" + "x" * 400_000  # seven copies: 2.8 MB, under the body limit
    obj = {
        "apiVersion": "x",
        "kind": KIND_OF_PATH[path],
        "metadata": {"name": huge, "namespace": huge, "annotations": {huge[:300]: huge}},
        "spec": {"queue": huge, "tasks": [{"name": huge}], "containers": [{"name": huge}]},
    }
    body = envelope(path, obj)
    body["request"]["name"] = huge
    check(port, path, json.dumps(body).encode(), body["request"]["uid"])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("amount", ["1e100000000", "1e309", "-1", "１２３", "9" * 5000])
def test_hostile_quantities_everywhere(port: int, path: str, amount: str) -> None:
    res = {"cpu": amount, "memory": amount, "nvidia.com/gpu": amount}
    container = {"name": "c", "image": "busybox", "resources": {"requests": res, "limits": res}}
    template = {"spec": {"containers": [container]}}
    obj = {
        "apiVersion": "x",
        "kind": KIND_OF_PATH[path],
        "metadata": {"name": "h", "namespace": "default"},
        "spec": {
            "containers": [container],
            "tasks": [{"name": "t", "replicas": 1, "template": template}],
            "capability": res,
            "deserved": res,
            "guarantee": {"resource": res},
            "minResources": res,
            "weight": 1,
            "queue": "default",
        },
    }
    body = envelope(path, obj)
    check(port, path, json.dumps(body).encode(), body["request"]["uid"])
