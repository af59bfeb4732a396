"""The queue policy in the admission server, in process: default queues patched in at
mutation, refusals naming the queues to use instead, the policy file reloaded when it changes
(a bad version never replacing the good one, counted in the metrics), and the CLI flag."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner

from stromboli.core.admission.policy import EMPTY_POLICY, PolicyError, PolicySource, parse_policy
from stromboli.core.cli import main
from stromboli.core.cli.webhook import _queue_policy
from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.patch import json_patch
from stromboli.webhooks import server as server_module
from stromboli.webhooks.policyfile import PolicyFile
from stromboli.webhooks.server import APP_METRICS, admission_app
from stromboli.webhooks.services import SERVICES, AdmissionOptions

SCHED = "scheduling.volcano.sh/v1beta1"
BATCH = "batch.volcano.sh/v1alpha1"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
GVK = {
    "Job": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "Pod": ("", "v1", "pods"),
}
POLICY_TEXT = """
namespaces:
  team: {queues: [team-q, shared], defaultQueue: team-q}
  "*": {queues: [shared], defaultQueue: shared}
queues:
  team-q: {maxPodsPerJob: 4}
  shared: {preemptableOnly: true}
"""
POLICY = parse_policy(POLICY_TEXT)


async def make_queue(store: MemoryStore, name: str) -> None:
    created = await store.create(
        {"apiVersion": SCHED, "kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}}
    )
    created["status"] = {"state": "Open"}
    await store.update_status(created)


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore(SystemClock())
    for name in ("root", "default", "team-q", "shared"):
        await make_queue(memory, name)
    for name in ("team", "web"):
        await memory.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return memory


async def serving(store: MemoryStore, policy: PolicySource) -> TestClient:
    app = admission_app(list(SERVICES.values()), store, AdmissionOptions(queue_policy=policy))
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[TestClient]:
    test_client = await serving(store, POLICY)
    yield test_client
    await test_client.close()


def review(obj: dict, operation: str = "CREATE") -> dict:
    group, version, resource = GVK[obj["kind"]]
    meta = obj.get("metadata") or {}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": operation,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "object": obj,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def admit(client: TestClient, path: str, obj: dict) -> dict:
    response = await client.post(path, data=orjson.dumps(review(obj)))
    assert response.status == 200, await response.text()
    return (await response.json())["response"]


async def mutated(client: TestClient, path: str, obj: dict) -> dict:
    response = await admit(client, path, obj)
    assert response["allowed"] is True
    if "patch" not in response:
        return obj
    return json_patch(obj, orjson.loads(base64.b64decode(response["patch"])))


def job(namespace: str = "team", replicas: int = 2, **spec: Any) -> dict:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": BATCH,
        "kind": "Job",
        "metadata": {"name": "j", "namespace": namespace},
        "spec": {"tasks": [{"name": "w", "replicas": replicas, "template": template}], **spec},
    }


def podgroup(namespace: str = "team", **spec: Any) -> dict:
    return {
        "apiVersion": SCHED,
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": namespace},
        "spec": {"minMember": 1, **spec},
    }


def pod(namespace: str = "web", annotations: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, "annotations": annotations or {}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]},
    }


# --- mutation ------------------------------------------------------------------------------------


async def test_a_job_without_a_queue_gets_the_namespace_default(client: TestClient) -> None:
    assert (await mutated(client, "/jobs/mutate", job()))["spec"]["queue"] == "team-q"
    assert (await mutated(client, "/jobs/mutate", job("web")))["spec"]["queue"] == "shared"
    named = await mutated(client, "/jobs/mutate", job(queue="shared"))
    assert named["spec"]["queue"] == "shared"


async def test_a_podgroup_and_a_pod_get_the_default(client: TestClient) -> None:
    group = await mutated(client, "/podgroups/mutate", podgroup())
    assert group["spec"]["queue"] == "team-q"
    enrolled = await mutated(client, "/pods/mutate", pod())
    assert enrolled["metadata"]["annotations"][QUEUE_ANNOTATION] == "shared"


async def test_the_namespace_annotation_wins_over_the_policy_default(
    store: MemoryStore, client: TestClient
) -> None:
    namespace = await store.get("v1", "Namespace", "team")
    namespace["metadata"]["annotations"] = {QUEUE_ANNOTATION: "shared"}
    await store.update(namespace)
    for _ in range(200):
        group = await mutated(client, "/podgroups/mutate", podgroup())
        if group["spec"]["queue"] == "shared":
            break
        await asyncio.sleep(0.01)
    assert group["spec"]["queue"] == "shared"
    assert (await mutated(client, "/jobs/mutate", job()))["spec"]["queue"] == "shared"


# --- validation ----------------------------------------------------------------------------------


async def test_a_job_over_the_queues_limit_is_refused_naming_the_alternatives(
    client: TestClient,
) -> None:
    response = await admit(client, "/jobs/validate", job(replicas=6, queue="team-q"))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        'queue policy: queue "team-q" takes at most 4 pods per job; this Job has 6 '
        "(the sum of spec.tasks[*].replicas); "
        'no queue namespace "team" may use takes this Job (it may use: team-q, shared)'
    )
    preemptable = job(replicas=6, queue="team-q")
    preemptable["metadata"]["annotations"] = {"volcano.sh/preemptable": "true"}
    response = await admit(client, "/jobs/validate", preemptable)
    assert response["status"]["message"].endswith(
        'queues that namespace "team" may use and that take this Job: shared'
    )
    response = await admit(client, "/jobs/validate", job(queue="team-q"))
    assert response["allowed"] is True


async def test_volcanos_reasons_and_the_policys_are_joined(client: TestClient) -> None:
    response = await admit(client, "/jobs/validate", job("web", queue="missing"))
    message = response["status"]["message"]
    assert message.startswith(
        'unable to find job queue: queue.scheduling.volcano.sh "missing" not found'
    )
    assert 'queue policy: namespace "web" may not use queue "missing" (spec.queue)' in message


async def test_a_podgroup_in_a_queue_its_namespace_may_not_use_is_refused(
    client: TestClient,
) -> None:
    response = await admit(client, "/podgroups/validate", podgroup("web", queue="team-q"))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        'queue policy: namespace "web" may not use queue "team-q" (spec.queue); '
        'no queue namespace "web" may use takes this PodGroup (it may use: shared)'
    )


async def test_an_enrolled_pod_is_judged(client: TestClient) -> None:
    response = await admit(client, "/pods/validate", pod(annotations={QUEUE_ANNOTATION: "shared"}))
    assert response["allowed"] is False
    assert 'queue "shared" takes only preemptable jobs' in response["status"]["message"]
    ok = pod(annotations={QUEUE_ANNOTATION: "shared", "volcano.sh/preemptable": "true"})
    assert (await admit(client, "/pods/validate", ok))["allowed"] is True


async def test_without_a_policy_nothing_changes(store: MemoryStore) -> None:
    test_client = await serving(store, EMPTY_POLICY)
    try:
        response = await admit(test_client, "/jobs/validate", job(replicas=60, queue="team-q"))
        assert response["allowed"] is True
        assert (await mutated(test_client, "/jobs/mutate", job()))["spec"]["queue"] == "default"
    finally:
        await test_client.close()


async def test_policy_mutation_waits_for_the_namespaces_but_plain_mutation_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before the first listing a pod cannot be given its namespace's queue (the namespace
    annotation may name one): with a policy it is answered 503, without one it is admitted."""
    unreachable = MemoryStore(SystemClock())

    async def fails(*args: object, **kwargs: object) -> None:
        raise ConnectionError("API server unreachable")

    monkeypatch.setattr(unreachable, "list", fails)
    monkeypatch.setattr(server_module, "SYNC_TIMEOUT", 0.01)
    for policy, status in ((POLICY, 503), (EMPTY_POLICY, 200)):
        test_client = await serving(unreachable, policy)
        try:
            response = await test_client.post("/pods/mutate", data=orjson.dumps(review(pod())))
            assert response.status == status, policy
        finally:
            await test_client.close()


# --- reloading -----------------------------------------------------------------------------------


def write(path: Path, text: str, bump: int) -> None:
    """Write ``text`` with a modification time of its own (a change within one clock tick
    would otherwise look like no change)."""
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


def reloads(client: TestClient, outcome: str) -> float:
    registry = client.app[APP_METRICS].registry
    value = registry.get_sample_value(
        "stromboli_webhook_queue_policy_reloads_total", {"outcome": outcome}
    )
    return value or 0.0


def stale(client: TestClient) -> float:
    return client.app[APP_METRICS].registry.get_sample_value("stromboli_webhook_queue_policy_stale")


async def test_a_changed_file_is_enforced_and_a_bad_one_keeps_the_last_good(
    tmp_path: Path, store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "queue-policy.yaml"
    write(path, POLICY_TEXT, 0)
    policy_file = PolicyFile(path, period=3600)  # checked by hand below
    test_client = await serving(store, policy_file)
    try:
        assert (await admit(test_client, "/jobs/validate", job(replicas=6, queue="team-q")))[
            "allowed"
        ] is False
        assert policy_file.check() is False  # unchanged

        write(path, POLICY_TEXT.replace("maxPodsPerJob: 4", "maxPodsPerJob: 8"), 1)
        assert policy_file.check() is True
        assert (await admit(test_client, "/jobs/validate", job(replicas=6, queue="team-q")))[
            "allowed"
        ] is True
        assert (reloads(test_client, "success"), stale(test_client)) == (1.0, 0.0)

        write(path, "namespaces:\n  team: {queues: [team-q, 7]}\n", 2)
        with caplog.at_level(logging.ERROR, logger="stromboli.webhooks.policyfile"):
            assert policy_file.check() is False
            assert policy_file.check() is False  # the same bad version: reported once
        assert [r.getMessage() for r in caplog.records] == [
            "queue policy not reloaded, the version loaded before stays: "
            f"{path}: namespaces.team.queues[1]: must be of string type"
        ]
        assert (reloads(test_client, "failure"), stale(test_client)) == (1.0, 1.0)
        assert (await admit(test_client, "/jobs/validate", job(replicas=6, queue="team-q")))[
            "allowed"
        ] is True  # still the version with 8

        path.unlink()
        assert policy_file.check() is False
        assert reloads(test_client, "failure") == 2.0
        assert policy_file.current().queues["team-q"].max_pods_per_job == 8

        write(path, POLICY_TEXT, 3)
        assert policy_file.check() is True
        assert (reloads(test_client, "success"), stale(test_client)) == (2.0, 0.0)
        assert (await admit(test_client, "/jobs/validate", job(replicas=6, queue="team-q")))[
            "allowed"
        ] is False
    finally:
        await test_client.close()


async def test_the_server_watches_the_file(tmp_path: Path, store: MemoryStore) -> None:
    path = tmp_path / "queue-policy.yaml"
    write(path, POLICY_TEXT, 0)
    policy_file = PolicyFile(path, period=0.01)
    test_client = await serving(store, policy_file)
    try:
        write(path, POLICY_TEXT.replace("defaultQueue: team-q", "defaultQueue: shared"), 1)
        for _ in range(500):
            if policy_file.current().namespaces["team"].default_queue == "shared":
                break
            await asyncio.sleep(0.01)
        assert (await mutated(test_client, "/jobs/mutate", job()))["spec"]["queue"] == "shared"
    finally:
        await test_client.close()


def test_a_bad_file_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "queue-policy.yaml"
    path.write_text("queues: {q: {maxPodsPerJob: many}}\n")
    with pytest.raises(PolicyError):
        PolicyFile(path)
    result = CliRunner().invoke(main, ["webhook-manager", "--queue-policy", str(path)])
    assert result.exit_code == 2
    assert "--queue-policy" in result.output
    assert "queues.q.maxPodsPerJob: must be a whole number" in result.output


def test_services_the_policy_needs_but_not_enabled_are_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "queue-policy.yaml"
    path.write_text(POLICY_TEXT)
    with caplog.at_level(logging.WARNING, logger="stromboli.core.cli.webhook"):
        loaded = _queue_policy(str(path), "/jobs/mutate,/jobs/validate,/pods/validate")
    assert isinstance(loaded, PolicyFile)
    assert [r.getMessage() for r in caplog.records] == [
        "--queue-policy: /podgroups/validate, /podgroups/mutate, /pods/mutate not in "
        "--enabled-admission; the policy is not enforced there"
    ]
    assert _queue_policy(None, "/jobs/mutate") is None
