"""The webhook under hostile input and overload (issue 9): body limit, in-flight budget,
deadlines, the watch-fed cache, crash-only answers, log-safe strings, prompt stop.

Every test runs the real aiohttp application in process against a memory store; slow or
failing rules are services of their own (a rule is data), not patches of the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import ObjectList
from stromboli.core.logsafe import LOG_LIMIT, log_safe
from stromboli.webhooks.limits import (
    MAX_BODY,
    MAX_INFLIGHT_BYTES,
    Budget,
    MiB,
    go_duration,
    request_timeout,
)
from stromboli.webhooks.metrics import WebhookMetrics
from stromboli.webhooks.review import Verdict
from stromboli.webhooks.server import WebhookOptions, WebhookServer, admission_app
from stromboli.webhooks.services import SERVICES, AdmissionOptions, AdmissionService

SCHED = "scheduling.volcano.sh/v1beta1"


class CountingStore(MemoryStore):
    """A memory store that counts lists, to see who reads the cluster per request."""

    def __init__(self) -> None:
        super().__init__(SystemClock())
        self.lists = 0

    async def list(self, *args: Any, **kwargs: Any) -> ObjectList:
        self.lists += 1
        return await super().list(*args, **kwargs)


async def open_queue(store: MemoryStore, name: str) -> None:
    created = await store.create(
        {"apiVersion": SCHED, "kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}}
    )
    created["status"] = {"state": "Open"}
    await store.update_status(created)


@pytest.fixture
async def store() -> CountingStore:
    memory = CountingStore()
    await open_queue(memory, "root")
    await open_queue(memory, "default")
    return memory


def review(obj: dict, kind: str = "Queue", operation: str = "CREATE") -> dict:
    group, version = ("", "v1") if kind == "Pod" else SCHED.split("/")
    if kind == "Job":
        group, version = "batch.volcano.sh", "v1alpha1"
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "name": (obj.get("metadata") or {}).get("name", ""),
        "namespace": (obj.get("metadata") or {}).get("namespace", ""),
        "object": obj,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def queue(name: str = "q", **spec: Any) -> dict:
    return {"apiVersion": SCHED, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def job(name: str = "j", queue_name: str = "default") -> dict:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "queue": queue_name,
            "minAvailable": 1,
            "tasks": [{"name": "w", "replicas": 1, "template": template}],
        },
    }


def blocking_service(gate: threading.Event, started: threading.Semaphore) -> AdmissionService:
    """``/queues/mutate`` whose rule waits for ``gate`` (work that takes a while)."""

    def rule(request: Any, cluster: Any, options: Any) -> Verdict:
        started.release()
        gate.wait(30)
        return Verdict.allow()

    base = SERVICES["/queues/mutate"]
    return AdmissionService(
        base.path, base.webhook_name, True, base.group, base.version, base.resource, base.kind,
        base.operations, rule,
    )  # fmt: skip


def failing_service(error: BaseException) -> AdmissionService:
    def rule(request: Any, cluster: Any, options: Any) -> Verdict:
        raise error

    base = SERVICES["/queues/validate"]
    return AdmissionService(
        base.path, base.webhook_name, False, base.group, base.version, base.resource, base.kind,
        base.operations, rule,
    )  # fmt: skip


@pytest.fixture
async def client(store: CountingStore) -> AsyncIterator[TestClient]:
    app = admission_app(list(SERVICES.values()), store, AdmissionOptions())
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


# --- defect 3: body size and memory ---------------------------------------------------------


async def test_a_15_mib_review_is_refused_unread(client: TestClient) -> None:
    padding = "x" * (15 * MiB)
    body = orjson.dumps(review(queue(annotations={"pad": padding})))
    response = await client.post("/queues/validate", data=body)
    assert response.status == 413
    assert f"over the limit of {MAX_BODY} bytes" in await response.text()


def test_the_body_limit_fits_an_update_of_two_largest_objects_and_the_budget_one_body() -> None:
    # The API server's request limit is 3 MiB; an UPDATE review carries two objects.
    assert 2 * 3 * MiB < MAX_BODY <= 8 * MiB
    assert MAX_BODY <= MAX_INFLIGHT_BYTES < 2 * MAX_BODY


async def test_bodies_beyond_the_byte_budget_are_shed(store: CountingStore) -> None:
    gate, started = threading.Event(), threading.Semaphore(0)
    app = admission_app(
        [blocking_service(gate, started)], store, AdmissionOptions(), max_inflight_bytes=3 * MiB
    )
    big = orjson.dumps(review(queue(annotations={"pad": "x" * (2 * MiB)})))
    async with TestClient(TestServer(app)) as client:
        first = asyncio.create_task(client.post("/queues/mutate", data=big))
        assert await asyncio.to_thread(started.acquire, True, 30)
        second = await client.post("/queues/mutate", data=big)
        assert second.status == 429
        assert second.headers["Retry-After"] == "1"
        small = asyncio.create_task(
            client.post("/queues/mutate", data=orjson.dumps(review(queue())))
        )
        assert await asyncio.to_thread(started.acquire, True, 30)  # small ones still fit
        gate.set()
        assert (await first).status == 200
        assert (await small).status == 200


# --- defect 4: overload ---------------------------------------------------------------------


async def test_queues_are_listed_once_not_per_admission(
    client: TestClient, store: CountingStore
) -> None:
    listed = store.lists
    for path, obj, kind in [
        ("/jobs/validate", job(), "Job"),
        ("/queues/validate", queue(), "Queue"),
    ]:
        for _ in range(25):
            response = await client.post(path, data=orjson.dumps(review(obj, kind)))
            assert (await response.json())["response"]["allowed"] is True
    assert store.lists == listed


async def test_requests_over_the_bound_are_shed_at_once_with_429(store: CountingStore) -> None:
    gate, started = threading.Event(), threading.Semaphore(0)
    metrics = WebhookMetrics()
    app = admission_app(
        [blocking_service(gate, started)],
        store,
        AdmissionOptions(),
        workers=2,
        max_inflight=3,
        metrics=metrics,
    )
    body = orjson.dumps(review(queue()))
    async with TestClient(TestServer(app)) as client:
        held = [asyncio.create_task(client.post("/queues/mutate", data=body)) for _ in range(3)]
        for _ in range(2):  # two on the workers, the third queued behind them
            assert await asyncio.to_thread(started.acquire, True, 30)
        shed = [await client.post("/queues/mutate", data=body) for _ in range(5)]
        assert [r.status for r in shed] == [429] * 5
        gate.set()
        assert [(await t).status for t in held] == [200] * 3
        assert metrics.value("/queues/mutate", "shed") == 5
        assert metrics.value("/queues/mutate", "allowed") == 3
        after = await client.post("/queues/mutate", data=body)
        assert after.status == 200  # the budget came back


async def test_a_request_past_its_deadline_is_dropped_not_answered(store: CountingStore) -> None:
    gate, started = threading.Event(), threading.Semaphore(0)
    metrics = WebhookMetrics()
    app = admission_app(
        [blocking_service(gate, started)], store, AdmissionOptions(), workers=1, metrics=metrics
    )
    body = orjson.dumps(review(queue()))
    async with TestClient(TestServer(app)) as client:
        busy = asyncio.create_task(client.post("/queues/mutate", data=body))
        assert await asyncio.to_thread(started.acquire, True, 30)
        late = await client.post("/queues/mutate?timeout=200ms", data=body)
        assert late.status == 504
        gone = await client.post("/queues/mutate?timeout=0s", data=body)
        assert gone.status == 504
        gate.set()
        assert (await busy).status == 200
        # The late one was never run: only the busy request and this one reach the rule.
        assert (await client.post("/queues/mutate", data=body)).status == 200
    assert metrics.value("/queues/mutate", "expired") == 2
    assert metrics.value("/queues/mutate", "allowed") == 2


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5s", 1.5), ("0s", 0.0), ("2h", 7200.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "-1s", "1d", "1e9s", "9" * 50 + "s", "10s "])
def test_unreadable_timeouts_fall_back_to_the_api_server_default(text: str) -> None:
    assert go_duration(text) is None or text == "1e9s"
    assert request_timeout(text) == 10.0


def test_timeouts_are_capped_at_the_webhook_maximum() -> None:
    assert request_timeout("2h") == 30.0
    assert request_timeout(None) == 10.0


def test_budget_counts_requests_and_bytes() -> None:
    budget = Budget(max_requests=2, max_bytes=10)
    assert budget.try_take(6)
    assert not budget.try_take(5)  # bytes
    assert budget.try_take(4)
    assert not budget.try_take(0)  # requests
    budget.give_back(6)
    assert budget.try_take(6)
    assert (budget.requests, budget.bytes) == (2, 10)


# --- crash-only -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error", [RuntimeError("boom\nforged line"), RecursionError("deep"), KeyError("x")]
)
async def test_a_rule_that_raises_answers_500_and_is_counted(
    store: CountingStore, error: BaseException
) -> None:
    metrics = WebhookMetrics()
    app = admission_app([failing_service(error)], store, AdmissionOptions(), metrics=metrics)
    async with TestClient(TestServer(app)) as client:
        for _ in range(2):  # the server goes on after the first
            response = await client.post("/queues/validate", data=orjson.dumps(review(queue())))
            assert response.status == 200
            answer = (await response.json())["response"]
            assert answer["allowed"] is False
            assert answer["status"]["code"] == 500
            assert answer["status"]["message"].startswith("validatequeue.volcano.sh failed: ")
            assert "\n" not in answer["status"]["message"]
    reason = type(error).__name__
    assert metrics.value("/queues/validate", "error") == 2
    assert (
        metrics.registry.get_sample_value(
            "stromboli_webhook_request_errors_total", {"path": "/queues/validate", "reason": reason}
        )
        == 2
    )


@pytest.mark.parametrize(
    ("request_field", "value"),
    [("name", {"a": 1}), ("namespace", ["x"]), ("operation", 7), ("kind", {"kind": ["Queue"]})],
)
async def test_wrong_types_in_the_request_are_400_naming_the_field(
    client: TestClient, request_field: str, value: Any
) -> None:
    body = review(queue())
    body["request"][request_field] = value
    response = await client.post("/queues/validate", data=orjson.dumps(body))
    assert response.status == 400
    assert f"request.{request_field}" in (await response.json())["error"]


async def test_deeply_nested_objects_are_answered(client: TestClient) -> None:
    deep: Any = "leaf"
    for _ in range(900):
        deep = {"d": deep}
    body = review(queue(annotations={"a": "b"}) | {"extra": deep})
    for path in ("/queues/mutate", "/queues/validate"):
        # orjson writes at most 254 levels; the API server may send up to its own limits.
        response = await client.post(path, data=json.dumps(body))
        assert response.status == 200
        assert (await response.json())["response"]["uid"] == body["request"]["uid"]
    too_deep = b'{"request": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    response = await client.post("/queues/mutate", data=too_deep)
    assert response.status == 400


# --- defect 9: logs -------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_log_safe_is_one_printable_bounded_line(text: str) -> None:
    safe = log_safe(text)
    assert safe.isprintable()  # no newline, carriage return, escape or other control
    assert len(safe) <= LOG_LIMIT * 10 + len(f"…(+{len(text)} chars)")  # \U0010ffff is 10
    if text.isprintable() and "\\" not in text and len(text) <= LOG_LIMIT:
        assert safe == text  # ordinary strings are left as they are


def test_log_safe_examples() -> None:
    assert log_safe("a\nb\r\tc\x1b[31m") == "a\\nb\\r\\tc\\x1b[31m"
    assert log_safe("x" * 300) == "x" * LOG_LIMIT + f"…(+{300 - LOG_LIMIT} chars)"
    assert log_safe("\u2028é") == "\\u2028é"
    assert len(log_safe({"k": "v" * 10_000})) < 100  # other objects: a bounded repr


async def test_denials_log_user_strings_escaped_and_truncated(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    name = "evil\n2026-01-01 I forged: everything is fine " + "x" * 200_000
    bad = queue(name, weight=-1)
    with caplog.at_level(logging.INFO, logger="stromboli.webhooks"):
        response = await client.post("/queues/validate", data=orjson.dumps(review(bad)))
        assert (await response.json())["response"]["allowed"] is False
    records = [r.getMessage() for r in caplog.records if "denied" in r.getMessage()]
    assert records
    for message in records:
        assert "\n" not in message
        assert "evil\\n2026" in message
        assert len(message) < 4 * 1024


# --- defect 2: the loop stays free; stop is prompt ------------------------------------------


async def test_the_loop_answers_health_while_every_worker_is_busy(store: CountingStore) -> None:
    gate, started = threading.Event(), threading.Semaphore(0)
    app = admission_app([blocking_service(gate, started)], store, AdmissionOptions(), workers=1)
    body = orjson.dumps(review(queue()))
    async with TestClient(TestServer(app)) as client:
        busy = asyncio.create_task(client.post("/queues/mutate", data=body))
        assert await asyncio.to_thread(started.acquire, True, 30)
        # The loop is not blocked: more requests are read and shed or queued.
        over = await client.post("/queues/mutate?timeout=50ms", data=body)
        assert over.status == 504
        gate.set()
        assert (await busy).status == 200


async def test_stop_is_prompt_while_a_rule_is_still_running(store: CountingStore) -> None:
    """A stopped server returns from ``run()`` even though a worker is stuck in a rule (the
    workers are daemon threads; the grace for requests in hand is bounded)."""
    gate, started = threading.Event(), threading.Semaphore(0)
    options = WebhookOptions(
        listen_address="127.0.0.1", port=0, enabled_admission="/queues/mutate", workers=1
    )
    server = WebhookServer(store, options)
    server.services = [blocking_service(gate, started)]
    running = asyncio.create_task(server.run())
    try:
        while not server.port:
            await asyncio.sleep(0.01)
        _reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.port, ssl=_trust_anything()
        )
        body = orjson.dumps(review(queue()))
        writer.write(
            b"POST /queues/mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        assert await asyncio.to_thread(started.acquire, True, 30)
        server.stop()
        await asyncio.wait_for(running, 20)  # a hang guard, not a speed check
        writer.close()
    finally:
        gate.set()
        if not running.done():
            running.cancel()


def _trust_anything() -> Any:
    import ssl

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
