"""The bound on the pods one vcjob may ask for: refused at create and update by the webhook
rules, naming ``spec.tasks[i].replicas`` and the limit; also through the admission server with
a limit of its own (``AdmissionOptions.max_job_replicas``)."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.admission.job import validate_job_create, validate_job_update
from stromboli.core.admission.jobsize import MAX_JOB_REPLICAS, oversize
from stromboli.core.admission.mutate import mutate_job
from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.webhooks.server import admission_app
from stromboli.webhooks.services import SERVICES, AdmissionOptions

QUEUES = {"default": {"metadata": {"name": "default"}, "status": {"state": "Open"}}}


def task(name: str, replicas: int) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "minAvailable": 1,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                ],
            }
        },
    }


def job(*tasks: dict[str, Any]) -> dict[str, Any]:
    return mutate_job(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {"minAvailable": 1, "tasks": list(tasks)},
        }
    )


def test_one_task_of_two_billion_pods_is_refused() -> None:
    errors = validate_job_create(job(task("worker", 2**31 - 1)), QUEUES)
    assert errors == [
        "spec.tasks[0].replicas: Invalid value: 2147483647: the job's tasks ask for 2147483647 "
        f"pods in all (up to this task), more than the {MAX_JOB_REPLICAS} one job may have "
        "(webhook-manager flag --max-job-replicas)"
    ]


def test_tasks_summing_past_the_limit_name_the_task_that_crosses_it() -> None:
    errors = validate_job_create(job(task("a", 30_000), task("b", 30_000)), QUEUES)
    assert len(errors) == 1
    assert errors[0].startswith("spec.tasks[1].replicas: Invalid value: 30000: ")
    assert "60000 pods in all" in errors[0]


def test_a_job_at_the_limit_is_admitted() -> None:
    assert validate_job_create(job(task("a", MAX_JOB_REPLICAS)), QUEUES) == []


def test_the_limit_is_a_parameter() -> None:
    assert validate_job_create(job(task("a", 11)), QUEUES, max_replicas=10) != []
    assert validate_job_create(job(task("a", 10)), QUEUES, max_replicas=10) == []


def test_scaling_a_job_past_the_limit_is_refused() -> None:
    old = job(task("a", 10))
    new = job(task("a", MAX_JOB_REPLICAS + 1))
    errors = validate_job_update(old, new)
    assert len(errors) == 1
    assert errors[0].startswith(f"spec.tasks[0].replicas: Invalid value: {MAX_JOB_REPLICAS + 1}")
    assert validate_job_update(old, job(task("a", 20))) == []


@given(st.lists(st.integers(min_value=0, max_value=2**31 - 1), max_size=8))
def test_oversize_names_the_first_task_whose_running_total_passes(replicas: list[int]) -> None:
    found = oversize(replicas, 1000)
    totals = [sum(replicas[: i + 1]) for i in range(len(replicas))]
    over = [i for i, total in enumerate(totals) if total > 1000]
    if not over:
        assert found is None
        return
    assert found is not None
    assert found.index == over[0]
    assert found.total == totals[over[0]]
    assert found.field == f"spec.tasks[{over[0]}].replicas"


async def test_the_admission_server_refuses_past_its_own_limit() -> None:
    store = MemoryStore(SystemClock())
    created = await store.create(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        }
    )
    created["status"] = {"state": "Open"}
    await store.update_status(created)
    app = admission_app(list(SERVICES.values()), store, AdmissionOptions(max_job_replicas=5))
    obj = job(task("worker", 6))
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
            "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"},
            "operation": "CREATE",
            "name": "big",
            "namespace": "default",
            "object": obj,
        },
    }
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/jobs/validate", data=orjson.dumps(body))
        answer = (await response.json())["response"]
    assert answer["allowed"] is False
    message = answer["status"]["message"]
    assert "spec.tasks[0].replicas: Invalid value: 6" in message
    assert "more than the 5 one job may have" in message


def test_the_webhook_flag_defaults_to_the_limit() -> None:
    from stromboli.core.cli import webhook

    assert webhook.MAX_JOB_REPLICAS == MAX_JOB_REPLICAS
