"""End to end on a real API server: `stromboli scheduler` placing Volcano-style PodGroups on
kwok nodes, as a user runs it (a subprocess with a kubeconfig).

These tests get their own small cluster (four 8-cpu nodes) so that queue shares and gang fits
are exact, independent of what other tests leave behind.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane, build_control_plane

PG = ("scheduling.volcano.sh/v1beta1", "PodGroup")
QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
STROMBOLI = Path(sys.executable).with_name("stromboli")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    run_dir = tmp_path_factory.mktemp("e2e-scheduler")
    cp = ControlPlane(build_control_plane(log_path=run_dir / "build.log"), run_dir=run_dir)
    try:
        cp.start()
        cp.apply_manifests(build_crds())
        cp.add_nodes(4, cpu="8", memory="32Gi", pods=110)
    except Exception as err:
        cp.stop()
        pytest.fail(f"e2e control plane did not start: {err}\n{cp.log_tail(60)}", pytrace=False)
    try:
        yield cp
    finally:
        cp.stop()


class SchedulerProcess:
    """`stromboli scheduler` in a subprocess, logs kept for failures."""

    def __init__(self, cp: ControlPlane, log: Path, *args: str) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [
                str(STROMBOLI),
                "scheduler",
                f"--kubeconfig={cp.kubeconfig_path}",
                "--schedule-period=200ms",
                "--listen-address=",
                "--healthz-address=",
                *args,
            ],
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(30)


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
    # Delete the pods now (not through the namespace, which goes some moments later) so that
    # the next test has the nodes free.
    for pod in (await store.list("v1", "Pod", name)).items:
        await store.delete("v1", "Pod", pod["metadata"]["name"], name)


def pod(name: str, namespace: str, cpu: str, group: str | None, scheduler: str = "volcano") -> dict:
    meta: dict = {"name": name, "namespace": namespace}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def podgroup(name: str, namespace: str, min_member: int, queue: str = "default") -> dict:
    return {
        "apiVersion": PG[0],
        "kind": PG[1],
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, "queue": queue},
    }


async def create_gang(store: KubeStore, namespace: str, name: str, size: int, cpu: str) -> None:
    await store.create(podgroup(name, namespace, size))
    for i in range(size):
        await store.create(pod(f"{name}-{i}", namespace, cpu, name))


async def placements(store: KubeStore, namespace: str) -> dict[str, str]:
    pods = (await store.list("v1", "Pod", namespace)).items
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}


async def eventually(check, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.3)


async def test_gang_is_bound_all_or_nothing(cluster, store, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    scheduler = SchedulerProcess(cluster, tmp_path / "scheduler.log")
    try:
        await create_gang(store, namespace, "fits", 4, "6")  # one pod per 8-cpu node
        await create_gang(store, namespace, "too-big", 4, "3")  # 2 cpu left per node: never

        async def fits_bound() -> bool:
            placed = await placements(store, namespace)
            return all(placed[f"fits-{i}"] for i in range(4))

        await eventually(fits_bound)
        await asyncio.sleep(2)
        placed = await placements(store, namespace)
        assert len({placed[f"fits-{i}"] for i in range(4)}) == 4
        assert not any(placed[f"too-big-{i}"] for i in range(4))
        pg = await store.get(*PG, "too-big", namespace)
        condition = next(c for c in pg["status"]["conditions"] if c["type"] == "Unschedulable")
        assert "4/4 tasks in gang unschedulable" in condition["message"]

        async def running() -> bool:
            fits = await store.get(*PG, "fits", namespace)
            return (fits.get("status") or {}).get("phase") == "Running"

        await eventually(running)
        blocked = await store.get("v1", "Pod", "too-big-0", namespace)
        scheduled = next(c for c in blocked["status"]["conditions"] if c["type"] == "PodScheduled")
        assert scheduled["status"] == "False"
    finally:
        assert scheduler.stop() == 0, (tmp_path / "scheduler.log").read_text()[-3000:]


async def test_pods_of_other_schedulers_are_left_alone(cluster, store, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    scheduler = SchedulerProcess(cluster, tmp_path / "scheduler.log")
    try:
        await store.create(pod("theirs", namespace, "1", None, scheduler="someone-else"))
        await create_gang(store, namespace, "ours", 1, "1")

        async def ours_bound() -> bool:
            return bool((await placements(store, namespace))["ours-0"])

        await eventually(ours_bound)
        await asyncio.sleep(1)
        theirs = await store.get("v1", "Pod", "theirs", namespace)
        assert not theirs["spec"].get("nodeName")
        annotations = theirs["metadata"].get("annotations") or {}
        assert "scheduling.k8s.io/group-name" not in annotations
    finally:
        scheduler.stop()


async def test_queues_share_by_weight(cluster, store, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for name, weight in (("light", 1), ("heavy", 3)):
        await store.create(
            {
                "apiVersion": QUEUE[0],
                "kind": QUEUE[1],
                "metadata": {"name": name},
                "spec": {"weight": weight, "reclaimable": True},
            }
        )
    scheduler = SchedulerProcess(cluster, tmp_path / "scheduler.log")
    try:
        for queue in ("light", "heavy"):
            await store.create(podgroup(f"{queue}-job", namespace, 1, queue))
            for i in range(32):
                await store.create(pod(f"{queue}-job-{i}", namespace, "1", f"{queue}-job"))

        async def settled() -> bool:
            placed = await placements(store, namespace)
            return sum(1 for node in placed.values() if node) >= 32

        await eventually(settled)
        await asyncio.sleep(2)
        placed = await placements(store, namespace)
        counts = {
            q: sum(1 for n, node in placed.items() if n.startswith(q) and node)
            for q in ("light", "heavy")
        }
        assert counts == {"light": 8, "heavy": 24}
    finally:
        scheduler.stop()


async def test_restart_mid_run_loses_nothing(cluster, store, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "scheduler.log"
    scheduler = SchedulerProcess(cluster, log)
    for g in range(8):
        await create_gang(store, namespace, f"g{g}", 4, "500m")
    await asyncio.sleep(0.5)
    scheduler.kill()  # mid-run: some gangs may be bound, others not yet
    for g in range(8, 12):
        await create_gang(store, namespace, f"g{g}", 4, "500m")
    scheduler = SchedulerProcess(cluster, log)
    try:

        async def all_bound() -> bool:
            placed = await placements(store, namespace)
            return len(placed) == 48 and all(placed.values())

        await eventually(all_bound)
        for p in (await store.list("v1", "Pod", namespace)).items:
            for condition in (p.get("status") or {}).get("conditions") or ():
                assert condition.get("reason") != "SchedulerError", condition
    finally:
        scheduler.stop()


class ControllerProcess(SchedulerProcess):
    """`stromboli controller` in a subprocess."""

    def __init__(self, cp: ControlPlane, log: Path) -> None:
        self.log = log
        self.process = subprocess.Popen(
            [
                str(STROMBOLI),
                "controller",
                f"--kubeconfig={cp.kubeconfig_path}",
                "--healthz-address=",
                "--listen-address=",
            ],
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )


def vcjob(name: str, namespace: str, replicas: int, succeed_after: str) -> dict:
    template = {
        "metadata": {"annotations": {"devcluster.stromboli.io/succeed-after": succeed_after}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": replicas,
            "maxRetry": 3,
            "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
        },
    }


async def test_vcjob_runs_to_completion(cluster, store, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    scheduler = SchedulerProcess(cluster, tmp_path / "scheduler.log")
    controller = ControllerProcess(cluster, tmp_path / "controller.log")
    try:
        await store.create(vcjob("train", namespace, 3, "2s"))

        async def completed() -> bool:
            job = await store.get("batch.volcano.sh/v1alpha1", "Job", "train", namespace)
            return ((job.get("status") or {}).get("state") or {}).get("phase") == "Completed"

        await eventually(completed, timeout=90)
        job = await store.get("batch.volcano.sh/v1alpha1", "Job", "train", namespace)
        assert job["status"]["succeeded"] == 3
        placed = await placements(store, namespace)
        assert sorted(placed) == ["train-worker-0", "train-worker-1", "train-worker-2"]
        assert all(placed.values())
        pod = await store.get("v1", "Pod", "train-worker-0", namespace)
        annotations = pod["metadata"]["annotations"]
        assert annotations["scheduling.k8s.io/group-name"].startswith("train-")
        assert annotations["volcano.sh/task-spec"] == "worker"
    finally:
        controller.stop()
        scheduler.stop()


async def test_scheduler_survives_an_api_server_restart(cluster, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "scheduler.log"
    scheduler = SchedulerProcess(cluster, log)
    store = KubeStore(KubeConfig.load(str(cluster.kubeconfig_path)))
    try:
        await create_gang(store, namespace, "before", 2, "500m")

        async def bound(prefix: str) -> bool:
            placed = await placements(store, namespace)
            pods = [node for name, node in placed.items() if name.startswith(prefix)]
            return len(pods) == 2 and all(pods)

        await eventually(lambda: bound("before"))
        await asyncio.to_thread(cluster.restart_apiserver)
        await create_gang(store, namespace, "after", 2, "500m")
        await eventually(lambda: bound("after"), timeout=90)
        assert scheduler.process.poll() is None, log.read_text()[-3000:]
    finally:
        scheduler.stop()
        await store.close()


async def test_plain_pod_is_enrolled_and_scheduled(cluster, store, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    scheduler = SchedulerProcess(cluster, tmp_path / "scheduler.log")
    controller = ControllerProcess(cluster, tmp_path / "controller.log")
    try:
        created = await store.create(pod("plain", namespace, "1", None))

        async def bound() -> bool:
            return bool((await placements(store, namespace))["plain"])

        await eventually(bound)
        group = f"podgroup-{created['metadata']['uid']}"
        pg = await store.get(*PG, group, namespace)
        assert pg["spec"]["minMember"] == 1
        placed = await store.get("v1", "Pod", "plain", namespace)
        assert placed["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
    finally:
        controller.stop()
        scheduler.stop()
