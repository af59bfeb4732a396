"""Plain pods scheduled without a PodGroup object (``--plain-pod-groups=memory``): the real
scheduler over an in-memory store, compared with Volcano's way (``object``) on the same pods."""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.controller.enrol import PodEnroller
from stromboli.core.controller.podgroup import enrol_pod, needs_podgroup
from stromboli.core.scheduler.api.plaingroup import (
    fallback_group_name,
    plain_group_name,
    plain_pod_groups_mode,
)
from stromboli.core.scheduler.explain import explain, find_task
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.metrics import SchedulerMetrics
from stromboli.core.scheduler.scheduler import Scheduler

from .builders import (
    BASIC_CONF,
    SCHEDULING,
    Cluster,
    conf,
    node,
    pod,
    pod_condition,
    podgroup,
    priority_class,
    queue,
)

#: Preemption as in test_preempt, without overcommit and proportion: a plain pod's group
#: carries its ``minResources`` (the controller's formula), so on a full cluster their enqueue
#: votes keep it Pending, in either mode and in Volcano, and a Pending group does not preempt.
PREEMPT_CONF = conf(
    "enqueue, allocate, preempt, backfill",
    ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"],
    [{"name": "drf", "enablePreemptable": False}, "predicates"],
)


def owner(uid: str, kind: str = "ReplicaSet") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": f"rs-{uid}",
        "uid": uid,
        "controller": True,
    }


async def cluster(
    tmp_path: Path, mode: str = "memory", config: str = BASIC_CONF, *objects: dict
) -> Cluster:
    c = Cluster(tmp_path, config)
    c.scheduler = Scheduler(
        c.store, c.clock, c.config, plain_pod_groups=plain_pod_groups_mode(mode)
    )
    await c.start()
    await c.add(*objects)
    return c


async def restarted(c: Cluster, mode: str = "memory") -> Cluster:
    """A new scheduler process over the same store: it knows only what the store holds."""
    c.scheduler = Scheduler(
        c.store, c.clock, c.config, plain_pod_groups=plain_pod_groups_mode(mode)
    )
    await c.scheduler.start()
    return c


async def podgroups(c: Cluster) -> list[dict]:
    return (await c.store.list(SCHEDULING, "PodGroup")).items


async def group_events(c: Cluster) -> list[dict]:
    return [e for e in await c.events() if e["involvedObject"].get("kind") == "PodGroup"]


async def session(c: Cluster) -> Session:
    await c.scheduler.informer.pump()
    ssn = Session(c.scheduler.cache.snapshot(), c.config.current(), c.clock.now())
    ssn.open()
    return ssn


# -- the pure group name ----------------------------------------------------------------------


def test_group_name_is_the_owner_uid_or_the_pod_uid() -> None:
    assert fallback_group_name(pod("a", uid="p1")) == "podgroup-p1"
    assert fallback_group_name(pod("a", uid="p1", owner=owner("o1"))) == "podgroup-o1"
    not_controller = {**owner("o2"), "controller": False}
    assert fallback_group_name(pod("a", uid="p1", owner=not_controller)) == "podgroup-p1"
    assert fallback_group_name(pod("a")) is None


def test_plain_means_no_group_or_the_controllers_own_name() -> None:
    assert plain_group_name(pod("a", uid="p1")) == "podgroup-p1"
    assert plain_group_name(pod("a", uid="p1", group="podgroup-p1")) == "podgroup-p1"
    assert plain_group_name(pod("a", uid="p1", group="mine")) is None
    assert plain_group_name(pod("a")) is None  # no uid: nothing to name a group after


@pytest.mark.parametrize("value", ["", "Memory", "objects", "memory ", "x" * 10_000])
def test_mode_names_are_exact(value: str) -> None:
    with pytest.raises(ValueError, match="object, memory") as err:
        plain_pod_groups_mode(value)
    assert len(str(err.value)) < 120  # a huge value is not echoed whole


def test_hostile_owner_references_do_not_crash() -> None:
    for refs in ("nonsense", [None, 3, "x"], [{"controller": True}]):
        p = pod("a", uid="p1")
        p["metadata"]["ownerReferences"] = refs
        assert plain_group_name(p) in ("podgroup-p1", None)


# -- memory mode: no PodGroup, two writes -----------------------------------------------------


async def test_plain_pod_is_bound_without_a_podgroup_object(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "memory", BASIC_CONF, node("n1", cpu="4"))
    [created] = await c.add(pod("solo", cpu="1", memory="1Gi"))
    stats = await c.run()
    assert stats.bound == 1
    assert await c.node_of("solo") == "n1"
    assert await podgroups(c) == []
    stored = await c.pod("solo")
    assert k.GROUP_NAME_ANNOTATION not in (stored["metadata"].get("annotations") or {})
    [scheduled] = await c.events(reason="Scheduled")
    assert scheduled["involvedObject"]["kind"] == "Pod"
    assert scheduled["message"] == "Successfully assigned default/solo to n1"
    await c.run()
    assert await group_events(c) == []
    allocated = (await c.queue("default"))["status"]["allocated"]
    assert allocated == {"cpu": "1", "memory": "1Gi", "pods": "1"}
    # The group goes on in memory: Running once its pod is bound, as the object would be.
    job_id = f"default/podgroup-{created['metadata']['uid']}"
    entry = c.scheduler.cache.jobs[job_id]
    assert entry.in_memory
    assert entry.podgroup is not None and entry.podgroup["status"]["phase"] == "Running"


async def test_object_mode_still_needs_the_controllers_podgroup(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "object", BASIC_CONF, node("n1"))
    [created] = await c.add(pod("solo", cpu="1"))
    assert (await c.run()).bound == 0  # Volcano's way: no group yet, no scheduling
    assert needs_podgroup(created, {"volcano"})
    await enrol_pod(c.store, created)
    assert (await c.run()).bound == 1
    assert len(await podgroups(c)) == 1


async def test_object_mode_group_is_written_once_when_a_cycle_falls_between_enrol_writes(
    tmp_path: Path,
) -> None:
    """The controller's two writes (pod patch, PodGroup create) with a scheduler cycle between
    them, as on a busy cluster: the group is still written once (Pending → Running), never
    enqueued empty first (an ``Inqueue`` write and a gang event of its own)."""
    c = await cluster(tmp_path, "object", BASIC_CONF, node("n1"))
    [created] = await c.add(pod("solo", cpu="1"))
    writes: list[str] = []
    store = c.store
    real_create, real_patch, real_update = store.create, store.patch, store.update

    async def after_first_write() -> None:
        if len(writes) == 1:
            assert (await c.run()).bound == 0  # half enrolled: nothing to bind yet

    async def create(obj: dict) -> dict:
        made = await real_create(obj)
        writes.append(f"create {obj['kind']}")
        await after_first_write()
        return made

    async def patch(*args: Any, **kwargs: Any) -> dict:
        patched = await real_patch(*args, **kwargs)
        writes.append(f"patch {args[1]}")
        await after_first_write()
        return patched

    async def update(obj: dict) -> dict:
        writes.append(f"update {obj['kind']}")
        return await real_update(obj)

    store.create, store.patch, store.update = create, patch, update  # type: ignore[method-assign]
    name = await enrol_pod(store, created)
    assert name is not None
    assert writes == ["patch Pod", "create PodGroup"]
    assert (await c.run()).bound == 1
    assert writes.count("update PodGroup") == 1
    assert (await c.pg(name))["status"]["phase"] == "Running"
    assert [e["reason"] for e in await group_events(c)] == ["Scheduled"]


async def enrol_with_cycles(tmp_path: Path, owners: list[int | None], cycles: list[bool]) -> None:
    """Enrol plain pods (``owners``: the ReplicaSet of each, or None) one by one through the
    PodEnroller, a scheduler cycle after each controller write where ``cycles`` says so; then
    check what the groups' stored versions went through."""
    c = await cluster(tmp_path, "object", BASIC_CONF, node("n1", cpu="16"))
    made = await c.add(
        *(
            pod(f"p{i}", cpu="1", owner=None if o is None else owner(f"rs{o}"))
            for i, o in enumerate(owners)
        )
    )
    store = c.store
    real_create, real_patch, real_update = store.create, store.patch, store.update
    turns = iter(cycles)
    phases: dict[str, list[str]] = {}

    async def maybe_cycle() -> None:
        if next(turns, False):
            await c.run()

    async def create(obj: dict) -> dict:
        created = await real_create(obj)
        if obj["kind"] == "PodGroup":  # the controller's (the scheduler creates events)
            await maybe_cycle()
        return created

    async def patch(*args: Any, **kwargs: Any) -> dict:
        patched = await real_patch(*args, **kwargs)
        if args[1] == "Pod":
            await maybe_cycle()
        return patched

    async def update(obj: dict) -> dict:
        if obj["kind"] == "PodGroup":
            phases.setdefault(obj["metadata"]["name"], []).append(obj["status"]["phase"])
        return await real_update(obj)

    store.create, store.patch, store.update = create, patch, update  # type: ignore[method-assign]
    enroller = PodEnroller(store, {"volcano"})
    for created in made:
        enroller.seen(("v1", "Pod"), "ADDED", created)
        assert await enroller.enrol_waiting() == 1
    await c.run(2)
    groups = {g["metadata"]["name"] for g in await podgroups(c)}
    assert groups == {fallback_group_name(p) for p in made}
    assert all([await c.node_of(p["metadata"]["name"]) for p in made])
    # Every group was admitted and placed in one cycle: never stored Inqueue, written once
    # (Running), no gang event of its own; no pod was bound twice.
    assert set(phases) == groups
    assert all(written == ["Running"] for written in phases.values())
    assert [e for e in await group_events(c) if e["reason"] != "Scheduled"] == []
    assert len(await c.events(reason="Scheduled")) == len(made) + len(groups)


@settings(max_examples=25, deadline=None)
@given(
    owners=st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=1, max_size=6),
    cycles=st.lists(st.booleans(), max_size=12),
)
def test_object_mode_groups_are_written_once_whatever_cycles_fall_between_enrol_writes(
    owners: list[int | None], cycles: list[bool]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(enrol_with_cycles(Path(tmp), owners, cycles))


async def test_controller_in_memory_mode_creates_and_patches_nothing(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "memory", BASIC_CONF, node("n1"))
    [created] = await c.add(pod("solo", cpu="1"))
    version = created["metadata"]["resourceVersion"]
    for mode, enrolled in (("memory", 0), ("object", 1)):
        enroller = PodEnroller(c.store, {"volcano"}, plain_pod_groups=plain_pod_groups_mode(mode))
        enroller.seen(("v1", "Pod"), "ADDED", created)
        assert await enroller.enrol_waiting() == enrolled
        if mode == "memory":
            assert await podgroups(c) == []
            assert (await c.pod("solo"))["metadata"]["resourceVersion"] == version


async def test_pods_of_one_owner_share_one_group(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "memory", BASIC_CONF, node("n1", cpu="2"))
    await c.add(*(pod(f"web-{i}", cpu="1", owner=owner("rs1")) for i in range(3)))
    stats = await c.run()
    assert stats.bound == 2  # minMember 1: the two that fit go, the third waits
    ssn = await session(c)
    [job] = [j for j in ssn.jobs.values() if j.in_memory]
    assert job.name == "podgroup-rs1" and job.min_available == 1 and len(job.tasks) == 3


async def test_queue_annotation_and_priority_class_are_read_from_the_pod(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        "memory",
        BASIC_CONF,
        node("n1", cpu="4"),
        queue("eng"),
        priority_class("high", 1000),
    )
    await c.add(
        pod(
            "p",
            cpu="1",
            priority_class="high",
            annotations={k.QUEUE_NAME_ANNOTATION_KEY: "eng"},
        )
    )
    await c.run()
    [job] = (await session(c)).jobs.values()
    assert (job.queue, job.priority) == ("eng", 1000)
    assert (await c.queue("eng"))["status"]["allocated"]["cpu"] == "1"


async def test_unschedulable_plain_pod_says_why_on_the_pod(tmp_path: Path) -> None:
    said = {}
    for mode in ("object", "memory"):
        (tmp_path / mode).mkdir()
        c = await cluster(tmp_path / mode, mode, BASIC_CONF, node("n1", cpu="1"))
        [created] = await c.add(pod("big", cpu="8"))
        if mode == "object":
            await enrol_pod(c.store, created)
        await c.run()
        condition = pod_condition(await c.pod("big"))
        assert condition is not None and condition["status"] == "False"
        said[mode] = (condition["reason"], condition["message"])
    assert said["memory"] == said["object"]
    assert said["memory"][0] == "Unschedulable"
    [failed] = await c.events(reason="FailedScheduling")
    assert failed["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "big",
        "namespace": "default",
    }
    assert await group_events(c) == []
    assert await podgroups(c) == []
    # explain finds the pod in its in-memory group.
    ssn = await session(c)
    task = find_task(ssn, "default", "big")
    assert task is not None
    result = explain(ssn, task)
    assert result.job.in_memory
    [verdict] = result.nodes
    assert verdict.failures[0][0] == "resources"


async def test_a_stored_podgroup_of_the_same_name_takes_over(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "memory", BASIC_CONF, node("n1", cpu="1"), queue("eng"))
    await c.add(pod("big", cpu="8", owner=owner("rs9")))
    await c.run()
    await c.add(podgroup("podgroup-rs9", 1, queue="eng"))
    [job] = (await session(c)).jobs.values()
    assert (job.queue, job.in_memory) == ("eng", False)
    await c.run()  # the object's status is written as Volcano's scheduler writes it
    assert (await c.pg("podgroup-rs9"))["status"]["phase"] in ("Pending", "Inqueue")
    assert await group_events(c) != []
    await c.store.delete(SCHEDULING, "PodGroup", "podgroup-rs9", "default")
    await c.run()
    [job] = (await session(c)).jobs.values()
    assert (job.queue, job.in_memory) == ("default", True)


async def test_a_pod_given_a_group_follows_it(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "memory", BASIC_CONF, queue("eng"))
    await c.add(pod("p", cpu="1"), podgroup("mine", 1, queue="eng"))
    await c.run()
    jobs = (await session(c)).jobs.values()
    assert [j.in_memory for j in jobs if j.tasks] == [True]
    await c.store.patch(
        "v1",
        "Pod",
        "p",
        {"metadata": {"annotations": {k.GROUP_NAME_ANNOTATION: "mine"}}},
        "default",
    )
    await c.add(node("n1"))
    assert (await c.run()).bound == 1
    ssn = await session(c)
    assert [j.uid for j in ssn.jobs.values() if j.tasks] == ["default/mine"]
    assert not any(j.in_memory for j in ssn.jobs.values())  # it went with its last pod
    assert (await c.queue("eng"))["status"]["allocated"]["cpu"] == "1"


async def test_restart_rebuilds_groups_from_pods_and_binds_nothing_twice(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "memory", BASIC_CONF, node("n1", cpu="2"))
    await c.add(pod("a", cpu="1"), pod("b", cpu="1"))
    assert (await c.run()).bound == 2
    for name in ("a", "b"):
        await c.set_phase(name, "Running")
    await c.run()
    allocated = (await c.queue("default"))["status"]["allocated"]
    await restarted(c)
    stats = await c.run()
    assert (stats.bind_attempts, stats.bound) == (0, 0)
    assert (await c.queue("default"))["status"]["allocated"] == allocated
    phases = {e.podgroup["status"]["phase"] for e in c.scheduler.cache.jobs.values() if e.in_memory}
    assert phases == {"Running"}
    await c.add(pod("c", cpu="1"))
    assert (await c.run()).bound == 0  # the node is full: the restart kept its room counted
    assert len(await c.events(reason="Scheduled")) == 2


async def test_a_plain_pod_preempts_and_is_preempted(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        "memory",
        PREEMPT_CONF,
        node("n1", cpu="2"),
        priority_class("high", 1000),
        priority_class("low", 10),
    )
    await c.add(*(pod(f"low-{i}", cpu="1", priority=10, priority_class="low") for i in range(2)))
    await c.run()
    for name in ("low-0", "low-1"):
        await c.set_phase(name, "Running")
    await c.add(pod("high", cpu="1", priority=1000, priority_class="high"))
    stats = await c.run()
    assert stats.evicted == 1
    [evict] = await c.events(reason="Evict")
    assert evict["involvedObject"]["kind"] == "Pod"
    assert await group_events(c) == []
    await c.run()
    assert await c.node_of("high") == "n1"


async def test_an_unreadable_plain_pod_is_set_aside(tmp_path: Path) -> None:
    c = await cluster(tmp_path, "memory", BASIC_CONF, node("n1"))
    bad = pod("bad", cpu="1", annotations={k.NETWORK_TOPOLOGY_MODE_KEY: "hard"})
    bad["metadata"]["annotations"][k.NETWORK_TOPOLOGY_HIGHEST_TIER_KEY] = "x" * 100_000
    await c.add(bad, pod("good", cpu="1"))
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["good"]
    assert c.scheduler.cache.quarantine.counts.get("Pod") == 1


async def test_a_plain_pod_group_a_plugin_breaks_on_is_warned_on_its_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stromboli.core.scheduler.actions.allocate import AllocateAction

    c = await cluster(tmp_path, "memory", BASIC_CONF, node("n1", cpu="4"))
    await c.add(pod("broken", cpu="1"), pod("fine", cpu="1"))
    real = AllocateAction.allocate_job

    def breaks_on_one(ssn: Any, queue: Any, job: Any, *rest: Any) -> None:
        if any(t.name == "broken" for t in job.tasks.values()):
            raise RuntimeError("a plugin broke")
        real(ssn, queue, job, *rest)

    monkeypatch.setattr(AllocateAction, "allocate_job", staticmethod(breaks_on_one))
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["fine"]
    assert c.scheduler.cache.quarantine.counts.get("Pod") == 1
    assert "PodGroup" not in c.scheduler.cache.quarantine.counts
    warned = {e["involvedObject"]["name"] for e in await c.events() if e["type"] == "Warning"}
    assert "broken" in warned
    assert await group_events(c) == []


# -- the two modes decide alike -----------------------------------------------------------------

NODE_CPUS = st.lists(st.integers(1, 4), min_size=1, max_size=4)
POD = st.tuples(
    st.integers(1, 3),  # cpu
    st.integers(0, 2),  # owner: 0 none, else one of two ReplicaSets
    st.sampled_from(["default", "eng"]),
    st.sampled_from([None, "high"]),
)


async def decide(tmp: Path, mode: str, cpus: list[int], pods: list[tuple]) -> tuple[dict, dict]:
    """Bindings and queue totals after a few cycles; pods arrive between cycles."""
    c = Cluster(tmp, BASIC_CONF)
    c.scheduler = Scheduler(
        c.store, c.clock, c.config, plain_pod_groups=plain_pod_groups_mode(mode)
    )
    await c.start()
    await c.add(queue("eng"), priority_class("high", 1000))
    await c.add(*(node(f"n{i}", cpu=str(cpu)) for i, cpu in enumerate(cpus)))
    for i, (cpu, owned, queue_name, level) in enumerate(pods):
        made = pod(
            f"p{i}",
            uid=f"uid-{i}",
            cpu=str(cpu),
            owner=owner(f"rs{owned}") if owned else None,
            priority_class=level,
            annotations={k.QUEUE_NAME_ANNOTATION_KEY: queue_name},
        )
        created = await c.store.create(made)
        if mode == "object":
            await enrol_pod(c.store, created)  # the controller, in the pod's second
        c.clock.advance(1)
        if i % 3 == 2:
            await c.run()
    await c.run(3)
    pods_now = (await c.store.list("v1", "Pod")).items
    bound = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods_now}
    queues = (await c.store.list(SCHEDULING, "Queue")).items
    totals = {q["metadata"]["name"]: (q.get("status") or {}).get("allocated") for q in queues}
    return bound, totals


@settings(max_examples=30, deadline=None)
@given(cpus=NODE_CPUS, pods=st.lists(POD, min_size=1, max_size=8))
def test_memory_mode_decides_as_object_mode(cpus: list[int], pods: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        objects = asyncio.run(decide(Path(one), "object", cpus, pods))
        memory = asyncio.run(decide(Path(two), "memory", cpus, pods))
    assert memory == objects


#: Metrics of what was decided (not of how long it took): equal in both modes.
DECIDED = re.compile(
    r"^(volcano_queue_\w+|volcano_job_share|volcano_namespace_\w+|volcano_unschedule_\w+"
    r"|volcano_schedule_attempts_total|stromboli_pending_pods)[{ ]"
)


async def decided_metrics(tmp: Path, mode: str) -> list[str]:
    c = await cluster(tmp, mode, BASIC_CONF, node("n1", cpu="2"), queue("eng"))
    metrics = SchedulerMetrics()
    for i in range(5):
        made = pod(
            f"p{i}",
            cpu="1",
            owner=owner("rs1") if i < 2 else None,
            annotations={k.QUEUE_NAME_ANNOTATION_KEY: "eng" if i % 2 else "default"},
        )
        created = await c.store.create(made)
        if mode == "object":
            await enrol_pod(c.store, created)
        c.clock.advance(1)
    for _ in range(3):
        metrics.observe(await c.scheduler.run_once())
        c.clock.advance(1)
    text = metrics.exposition().decode()
    # The store gives each run its own pod uids: name an owner-less pod's group by its pod.
    for p in (await c.store.list("v1", "Pod")).items:
        text = text.replace(f"podgroup-{p['metadata']['uid']}", f"group-of-{p['metadata']['name']}")
    return sorted(line for line in text.splitlines() if DECIDED.match(line))


async def test_metrics_of_the_decisions_are_the_same_in_both_modes(tmp_path: Path) -> None:
    (tmp_path / "object").mkdir()
    (tmp_path / "memory").mkdir()
    objects = await decided_metrics(tmp_path / "object", "object")
    memory = await decided_metrics(tmp_path / "memory", "memory")
    assert any(line.startswith("volcano_queue_allocated_milli_cpu") for line in memory)
    assert any("podgroup-rs1" in line for line in memory)  # per-job metrics name the group
    assert memory == objects
