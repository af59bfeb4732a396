"""The scheduler loop over a store: built-in queues, queue status, which pods it follows,
and how its cache tracks the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.controller.podgroup import enrol_pod, needs_podgroup
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.cache import SchedulerCache

from .builders import (
    BASIC_CONF,
    Cluster,
    conf,
    make_cache,
    node,
    pod,
    pod_condition,
    podgroup,
    queue,
)


async def start(tmp_path: Path, *objects: dict, config: str = BASIC_CONF) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(*objects)
    return c


# -- built-in queues -----------------------------------------------------------------------------


async def test_start_creates_root_and_default_queues(tmp_path: Path) -> None:
    c = await start(tmp_path)
    root, default = await c.queue("root"), await c.queue("default")
    assert root["spec"]["weight"] == 1
    assert root["spec"]["reclaimable"] is False
    assert "parent" not in root["spec"]
    assert root["status"]["state"] == "Open"
    assert default["spec"]["weight"] == 1
    assert default["spec"]["reclaimable"] is True
    assert default["spec"]["parent"] == "root"
    assert default["status"]["state"] == "Open"


async def test_start_keeps_existing_queues(tmp_path: Path) -> None:
    c = Cluster(tmp_path, BASIC_CONF)
    await c.add(queue("default", weight=7))
    await c.start()
    assert (await c.queue("default"))["spec"]["weight"] == 7
    assert await c.exists("Queue", "root", None)


async def test_start_twice_is_harmless(tmp_path: Path) -> None:
    c = await start(tmp_path)
    await c.scheduler.start()
    assert (await c.queue("root"))["status"]["state"] == "Open"


# -- queue status.allocated ----------------------------------------------------------------------


async def test_queue_allocated_is_written_and_rolled_up_to_root(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="8", memory="16Gi"),
        queue("eng"),
        queue("dev", parent="eng"),
        podgroup("a", 1, queue="dev"),
        pod("a-0", group="a", cpu="1", memory="1Gi"),
        pod("a-1", group="a", cpu="500m", memory="1Gi"),
        podgroup("b", 1),
        pod("b-0", group="b", cpu="2"),
    )
    await c.run()
    allocated = {
        name: (await c.queue(name))["status"].get("allocated")
        for name in ("dev", "eng", "default", "root")
    }
    # As Volcano writes it: cpu and memory always, the pods counted.
    assert allocated == {
        "dev": {"cpu": "1500m", "memory": "2Gi", "pods": "2"},
        "eng": {"cpu": "1500m", "memory": "2Gi", "pods": "2"},
        "default": {"cpu": "2", "memory": "0", "pods": "1"},
        "root": {"cpu": "3500m", "memory": "2Gi", "pods": "3"},
    }


async def test_queue_allocated_drops_finished_pods(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("a", 1), pod("a-0", group="a", cpu="1"))
    await c.run()
    assert (await c.queue("default"))["status"]["allocated"] == {
        "cpu": "1",
        "memory": "0",
        "pods": "1",
    }
    await c.set_phase("a-0", "Succeeded")
    await c.run()
    idle = {"cpu": "0", "memory": "0"}
    assert (await c.queue("default"))["status"]["allocated"] == idle
    assert (await c.queue("root"))["status"]["allocated"] == idle


async def test_queue_status_keeps_its_state(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("a", 1), pod("a-0", group="a", cpu="1"))
    await c.run()
    assert (await c.queue("default"))["status"]["state"] == "Open"


async def test_queue_status_not_rewritten_when_unchanged(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("a", 1), pod("a-0", group="a", cpu="1"))
    await c.run()
    version = (await c.queue("default"))["metadata"]["resourceVersion"]
    await c.run(2)
    assert (await c.queue("default"))["metadata"]["resourceVersion"] == version


# -- which pods the scheduler follows ------------------------------------------------------------


async def test_pods_of_another_scheduler_are_ignored(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1"),
        podgroup("pg", 1),
        pod("theirs", group="pg", cpu="1", scheduler="default-scheduler"),
        pod("unnamed", group="pg", cpu="1", scheduler=None),
    )
    stats = await c.run()
    assert stats.bound == 0
    for name in ("theirs", "unnamed"):
        p = await c.pod(name)
        assert not p["spec"].get("nodeName")
        assert pod_condition(p) is None
    assert await c.events(reason="FailedScheduling") == []


async def test_pods_of_another_scheduler_are_not_enrolled() -> None:
    p = pod("theirs", uid="u1", scheduler="default-scheduler")
    assert not needs_podgroup(p, {"volcano"})


async def test_extra_scheduler_names_are_followed(tmp_path: Path) -> None:
    c = Cluster(tmp_path, BASIC_CONF)
    c.scheduler.cache.scheduler_names.add("batch")
    await c.start()
    await c.add(node("n1"), podgroup("pg", 1), pod("pg-0", group="pg", cpu="1", scheduler="batch"))
    assert (await c.run()).bound == 1


async def test_bare_pod_is_enrolled_then_scheduled(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"))
    [created] = await c.add(pod("solo", cpu="1"))
    assert needs_podgroup(created, {"volcano"})
    group = await enrol_pod(c.store, created)
    assert group == f"podgroup-{created['metadata']['uid']}"
    stats = await c.run()
    assert stats.bound == 1
    assert await c.node_of("solo") == "n1"
    await c.run()
    assert (await c.pg(group))["status"]["phase"] == "Running"


async def test_pod_naming_a_missing_podgroup_waits(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), pod("early-0", group="early", cpu="1"))
    assert (await c.run()).bound == 0
    await c.add(podgroup("early", 1))
    assert (await c.run()).bound == 1


async def test_deleted_pod_frees_its_node(tmp_path: Path) -> None:
    c = await start(
        tmp_path,
        node("n1", cpu="2"),
        pod("hog", cpu="2", node_name="n1", phase="Running", scheduler="default-scheduler"),
        podgroup("pg", 1),
        pod("pg-0", group="pg", cpu="2"),
    )
    assert (await c.run()).bound == 0
    await c.store.delete("v1", "Pod", "hog", "default")
    assert (await c.run()).bound == 1


async def test_config_change_takes_effect_next_cycle(tmp_path: Path) -> None:
    import os

    c = await start(tmp_path, node("n1"), podgroup("be", 1), pod("be-0", group="be"))
    c.conf_path.write_text(conf("enqueue, allocate", ["gang"]))
    os.utime(c.conf_path, (1, 1))
    assert (await c.run()).bound == 0  # no backfill: the best-effort pod waits
    c.conf_path.write_text(BASIC_CONF)
    os.utime(c.conf_path, (2, 2))
    assert (await c.run()).bound == 1


async def test_cycle_stats(tmp_path: Path) -> None:
    c = await start(tmp_path, node("n1"), podgroup("a", 1), pod("a-0", group="a", cpu="1"))
    stats = await c.run()
    assert stats.bound == 1
    assert set(stats.action_seconds) == {"enqueue", "allocate", "backfill"}
    assert stats.session is c.scheduler.last_session
    assert stats.status_writes >= 2  # the PodGroup and at least one queue


# -- the cache -----------------------------------------------------------------------------------


def test_cache_accounts_assigned_pods_of_any_scheduler() -> None:
    cache = make_cache(
        [
            node("n1", cpu="4"),
            pod("mine", uid="m", cpu="1", node_name="n1", phase="Running", group="g"),
            pod("theirs", uid="t", cpu="2", node_name="n1", phase="Running", scheduler="x"),
            pod("waiting", uid="w", cpu="3", scheduler="x"),
        ]
    )
    assert cache.nodes.used_of("n1").milli_cpu == 3000
    assert "w" not in cache.pods


def test_cache_counts_pods_that_arrive_before_their_node() -> None:
    cache = make_cache([pod("early", uid="e", cpu="1", node_name="n1", phase="Running")])
    cache.apply(("v1", "Node"), "ADDED", node("n1", cpu="4"))
    assert cache.nodes.used_of("n1").milli_cpu == 1000


def test_cache_forgets_deleted_pods() -> None:
    p = pod("p", uid="p", cpu="1", node_name="n1", phase="Running", group="g")
    cache = make_cache([node("n1"), podgroup("g", 1), p])
    cache.apply(("v1", "Pod"), "DELETED", p)
    assert cache.nodes.used_of("n1").milli_cpu == 0
    assert cache.jobs["default/g"].tasks == {}


def test_cache_updates_a_pod_in_place() -> None:
    p = pod("p", uid="p", cpu="1", group="g")
    cache = make_cache([node("n1"), podgroup("g", 1), p])
    running = pod("p", uid="p", cpu="1", group="g", node_name="n1", phase="Running")
    cache.apply(("v1", "Pod"), "MODIFIED", running)
    assert cache.pods["p"].task.status == TaskStatus.RUNNING
    assert cache.nodes.used_of("n1").milli_cpu == 1000
    assert len(cache.jobs["default/g"].tasks) == 1


def test_cache_node_removal_and_return() -> None:
    n = node("n1", cpu="4")
    cache = make_cache([n, pod("p", uid="p", cpu="1", node_name="n1", phase="Running")])
    cache.apply(("v1", "Node"), "DELETED", n)
    assert "n1" not in cache.nodes.position
    cache.apply(("v1", "Node"), "ADDED", n)
    assert cache.nodes.used_of("n1").milli_cpu == 1000


def test_cache_ignores_pods_with_bad_quantities() -> None:
    cache = SchedulerCache()
    with pytest.raises(ValueError, match=r"spec\.containers\[0\]\.resources\.requests\.cpu"):
        cache.apply(("v1", "Pod"), "ADDED", pod("bad", uid="b", cpu="lots", group="g"))
    assert cache.pods == {}


def test_snapshot_is_independent_of_the_cache() -> None:
    cache = make_cache([node("n1"), podgroup("g", 1), pod("p", uid="p", cpu="1", group="g")])
    snapshot = cache.snapshot()
    job = snapshot.jobs["default/g"]
    t = job.tasks["p"]
    job.update_status(t, TaskStatus.ALLOCATED)
    snapshot.nodes.add_task("n1", t)
    assert cache.pods["p"].task.status == TaskStatus.PENDING
    assert cache.nodes.used_of("n1").milli_cpu == 0
    assert cache.snapshot().jobs["default/g"].tasks["p"].status == TaskStatus.PENDING


def test_queue_fields_from_spec() -> None:
    cache = make_cache(
        [
            queue(
                "q",
                weight=3,
                capability={"cpu": "10"},
                guarantee={"cpu": "2"},
                priority=5,
                reclaimable=False,
                state="Closed",
            )
        ]
    )
    q = cache.queues["q"]
    assert (q.weight, q.priority, q.reclaimable, q.state, q.parent) == (
        3,
        5,
        False,
        "Closed",
        "root",
    )
    assert q.capability is not None and q.capability.milli_cpu == 10000
    assert q.guarantee is not None and q.guarantee.milli_cpu == 2000
    assert not q.is_open()
    assert cache.queues["root"].parent == ""


def test_only_the_kubernetes_group_annotation_links_a_pod() -> None:
    from stromboli.core.api import constants as k

    cache = make_cache(
        [
            podgroup("g", 1),
            pod("linked", uid="a", cpu="1", group="g"),
            pod(
                "volcano-key", uid="b", cpu="1", annotations={k.VOLCANO_GROUP_NAME_ANNOTATION: "g"}
            ),
        ]
    )
    assert set(cache.jobs["default/g"].tasks) == {"a"}


def test_a_podgroup_links_only_pods_of_its_namespace() -> None:
    cache = make_cache(
        [
            podgroup("g", 1),
            pod("here", uid="a", cpu="1", group="g"),
            pod("there", uid="b", cpu="1", group="g", namespace="other"),
        ]
    )
    snapshot = cache.snapshot()
    assert set(snapshot.jobs["default/g"].tasks) == {"a"}
    assert "other/g" not in snapshot.jobs  # no PodGroup there
