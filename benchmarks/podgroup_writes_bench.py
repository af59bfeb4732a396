"""Where object mode's API requests go: every write to each plain pod's PodGroup, in order.

``live_bench.py`` counts requests per pod by verb and resource; this says which of them a
PodGroup receives and why. It starts the test control plane with N kwok nodes,
``stromboli scheduler`` and ``stromboli controller`` (``--plain-pod-groups=object``), creates P
plain pods while they run, and watches the PodGroups: each version a watch delivers is recorded
as (phase, running count, condition types, the field manager of the write). It prints the
versions per PodGroup, the most common histories, the requests per pod by verb and resource,
and the API server's CPU per pod.

Run: .venv/bin/python benchmarks/podgroup_writes_bench.py [--nodes 200] [--pods 1000]
(with ``PYTHONPATH=<other tree>/src`` to measure another tree)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster.controlplane import ControlPlane

sys.path.insert(0, str(Path(__file__).parent))
from live_bench import (
    BACKGROUND,
    NAMESPACE,
    STROMBOLI,
    cpu_seconds,
    create_all,
    plain_pods,
    request_counts,
)

PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")


def version_of(pg: dict) -> tuple:
    """What a reader of the PodGroup sees change between versions."""
    status = pg.get("status") or {}
    conditions = tuple(f"{c.get('type')}={c.get('status')}" for c in status.get("conditions") or ())
    return (status.get("phase", ""), status.get("running", 0), conditions)


async def follow(store: KubeStore, histories: dict[str, list[tuple]], stop: asyncio.Event) -> None:
    listed = await store.list(*PODGROUP, NAMESPACE)
    stream = store.watch(*PODGROUP, NAMESPACE, resource_version=listed.resource_version)
    try:
        while not stop.is_set():
            try:
                event = await asyncio.wait_for(anext(stream), 1.0)
            except TimeoutError:
                continue
            if event.type in ("ADDED", "MODIFIED"):
                name = event.object["metadata"]["name"]
                histories.setdefault(name, []).append(version_of(event.object))
    finally:
        await stream.aclose()


async def run(args: argparse.Namespace) -> None:
    with ControlPlane(nodes=0) as cp:
        cp.add_nodes(args.nodes)
        cp.apply_manifests(build_crds())
        store = KubeStore(KubeConfig.load(str(cp.kubeconfig_path)), qps=5000, burst=5000)
        common = [
            f"--kubeconfig={cp.kubeconfig_path}",
            "--healthz-address=",
            "--listen-address=",
            "--kube-api-qps=5000",
            "--kube-api-burst=5000",
            "--plain-pod-groups=object",
            "-v",
            "1",
        ]
        procs = {
            name: subprocess.Popen([str(STROMBOLI), name, *common, *extra])
            for name, extra in (
                ("scheduler", args.scheduler_arg),
                ("controller", args.controller_arg),
            )
        }
        api_pid = cp.components["kube-apiserver"].pid
        await asyncio.sleep(args.warmup)
        histories: dict[str, list[tuple]] = {}
        stop = asyncio.Event()
        watching = asyncio.create_task(follow(store, histories, stop))
        before = request_counts(cp.client)
        cpu_before = {"kube-apiserver": cpu_seconds(api_pid)}
        cpu_before |= {name: cpu_seconds(p.pid) for name, p in procs.items()}
        started = time.time()
        work = plain_pods("pw", args.pods, "volcano")
        await create_all(store, work.objects)
        bound = 0
        while time.time() - started < args.timeout:
            pods = await store.list("v1", "Pod", NAMESPACE)
            bound = sum(1 for p in pods.items if (p.get("spec") or {}).get("nodeName"))
            running = sum(
                1 for p in pods.items if (p.get("status") or {}).get("phase") == "Running"
            )
            if bound >= args.pods and running >= args.pods:
                break
            await asyncio.sleep(1)
        elapsed = time.time() - started
        await asyncio.sleep(args.settle)
        requests = request_counts(cp.client) - before
        cpu = {"kube-apiserver": cpu_seconds(api_pid) - cpu_before["kube-apiserver"]}
        cpu |= {name: cpu_seconds(p.pid) - cpu_before[name] for name, p in procs.items()}
        stop.set()
        await watching
        events = await store.list("v1", "Event", NAMESPACE)
        kinds: Counter[tuple] = Counter()
        for e in events.items:
            kinds[
                (
                    (e.get("source") or {}).get("component", ""),
                    (e.get("involvedObject") or {}).get("kind", ""),
                    e.get("type", ""),
                    e.get("reason", ""),
                    e.get("count", 1),
                )
            ] += 1
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(30)
        await store.close()
    per_pod = max(bound, 1)
    print(
        f"{args.nodes} nodes, {args.pods} pods, bound {bound} in {elapsed:.1f}s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("cpu ms/pod: " + "  ".join(f"{n} {s * 1000 / per_pod:.1f}" for n, s in cpu.items()))
    budget = {key: n for key, n in requests.items() if key not in BACKGROUND}
    total = sum(budget.values()) / per_pod
    print(f"requests/pod {total:.2f}:")
    for (verb, resource), n in sorted(budget.items(), key=lambda kv: -kv[1]):
        print(f"    {verb:<7} {resource:<28} {n / per_pod:.3f}")
    print("events (source, object kind, type, reason, count): objects")
    for key, n in kinds.most_common():
        print(f"    {n:>6}  {key}")
    versions = Counter(len(h) for h in histories.values())
    print(
        "PodGroup versions seen (create included): "
        + ", ".join(f"{n}: {c}" for n, c in sorted(versions.items()))
    )
    shapes = Counter(
        " -> ".join(f"{p}/{r}/{','.join(c) or '-'}" for p, r, c in h) for h in histories.values()
    )
    print("most common histories (phase/running/conditions):")
    for shape, count in shapes.most_common(args.top):
        print(f"    {count:>6}  {shape}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before creating")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after the last bind")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--scheduler-arg", action="append", default=[])
    parser.add_argument("--controller-arg", action="append", default=[])
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
