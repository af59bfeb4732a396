"""A cycle leaves settled jobs out of allocate's job queues and backfill's sort (issue 14):
the real scheduler decides exactly as when every job is queued and sorted, over several cycles
of arrivals and completions, with preemption and reclaim seeing running jobs as victims."""

from __future__ import annotations

import asyncio
import functools
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.actions import allocate
from stromboli.core.scheduler.actions.backfill import BackfillAction, backfill_jobs
from stromboli.core.scheduler.api.plaingroup import plain_pod_groups_mode
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.scheduler import Scheduler

from .builders import (
    SCHEDULING,
    Cluster,
    conf,
    make_session,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
)

CONF = conf(
    "enqueue, allocate, preempt, reclaim, backfill",
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion"],
)


def _every_job_backfill(_action: BackfillAction, ssn: Session) -> None:
    """Backfill as before issue 14: every admitted job sorted and visited."""
    jobs = [
        job
        for job in ssn.jobs.values()
        if not job.is_pending() and job.queue in ssn.queues and job.invalid is None
    ]
    jobs.sort(key=functools.cmp_to_key(ssn.job_compare))
    for job in jobs:
        BackfillAction.backfill_job(ssn, job)


@contextmanager
def every_job_visited() -> Iterator[None]:
    with (
        mock.patch.object(allocate, "has_work", lambda job: True),
        mock.patch.object(BackfillAction, "execute", _every_job_backfill),
    ):
        yield


#: One job: members, cpu per member (0: best-effort), gang (a PodGroup) or plain pods,
#: queue, priority class.
JOB = st.tuples(
    st.integers(1, 3),
    st.integers(0, 2),
    st.booleans(),
    st.sampled_from(["default", "eng"]),
    st.sampled_from([None, "high"]),
)
#: Per cycle: jobs arriving before it, and which placed pods (by index among them) run or end.
CYCLE = st.tuples(
    st.lists(JOB, max_size=4),
    st.lists(st.integers(0, 20), max_size=4),
    st.lists(st.integers(0, 20), max_size=3),
)


async def decide(tmp: Path, cpus: list[int], cycles: list[tuple]) -> list[Any]:
    """What the store shows after every cycle: each pod's node and phase, each PodGroup's
    phase and conditions, each queue's status."""
    c = Cluster(tmp, CONF)
    c.scheduler = Scheduler(
        c.store, c.clock, c.config, plain_pod_groups=plain_pod_groups_mode("memory")
    )
    await c.start()
    await c.add(queue("eng"), priority_class("high", 1000))
    await c.add(*(node(f"n{i}", cpu=str(cpu)) for i, cpu in enumerate(cpus)))
    seen: list[Any] = []
    made = 0
    for arrivals, running, ending in cycles:
        for members, cpu, gang, queue_name, level in arrivals:
            made += 1
            name = f"j{made}"
            if gang:
                await c.add(
                    podgroup(name, members, queue=queue_name, priority_class=level, phase="Pending")
                )
            for m in range(members):
                await c.add(
                    pod(
                        f"{name}-{m}",
                        group=name if gang else None,
                        cpu=str(cpu) if cpu else None,
                        priority_class=level,
                        annotations={k.QUEUE_NAME_ANNOTATION_KEY: queue_name},
                    )
                )
        await c.run()
        pods = (await c.store.list("v1", "Pod")).items
        placed = sorted(
            p["metadata"]["name"]
            for p in pods
            if (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase", "Pending") in ("Pending", "Running")
        )
        for phase, picks in (("Running", running), ("Succeeded", ending)):
            for i in picks:
                if i < len(placed):
                    await c.set_phase(placed[i], phase)
        pods = (await c.store.list("v1", "Pod")).items
        groups = (await c.store.list(SCHEDULING, "PodGroup")).items
        queues = (await c.store.list(SCHEDULING, "Queue")).items
        seen.append(
            (
                sorted(
                    (
                        p["metadata"]["name"],
                        (p.get("spec") or {}).get("nodeName"),
                        (p.get("status") or {}).get("phase"),
                    )
                    for p in pods
                ),
                sorted(
                    (
                        g["metadata"]["name"],
                        (g.get("status") or {}).get("phase"),
                        [
                            (x.get("type"), x.get("status"), x.get("reason"))
                            for x in (g.get("status") or {}).get("conditions") or []
                        ],
                    )
                    for g in groups
                ),
                sorted((q["metadata"]["name"], q.get("status")) for q in queues),
            )
        )
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cpus=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    cycles=st.lists(CYCLE, min_size=1, max_size=5),
)
def test_settled_jobs_left_out_decide_as_every_job_visited(
    cpus: list[int], cycles: list[tuple]
) -> None:
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        selected = asyncio.run(decide(Path(one), cpus, cycles))
        with every_job_visited():
            everything = asyncio.run(decide(Path(two), cpus, cycles))
    assert selected == everything


def test_only_jobs_with_work_are_queued_and_sorted() -> None:
    """A running job is in neither allocate's queues nor backfill's list; a pending one and
    one with a best-effort pod are."""
    ssn = make_session(
        [
            node("n1", cpu="4"),
            podgroup("run", 1, phase="Running"),
            pod("run-0", group="run", cpu="1", node_name="n1", phase="Running"),
            podgroup("wait", 1, phase="Inqueue"),
            pod("wait-0", group="wait", cpu="1"),
            podgroup("be", 1, phase="Running"),
            pod("be-0", group="be"),
        ],
        CONF,
    )
    plan = allocate.schedulable_jobs(ssn, promote_pending=False)
    queued = []
    while (popped := plan.pop_next()) is not None:
        queued.append(popped[1].name)
    assert queued == ["wait"]
    assert [job.name for job in backfill_jobs(ssn)] == ["be"]
