"""A close that looks only at the jobs that may have changed (``settled.py``) writes, reports and
counts exactly what a close over every job writes: two schedulers on identical stores, one
with settled jobs skipped and one without, go through the same random cycles (gangs and plain
pods arriving, pods running, finishing and deleted, groups deleted and edited by others, nodes
and queues coming and going, preemption), and after every cycle their stores (PodGroup,
Queue and pod objects, resource versions included, so the same writes happened), their events
and their metrics agree."""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter, deque
from pathlib import Path
from typing import Any

from hypothesis import event, given, settings, target
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.changelog import JobChanges
from stromboli.core.scheduler.metrics import SchedulerMetrics
from stromboli.core.scheduler.queueheld import HeldByQueue, job_part
from stromboli.core.scheduler.scheduler import CycleStats, Decided
from stromboli.core.scheduler.settled import SettledJobs
from stromboli.core.scheduler.status import _add_held

from .builders import (
    BASIC_CONF,
    SCHEDULING,
    Cluster,
    conf,
    job_info,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
    task,
)

PREEMPT_CONF = conf(
    "enqueue, allocate, preempt, backfill",
    ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"],
    ["overcommit", {"name": "drf", "enablePreemptable": False}, "predicates", "proportion"],
)
CAPACITY_CONF = conf(
    "enqueue, allocate, backfill",
    ["priority", "gang", "conformance"],
    ["predicates", {"name": "capacity", "enableHierarchy": True}],
)
#: Families timed with the machine's clock (the rest follow the virtual one).
TIMED = (
    "volcano_e2e_scheduling_latency_milliseconds",
    "volcano_open_session_duration_milliseconds",
    "volcano_action_scheduling_latency_milliseconds",
    "volcano_plugin_scheduling_latency_milliseconds",
    "volcano_scheduling_stage_duration_milliseconds",
    "stromboli_cycle_duration_seconds",
)
CPUS = ("100m", "500m", "1", "1500m", "2", "0.5m")
QUEUES = ("default", "eng", "ops")
NAMESPACES = ("default", "team")

OP = st.one_of(
    st.tuples(
        st.just("job"),
        st.integers(1, 4),  # pods
        st.integers(1, 4),  # minMember
        st.sampled_from(CPUS),
        st.sampled_from(QUEUES),
        st.sampled_from(NAMESPACES),
        st.sampled_from(("", "high", "low")),
    ),
    st.tuples(st.sampled_from(("run", "succeed", "fail", "delete_pod")), st.integers(0, 50)),
    st.tuples(st.sampled_from(("delete_pg", "pg_phase", "pg_queue")), st.integers(0, 50)),
    st.tuples(st.just("node_add"), st.sampled_from(("2", "4"))),
    st.tuples(st.just("node_del"), st.integers(0, 10)),
    st.tuples(st.just("queue"), st.sampled_from(("eng", "ops")), st.sampled_from(("", "eng"))),
    st.tuples(
        st.just("run_all"),
    ),
    st.tuples(
        st.just("wait"),
    ),
)


class Run:
    """One scheduler over its store, with its metrics; ``pipelined`` is how many decided
    cycles may wait to be written while the next one decides (0: each written at once), as
    the server loop's ``commits_in_flight``; a cycle's bindings are written when it is decided,
    ahead of the commits still waiting, as the server's are."""

    def __init__(self, c: Cluster, settled: bool, pipelined: int) -> None:
        self.c = c
        c.scheduler.settled = SettledJobs(settled)
        self.metrics = SchedulerMetrics()
        self.pipelined = int(pipelined)
        self.decided: deque[Decided] = deque()
        self.names = 0

    async def cycle(self) -> None:
        scheduler = self.c.scheduler
        if not self.pipelined:
            self.observe(await scheduler.run_once())
        else:
            cycle = await scheduler.decide()
            scheduler.reserve(cycle)
            scheduler.start_binds(cycle)
            if cycle.binding is not None:
                # Written before earlier cycles' statuses, as in the server; awaited here so
                # that runs compared side by side interleave their writes alike.
                await cycle.binding
            self.decided.append(cycle)
            while len(self.decided) > (0 if cycle.evicts else self.pipelined):
                self.observe(await scheduler.commit(self.decided.popleft()))
        self.c.clock.advance(1)

    def observe(self, stats: CycleStats) -> None:
        self.metrics.observe(stats)

    async def objects(self, kind: str) -> list[dict]:
        api = "v1" if kind == "Pod" or kind == "Node" else SCHEDULING
        items = (await self.c.store.list(api, kind)).items
        return sorted(
            items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])
        )

    async def apply(self, op: tuple) -> None:
        c, kind = self.c, op[0]
        if kind == "job":
            _, size, minimum, cpu, queue_name, namespace, priority = op
            self.names += 1
            name = f"j{self.names}"
            await c.add(
                podgroup(
                    name,
                    min(minimum, size),
                    namespace=namespace,
                    queue=queue_name,
                    priority_class=priority or None,
                )
            )
            for i in range(size):
                await c.add(
                    pod(
                        f"{name}-{i}",
                        group=name,
                        namespace=namespace,
                        cpu=cpu,
                        memory="1Gi",
                        priority_class=priority or None,
                    )
                )
        elif kind == "run_all":  # the kubelet starts every bound pod
            for p in await self.objects("Pod"):
                if (p.get("spec") or {}).get("nodeName") and p["status"].get("phase") == "Pending":
                    p["status"]["phase"] = "Running"
                    await c.store.update_status(p)
        elif kind in ("run", "succeed", "fail", "delete_pod"):
            bound = [p for p in await self.objects("Pod") if (p.get("spec") or {}).get("nodeName")]
            if not bound:
                return
            target = bound[op[1] % len(bound)]
            meta = target["metadata"]
            if kind == "delete_pod":
                await c.store.delete("v1", "Pod", meta["name"], meta["namespace"])
                return
            phase = {"run": "Running", "succeed": "Succeeded", "fail": "Failed"}[kind]
            target.setdefault("status", {})["phase"] = phase
            await c.store.update_status(target)
        elif kind in ("delete_pg", "pg_phase", "pg_queue"):
            groups = await self.objects("PodGroup")
            if not groups:
                return
            target = groups[op[1] % len(groups)]
            meta = target["metadata"]
            if kind == "delete_pg":
                await c.store.delete(SCHEDULING, "PodGroup", meta["name"], meta["namespace"])
            elif kind == "pg_phase":  # another writer resets the status
                target["status"] = {"phase": "Pending"}
                await c.store.update(target)
            else:
                target["spec"]["queue"] = "ops"
                await c.store.update(target)
        elif kind == "node_add":
            self.names += 1
            await c.add(node(f"n{self.names}", cpu=op[1], memory="8Gi"))
        elif kind == "node_del":
            nodes = await self.objects("Node")
            if nodes:
                target = nodes[op[1] % len(nodes)]
                await c.store.delete("v1", "Node", target["metadata"]["name"])
        elif kind == "queue":
            _, name, parent = op
            try:
                await c.store.get(SCHEDULING, "Queue", name)
            except NotFoundError:
                await c.add(queue(name, parent=parent or None))

    async def state(self) -> dict[str, Any]:
        stored: dict[tuple, Any] = {}
        for kind in ("PodGroup", "Queue", "Pod"):
            for obj in await self.objects(kind):
                meta = obj["metadata"]
                status = dict(obj.get("status") or {})
                status["conditions"] = [
                    {k: v for k, v in condition.items() if k != "transitionID"}
                    for condition in status.get("conditions") or ()
                ]
                stored[(kind, meta.get("namespace"), meta["name"])] = (
                    meta.get("resourceVersion"),
                    meta.get("annotations"),
                    (obj.get("spec") or {}).get("nodeName"),
                    status,
                )
        events = Counter(
            (
                e["involvedObject"].get("kind"),
                e["involvedObject"].get("name"),
                e["type"],
                e["reason"],
                e["message"],
                e.get("count"),
            )
            for e in (await self.c.store.list("v1", "Event")).items
        )
        return {"objects": stored, "events": events, "metrics": self.samples()}

    def samples(self) -> dict[tuple, float]:
        out: dict[tuple, float] = {}
        text = self.metrics.exposition().decode()
        for family in text_string_to_metric_families(text):
            if family.name in TIMED:
                continue
            for sample in family.samples:
                if sample.name.endswith("_created"):
                    continue
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out


async def _compare(config: str, pipelined: int, steps: list[list[tuple]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for settled in (True, False):
            path = Path(tmp) / str(settled)
            path.mkdir()
            c = await Cluster(path, config).start()
            await c.add(priority_class("high", 1000), priority_class("low", 10))
            await c.add(node("n0", cpu="16", memory="32Gi"))
            runs.append(Run(c, settled, pipelined))
        skipped = 0
        for step in steps:
            for op in step:
                for run in runs:
                    await run.apply(op)
            for run in runs:
                await run.cycle()
            settled_state, full_state = [await run.state() for run in runs]
            assert settled_state["objects"] == full_state["objects"]
            assert settled_state["events"] == full_state["events"]
            assert settled_state["metrics"] == full_state["metrics"]
            ssn = runs[0].c.scheduler.last_session
            if ssn is not None and ssn.closing is not None and not ssn.closing.full:
                skipped += len(ssn.jobs) - len(ssn.closing.jobs)
        event(f"settled jobs skipped: {'some' if skipped else 'none'}")
        target(float(skipped), label="settled jobs skipped")
        for run in runs:
            await run.c.scheduler.informer.stop()


@settings(max_examples=40, deadline=None)
@given(
    config=st.sampled_from((BASIC_CONF, PREEMPT_CONF, CAPACITY_CONF)),
    pipelined=st.integers(0, 2),
    steps=st.lists(st.lists(OP, max_size=4), min_size=3, max_size=10),
)
def test_settled_close_writes_what_a_full_close_writes(
    config: str, pipelined: int, steps: list[list[tuple]]
) -> None:
    asyncio.run(_compare(config, pipelined, steps))


async def forty_settled(tmp_path: Path) -> Cluster:
    """A cluster whose forty one-pod jobs are Running with nothing to do, and settled."""
    c = await Cluster(tmp_path, BASIC_CONF).start()
    await c.add(node("n0", cpu="64", memory="64Gi"))
    for i in range(40):
        await c.add(podgroup(f"s{i}"), pod(f"s{i}-0", group=f"s{i}", cpu="100m"))
    await c.run(2)
    for p in (await c.store.list("v1", "Pod")).items:
        p.setdefault("status", {})["phase"] = "Running"
        await c.store.update_status(p)
    await c.run(3)
    return c


async def test_settled_jobs_are_not_looked_at(tmp_path: Path) -> None:
    """Forty one-pod jobs Running with nothing to do: after they settle, a cycle with one new
    job closes that job alone (plus none of the settled ones), and writes what it must."""
    c = await forty_settled(tmp_path)
    ssn = c.scheduler.last_session
    assert ssn is not None and ssn.closing is not None and not ssn.closing.full
    assert ssn.closing.jobs == []
    await c.add(podgroup("new"), pod("new-0", group="new", cpu="100m"))
    stats = await c.run()
    ssn = c.scheduler.last_session
    assert ssn is not None and ssn.closing is not None
    assert [job.name for job in ssn.closing.jobs] == ["new"]
    assert stats.bound == 1
    assert (await c.pg("new"))["status"]["phase"] == "Running"
    assert (await c.queue("default"))["status"]["allocated"]["cpu"] == "4100m"


def test_change_log_answers_since_a_mark_and_gives_up_when_it_cannot() -> None:
    log = JobChanges()
    start = log.mark()
    log.note("a")
    middle = log.mark()
    log.note("b")
    assert log.since(start) == {"a", "b"}
    assert log.since(middle) == {"b"}
    log.forget_before(middle)
    assert log.since(start) is None  # forgotten: the reader must look at everything
    assert log.since(middle) == {"b"}
    before_all = log.mark()
    log.note_all()
    assert log.since(before_all) is None
    after = log.mark()
    log.note("c")
    assert log.since(after) == {"c"}


@settings(max_examples=100, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(st.sampled_from(QUEUES), st.sampled_from(CPUS), st.integers(0, 3)),
        max_size=12,
    ),
    changes=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 3)), max_size=12),
)
def test_queue_totals_kept_from_parts_equal_a_fresh_sum(
    jobs: list[tuple[str, str, int]], changes: list[tuple[int, int]]
) -> None:
    """Parts added and taken away give each queue the sum a walk over every job gives, or
    None when an amount has a fraction (the caller then walks every job)."""
    infos = []
    for i, (queue_name, cpu, count) in enumerate(jobs):
        pods = [
            task(f"j{i}-{n}", job=f"default/j{i}", cpu=cpu, phase="Running", node_name="n0")
            for n in range(count)
        ]
        info = job_info(1, pods, name=f"j{i}")
        info.queue = queue_name
        infos.append(info)
    held = HeldByQueue()
    held.rebuild(infos)
    for index, count in changes:
        if not infos:
            break
        job = infos[index % len(infos)]
        for uid in list(job.tasks)[count:]:
            job.remove_task(uid)
        held.update(job)
    fresh: dict[str, Resource] = {}
    for job in infos:
        _add_held(fresh, job)
    totals = held.totals()
    fractional = any(not v.is_integer() for r in fresh.values() for v in r.amounts.values())
    if totals is None:
        assert fractional or any(
            not v.is_integer() for job in infos for v in job_part(job).values()
        )
        return
    assert not fractional
    nonempty = {q: r.amounts for q, r in fresh.items() if r.amounts}
    assert {q: r.amounts for q, r in totals.items() if r.amounts} == nonempty
