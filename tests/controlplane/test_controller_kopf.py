"""`stromboli controller --driver kopf` on a real API server: kopf owns the watches, our
controllers reconcile. A vcjob runs to Completed (kwok plays the kubelet through the
devcluster's succeed-after annotation), a plain pod is enrolled, an API server restart is
survived, controller metrics are served, and kopf leaves no trace on our objects."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
import subprocess
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane

from .test_e2e_scheduler import (
    PG,
    STROMBOLI,
    SchedulerProcess,
    eventually,
    placements,
    pod,
    vcjob,
)
from .test_e2e_scheduler import cluster as cluster  # the module's own small cluster

JOB = ("batch.volcano.sh/v1alpha1", "Job")
KOPF_MARKS = ("kopf.zalando.org", "kopf.dev")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class KopfController(SchedulerProcess):
    """`stromboli controller --driver kopf` with /metrics on a free local port."""

    def __init__(self, cp: ControlPlane, log: Path) -> None:
        self.log = log
        self.metrics_port = free_port()
        self.process = subprocess.Popen(
            [
                str(STROMBOLI),
                "controller",
                f"--kubeconfig={cp.kubeconfig_path}",
                "--driver=kopf",
                "--healthz-address=",
                f"--listen-address=127.0.0.1:{self.metrics_port}",
                "--v=2",
            ],
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()

    def alive(self) -> None:
        assert self.process.poll() is None, self.log.read_text()[-4000:]


@pytest.fixture(scope="module")
def stack(
    cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KopfController]:
    logs = tmp_path_factory.mktemp("kopf-stack")
    scheduler = SchedulerProcess(cluster, logs / "scheduler.log")
    controller = KopfController(cluster, logs / "controller.log")
    try:
        yield controller
    finally:
        scheduler.stop()
        # kopf takes SIGTERM over; the controller must still stop cleanly on it.
        assert controller.stop() == 0, controller.log.read_text()[-4000:]


@pytest.fixture
async def store(cluster: ControlPlane) -> AsyncIterator[KubeStore]:
    kube = KubeStore(KubeConfig.load(str(cluster.kubeconfig_path)))
    yield kube
    await kube.close()


@pytest.fixture
async def namespace(store: KubeStore, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    name = request.node.name.replace("_", "-")[:50].lower()
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    for kind in (JOB, ("v1", "Pod")):
        for obj in (await store.list(*kind, name)).items:
            # The garbage collector may take a job's pods first.
            with contextlib.suppress(NotFoundError):
                await store.delete(*kind, obj["metadata"]["name"], name)


async def phase(store: KubeStore, name: str, namespace: str) -> str:
    job = await store.get(*JOB, name, namespace)
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def no_kopf_marks(obj: dict) -> None:
    meta = obj["metadata"]
    marked = [
        key
        for key in [*(meta.get("annotations") or {}), *(meta.get("finalizers") or [])]
        if any(mark in key for mark in KOPF_MARKS)
    ]
    assert not marked, f"{meta['name']}: kopf wrote {marked}"


async def test_vcjob_completes_and_kopf_writes_nothing_on_it(stack, store, namespace) -> None:  # type: ignore[no-untyped-def]
    await store.create(vcjob("train", namespace, 3, "2s"))

    async def completed() -> bool:
        return await phase(store, "train", namespace) == "Completed"

    await eventually(completed, timeout=90)
    job = await store.get(*JOB, "train", namespace)
    assert job["status"]["succeeded"] == 3
    placed = await placements(store, namespace)
    assert sorted(placed) == ["train-worker-0", "train-worker-1", "train-worker-2"]
    assert all(placed.values())
    no_kopf_marks(job)
    for obj in (await store.list("v1", "Pod", namespace)).items:
        no_kopf_marks(obj)
    for obj in (await store.list(*PG, namespace)).items:
        no_kopf_marks(obj)
    # kopf posts no Kubernetes Events of its own (handler successes and the like).
    events = (await store.list("v1", "Event", namespace)).items
    assert not [e for e in events if "kopf" in str((e.get("source") or {}).get("component"))]
    text = await asyncio.to_thread(stack.metrics)
    series = rf'^volcano_job_completed_phase_count\w*\{{[^}}]*job_name="{namespace}/train"'
    assert re.search(series, text, re.M), text
    assert "volcano_controller_job_to_pod_creation_latency_milliseconds_count" in text
    stack.alive()


async def test_plain_pod_is_enrolled(stack, store, namespace) -> None:  # type: ignore[no-untyped-def]
    created = await store.create(pod("plain", namespace, "1", None))

    async def bound() -> bool:
        return bool((await placements(store, namespace))["plain"])

    await eventually(bound)
    group = f"podgroup-{created['metadata']['uid']}"
    pg = await store.get(*PG, group, namespace)
    assert pg["spec"]["minMember"] == 1
    placed = await store.get("v1", "Pod", "plain", namespace)
    assert placed["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
    no_kopf_marks(placed)
    stack.alive()


async def test_an_api_server_restart_is_survived(cluster, stack, store, namespace) -> None:  # type: ignore[no-untyped-def]
    await store.create(vcjob("before", namespace, 2, "600s"))

    async def running() -> bool:
        return await phase(store, "before", namespace) == "Running"

    await eventually(running, timeout=90)
    await asyncio.to_thread(cluster.restart_apiserver)
    # The watches broke and resume (or relist); the controller notices both changes below.
    await store.delete("v1", "Pod", "before-worker-0", namespace)
    await store.create(vcjob("after", namespace, 2, "2s"))

    async def after_completed() -> bool:
        return await phase(store, "after", namespace) == "Completed"

    await eventually(after_completed, timeout=120)

    async def recreated() -> bool:
        # The deleted pod of the running job is replaced (its restart policy), by a new uid.
        pods = {p["metadata"]["name"] for p in (await store.list("v1", "Pod", namespace)).items}
        return "before-worker-0" in pods

    await eventually(recreated, timeout=60)
    stack.alive()


async def test_sigterm_stops_the_controller_without_a_traceback(  # type: ignore[no-untyped-def]
    stack, cluster, store, namespace, tmp_path
) -> None:
    """SIGTERM (kubelet's stop) while kopf and our watches stream and a vcjob is reconciled
    (a second controller beside the stack's, as during a rolling update): exit 0, and stderr
    says nothing of kopf's insides (no traceback)."""
    stderr = tmp_path / "controller.stderr"
    process = subprocess.Popen(
        [
            str(STROMBOLI),
            "controller",
            f"--kubeconfig={cluster.kubeconfig_path}",
            "--driver=kopf",
            "--healthz-address=",
            f"--listen-address=127.0.0.1:{free_port()}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr.open("wb"),
    )
    try:
        await store.create(vcjob("stopping", namespace, 1, "600s"))

        async def streaming() -> bool:
            # Logged once the frameworks' discovery is done, just before kopf starts.
            return "framework adapters on" in stderr.read_text()

        await eventually(streaming)
        await asyncio.sleep(5)  # kopf's own watches (Queues, Commands, ...) are streaming
        # A burst, so that the signal finds the vcjob controller's workers mid-write.
        await asyncio.gather(
            *(store.create(vcjob(f"burst-{n}", namespace, 1, "600s")) for n in range(150))
        )

        async def some_podgroups() -> bool:
            return len((await store.list(*PG, namespace)).items) >= 10

        await eventually(some_podgroups)
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = stderr.read_text()
    assert code == 0, text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    assert "athrow" not in text, text[-4000:]
