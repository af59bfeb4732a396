"""How long the answers to "why pending" take on a large state.

Builds a cluster in memory (``--nodes`` 32-cpu nodes, ``--queues`` queues with a capability),
then ``--jobs`` jobs spread over the queues: half are Pending with ``minResources`` (many held
at enqueue by their queue's capability), half are admitted gangs of ``--gang`` pods, some of
which fit nowhere. Prints the time to open the session, to replay enqueue once for every
Pending job (what the simulator's report does), to explain every job, to explain one job on its
own (what ``stromboli explain job/NAME`` does) and to explain every queue.

Run: .venv/bin/python benchmarks/explain_bench.py [--nodes 500] [--jobs 2000] [--gang 16]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.clock import EPOCH
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.conf import parse_config
from stromboli.core.scheduler.explain_enqueue import enqueue_verdicts
from stromboli.core.scheduler.explain_job import explain_job
from stromboli.core.scheduler.explain_queue import explain_queue
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.scheduler import builtin_queue

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
"""
SCHEDULING = k.SCHEDULING_V1BETA1


def objects(nodes: int, queues: int, jobs: int, gang: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(nodes):
        allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
                "status": {"allocatable": allocatable, "capacity": allocatable},
            }
        )
    capability = str(max(nodes * 32 // queues // 2, 1))
    for q in range(queues):
        out.append(
            {
                "apiVersion": SCHEDULING,
                "kind": "Queue",
                "metadata": {"name": f"q{q}"},
                "spec": {"weight": 1, "capability": {"cpu": capability}},
                "status": {"state": "Open"},
            }
        )
    for j in range(jobs):
        name, queue = f"job-{j}", f"q{j % queues}"
        created = f"1970-01-01T00:{j // 60 % 60:02d}:{j % 60:02d}Z"
        admitted = j % 2 == 1
        pg: dict[str, Any] = {
            "apiVersion": SCHEDULING,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
            "spec": {"minMember": gang, "queue": queue, "minResources": {"cpu": str(gang * 2)}},
            "status": {"phase": "Inqueue" if admitted else "Pending"},
        }
        out.append(pg)
        if not admitted:
            continue
        cpu = "40" if j % 10 == 1 else "2"  # every fifth admitted gang fits nowhere
        for p in range(gang):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{p}",
                        "namespace": "default",
                        "uid": f"{name}-{p}",
                        "annotations": {k.GROUP_NAME_ANNOTATION: name},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                        ],
                    },
                }
            )
    return out


def session(objs: list[dict[str, Any]]) -> Session:
    cache = SchedulerCache()
    for name in (k.ROOT_QUEUE, k.DEFAULT_QUEUE):
        cache.apply((SCHEDULING, "Queue"), "ADDED", builtin_queue(name))
    for obj in objs:
        cache.apply((obj["apiVersion"], obj["kind"]), "ADDED", obj)
    ssn = Session(cache.snapshot(), parse_config(CONF, "<bench>"), EPOCH)
    ssn.open()
    return ssn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--gang", type=int, default=16)
    args = parser.parse_args()
    register_builtins()
    objs = objects(args.nodes, args.queues, args.jobs, args.gang)

    started = time.perf_counter()
    ssn = session(objs)
    opened = time.perf_counter() - started

    started = time.perf_counter()
    verdicts = enqueue_verdicts(ssn)
    replay = time.perf_counter() - started
    held = sum(1 for v in verdicts.values() if not v.admitted)

    started = time.perf_counter()
    stages: dict[str, int] = {}
    for job in list(ssn.jobs.values()):
        result = explain_job(ssn, job, verdicts.get(job.uid))
        stages[result.stage] = stages.get(result.stage, 0) + 1
    every = time.perf_counter() - started

    fresh = session(objs)
    last_pending = max((j for j in fresh.jobs.values() if j.is_pending()), key=lambda j: j.creation)
    started = time.perf_counter()
    explain_job(fresh, last_pending)
    one = time.perf_counter() - started

    started = time.perf_counter()
    for queue in ssn.queues.values():
        explain_queue(ssn, queue)
    queues = time.perf_counter() - started

    pods = sum(len(j.tasks) for j in ssn.jobs.values())
    print(
        f"{args.nodes} nodes, {len(ssn.queues)} queues, {len(ssn.jobs)} jobs, {pods} pods "
        f"(gangs of {args.gang})"
    )
    print(f"session open (cache and plugins):     {opened:8.3f} s")
    print(f"enqueue replay, every Pending job:   {replay:8.3f} s  ({held} held of {len(verdicts)})")
    print(f"explain every job:                    {every:8.3f} s  {dict(sorted(stages.items()))}")
    print(f"explain the last Pending job alone:   {one:8.3f} s")
    print(f"explain every queue:                  {queues:8.3f} s")


if __name__ == "__main__":
    main()
