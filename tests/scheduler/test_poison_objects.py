"""Poison objects in process: one object the scheduler or controller cannot read never stops
them; it gets a Warning event naming the field and a count, and the others are scheduled."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.enrol import PodEnroller
from stromboli.core.events import EventRecorder
from stromboli.core.quarantine import REASON, Quarantine
from stromboli.core.scheduler.cache import POD, SchedulerCache

from .builders import Cluster, node, pod, podgroup, queue


async def cluster(tmp_path: Path) -> Cluster:
    return await Cluster(tmp_path).start()


def raw_pod(name: str, cpu: object, **kw: object) -> dict:
    """A pod as the API server would store it, bypassing our builders' own checks."""
    obj = pod(name, group=kw.pop("group", None), cpu="1", **kw)  # type: ignore[arg-type]
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return obj


@pytest.mark.parametrize("cpu", ["1e309", "1e100000000", "-1", "１", "lots"])
async def test_unreadable_pod_is_reported_and_others_are_bound(tmp_path: Path, cpu: str) -> None:
    c = await cluster(tmp_path)
    await c.add(node("n1"), podgroup("bad", 1), podgroup("good", 1))
    await c.add(raw_pod("bad-0", cpu, group="bad"), pod("good-0", group="good", cpu="1"))
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["good-0"]
    assert not await c.node_of("bad-0")
    events = await c.events(reason=REASON, name="bad-0")
    assert len(events) == 1
    assert events[0]["type"] == "Warning"
    assert "spec.containers[0].resources.requests.cpu" in events[0]["message"]
    # Once per version: later cycles do not post it again.
    await c.run(2)
    assert (await c.events(reason=REASON, name="bad-0"))[0]["count"] == 1


async def test_bound_pod_with_overflowing_request_does_not_stop_the_scheduler(
    tmp_path: Path,
) -> None:
    c = await cluster(tmp_path)
    await c.add(node("n1"), podgroup("good", 1))
    await c.add(raw_pod("bound", "1e309", node_name="n1"), pod("good-0", group="good", cpu="1"))
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["good-0"]
    assert await c.events(reason=REASON, name="bound")


async def test_scheduler_restart_with_a_poison_pod_stored(tmp_path: Path) -> None:
    c = await cluster(tmp_path)
    await c.add(node("n1"), podgroup("g", 1))
    await c.add(raw_pod("poison", "1e309", group="g"))
    await c.run()
    # A new scheduler lists the same store at start: it must come up and keep scheduling.
    from stromboli.core.scheduler.scheduler import Scheduler

    c.scheduler = Scheduler(c.store, c.clock, c.config)
    await c.scheduler.start()
    await c.add(podgroup("later", 1), pod("later-0", group="later", cpu="1"))
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["later-0"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"weight": 1, "capability": {"cpu": "1e309"}}, "spec.capability.cpu"),
        ({"weight": -1}, "spec.weight"),
        ({"weight": 1, "deserved": {"memory": "-1Gi"}}, "spec.deserved.memory"),
        (["x"], "spec"),
    ],
)
async def test_unreadable_queue_holds_only_its_own_jobs(
    tmp_path: Path, spec: object, field: str
) -> None:
    c = await cluster(tmp_path)
    bad = queue("bad")
    bad["spec"] = spec
    await c.add(node("n1"), podgroup("in-bad", 1, queue="bad"), podgroup("ok", 1))
    await c.add(bad)
    await c.add(pod("a", group="in-bad", cpu="1"), pod("b", group="ok", cpu="1"))
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["b"]
    (event,) = await c.events(reason=REASON, name="bad")
    assert field in event["message"]


async def test_unreadable_node_takes_no_pods(tmp_path: Path) -> None:
    c = await cluster(tmp_path)
    await c.add(node("n1", cpu="1e309"), node("n2"), podgroup("g", 1))
    await c.add(pod("p", group="g", cpu="1"))
    stats = await c.run()
    assert [(t.name, t.node_name) for t in stats.bound_tasks] == [("p", "n2")]
    assert await c.events(reason=REASON, name="n1")


async def test_node_that_becomes_unreadable_is_dropped_not_kept_stale(tmp_path: Path) -> None:
    c = await cluster(tmp_path)
    (n1,) = await c.add(node("n1"))
    await c.run()
    n1["status"]["allocatable"]["cpu"] = "1e309"
    await c.store.update_status(n1)
    await c.add(podgroup("g", 1), pod("p", group="g", cpu="1"))
    stats = await c.run()
    assert stats.bound == 0
    assert "n1" not in c.scheduler.cache.nodes.position


async def test_unreadable_podgroup_holds_only_its_pods(tmp_path: Path) -> None:
    c = await cluster(tmp_path)
    bad = podgroup("bad", 1, min_resources={"cpu": "1e309"})
    await c.add(node("n1"), podgroup("ok", 1))
    await c.add(bad)
    await c.add(pod("a", group="bad", cpu="1"), pod("b", group="ok", cpu="1"))
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["b"]
    (event,) = await c.events(reason=REASON, name="bad")
    assert "spec.minResources.cpu" in event["message"]


def test_cache_drops_the_old_version_of_a_pod_that_becomes_unreadable() -> None:
    cache = SchedulerCache()
    cache.apply(POD, "ADDED", pod("p", uid="p", cpu="1", group="g"))
    assert "p" in cache.pods
    with pytest.raises(ValueError, match="out of range"):
        cache.apply(POD, "MODIFIED", raw_pod("p", "1e309", uid="p", group="g"))
    assert "p" not in cache.pods


async def test_enroller_reports_a_pod_it_cannot_size(tmp_path: Path) -> None:
    clock = VirtualClock(0)
    store = MemoryStore(clock)
    enroller = PodEnroller(store, {"volcano"}, events=EventRecorder(store, clock, "test"))
    bad, good = raw_pod("bad", "1e309"), pod("good", cpu="1")
    for obj in (bad, good):
        enroller.seen(POD, "ADDED", await store.create(obj))
    assert await enroller.enrol_waiting() == 1
    events = (await store.list("v1", "Event")).items
    assert [e["involvedObject"]["name"] for e in events] == ["bad"]
    assert "spec.containers[0].resources.requests.cpu" in events[0]["message"]
    assert enroller.quarantine.counts == {"Pod": 1}


def test_quarantine_reports_each_version_once_and_bounds_messages() -> None:
    q = Quarantine("test")
    obj = {"kind": "Pod", "metadata": {"name": "p", "uid": "u", "resourceVersion": "1"}}
    assert q.reject(obj, ValueError("x" * 10_000))
    assert not q.reject(obj, ValueError("again"))
    obj["metadata"]["resourceVersion"] = "2"
    assert q.reject(obj, ValueError("v2"))
    taken = q.take()
    assert len(taken) == 2 and all(len(r.message) < 1100 for r in taken)
    q.forget(obj)
    obj["metadata"]["resourceVersion"] = "1"
    assert q.reject(obj, ValueError("a new object of that name"))


def test_quarantine_accepts_objects_without_usable_metadata() -> None:
    q = Quarantine("test")
    assert q.reject({"metadata": []}, TypeError("bad"), "Pod")  # type: ignore[dict-item]
    assert q.take() == []  # nothing to post an event on; logged and counted
    assert q.counts == {"Pod": 1}


async def test_job_that_breaks_a_plugin_is_set_aside_and_others_are_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stromboli.core.scheduler.actions import allocate

    real_place = allocate.place

    def place(ssn, task, *args, **kwargs):  # type: ignore[no-untyped-def]
        if task.job_id == "default/cursed":
            raise ValueError("metadata.annotations[x]: unreadable")
        return real_place(ssn, task, *args, **kwargs)

    monkeypatch.setattr(allocate, "place", place)
    c = await cluster(tmp_path)
    await c.add(node("n1"), podgroup("cursed", 2), podgroup("fine", 1))
    await c.add(
        pod("cursed-0", group="cursed", cpu="1"),
        pod("cursed-1", group="cursed", cpu="1"),
        pod("fine-0", group="fine", cpu="1"),
    )
    stats = await c.run()
    assert [t.name for t in stats.bound_tasks] == ["fine-0"]
    (event,) = await c.events(reason=REASON, name="cursed")
    assert "metadata.annotations[x]" in event["message"]
