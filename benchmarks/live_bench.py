"""Side by side on the test control plane: stromboli scheduler versus kube-scheduler.

Starts etcd, kube-apiserver and kwok with N fake nodes (32 cpu, 256Gi, 110 pods), then:
1. creates P plain pods with ``schedulerName: volcano`` and runs ``stromboli scheduler``;
2. creates the same P pods with ``schedulerName: default-scheduler`` and runs the
   kube-scheduler built from the same Kubernetes release (client QPS raised to match);
3. creates G gang jobs of S pods (PodGroup + pods) for stromboli.
For each it prints pods/s (bound pods over the time from the first create to the last bind),
create-to-bound latency p50/p99 and the CPU seconds used by the scheduler and the API server
(the machine's cores are shared by all of them).

Run: .venv/bin/python benchmarks/live_bench.py [--nodes 1000] [--pods 5000] [--gangs 250]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster.controlplane import ControlPlane

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: int | list[int]) -> float:
    """User + system CPU of processes and their reaped children, from /proc."""
    total = 0.0
    for pid in [pids] if isinstance(pids, int) else pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(v) for v in fields[11:15]) / TICKS
    return total


def pod(name: str, scheduler: str, group: str | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }


async def create_all(
    store: KubeStore, objects: list[dict], concurrency: int = 64
) -> dict[str, float]:
    """Create every object; returns when each pod's create call returned (wall clock)."""
    gate = asyncio.Semaphore(concurrency)
    created: dict[str, float] = {}

    async def one(obj: dict) -> None:
        async with gate:
            await store.create(obj)
        if obj["kind"] == "Pod":
            created[obj["metadata"]["name"]] = time.time()

    await asyncio.gather(*(one(o) for o in objects))
    return created


async def watch_bound(store: KubeStore, names: set[str], timeout: float) -> dict[str, float]:
    """When (wall clock) each pod in ``names`` was seen bound."""
    bound: dict[str, float] = {}
    listed = await store.list("v1", "Pod", "default")
    stream = store.watch("v1", "Pod", "default", resource_version=listed.resource_version)
    deadline = time.monotonic() + timeout
    for item in listed.items:
        name = item["metadata"]["name"]
        if name in names and item["spec"].get("nodeName"):
            bound[name] = time.time()
    try:
        while len(bound) < len(names) and time.monotonic() < deadline:
            try:
                event = await asyncio.wait_for(anext(stream), deadline - time.monotonic())
            except TimeoutError:
                break
            if event.type not in ("ADDED", "MODIFIED"):
                continue
            name = event.object["metadata"]["name"]
            if name in names and event.object["spec"].get("nodeName") and name not in bound:
                bound[name] = time.time()
    finally:
        await stream.aclose()
    return bound


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run_case(
    cp: ControlPlane,
    store: KubeStore,
    label: str,
    objects: list[dict],
    names: set[str],
    start_scheduler,
    stop_scheduler,
    scheduler_pid,
) -> None:  # type: ignore[no-untyped-def]
    api_pid = cp.components["kube-apiserver"].pid
    api_before = cpu_seconds(api_pid)
    start_scheduler()
    sched_before = cpu_seconds(scheduler_pid())
    started = time.time()
    watching = asyncio.create_task(watch_bound(store, names, timeout=600))
    created = await create_all(store, objects)
    bound = await watching
    elapsed = max(bound.values(), default=started) - started
    latencies = {name: at - created[name] for name, at in bound.items() if name in created}
    sched_cpu = cpu_seconds(scheduler_pid()) - sched_before
    api_cpu = cpu_seconds(api_pid) - api_before
    stop_scheduler()
    rate = len(latencies) / elapsed if elapsed > 0 else 0.0
    print(
        f"{label:<34} {len(latencies):>6}/{len(names)} bound  {rate:8.1f} pods/s  "
        f"p50 {percentile(list(latencies.values()), 0.5):6.2f}s  "
        f"p99 {percentile(list(latencies.values()), 0.99):6.2f}s  "
        f"scheduler cpu {sched_cpu:6.1f}s  apiserver cpu {api_cpu:6.1f}s"
    )


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(nodes=0) as cp:
        cp.add_nodes(args.nodes)
        cp.apply_manifests(build_crds())
        store = KubeStore(KubeConfig.load(str(cp.kubeconfig_path)), qps=5000, burst=5000)
        stromboli = Path(sys.executable).with_name("stromboli")
        process: dict[str, subprocess.Popen] = {}

        def start_ours() -> None:
            common = [
                f"--kubeconfig={cp.kubeconfig_path}",
                "--healthz-address=",
                "--kube-api-qps=5000",
                "--kube-api-burst=5000",
                "-v",
                "1",
            ]
            process["p"] = subprocess.Popen(
                [str(stromboli), "scheduler", "--listen-address=", *common]
            )
            # Plain pods reach the scheduler through a one-pod PodGroup the controller makes,
            # as with Volcano's pg-controller: its work counts as ours.
            process["c"] = subprocess.Popen([str(stromboli), "controller", *common])

        def stop_ours() -> None:
            for proc in (process["p"], process["c"]):
                proc.terminate()
                proc.wait(30)

        def ours_cpu_pids() -> list[int]:
            return [process["p"].pid, process["c"].pid]

        config = Path(tmp) / "kube-scheduler.yaml"
        config.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            f"clientConnection: {{kubeconfig: {cp.kubeconfig_path}, qps: 5000, burst: 5000}}\n"
            "leaderElection: {leaderElect: false}\n"
        )
        print(f"{args.nodes} kwok nodes; {os.cpu_count()} cpus shared by every process")
        names = {f"ours-{i}" for i in range(args.pods)}
        await run_case(
            cp,
            store,
            "stromboli, plain pods",
            [pod(n, "volcano") for n in sorted(names)],
            names,
            start_ours,
            stop_ours,
            ours_cpu_pids,
        )
        names = {f"kube-{i}" for i in range(args.pods)}
        await run_case(
            cp,
            store,
            "kube-scheduler, plain pods",
            [pod(n, "default-scheduler") for n in sorted(names)],
            names,
            lambda: cp.start_scheduler([f"--config={config}"]),
            cp.stop_scheduler,
            lambda: cp.components["kube-scheduler"].pid,
        )
        gangs: list[dict] = []
        names = set()
        for g in range(args.gangs):
            group = f"gang-{g}"
            gangs.append(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": group, "namespace": "default"},
                    "spec": {"minMember": args.gang_size},
                }
            )
            for i in range(args.gang_size):
                names.add(f"{group}-{i}")
                gangs.append(pod(f"{group}-{i}", "volcano", group))
        await run_case(
            cp,
            store,
            f"stromboli, {args.gangs} gangs x {args.gang_size}",
            gangs,
            names,
            start_ours,
            stop_ours,
            ours_cpu_pids,
        )
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=250)
    parser.add_argument("--gang-size", type=int, default=20)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
