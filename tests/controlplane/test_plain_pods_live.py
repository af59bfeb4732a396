"""Plain pods on a real API server in both ``--plain-pod-groups`` modes: ``stromboli scheduler``
and ``stromboli controller`` as subprocesses, the API server's own request counters read
before and after.

``object`` (the default, Volcano's way): the controller creates ``podgroup-<uid>`` and patches
the pod. ``memory``: no PodGroup is created and the pod is not patched; the pod is bound and its
``Scheduled`` event written, ``stromboli explain`` still reads it, and a restarted scheduler
binds nothing twice.

The module runs its own small control plane (two 4-cpu nodes): it judges request counts of the
whole cluster, which other tests' work would sway.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from tests.controlplane.conftest import own_control_plane

PG = ("scheduling.volcano.sh/v1beta1", "PodGroup")
GROUP = "scheduling.k8s.io/group-name"
STROMBOLI = Path(sys.executable).with_name("stromboli")
_REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")


def _nodes(cp: ControlPlane) -> None:
    cp.apply_manifests(build_crds())
    cp.add_nodes(2, cpu="4", memory="16Gi", pods=110)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from own_control_plane(tmp_path_factory, nodes=0, prepare=_nodes)


@pytest.fixture
async def store(cluster: ControlPlane) -> AsyncIterator[KubeStore]:
    kube = KubeStore(KubeConfig.load(str(cluster.kubeconfig_path)))
    yield kube
    await kube.close()


@pytest.fixture
async def namespace(store: KubeStore, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    name = request.node.name.replace("_", "-").replace("[", "-").replace("]", "")[:50].lower()
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    for pod in (await store.list("v1", "Pod", name)).items:
        await store.delete("v1", "Pod", pod["metadata"]["name"], name)
    # Not left to the garbage collector: the next test's scheduler would write their status.
    for group in (await store.list(*PG, name)).items:
        with contextlib.suppress(NotFoundError):  # the garbage collector may be first
            await store.delete(*PG, group["metadata"]["name"], name)


class Processes:
    """``stromboli scheduler`` and ``stromboli controller`` in one mode, logs kept."""

    def __init__(self, cp: ControlPlane, logs: Path, mode: str) -> None:
        self.cp, self.logs, self.mode = cp, logs, mode
        self.running: dict[str, subprocess.Popen] = {}

    def start(self, *which: str) -> None:
        for name in which or ("scheduler", "controller"):
            extra = (
                ["--schedule-period=200ms"]
                if name == "scheduler"
                else ["--driver=native", "--no-frameworks"]
            )
            self.running[name] = subprocess.Popen(
                [
                    str(STROMBOLI),
                    name,
                    f"--kubeconfig={self.cp.kubeconfig_path}",
                    "--listen-address=",
                    "--healthz-address=",
                    f"--plain-pod-groups={self.mode}",
                    *extra,
                ],
                stdout=(self.logs / f"{name}.log").open("ab"),
                stderr=subprocess.STDOUT,
            )

    def stop(self, *which: str) -> None:
        for name in which or tuple(self.running):
            process = self.running.pop(name)
            process.terminate()
            assert process.wait(30) == 0, self.log(name)

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text()[-3000:]


def requests(cp: ControlPlane) -> Counter[tuple[str, str]]:
    """``apiserver_request_total`` by (verb, resource[/subresource]), watches left out."""
    status, body = cp.client.request_raw("GET", "/metrics", accept="text/plain")
    assert status == 200
    counts: Counter[tuple[str, str]] = Counter()
    for line in body.decode().splitlines():
        match = _REQUEST.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            resource = "/".join(filter(None, (labels.get("resource"), labels.get("subresource"))))
            if labels.get("verb") != "WATCH":
                counts[(labels.get("verb", ""), resource)] += int(float(match.group(2)))
    return counts


def plain_pod(name: str, namespace: str, cpu: str = "1") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


async def eventually(check, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.3)


async def bound(store: KubeStore, namespace: str) -> dict[str, str]:
    pods = (await store.list("v1", "Pod", namespace)).items
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}


def writes_to_podgroups(counts: Counter[tuple[str, str]]) -> int:
    return sum(
        n
        for (verb, resource), n in counts.items()
        if resource.startswith("podgroups") and verb in ("POST", "PUT", "PATCH")
    )


@pytest.mark.parametrize("mode", ["object", "memory"])
async def test_plain_pods_are_bound_in_both_modes(
    cluster: ControlPlane, store: KubeStore, namespace: str, tmp_path: Path, mode: str
) -> None:
    count = 6
    processes = Processes(cluster, tmp_path, mode)
    processes.start()
    try:

        async def no_podgroups() -> bool:
            return not (await store.list(*PG)).items

        await eventually(no_podgroups)  # nothing of another test's left to write to
        await asyncio.sleep(3)  # both have listed the cluster
        before = requests(cluster)
        for i in range(count):
            await store.create(plain_pod(f"p{i}", namespace))

        async def all_bound() -> bool:
            return all((await bound(store, namespace)).values())

        await eventually(all_bound)
        await asyncio.sleep(2)  # the writes that follow a binding (events, statuses) land
        spent = requests(cluster) - before
        groups = (await store.list(*PG, namespace)).items
        pods = (await store.list("v1", "Pod", namespace)).items
        assert spent[("POST", "pods/binding")] == count
        if mode == "object":
            assert len(groups) == count  # Volcano's one-pod PodGroups, one per pod
            # A pod seen again before its patch lands is tried again (answered 409).
            assert spent[("POST", "podgroups")] >= count
            assert spent[("PATCH", "pods")] >= count
            assert all(p["metadata"]["annotations"][GROUP].startswith("podgroup-") for p in pods)
        else:
            assert groups == []
            assert writes_to_podgroups(spent) == 0
            assert spent[("PATCH", "pods")] == 0  # no annotation patch
            assert not any(GROUP in (p["metadata"].get("annotations") or {}) for p in pods)

        async def every_pod_told() -> bool:
            events = (await store.list("v1", "Event", namespace)).items
            told = {
                e["involvedObject"]["name"]
                for e in events
                if e.get("reason") == "Scheduled" and e["involvedObject"]["kind"] == "Pod"
            }
            return told == {f"p{i}" for i in range(count)}

        await eventually(every_pod_told)  # the binding's event, one per pod
        events = (await store.list("v1", "Event", namespace)).items
        scheduled = [e for e in events if e.get("reason") == "Scheduled"]
        assert {e["involvedObject"]["kind"] for e in scheduled} == (
            {"Pod", "PodGroup"} if mode == "object" else {"Pod"}
        )
        per_pod = sum(spent.values()) / count
        print(f"{mode}: {per_pod:.2f} requests per pod: {dict(spent.most_common(8))}")
        print("events:", Counter((e["reason"], e["involvedObject"]["kind"]) for e in events))
    finally:
        processes.stop()


async def test_memory_mode_explains_and_survives_a_restart(
    cluster: ControlPlane, store: KubeStore, namespace: str, tmp_path: Path
) -> None:
    processes = Processes(cluster, tmp_path, "memory")
    processes.start()
    try:
        for i in range(3):
            await store.create(plain_pod(f"fit{i}", namespace, cpu="2"))
        await store.create(plain_pod("huge", namespace, cpu="64"))

        async def fits_bound() -> bool:
            placed = await bound(store, namespace)
            return all(placed[f"fit{i}"] for i in range(3))

        await eventually(fits_bound)

        async def huge_said_why() -> bool:
            pod = await store.get("v1", "Pod", "huge", namespace)
            conditions = (pod.get("status") or {}).get("conditions") or ()
            return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

        await eventually(huge_said_why)
        explained = subprocess.run(
            [
                str(STROMBOLI),
                "explain",
                "pod/huge",
                "-n",
                namespace,
                f"--kubeconfig={cluster.kubeconfig_path}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert explained.returncode == 0, explained.stderr
        assert "(in memory)" in explained.stdout
        assert "Insufficient cpu" in explained.stdout
        assert "Last reason: Unschedulable" in explained.stdout

        placed = await bound(store, namespace)
        processes.stop("scheduler")
        before = requests(cluster)
        processes.start("scheduler")
        await asyncio.sleep(5)  # many cycles over the rebuilt cache
        assert requests(cluster)[("POST", "pods/binding")] == before[("POST", "pods/binding")]
        assert await bound(store, namespace) == placed
        await store.create(plain_pod("late", namespace, cpu="1"))

        async def late_bound() -> bool:
            return bool((await bound(store, namespace))["late"])

        await eventually(late_bound)
        assert (await store.list(*PG, namespace)).items == []
    finally:
        processes.stop()
