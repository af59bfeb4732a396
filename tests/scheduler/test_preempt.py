"""preempt through the real scheduler on an in-memory store (reference §3.4, §3.8), the
session's victim combination rules (§3.3), and the preemption example."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.conf import ConfigError, parse_config
from stromboli.core.scheduler.framework.session import ABSTAIN, PERMIT, VictimFilter

from .builders import (
    Cluster,
    conf,
    make_cache,
    make_session,
    node,
    pod,
    pod_condition,
    podgroup,
    priority_class,
    queue,
    session_task,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: Volcano's default tiers with preempt added, gang's and drf's victim votes switched off as in
#: Volcano's Helm chart and CI: priority decides who may preempt whom.
PREEMPT_CONF = conf(
    "enqueue, allocate, preempt, backfill",
    ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"],
    ["overcommit", {"name": "drf", "enablePreemptable": False}, "predicates", "proportion"],
)
#: The same with gang voting: a victim job keeps its ``minAvailable`` running pods.
GANG_CONF = conf(
    "enqueue, allocate, preempt, backfill",
    ["priority", "gang", "conformance"],
    ["overcommit", {"name": "drf", "enablePreemptable": False}, "predicates", "proportion"],
)
#: The same with drf voting: when the first tier finds no victim, drf's tier decides.
DRF_CONF = conf(
    "enqueue, allocate, preempt, backfill",
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion"],
)
HIGH, MID, LOW = 1000, 100, 10


async def cluster(tmp_path: Path, *objects: dict, config: str = PREEMPT_CONF) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(
        priority_class("high", HIGH), priority_class("mid", MID), priority_class("low", LOW)
    )
    await c.add(*objects)
    return c


def job(
    name: str,
    replicas: int,
    min_member: int = 1,
    *,
    level: str = "low",
    cpu: str = "1",
    queue_name: str | None = None,
    **pod_args: Any,
) -> list[dict]:
    """A PodGroup of ``replicas`` pods ``<name>-<i>`` at PriorityClass ``level``."""
    value = {"high": HIGH, "mid": MID, "low": LOW}[level]
    pg = podgroup(name, min_member, priority_class=level, queue=queue_name)
    pods = [
        pod(f"{name}-{i}", group=name, cpu=cpu, priority=value, **pod_args) for i in range(replicas)
    ]
    return [pg, *pods]


async def running(c: Cluster, *names: str) -> None:
    await c.run()
    for name in names:
        assert await c.node_of(name), f"{name} was not bound"
        await c.set_phase(name, "Running")


async def gone(c: Cluster, *names: str) -> list[str]:
    return [name for name in names if not await c.exists("Pod", name)]


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


# -- preemption within a queue --------------------------------------------------------------------


async def test_high_priority_job_preempts_low_priority_job(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="4"), *job("low", 4))
    await running(c, *names("low", 4))
    await c.add(*job("high", 2, 2, level="high"))

    stats = await c.run()
    assert stats.evicted == 2
    assert stats.session is not None
    figures = stats.session.eviction_figures
    assert figures["transactions/preempt"] == 1
    assert figures["preemption_attempts"] == 2
    # The last-ordered victims go first; the preemptors wait, nominated, for the room.
    assert await gone(c, *names("low", 4)) == ["low-2", "low-3"]
    high = await c.pod("high-0")
    assert high["status"]["nominatedNodeName"] == "n1"
    assert "nodeName" not in high["spec"]

    await c.run()
    assert [await c.node_of(n) for n in names("high", 2)] == ["n1", "n1"]
    assert await gone(c, *names("low", 4)) == ["low-2", "low-3"]


async def test_evict_events_on_pods_and_podgroup(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="2"), *job("low", 2))
    await running(c, *names("low", 2))
    await c.add(*job("high", 1, level="high"))
    await c.run()
    [event] = await c.events(reason="Evict", name="low-1")
    assert event["type"] == "Warning"
    assert event["message"] == "Pod is evicted, because of preempt"
    assert event["involvedObject"]["kind"] == "Pod"
    [group_event] = await c.events(reason="Evict", name="low")
    assert group_event["type"] == "Normal"
    assert group_event["message"] == "preempt"
    assert group_event["involvedObject"]["kind"] == "PodGroup"
    assert await c.events(reason="Evict", name="low-0") == []


async def test_victims_are_marked_and_wait_out_their_termination(tmp_path: Path) -> None:
    """A victim that takes time to go (a finalizer here, a grace period on a cluster) keeps
    its conditions and its room stays promised to the preemptor until it is gone."""
    objects = job("low", 2)
    for obj in objects[1:]:
        obj["metadata"]["finalizers"] = ["example.com/hold"]
    c = await cluster(tmp_path, node("n1", cpu="2"), *objects)
    await running(c, *names("low", 2))
    await c.add(*job("high", 1, level="high"))

    assert (await c.run()).evicted == 1
    victim = await c.pod("low-1")
    assert victim["metadata"].get("deletionTimestamp")
    ready = pod_condition(victim, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "Evict")
    assert ready["message"] == "Pod is evicted, because of preempt"
    target = pod_condition(victim, "DisruptionTarget")
    assert target is not None
    assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
    assert target["message"] == "volcano: preempting to accommodate a higher priority pod"

    # While the victim terminates nothing more is evicted and the preemptor stays nominated.
    for _ in range(3):
        assert (await c.run()).evicted == 0
    assert await c.node_of("high-0") == ""
    assert (await c.pod("high-0"))["status"]["nominatedNodeName"] == "n1"
    assert await c.exists("Pod", "low-0")

    victim = await c.pod("low-1")
    victim["metadata"]["finalizers"] = []
    await c.store.update(victim)
    await c.run()
    assert await c.node_of("high-0") == "n1"
    assert await c.exists("Pod", "low-0")


async def test_no_preemption_when_resources_are_enough(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="4"), *job("low", 2))
    await running(c, *names("low", 2))
    await c.add(*job("high", 2, 2, level="high"))
    stats = await c.run()
    assert (stats.evicted, stats.bound) == (0, 2)


async def test_no_preemption_across_queues(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        queue("other"),
        node("n1", cpu="2"),
        *job("low", 2, queue_name="other"),
    )
    await running(c, *names("low", 2))
    await c.add(*job("high", 1, level="high"))
    for _ in range(3):
        assert (await c.run()).evicted == 0
    assert await c.node_of("high-0") == ""


async def test_no_preemption_when_idle_and_victims_are_not_enough(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        node("n1", cpu="4"),
        *job("low", 2),
        *job("peer", 2, level="high"),
    )
    await running(c, *names("low", 2), *names("peer", 2))
    # Two 2-cpu pods, both needed; only the two low pods (2 cpu) may go.
    await c.add(*job("high", 2, 2, level="high", cpu="2"))
    for _ in range(3):
        assert (await c.run()).evicted == 0
    assert await gone(c, *names("low", 2), *names("peer", 2)) == []


async def test_pending_podgroup_does_not_preempt(tmp_path: Path) -> None:
    config = conf(
        "enqueue, allocate, preempt",
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "proportion"],
    )
    c = await cluster(tmp_path, node("n1", cpu="2"), *job("low", 2), config=config)
    await running(c, *names("low", 2))
    # minResources beyond the whole cluster: overcommit keeps the group Pending.
    high = job("high", 1, level="high")
    high[0]["spec"]["minResources"] = {"cpu": "100"}
    await c.add(*high)
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert (await c.pg("high")).get("status", {}).get("phase", "Pending") == "Pending"


async def test_equal_priority_is_not_preempted(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="2"), *job("first", 2))
    await running(c, *names("first", 2))
    await c.add(*job("second", 1))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_drf_evens_out_equal_priority_jobs(tmp_path: Path) -> None:
    """With drf voting, a job with no share may take a pod from an equal-priority job whose
    dominant share stays at least as large (Volcano's default tiers)."""
    c = await cluster(tmp_path, node("n1", cpu="2"), *job("first", 2), config=DRF_CONF)
    await running(c, *names("first", 2))
    await c.add(*job("second", 1))
    assert (await c.run()).evicted == 1
    await c.run()
    assert await c.node_of("second-0") == "n1"
    assert await gone(c, *names("first", 2)) == ["first-1"]


async def test_multiple_preemptors_by_priority(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="2"), *job("low", 2))
    await running(c, *names("low", 2))
    await c.add(*job("mid", 1, level="mid"), *job("high", 1, level="high"))
    stats = await c.run()
    assert stats.evicted == 2
    await c.run()
    assert await c.node_of("high-0") == "n1"
    assert await c.node_of("mid-0") == "n1"


async def test_preemptable_false_pods_are_protected(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        node("n1", cpu="2"),
        *job("low", 2, annotations={"volcano.sh/preemptable": "false"}),
    )
    await running(c, *names("low", 2))
    await c.add(*job("high", 1, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0


@pytest.mark.parametrize(
    "protection",
    [{"priority_class": "system-cluster-critical"}, {"priority_class": "system-node-critical"}],
)
async def test_system_critical_pods_are_never_evicted(
    tmp_path: Path, protection: dict[str, str]
) -> None:
    objects = job("low", 2)
    for obj in objects[1:]:
        obj["spec"]["priorityClassName"] = protection["priority_class"]
    c = await cluster(tmp_path, node("n1", cpu="2"), *objects)
    await running(c, *names("low", 2))
    await c.add(*job("high", 1, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_kube_system_pods_are_never_evicted(tmp_path: Path) -> None:
    low = [
        podgroup("low", 1, namespace="kube-system", priority_class="low"),
        *[
            pod(f"low-{i}", group="low", namespace="kube-system", cpu="1", priority=LOW)
            for i in range(2)
        ],
    ]
    c = await cluster(tmp_path, node("n1", cpu="2"), *low)
    await c.run()
    for i in range(2):
        await c.set_phase(f"low-{i}", "Running", namespace="kube-system")
    await c.add(*job("high", 1, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_preemption_policy_never_waits(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="2"), *job("low", 2))
    await running(c, *names("low", 2))
    high = job("high", 1, level="high")
    high[1]["spec"]["preemptionPolicy"] = "Never"
    await c.add(*high)
    assert (await c.run()).evicted == 0


async def test_gated_pods_do_not_preempt(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="2"), *job("low", 2))
    await running(c, *names("low", 2))
    high = job("high", 1, level="high")
    high[1]["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    await c.add(*high)
    assert (await c.run()).evicted == 0


async def test_best_effort_preemptor_cannot_evict_requesting_pods(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="2", pods="2"), *job("low", 2))
    await running(c, *names("low", 2))
    await c.add(
        podgroup("high", 1, priority_class="high"),
        pod("high-0", group="high", priority=HIGH),
    )
    assert (await c.run()).evicted == 0


async def test_a_stale_nomination_does_not_stop_preemption(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        node("n1", cpu="1"),
        node("n2", cpu="1"),
        *job("peer", 1, level="high"),
        *job("low", 1),
    )
    await running(c, "peer-0", "low-0")
    assert (await c.node_of("peer-0"), await c.node_of("low-0")) == ("n1", "n2")
    # Nominated to n1 in some earlier cycle, but n1's room went to an equal-priority pod.
    high = job("high", 1, level="high")
    high[1]["status"] = {"phase": "Pending", "nominatedNodeName": "n1"}
    await c.add(*high)
    assert (await c.pod("high-0"))["status"]["nominatedNodeName"] == "n1"
    assert (await c.run()).evicted == 1
    assert await gone(c, "peer-0", "low-0") == ["low-0"]
    await c.run()
    assert await c.node_of("high-0") == "n2"


def test_cache_treats_an_evicted_pod_as_terminating_until_the_store_says() -> None:
    running = pod("v", group="pg", uid="v", cpu="1", node_name="n1", phase="Running")
    cache = make_cache([node("n1", cpu="2"), podgroup("pg", 1), running])
    cache.assume_evicted(cache.pods["v"].task)
    assert cache.pods["v"].task.status == TaskStatus.RELEASING
    releasing = cache.nodes.releasing[cache.nodes.position["n1"]]
    assert releasing[0] == 1000  # cpu, in millicores
    # An update that is not yet the deletion keeps it terminating ...
    cache.apply(("v1", "Pod"), "MODIFIED", running)
    assert cache.pods["v"].task.status == TaskStatus.RELEASING
    # ... and the deletion ends the assumption.
    cache.apply(("v1", "Pod"), "DELETED", running)
    assert "v" not in cache.pods and cache.evicting == set()
    assert cache.nodes.releasing[cache.nodes.position["n1"]][0] == 0


# -- gangs ----------------------------------------------------------------------------------------


async def test_victim_gang_keeps_its_minimum(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="4"), *job("low", 4, 3), config=GANG_CONF)
    await running(c, *names("low", 4))
    # One pod of the low gang is beyond its minimum: enough for one preemptor ...
    await c.add(*job("one", 1, level="high"))
    assert (await c.run()).evicted == 1
    assert len(await gone(c, *names("low", 4))) == 1
    await c.run()
    assert await c.node_of("one-0") == "n1"
    # ... but not for a gang of two more: the low gang stays at its minimum of three.
    await c.add(*job("two", 2, 2, level="high"))
    for _ in range(3):
        assert (await c.run()).evicted == 0
    assert len(await gone(c, *names("low", 4))) == 1


@pytest.mark.parametrize("gang_votes", [True, False])
async def test_single_pod_job_is_a_victim_only_without_gang_vote(
    tmp_path: Path, gang_votes: bool
) -> None:
    """Gang offers only pods beyond a job's minimum, with no exception for ``minAvailable: 1``
    (Volcano's rule): while it votes, a one-pod job keeps its pod even against a
    higher-priority one; with its vote off, priority decides."""
    config = GANG_CONF if gang_votes else PREEMPT_CONF
    c = await cluster(tmp_path, node("n1", cpu="1"), *job("low", 1), config=config)
    await running(c, "low-0")
    await c.add(*job("high", 1, level="high"))
    evictions = [(await c.run()).evicted for _ in range(3)]
    if gang_votes:
        assert evictions == [0, 0, 0]
        assert await gone(c, "low-0") == []
        assert await c.node_of("high-0") == ""
    else:
        assert evictions == [1, 0, 0]
        assert await gone(c, "low-0") == ["low-0"]
        assert await c.node_of("high-0") == "n1"


async def test_drf_fallback_cannot_break_a_gang(tmp_path: Path) -> None:
    """The first tier finds no victim (gang at its minimum), so drf's tier decides, as in
    Volcano; the eviction still never leaves the victim gang below its minimum."""
    c = await cluster(tmp_path, node("n1", cpu="4"), *job("low", 4, 4), config=DRF_CONF)
    await running(c, *names("low", 4))
    await c.add(*job("high", 1, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert await gone(c, *names("low", 4)) == []


async def test_preemptor_gang_pipelines_whole_or_evicts_nothing(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        node("n1", cpu="2"),
        node("n2", cpu="2"),
        *job("low", 2),
        *job("peer", 2, level="high"),
    )
    await running(c, *names("low", 2), *names("peer", 2))
    low_node = await c.node_of("low-0")
    assert await c.node_of("low-1") == low_node
    # Three pods needed, two low pods to take: nothing is evicted for a gang left short.
    await c.add(*job("high", 3, 3, level="high"))
    assert (await c.run()).evicted == 0
    await c.add(*job("pair", 2, 2, level="high"))
    assert (await c.run()).evicted == 2
    await c.run()
    assert [await c.node_of("pair-0"), await c.node_of("pair-1")] == [low_node, low_node]


# -- within one job -------------------------------------------------------------------------------


async def test_task_evicts_lower_priority_task_of_its_own_job(tmp_path: Path) -> None:
    config = conf("allocate, preempt", ["priority"])
    c = await cluster(
        tmp_path,
        node("n1", cpu="1"),
        podgroup("job", 1),
        pod("job-low", group="job", cpu="1", priority=LOW),
        config=config,
    )
    await running(c, "job-low")
    await c.add(pod("job-high", group="job", cpu="1", priority=HIGH))
    assert (await c.run()).evicted == 1
    assert await gone(c, "job-low") == ["job-low"]
    await c.run()
    assert await c.node_of("job-high") == "n1"


# -- arguments and topology-aware preemption ------------------------------------------------------


def test_arguments_are_known() -> None:
    parsed = parse_config(
        PREEMPT_CONF
        + """configurations:
- name: preempt
  arguments:
    predicateErrorCacheEnable: false
    enableTopologyAwarePreemption: true
    topologyAwarePreemptWorkerNum: 4
    minCandidateNodesPercentage: 20
    minCandidateNodesAbsolute: 2
    maxCandidateNodesAbsolute: 50
"""
    )
    assert parsed.action_args("preempt").get_int("maxCandidateNodesAbsolute", 0) == 50
    with pytest.raises(ConfigError, match="unknown argument 'maxCandidates'"):
        parse_config(
            PREEMPT_CONF + "configurations:\n- name: preempt\n  arguments: {maxCandidates: 1}\n"
        )


@pytest.mark.parametrize(("topology_aware", "victim"), [(False, "mid-0"), (True, "low-0")])
async def test_topology_aware_preemption_picks_the_cheapest_node(
    tmp_path: Path, topology_aware: bool, victim: str
) -> None:
    config = conf(
        "enqueue, allocate, preempt",
        ["priority", {"name": "gang", "enablePreemptable": False}, "conformance"],
    )
    config += (
        "configurations:\n- name: preempt\n  arguments:\n"
        f"    enableTopologyAwarePreemption: {str(topology_aware).lower()}\n"
        "    minCandidateNodesAbsolute: 2\n"
    )
    c = await cluster(
        tmp_path,
        node("n1", cpu="1"),
        node("n2", cpu="1"),
        *job("mid", 1, level="mid"),
        *job("low", 1),
        config=config,
    )
    await running(c, "mid-0", "low-0")
    assert await c.node_of("mid-0") == "n1"
    await c.add(*job("high", 1, level="high"))
    assert (await c.run()).evicted == 1
    assert await gone(c, "mid-0", "low-0") == [victim]


# -- the session's combination rules --------------------------------------------------------------


def victim_session(*tiers: list[str]) -> tuple[Any, list[TaskInfo], TaskInfo]:
    objects = [
        node("n1"),
        podgroup("pg", 1, phase="Running"),
        *[
            pod(f"v{i}", group="pg", uid=f"v{i}", cpu="1", node_name="n1", phase="Running")
            for i in range(4)
        ],
        pod("p", group="pg", uid="p", cpu="1"),
    ]
    ssn = make_session(objects, conf("preempt", *tiers), open_plugins=False)
    candidates = [session_task(ssn, f"v{i}") for i in range(4)]
    return ssn, candidates, session_task(ssn, "p")


def answer(uids: list[str] | None, vote: int = PERMIT):  # type: ignore[no-untyped-def]
    def fn(_evictor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        if uids is None:
            return list(candidates), vote
        return [t for t in candidates if t.uid in uids], vote

    return fn


def uids(tasks: list[TaskInfo]) -> list[str]:
    return [t.uid for t in tasks]


def test_victims_intersect_within_a_tier() -> None:
    ssn, candidates, preemptor = victim_session(["priority", "gang"], ["drf"])
    ssn.register("preemptable", "priority", answer(["v0", "v1", "v2"]))
    ssn.register("preemptable", "gang", answer(["v1", "v2", "v3"]))
    ssn.register("preemptable", "drf", answer(["v3"]))
    assert uids(ssn.preemptable(preemptor, candidates)) == ["v1", "v2"]


def test_abstaining_plugins_are_skipped() -> None:
    ssn, candidates, preemptor = victim_session(["priority", "gang"])
    ssn.register("reclaimable", "priority", answer([], ABSTAIN))
    ssn.register("reclaimable", "gang", answer(["v2"]))
    assert uids(ssn.reclaimable(preemptor, candidates)) == ["v2"]


def test_an_empty_answer_ends_the_tier_and_the_next_tier_decides() -> None:
    ssn, candidates, preemptor = victim_session(["priority", "gang", "conformance"], ["drf"])
    calls: list[str] = []

    def never(_e: TaskInfo, _c: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
        calls.append("conformance")
        return list(_c), PERMIT

    ssn.register("preemptable", "priority", answer(["v0"]))
    ssn.register("preemptable", "gang", answer([]))
    ssn.register("preemptable", "conformance", never)
    ssn.register("preemptable", "drf", answer(["v3"]))
    assert uids(ssn.preemptable(preemptor, candidates)) == ["v3"]
    assert calls == []


def test_an_empty_intersection_is_not_refilled_by_a_later_plugin() -> None:
    ssn, candidates, preemptor = victim_session(["priority", "gang", "conformance"])
    ssn.register("preemptable", "priority", answer(["v0"]))
    ssn.register("preemptable", "gang", answer(["v1"]))
    ssn.register("preemptable", "conformance", answer(None))
    assert ssn.preemptable(preemptor, candidates) == []


def test_the_first_tier_with_victims_decides() -> None:
    ssn, candidates, preemptor = victim_session(["priority"], ["drf"])
    ssn.register("preemptable", "priority", answer(["v0"]))
    ssn.register("preemptable", "drf", answer(["v1"]))
    assert uids(ssn.preemptable(preemptor, candidates)) == ["v0"]


def test_switched_off_plugins_take_no_part() -> None:
    ssn, candidates, preemptor = victim_session(
        [{"name": "priority", "enablePreemptable": False}, "gang"]
    )
    ssn.register("preemptable", "priority", answer([]))
    ssn.register("preemptable", "gang", answer(["v1"]))
    assert uids(ssn.preemptable(preemptor, candidates)) == ["v1"]


def test_victim_tasks_unite_within_the_first_nominating_tier() -> None:
    ssn, candidates, _ = victim_session(["priority", "gang"], ["drf"])
    ssn.register("victim_tasks", "priority", lambda tasks: [t for t in tasks if t.uid == "v0"])
    ssn.register("victim_tasks", "gang", lambda tasks: [t for t in tasks if t.uid in ("v0", "v1")])
    ssn.register("victim_tasks", "drf", lambda tasks: [t for t in tasks if t.uid == "v3"])
    assert uids(ssn.victim_tasks(candidates)) == ["v0", "v1"]


def test_victim_tasks_fall_to_a_later_tier_and_filters_veto() -> None:
    ssn, candidates, _ = victim_session(["priority", "gang"], ["drf"])
    ssn.register("victim_tasks", "priority", lambda tasks: [])
    ssn.register(
        "victim_tasks", "gang", VictimFilter(lambda tasks: [t for t in tasks if t.uid != "v2"])
    )
    ssn.register("victim_tasks", "drf", lambda tasks: [t for t in tasks if t.uid in ("v2", "v3")])
    assert uids(ssn.victim_tasks(candidates)) == ["v3"]


def test_a_filter_alone_nominates_nothing() -> None:
    ssn, candidates, _ = victim_session(["priority"])
    ssn.register("victim_tasks", "priority", VictimFilter(lambda tasks: list(tasks)))
    assert ssn.victim_tasks(candidates) == []


# -- the example ----------------------------------------------------------------------------------


def simulate(*args: str) -> dict:
    result = CliRunner().invoke(main, ["simulate", *args, "--output", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def test_preemption_example() -> None:
    state = simulate(
        str(EXAMPLES / "preemption.yaml"), "--scheduler-conf", str(EXAMPLES / "preempt-conf.yaml")
    )
    pods = {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "Pod"}
    events = [o for o in state["items"] if o["kind"] == "Event"]
    evicted = sorted(
        e["involvedObject"]["name"]
        for e in events
        if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "Pod"
    )
    # Both nodes are full and score alike: node-0 gives its two last batch pods.
    assert evicted == ["batch-4", "batch-6"]
    assert all(
        e["message"] == "Pod is evicted, because of preempt"
        for e in events
        if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "Pod"
    )
    group_events = [
        e for e in events if e["reason"] == "Evict" and e["involvedObject"]["kind"] == "PodGroup"
    ]
    assert [(e["involvedObject"]["name"], e["message"], e["count"]) for e in group_events] == [
        ("batch", "preempt", 2)
    ]
    assert sorted(pods) == [
        *[f"batch-{i}" for i in (0, 1, 2, 3, 5, 7)],
        "urgent-0",
        "urgent-1",
    ]
    for i in range(2):
        urgent = pods[f"urgent-{i}"]
        assert urgent["spec"]["nodeName"] == "node-0"
        assert urgent["status"]["startTime"] == "1970-01-01T00:00:31Z"
        assert urgent["status"]["phase"] == "Succeeded"
    for i in (0, 1, 2, 3, 5, 7):
        assert pods[f"batch-{i}"]["status"]["startTime"] == "1970-01-01T00:00:00Z"
        assert pods[f"batch-{i}"]["status"]["phase"] == "Succeeded"
