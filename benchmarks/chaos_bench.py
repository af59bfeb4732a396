"""Chaos on the test control plane: kills in the middle of the work, and what they cost.

Starts etcd, kube-apiserver and kwok with fake nodes, runs ``stromboli scheduler`` and
``stromboli controller`` as subprocesses, and then:

1. ``--kills`` times: creates a gang (PodGroup + pods) and SIGKILLs the scheduler as soon as a
   watch shows the gang's first binding (bindings of one gang are in flight together), then
   starts a new scheduler at once; the gang is half-bound from its first binding to its last;
2. restarts kube-apiserver (SIGKILL) right after creating one more gang;
3. creates a vcjob and SIGKILLs the controller as soon as its first pod exists, then starts a
   new one;
4. with ``--standby`` (or ``standby=True``): two schedulers with leader election; the one that
   holds the Lease is SIGKILLed mid-gang-bind, and the standby must wait for the Lease to
   expire before it finishes the gang.

A watch on the namespace's pods records every binding. Printed: double binds (a pod whose
``nodeName`` changed once set), lost pods (deleted, or missing at the end), half gangs left at
the end, and how long each gang stayed half-bound (first to last binding). The test suite runs
the same function on a small cluster and asserts the counts are zero.

Run: .venv/bin/python benchmarks/chaos_bench.py [--nodes 8] [--gang-size 64] [--kills 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster.controlplane import ControlPlane

STROMBOLI = Path(sys.executable).with_name("stromboli")
PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")
JOB = ("batch.volcano.sh/v1alpha1", "Job")
GROUP = "scheduling.k8s.io/group-name"
JOB_NAME = "volcano.sh/job-name"


@dataclass
class ChaosReport:
    scheduler_kills: int = 0
    #: Of those kills, how many left the gang half-bound (some bound, some not) at the kill.
    kills_mid_bind: int = 0
    apiserver_restarts: int = 0
    controller_kills: int = 0
    #: Pods created for the job before the controller was killed, and at the end.
    job_pods_at_kill: int = 0
    job_pods: int = 0
    job_replicas: int = 0
    #: Pod uids the job's pods had before the kill that changed after it.
    job_uids_changed: int = 0
    double_binds: int = 0
    lost_pods: int = 0
    half_gangs_at_end: int = 0
    #: Per gang: seconds from its first binding to its last.
    half_gang_seconds: dict[str, float] = field(default_factory=dict)
    #: Per killed gang: bound pods the watch had seen when the kill was sent.
    bound_at_kill: dict[str, int] = field(default_factory=dict)
    #: Leader killed with a standby waiting (0 or 1), and the standby gang's half-bound time.
    leader_kills: int = 0


class PodLedger:
    """Every binding of the namespace's pods, from a watch (relisting after 410)."""

    def __init__(self, store: KubeStore, namespace: str) -> None:
        self.store = store
        self.namespace = namespace
        self.node: dict[str, str] = {}
        self.uid: dict[str, str] = {}
        self.bound_at: dict[str, float] = {}
        self.double_binds: list[tuple[str, str, str]] = []
        self.deleted: list[str] = []
        self._task: asyncio.Task | None = None

    def start(self) -> PodLedger:
        self._task = asyncio.create_task(self._follow())
        return self

    async def _follow(self) -> None:
        while True:
            try:
                listed = await self.store.list("v1", "Pod", self.namespace)
                for pod in listed.items:
                    self._seen("MODIFIED", pod)
                stream = self.store.watch(
                    "v1", "Pod", self.namespace, resource_version=listed.resource_version
                )
                async for event in stream:
                    self._seen(event.type, event.object)
            except Exception:  # a broken watch, an API server restart: list again
                await asyncio.sleep(0.2)

    def _seen(self, event_type: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if event_type == "DELETED":
            self.deleted.append(name)
            return
        self.uid.setdefault(name, pod["metadata"].get("uid", ""))
        node = (pod.get("spec") or {}).get("nodeName") or ""
        known = self.node.get(name, "")
        if node and known and node != known:
            self.double_binds.append((name, known, node))
        if node and not known:
            self.node[name] = node
            self.bound_at[name] = time.monotonic()
        self.node.setdefault(name, "")

    def bound(self, prefix: str) -> int:
        return sum(1 for n, node in self.node.items() if n.startswith(prefix) and node)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class Daemon:
    """One ``stromboli <command>`` subprocess that can be SIGKILLed and started again."""

    def __init__(self, cp: ControlPlane, log: Path, *argv: str) -> None:
        self.argv = [str(STROMBOLI), *argv, f"--kubeconfig={cp.kubeconfig_path}"]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Daemon:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def pod(name: str, namespace: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": {GROUP: group}},
        "spec": {
            "schedulerName": "volcano",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


async def create_gang(store: KubeStore, namespace: str, name: str, size: int) -> None:
    await store.create(
        {
            "apiVersion": PODGROUP[0],
            "kind": PODGROUP[1],
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": size, "queue": "default"},
        }
    )
    gate = asyncio.Semaphore(16)

    async def one(i: int) -> None:
        async with gate:
            await store.create(pod(f"{name}-{i}", namespace, name))

    await asyncio.gather(*(one(i) for i in range(size)))


def vcjob(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    template = {
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        }
    }
    return {
        "apiVersion": JOB[0],
        "kind": JOB[1],
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": replicas,
            "maxRetry": 3,
            "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
        },
    }


async def until(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached in {timeout:.0f} s")
        await asyncio.sleep(0.005)


async def run_chaos(
    cp: ControlPlane,
    workdir: Path,
    *,
    namespace: str = "chaos",
    gang_size: int = 64,
    kills: int = 3,
    job_replicas: int = 40,
    timeout: float = 120.0,
    standby: bool = False,
) -> ChaosReport:
    """Run the three kinds of failure once over ``cp`` and count what they broke."""
    report = ChaosReport(job_replicas=job_replicas)
    store = KubeStore(KubeConfig.load(str(cp.kubeconfig_path)))
    scheduler = Daemon(
        cp,
        workdir / "scheduler.log",
        "scheduler",
        "--schedule-period=200ms",
        "--listen-address=",
        "--healthz-address=",
    ).start()
    controller = Daemon(
        cp,
        workdir / "controller.log",
        "controller",
        "--leader-elect=false",
        "--listen-address=",
        "--healthz-address=",
    ).start()
    gangs: list[str] = []
    ledger: PodLedger | None = None
    try:
        await store.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        ledger = PodLedger(store, namespace).start()
        for round_ in range(kills):
            name = f"kill{round_}"
            gangs.append(name)
            await create_gang(store, namespace, name, gang_size)
            await until(lambda n=name: ledger.bound(f"{n}-") > 0, timeout, f"{name} first bind")
            scheduler.kill()
            report.scheduler_kills += 1
            seen = ledger.bound(f"{name}-")
            report.bound_at_kill[name] = seen
            if seen < gang_size:
                report.kills_mid_bind += 1
            scheduler.start()
            await until(lambda n=name: ledger.bound(f"{n}-") == gang_size, timeout, f"{name} bound")
        gangs.append("restart")
        await create_gang(store, namespace, "restart", gang_size)
        await asyncio.to_thread(cp.restart_apiserver)
        report.apiserver_restarts += 1
        await until(lambda: ledger.bound("restart-") == gang_size, timeout, "restart bound")

        await store.create(vcjob("train", namespace, job_replicas))
        prefix = "train-worker-"
        await until(
            lambda: any(n.startswith(prefix) for n in ledger.node), timeout, "first job pod"
        )
        controller.kill()
        report.controller_kills += 1
        before = {n: u for n, u in ledger.uid.items() if n.startswith(prefix)}
        report.job_pods_at_kill = len(before)
        controller.start()
        await until(lambda: ledger.bound(prefix) == job_replicas, timeout, "job pods bound")
        if standby:
            scheduler.stop()
            await leader_failover(cp, store, namespace, workdir, gang_size, ledger, timeout)
            gangs.append("standby")
            report.leader_kills += 1
        await asyncio.sleep(1.0)  # let any stray extra pod show up before counting
        pods = {p["metadata"]["name"]: p for p in (await store.list("v1", "Pod", namespace)).items}
        job_pods = {n: p for n, p in pods.items() if n.startswith(prefix)}
        report.job_pods = len(job_pods)
        report.job_uids_changed = sum(
            1
            for n, uid in before.items()
            if n in job_pods and job_pods[n]["metadata"]["uid"] != uid
        )
        for gang in gangs:
            members = [n for n in pods if n.startswith(f"{gang}-")]
            bound = [n for n in members if pods[n]["spec"].get("nodeName")]
            if 0 < len(bound) < gang_size:
                report.half_gangs_at_end += 1
            times = [ledger.bound_at[n] for n in members if n in ledger.bound_at]
            if times:
                report.half_gang_seconds[gang] = max(times) - min(times)
        report.double_binds = len(ledger.double_binds)
        expected = {f"{g}-{i}" for g in gangs for i in range(gang_size)}
        report.lost_pods = len(set(ledger.deleted)) + len(expected - set(pods))
    finally:
        if ledger is not None:
            await ledger.stop()
        controller.stop()
        scheduler.stop()
        await store.close()
    return report


LEASE = ("coordination.k8s.io/v1", "Lease")
LEASE_NAMESPACE = "chaos-lease"


async def leader_failover(
    cp: ControlPlane,
    store: KubeStore,
    namespace: str,
    workdir: Path,
    gang_size: int,
    ledger: PodLedger,
    timeout: float,
) -> None:
    """Two schedulers with leader election; SIGKILL the leader mid-bind, let the standby
    finish the gang (the main scheduler of ``run_chaos`` is stopped meanwhile)."""
    await store.create(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LEASE_NAMESPACE}}
    )
    args = (
        "scheduler",
        "--schedule-period=200ms",
        "--listen-address=",
        "--healthz-address=",
        "--leader-elect=true",
        f"--lock-object-namespace={LEASE_NAMESPACE}",
    )
    pair = [Daemon(cp, workdir / f"scheduler-{i}.log", *args).start() for i in range(2)]
    try:

        async def holder() -> str:
            try:
                lease = await store.get(*LEASE, "vc-scheduler", LEASE_NAMESPACE)
            except Exception:
                return ""
            return str((lease.get("spec") or {}).get("holderIdentity") or "")

        deadline = time.monotonic() + timeout
        while not (identity := await holder()):
            if time.monotonic() > deadline:
                raise TimeoutError("no scheduler took the Lease")
            await asyncio.sleep(0.1)
        pid = int(identity.rsplit("_", 1)[1])
        leader = next(d for d in pair if d.process is not None and d.process.pid == pid)
        await create_gang(store, namespace, "standby", gang_size)
        await until(lambda: ledger.bound("standby-") > 0, timeout, "standby first bind")
        leader.kill()
        await until(
            lambda: ledger.bound("standby-") == gang_size, timeout + 30, "standby gang bound"
        )
    finally:
        for daemon in pair:
            daemon.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gang-size", type=int, default=64)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--job-replicas", type=int, default=40)
    parser.add_argument(
        "--standby", action="store_true", help="also kill a leader with a standby waiting"
    )
    args = parser.parse_args()
    from stromboli.core.devcluster import build_control_plane

    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        workdir = Path(tmp)
        cp = ControlPlane(build_control_plane(log_path=workdir / "build.log"), run_dir=workdir)
        cp.start()
        try:
            cp.apply_manifests(build_crds())
            cp.add_nodes(args.nodes, cpu="32", memory="64Gi", pods=110)
            report = asyncio.run(
                run_chaos(
                    cp,
                    workdir,
                    gang_size=args.gang_size,
                    kills=args.kills,
                    job_replicas=args.job_replicas,
                    standby=args.standby,
                )
            )
        finally:
            cp.stop()
    print(f"nodes {args.nodes}, gangs of {args.gang_size} pods, 2 cores shared by everything")
    print(
        f"scheduler SIGKILLs: {report.scheduler_kills} "
        f"(mid-bind: {report.kills_mid_bind}; bound at kill: {report.bound_at_kill})"
    )
    for gang, seconds in report.half_gang_seconds.items():
        print(f"  gang {gang}: first to last binding {seconds:.2f} s")
    if report.leader_kills:
        print(f"leader SIGKILLed mid-bind with a standby waiting: {report.leader_kills}")
    print(f"kube-apiserver restarts: {report.apiserver_restarts}")
    print(
        f"controller SIGKILLs mid-creation: {report.controller_kills} "
        f"({report.job_pods_at_kill} of {report.job_replicas} pods existed); "
        f"pods at the end {report.job_pods}, uids changed {report.job_uids_changed}"
    )
    print(
        f"double binds {report.double_binds}, lost pods {report.lost_pods}, "
        f"half gangs at the end {report.half_gangs_at_end}"
    )


if __name__ == "__main__":
    main()
