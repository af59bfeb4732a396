"""A snapshot that lends a job's clone of a finished session again (``SchedulerCache._lend``)
gives every session what a snapshot cloning every job gives: two schedulers on identical
stores, one lending clones and one cloning afresh, go through the same random cycles (gangs
and plain pods arriving, in memory or with PodGroups, pods running, finishing and deleted,
groups deleted and edited by others, nodes and queues coming and going, preemption, requests
of a resource no node has, writes of one cycle landing while the next decides), and after
every cycle they decided the same bindings and evictions, and their stores, events and metrics
agree. Beside that, every job of every lending snapshot is compared, field by field, with a
fresh clone of the cache's job taken at that moment."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import event, given, settings, target
from hypothesis import strategies as st

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.plaingroup import MEMORY, OBJECT
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.framework.snapshot import Snapshot
from stromboli.core.scheduler.scheduler import CycleStats

from .builders import BASIC_CONF, Cluster, node, pod, podgroup, priority_class
from .test_settled_close import CAPACITY_CONF, OP, PREEMPT_CONF, Run, forty_settled

EXOTIC = "example.com/widget"
GADGET = "example.com/gadget"

REUSE_OP = st.one_of(
    OP,
    # A plain pod (its group in memory, or made by nobody in object mode: it waits).
    st.tuples(st.just("plain"), st.sampled_from(("100m", "1")), st.sampled_from(("", "high"))),
    # A pod asking for a resource no node offers (the session indexes its name): it waits.
    st.tuples(st.just("exotic"), st.sampled_from(("1", "2"))),
    # A node offering another such resource (the cache indexes its name).
    st.tuples(st.just("gadget_node")),
)

_JOB_FIELDS = (
    "uid",
    "name",
    "namespace",
    "queue",
    "priority",
    "min_available",
    "podgroup",
    "creation",
    "in_memory",
    "min_task_member",
    "min_resources",
    "preemptable",
    "fit_errors",
    "job_fit_error",
    "invalid",
    "best_effort_tasks",
)
_TASK_FIELDS = tuple(
    name for name in TaskInfo.__dataclass_fields__ if name not in ("vector", "resreq", "pod")
)


def task_state(task: TaskInfo) -> tuple:
    return (*[getattr(task, name) for name in _TASK_FIELDS], id(task.pod), task.resreq.amounts)


def job_state(job: JobInfo) -> dict[str, Any]:
    """What a session can read of a job (its revision and objects' identities aside)."""
    return {
        "fields": {name: getattr(job, name) for name in _JOB_FIELDS},
        "tasks": [(uid, task_state(task)) for uid, task in job.tasks.items()],
        "by_status": [(status, list(bucket)) for status, bucket in job.by_status.items()],
        "allocated": job.allocated.amounts,
        "total_request": job.total_request.amounts,
    }


class CheckedCache:
    """Wraps a cache's ``snapshot``: every job it hands out must be what a fresh clone of the
    cache's job is, and each node must hold the session's own task objects."""

    def __init__(self, cache: SchedulerCache) -> None:
        self.cache = cache
        self.inner = cache.snapshot
        self.lent = 0
        #: Snapshots handed out and not released: no job of theirs may be lent again.
        self.held: dict[int, Snapshot] = {}
        cache.snapshot = self  # type: ignore[method-assign]
        release = cache.release

        def released(snapshot: Snapshot) -> None:
            self.held.pop(snapshot.serial, None)
            release(snapshot)

        cache.release = released  # type: ignore[method-assign]

    def __call__(self) -> Snapshot:
        before = {
            job_id: entry.built.clone()
            for job_id, entry in self.cache.jobs.items()
            if entry.built is not None
        }
        lent = {id(lent.job) for entry in self.cache.jobs.values() for lent in entry.lent}
        snapshot = self.inner()
        in_use = {id(job) for held in self.held.values() for job in held.jobs.values()}
        assert not any(id(job) in in_use for job in snapshot.jobs.values())
        self.held[snapshot.serial] = snapshot
        index = snapshot.nodes.index
        for job_id, job in snapshot.jobs.items():
            fresh = before.get(job_id)
            if fresh is None:  # built by this snapshot: nothing lent
                continue
            self.lent += id(job) in lent
            assert job_state(job) == job_state(fresh), job_id
            for uid, task in job.tasks.items():
                if task.vector is not None and task.vector.shape[0] == len(index):
                    # A row kept from an earlier session must still be the request's row.
                    expected = (
                        index.vector(task.init_resreq, 1.0)
                        if all(name in index.columns for name in task.init_resreq.names())
                        else None
                    )
                    assert expected is not None and np.array_equal(task.vector, expected), uid
                if task.node_name in snapshot.nodes.position:
                    held = snapshot.nodes.nodes[snapshot.nodes.position[task.node_name]].tasks
                    assert held.get(uid, task) is task, uid
        return snapshot


class ReuseRun(Run):
    """``Run`` that also records each decided cycle's bindings and evictions."""

    def __init__(self, c: Cluster, reuse: bool, pipelined: int) -> None:
        super().__init__(c, True, pipelined)
        c.scheduler.cache.reuse_clones = reuse
        self.checked = CheckedCache(c.scheduler.cache) if reuse else None
        self.decisions: list[tuple] = []

    def observe(self, stats: CycleStats) -> None:
        super().observe(stats)
        ssn = stats.session
        assert ssn is not None
        self.decisions.append(
            (
                sorted((task.key, node_name) for task, node_name in ssn.outcome.binds),
                sorted((e.task.key, e.reason) for e in ssn.outcome.evictions),
                sorted(task.key for task in stats.bound_tasks),
            )
        )

    async def apply(self, op: tuple) -> None:
        c = self.c
        if op[0] == "plain":
            self.names += 1
            await c.add(pod(f"p{self.names}", cpu=op[1], priority_class=op[2] or None))
        elif op[0] == "exotic":
            self.names += 1
            await c.add(pod(f"x{self.names}", cpu="100m", extra={EXOTIC: op[1]}))
        elif op[0] == "gadget_node":
            self.names += 1
            await c.add(node(f"g{self.names}", cpu="8", memory="16Gi", extra={GADGET: "4"}))
        else:
            await super().apply(op)


async def _compare(config: str, mode: str, pipelined: int, steps: list[list[tuple]]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        runs: list[ReuseRun] = []
        for reuse in (True, False):
            path = Path(tmp) / str(reuse)
            path.mkdir()
            c = Cluster(path, config)
            c.scheduler.cache.plain_pod_groups = MEMORY if mode == "memory" else OBJECT
            await c.start()
            await c.add(priority_class("high", 1000), priority_class("low", 10))
            await c.add(node("n0", cpu="16", memory="32Gi"))
            runs.append(ReuseRun(c, reuse, pipelined))
        for step in steps:
            for op in step:
                for run in runs:
                    await run.apply(op)
            for run in runs:
                await run.cycle()
            lending, cloning = [await run.state() for run in runs]
            assert runs[0].decisions == runs[1].decisions
            assert lending["objects"] == cloning["objects"]
            assert lending["events"] == cloning["events"]
            assert lending["metrics"] == cloning["metrics"]
        checked = runs[0].checked
        assert checked is not None
        for run in runs:
            await run.c.scheduler.informer.stop()
        return checked.lent


@settings(max_examples=40, deadline=None)
@given(
    config=st.sampled_from((BASIC_CONF, PREEMPT_CONF, CAPACITY_CONF)),
    mode=st.sampled_from(("object", "memory")),
    pipelined=st.integers(0, 2),  # decided cycles waiting to be written
    steps=st.lists(st.lists(REUSE_OP, max_size=4), min_size=4, max_size=12),
)
def test_lent_clones_decide_and_write_what_fresh_clones_do(
    config: str, mode: str, pipelined: int, steps: list[list[tuple]]
) -> None:
    lent = asyncio.run(_compare(config, mode, pipelined, steps))
    event(f"clones lent again: {'some' if lent else 'none'}")
    target(float(lent), label="clones lent again")


def test_a_clone_is_lent_again_only_once_its_snapshot_is_released() -> None:
    """Snapshots not released (a session deciding, one being written, the last one shown)
    share no job object; a released one's clones go to the next snapshot."""
    cache = SchedulerCache()
    for kind, obj in (
        (("scheduling.volcano.sh/v1beta1", "Queue"), {"metadata": {"name": "default"}}),
        (("v1", "Node"), node("n0")),
        (("scheduling.volcano.sh/v1beta1", "PodGroup"), podgroup("a")),
        (("v1", "Pod"), pod("a-0", group="a", cpu="1", node_name="n0", phase="Running")),
    ):
        cache.apply(kind, "ADDED", obj)
    first = cache.snapshot()
    cache.release(first)  # lending starts with the first release
    a, b, c = cache.snapshot(), cache.snapshot(), cache.snapshot()
    objects = [s.jobs["default/a"] for s in (a, b, c)]
    assert len({id(job) for job in objects}) == 3
    cache.release(b)
    d = cache.snapshot()
    assert d.jobs["default/a"] is b.jobs["default/a"]
    cache.release(a)
    touched = d.jobs["default/a"]
    task = next(iter(touched.tasks.values()))
    touched.update_status(task, task.status)  # as a statement's move does
    cache.release(d)  # d's clone was touched; a's is clean and free
    e = cache.snapshot()
    assert e.jobs["default/a"] is a.jobs["default/a"]
    cache.release(e)
    cache.release(c)
    f = cache.snapshot()
    assert f.jobs["default/a"] in (c.jobs["default/a"], e.jobs["default/a"])
    assert f.jobs["default/a"] is not d.jobs["default/a"]


async def test_settled_jobs_are_lent_not_cloned(tmp_path: Path) -> None:
    """Forty one-pod jobs Running with nothing to do: once they settle, a snapshot lends
    their clones of a finished session again; a job whose pod changes gets a new clone."""
    c = await forty_settled(tmp_path)
    ssn = c.scheduler.last_session
    assert ssn is not None
    older = dict(ssn.jobs)
    await c.run()
    target = await c.get("Pod", "s3-0")
    target["status"]["phase"] = "Succeeded"
    await c.store.update_status(target)
    stats = await c.run()
    assert stats.session is not None
    jobs = stats.session.jobs
    reused = [uid for uid, job in jobs.items() if job is older.get(uid)]
    assert len(reused) == 39 and "default/s3" not in reused
    assert jobs["default/s3"].tasks[next(iter(jobs["default/s3"].tasks))].status.name == (
        "SUCCEEDED"
    )
