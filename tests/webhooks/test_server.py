"""The admission server in process: AdmissionReview round trips for every path, with the
cluster state the rules read held in a memory store."""

from __future__ import annotations

import asyncio
import base64
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.cli import main
from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.patch import json_patch
from stromboli.webhooks.jsonpatch import json_diff
from stromboli.webhooks.registration import ClientTarget, webhook_configuration
from stromboli.webhooks.server import WebhookOptions, WebhookServer, admission_app
from stromboli.webhooks.services import SERVICES, AdmissionOptions, enabled_services
from stromboli.webhooks.tls import load_files, self_signed, service_hosts

SCHED = "scheduling.volcano.sh/v1beta1"
BATCH = "batch.volcano.sh/v1alpha1"
GVK = {
    "Job": ("batch.volcano.sh", "v1alpha1", "jobs"),
    "Queue": ("scheduling.volcano.sh", "v1beta1", "queues"),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "Pod": ("", "v1", "pods"),
}


async def make_queue(store: MemoryStore, name: str, state: str = "Open", **spec: Any) -> None:
    created = await store.create(
        {"apiVersion": SCHED, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    )
    created["status"] = {"state": state}
    await store.update_status(created)


@pytest.fixture
async def store() -> MemoryStore:
    memory = MemoryStore(SystemClock())
    await make_queue(memory, "root")
    await make_queue(memory, "default", weight=1)
    await make_queue(memory, "closed", state="Closed", weight=1)
    await memory.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "team",
                "annotations": {"scheduling.volcano.sh/queue-name": "team-q"},
            },
        }
    )
    return memory


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[TestClient]:
    app = admission_app(list(SERVICES.values()), store, AdmissionOptions())
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


def review(obj: dict | None, operation: str = "CREATE", old: dict | None = None, **extra) -> dict:
    source = obj or old or {}
    group, version, resource = GVK[source["kind"]]
    meta = source.get("metadata") or {}
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": source["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": operation,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "object": obj,
        "oldObject": old,
    } | extra
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


async def admit(client: TestClient, path: str, body: dict) -> dict:
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == body["request"]["uid"]
    return answer["response"]


async def mutated(client: TestClient, path: str, obj: dict) -> dict:
    response = await admit(client, path, review(obj))
    assert response["allowed"] is True
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    return json_patch(obj, orjson.loads(base64.b64decode(response["patch"])))


def job(name: str = "j", tasks: list[dict] | None = None, **spec: Any) -> dict:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": BATCH,
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "tasks": tasks
            if tasks is not None
            else [{"name": "worker", "replicas": 2, "template": template}],
            **spec,
        },
    }


def queue(name: str = "q", **spec: Any) -> dict:
    return {"apiVersion": SCHED, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


# --- mutation --------------------------------------------------------------------------------


async def test_job_mutation_fills_volcano_defaults(client: TestClient) -> None:
    out = await mutated(client, "/jobs/mutate", job(plugins={"mpi": []}))
    spec = out["spec"]
    assert spec["queue"] == "default"
    assert spec["schedulerName"] == "volcano"
    assert spec["maxRetry"] == 3
    assert spec["minAvailable"] == 2
    assert spec["tasks"][0]["minAvailable"] == 2
    assert spec["tasks"][0]["maxRetry"] == 3
    assert spec["plugins"] == {"mpi": [], "svc": [], "ssh": []}


async def test_job_mutation_keeps_given_values(client: TestClient) -> None:
    given = job(queue="q1", schedulerName="other", maxRetry=7, minAvailable=1)
    out = await mutated(client, "/jobs/mutate", given)
    assert (out["spec"]["queue"], out["spec"]["schedulerName"]) == ("q1", "other")
    assert (out["spec"]["maxRetry"], out["spec"]["minAvailable"]) == (7, 1)


async def test_queue_mutation_defaults_weight_and_reclaimable(client: TestClient) -> None:
    out = await mutated(client, "/queues/mutate", queue())
    assert out["spec"] == {"weight": 1, "reclaimable": True}
    kept = await mutated(client, "/queues/mutate", queue(weight=4, reclaimable=False))
    assert kept["spec"] == {"weight": 4, "reclaimable": False}


async def test_podgroup_mutation_takes_the_namespace_queue(client: TestClient) -> None:
    pg = {
        "apiVersion": SCHED,
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "default"},
    }
    assert (await mutated(client, "/podgroups/mutate", pg))["spec"]["queue"] == "team-q"
    elsewhere = pg | {"metadata": {"name": "pg", "namespace": "other"}}
    assert (await mutated(client, "/podgroups/mutate", elsewhere))["spec"]["queue"] == "default"


async def test_pod_mutation_without_resource_groups_changes_nothing(client: TestClient) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    response = await admit(client, "/pods/mutate", review(pod))
    assert response == {"uid": response["uid"], "allowed": True}


# --- validation ------------------------------------------------------------------------------


async def test_valid_job_is_allowed(client: TestClient) -> None:
    defaulted = await mutated(client, "/jobs/mutate", job())
    response = await admit(client, "/jobs/validate", review(defaulted))
    assert response["allowed"] is True


async def test_duplicate_task_names_are_refused(client: TestClient) -> None:
    task = {"name": "a", "replicas": 1, "template": {"spec": {"containers": []}}}
    response = await admit(client, "/jobs/validate", review(job(tasks=[task, task])))
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert "duplicated task name a" in response["status"]["message"]


async def test_job_to_a_closed_or_missing_queue_is_refused(client: TestClient) -> None:
    response = await admit(client, "/jobs/validate", review(job(queue="closed")))
    assert response["status"]["message"].endswith(
        "can only submit job to queue with state `Open`, queue `closed` status is `Closed`"
    )
    response = await admit(client, "/jobs/validate", review(job(queue="nope")))
    assert (
        'unable to find job queue: queue.scheduling.volcano.sh "nope" not found'
        in response["status"]["message"]
    )


async def test_job_update_may_not_add_tasks(client: TestClient) -> None:
    old = await mutated(client, "/jobs/mutate", job())
    new = orjson.loads(orjson.dumps(old))
    new["spec"]["tasks"].append(dict(new["spec"]["tasks"][0], name="extra"))
    response = await admit(client, "/jobs/validate", review(new, "UPDATE", old=old))
    assert response["status"]["message"] == "job updates may not add or remove tasks"
    same = await admit(client, "/jobs/validate", review(old, "UPDATE", old=old))
    assert same["allowed"] is True


async def test_queue_capability_below_deserved_is_refused(client: TestClient) -> None:
    bad = queue(weight=1, capability={"cpu": "1"}, deserved={"cpu": "2"})
    response = await admit(client, "/queues/validate", review(bad))
    assert response["allowed"] is False
    assert "deserved[cpu]=2 must be <= capability[cpu]=1" in response["status"]["message"]


async def test_builtin_queues_cannot_be_deleted(client: TestClient) -> None:
    body = review(None, "DELETE", old=queue("default"))
    response = await admit(client, "/queues/validate", body)
    assert response["status"]["message"] == "`default` queue can not be deleted"
    allowed = await admit(client, "/queues/validate", review(None, "DELETE", old=queue("closed")))
    assert allowed["allowed"] is True


async def test_podgroup_in_closed_queue_is_refused(client: TestClient) -> None:
    pg = {
        "apiVersion": SCHED,
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team"},
        "spec": {"minMember": 1, "queue": "closed"},
    }
    response = await admit(client, "/podgroups/validate", review(pg))
    assert response["status"]["message"] == (
        "can only submit PodGroup to queue with state `Open`, queue `closed` status is `Closed`."
    )
    pg["spec"]["queue"] = "default"
    assert (await admit(client, "/podgroups/validate", review(pg)))["allowed"] is True


async def test_pod_disruption_budget_annotations_are_checked(client: TestClient) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"volcano.sh/jdb-min-available": "0"}},
        "spec": {"schedulerName": "volcano"},
    }
    response = await admit(client, "/pods/validate", review(pod))
    assert "it must be a positive integer" in response["status"]["message"]
    pod["spec"]["schedulerName"] = "default-scheduler"
    assert (await admit(client, "/pods/validate", review(pod)))["allowed"] is True


# --- bad requests ----------------------------------------------------------------------------


async def test_bad_bodies_get_a_clear_400(client: TestClient) -> None:
    for body, reason in (
        (b"not json", "not JSON"),
        (b'{"kind": "Pod"}', "not an AdmissionReview"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', "no request"),
        (
            b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}',
            "no uid",
        ),
    ):
        response = await client.post("/jobs/validate", data=body)
        assert response.status == 400
        assert reason in (await response.json())["error"]


async def test_wrong_kind_or_missing_object_is_refused_not_crashed(client: TestClient) -> None:
    response = await admit(client, "/jobs/validate", review(queue()))
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "/jobs/validate admits batch.volcano.sh Job objects, got scheduling.volcano.sh/v1beta1 "
        "Queue"
    )
    body = review(None, "CREATE", old=job())
    response = await admit(client, "/jobs/mutate", body)
    assert response["status"]["message"] == "a CREATE of Job must carry the object"


async def test_queues_are_read_from_the_watch_not_per_request(
    client: TestClient, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once listed, queues come from the watch: a store that can no longer list does not
    change the answers, and a queue created later is seen."""

    async def unreachable(*args: object, **kwargs: object) -> None:
        raise ConnectionError("API server unreachable")

    monkeypatch.setattr(store, "list", unreachable)
    response = await admit(client, "/jobs/validate", review(job()))
    assert response["allowed"] is True
    await make_queue(store, "late", weight=1)
    for _ in range(200):
        response = await admit(client, "/jobs/validate", review(job(queue="late")))
        if response["allowed"]:
            break
        await asyncio.sleep(0.01)
    assert response["allowed"] is True


async def test_operations_a_service_does_not_admit_pass(client: TestClient) -> None:
    response = await admit(client, "/jobs/mutate", review(job(), "UPDATE", old=job()))
    assert response == {"uid": response["uid"], "allowed": True}


# --- pieces ----------------------------------------------------------------------------------


def test_json_diff_touches_only_what_changed() -> None:
    old = {"spec": {"a": 1, "tasks": [{"n": "x"}], "gone": True, "k/e~y": 1}}
    new = {"spec": {"a": 2, "tasks": [{"n": "x", "m": 3}], "b": [], "k/e~y": 1}}
    ops = json_diff(old, new)
    assert ops == [
        {"op": "remove", "path": "/spec/gone"},
        {"op": "replace", "path": "/spec/a", "value": 2},
        {"op": "add", "path": "/spec/tasks/0/m", "value": 3},
        {"op": "add", "path": "/spec/b", "value": []},
    ]
    assert json_patch(old, ops) == new
    assert json_diff(new, new) == []
    assert json_diff({"x": 1}, {"x": True}) == [{"op": "replace", "path": "/x", "value": True}]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["", "a", "~/"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab/~"), inner),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(old=JSON, new=JSON, keep=st.booleans())
def test_json_diff_patches_old_into_new_sharing_or_not(old: Any, new: Any, keep: bool) -> None:
    """A rule returns a new object that shares the subtrees it left alone (``keep``): the
    diff skips a shared subtree without walking it and still patches ``old`` into ``new``."""
    if keep and isinstance(new, dict):
        new = {**new, "shared": old}  # the very object, as a shallow-copying rule passes it on
        old = {"shared": old}
    assert json_patch(old, json_diff(old, new)) == new
    assert json_diff(old, old) == []


def test_enabled_admission_names_known_paths() -> None:
    assert [s.path for s in enabled_services(" /queues/mutate,,/jobs/validate ")] == [
        "/queues/mutate",
        "/jobs/validate",
    ]
    with pytest.raises(ValueError, match="'/nodes/validate' is not an admission"):
        enabled_services("/jobs/mutate,/nodes/validate")
    assert SERVICES["/jobs/mutate"].configuration_name == "volcano-admission-service-jobs-mutate"


async def test_server_speaks_https_with_its_generated_ca(store: MemoryStore) -> None:
    """The whole server: TLS with a self-signed CA that verifies 127.0.0.1."""
    certificate = self_signed(["127.0.0.1"])
    options = WebhookOptions(
        listen_address="127.0.0.1",
        port=0,
        enabled_admission="/queues/mutate",
        enable_healthz=True,
        healthz_address="127.0.0.1:0",
    )
    server = WebhookServer(store, options, certificate)
    await server.start()
    try:
        trust = ssl.create_default_context(cadata=certificate.ca_pem.decode())
        async with aiohttp.ClientSession() as http:
            url = f"https://127.0.0.1:{server.port}/queues/mutate"
            async with http.post(url, data=orjson.dumps(review(queue())), ssl=trust) as answer:
                response = (await answer.json())["response"]
            async with http.post(url.replace("queues", "jobs"), data=b"{}", ssl=trust) as answer:
                assert answer.status == 404  # not enabled
            assert server.health is not None
            async with http.get(f"http://127.0.0.1:{server.health.port}/healthz") as answer:
                assert (answer.status, await answer.text()) == (200, "ok")
        assert response["allowed"] is True
        assert response["patchType"] == "JSONPatch"
    finally:
        await server.close()
    assert server.registered == []  # no URL or Service given: configurations left alone


def test_configuration_for_a_service_in_the_cluster() -> None:
    target = ClientTarget(namespace="volcano-system", service_name="volcano-admission-service")
    config = webhook_configuration(SERVICES["/queues/validate"], target, b"CA")
    assert config["kind"] == "ValidatingWebhookConfiguration"
    assert config["metadata"]["name"] == "volcano-admission-service-queues-validate"
    (webhook,) = config["webhooks"]
    assert webhook["name"] == "validatequeue.volcano.sh"
    assert webhook["clientConfig"] == {
        "caBundle": base64.b64encode(b"CA").decode(),
        "service": {
            "namespace": "volcano-system",
            "name": "volcano-admission-service",
            "path": "/queues/validate",
            "port": 443,
        },
    }
    assert webhook["rules"] == [
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "apiVersions": ["v1beta1"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["queues"],
            "scope": "*",
        }
    ]
    excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
    assert excluded == ["volcano-system", "kube-system"]
    url = ClientTarget(url="https://10.0.0.5:8443/").client_config("/jobs/mutate", b"CA")
    assert url["url"] == "https://10.0.0.5:8443/jobs/mutate"


def test_certificate_files_are_loaded(tmp_path: Path) -> None:
    generated = self_signed(service_hosts("svc", "ns"))
    (tmp_path / "tls.crt").write_bytes(generated.cert_pem)
    (tmp_path / "tls.key").write_bytes(generated.key_pem)
    (tmp_path / "ca.crt").write_bytes(generated.ca_pem)
    loaded = load_files(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), None)
    assert loaded.ca_pem == generated.cert_pem  # no CA file: the certificate stands in
    loaded = load_files(
        str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), str(tmp_path / "ca.crt")
    )
    assert loaded == generated
    assert loaded.ssl_context().minimum_version == ssl.TLSVersion.TLSv1_2
    assert service_hosts("svc", "ns")[:4] == [
        "svc",
        "svc.ns",
        "svc.ns.svc",
        "svc.ns.svc.cluster.local",
    ]


def test_cli_refuses_bad_flags_before_serving(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["webhook-manager", "--enabled-admission", "/jobs/mutate,/x"])
    assert result.exit_code == 2
    assert "'/x' is not an admission this server serves" in result.output
    (tmp_path / "tls.crt").write_text("x")
    result = runner.invoke(main, ["webhook-manager", "--tls-cert-file", str(tmp_path / "tls.crt")])
    assert result.exit_code == 2
    assert "--tls-cert-file and --tls-private-key-file go together" in result.output


def test_pod_webhooks_are_scoped_and_exempt_in_every_mode() -> None:
    for target in (
        ClientTarget(namespace="ops", service_name="svc"),
        ClientTarget(url="https://127.0.0.1:1", exempt_namespace="volcano-system"),
    ):
        config = webhook_configuration(SERVICES["/pods/validate"], target, b"CA")
        ours, enrolled = config["webhooks"]
        assert (ours["name"], enrolled["name"]) == (
            "validatepod.volcano.sh",
            "enrolled.validatepod.volcano.sh",
        )
        assert {ours["failurePolicy"], enrolled["failurePolicy"]} == {"Ignore"}
        for hook in (ours, enrolled):
            exempt = hook["namespaceSelector"]["matchExpressions"][0]
            assert exempt["operator"] == "NotIn"
            assert "kube-system" in exempt["values"]
            assert (target.namespace or "volcano-system") in exempt["values"]
        enrol = [e for e in enrolled["namespaceSelector"]["matchExpressions"][1:]]
        assert enrol == [{"key": "stromboli.dev/enroll", "operator": "In", "values": ["true"]}]
        assert ours["namespaceSelector"]["matchExpressions"][1]["operator"] == "NotIn"
        assert ours["matchConditions"][0]["expression"] == (
            "has(object.spec.schedulerName) && object.spec.schedulerName in ['volcano']"
        )
    strict = ClientTarget(namespace="ops", service_name="svc", pods_failure_policy="Fail")
    hooks = webhook_configuration(SERVICES["/pods/mutate"], strict, b"CA")["webhooks"]
    assert [h["failurePolicy"] for h in hooks] == ["Fail", "Fail"]
    (job_hook,) = webhook_configuration(SERVICES["/jobs/validate"], strict, b"CA")["webhooks"]
    assert job_hook["failurePolicy"] == "Fail"
    with pytest.raises(ValueError, match="'Sometimes' is not one of Ignore, Fail"):
        ClientTarget(pods_failure_policy="Sometimes")


async def test_replicas_share_the_certificate_stored_in_the_secret() -> None:
    from stromboli.webhooks.tls import from_secret, shared_certificate

    memory = MemoryStore(SystemClock())
    first = await shared_certificate(memory, "volcano-system", "volcano-admission-secret", ["h"])
    second = await shared_certificate(memory, "volcano-system", "volcano-admission-secret", ["h"])
    assert first == second
    secret = await memory.get("v1", "Secret", "volcano-admission-secret", "volcano-system")
    assert secret["type"] == "kubernetes.io/tls"
    del secret["data"]["ca.crt"]
    with pytest.raises(ValueError, match=r"volcano-system/volcano-admission-secret: data\.ca\.crt"):
        from_secret(secret)
