"""Cost of what a session writes at close when many gangs wait (issue 16's Volcano words).

Every cycle Volcano's scheduler words a sentence for each group short of running (the
PodGroup's ``Unschedulable`` event, each pending pod's condition); this measures that pass,
``status.collect``, over a session where J gangs of S pods all wait (one node, too small for
any gang), and the allocate + close that precede it, for scale.

Run: .venv/bin/python benchmarks/status_close_bench.py [--jobs J] [--size S]
"""

from __future__ import annotations

import argparse
import time

from stromboli.core.api import constants as k
from stromboli.core.clock import EPOCH, format_time
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.conf import DEFAULT_CONFIG, parse_config
from stromboli.core.scheduler.framework.plugin import ACTIONS
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.scheduler import builtin_queue
from stromboli.core.scheduler.status import collect

SCHED = k.SCHEDULING_V1BETA1


def objects(jobs: int, size: int) -> list[tuple[tuple[str, str], dict]]:
    out: list[tuple[tuple[str, str], dict]] = [
        ((SCHED, "Queue"), builtin_queue(k.ROOT_QUEUE)),
        ((SCHED, "Queue"), builtin_queue(k.DEFAULT_QUEUE)),
        (
            ("v1", "Node"),
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n0"},
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
            },
        ),
    ]
    for j in range(jobs):
        name = f"pg-{j}"
        out.append(
            (
                (SCHED, "PodGroup"),
                {
                    "apiVersion": SCHED,
                    "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "default", "uid": f"u-{j}"},
                    "spec": {"minMember": size, "queue": "default"},
                    "status": {"phase": "Inqueue"},
                },
            )
        )
        for i in range(size):
            out.append(
                (
                    ("v1", "Pod"),
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{name}-{i}",
                            "namespace": "default",
                            "uid": f"u-{j}-{i}",
                            "annotations": {k.GROUP_NAME_ANNOTATION: name},
                        },
                        "spec": {
                            "schedulerName": "volcano",
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                        },
                        "status": {"phase": "Pending"},
                    },
                )
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--size", type=int, default=10)
    args = parser.parse_args()
    register_builtins()
    cache = SchedulerCache()
    for kind, obj in objects(args.jobs, args.size):
        cache.apply(kind, "ADDED", obj)
    config = parse_config(DEFAULT_CONFIG, "<default>")
    ssn = Session(cache.snapshot(), config, EPOCH, uid="bench")
    ssn.open()
    started = time.perf_counter()
    for name in config.actions:
        ACTIONS[name]().execute(ssn)
    acted = time.perf_counter()
    ssn.close()
    closed = time.perf_counter()
    changes = collect(ssn, format_time(EPOCH))
    collected = time.perf_counter()
    pods = args.jobs * args.size
    print(f"{args.jobs} waiting gangs of {args.size} pods ({pods} pods), one 4-cpu node")
    print(f"  actions        {acted - started:8.3f} s")
    print(f"  plugins close  {closed - acted:8.3f} s")
    print(
        f"  status collect {collected - closed:8.3f} s"
        f"  ({(collected - closed) / args.jobs * 1e6:.0f} us per gang)"
    )
    print(
        f"  written: {len(changes.podgroups)} PodGroups, {len(changes.pod_conditions)} pod "
        f"conditions, {len(changes.events)} events"
    )


if __name__ == "__main__":
    main()
