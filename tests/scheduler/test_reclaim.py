"""reclaim through the real scheduler on an in-memory store (reference §3.4), and the reclaim
example."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main

from .builders import Cluster, conf, node, pod, podgroup, priority_class, queue

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

RECLAIM_CONF = conf(
    "enqueue, allocate, reclaim, backfill",
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion"],
)


async def cluster(tmp_path: Path, *objects: dict, config: str = RECLAIM_CONF) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(*objects)
    return c


def job(
    name: str,
    queue_name: str,
    replicas: int,
    min_member: int = 1,
    *,
    cpu: str = "1",
    **pod_args: Any,
) -> list[dict]:
    pods = [pod(f"{name}-{i}", group=name, cpu=cpu, **pod_args) for i in range(replicas)]
    return [podgroup(name, min_member, queue=queue_name), *pods]


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


async def fill(c: Cluster, prefix: str, count: int) -> None:
    """Run a cycle that binds ``prefix``'s pods, and report them Running."""
    await c.run()
    for name in names(prefix, count):
        assert await c.node_of(name), f"{name} was not bound"
        await c.set_phase(name, "Running")


async def alive(c: Cluster, prefix: str, count: int) -> list[str]:
    return [name for name in names(prefix, count) if await c.exists("Pod", name)]


async def two_queues(tmp_path: Path, *, batch: dict | None = None, **job_args: Any) -> Cluster:
    """Two 4-cpu nodes; queue ``batch`` (weight 1) fills both with 8 one-cpu pods."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        batch or queue("batch"),
        queue("team"),
        *job("hog", "batch", 8, **job_args),
    )
    await fill(c, "hog", 8)
    return c


async def test_queue_reclaims_its_deserved_share(tmp_path: Path) -> None:
    c = await two_queues(tmp_path)
    await c.add(*job("gang", "team", 4, 4))
    stats = await c.run()
    assert stats.evicted == 4
    # The gang is pipelined whole onto the room being released ...
    for name in names("gang", 4):
        assert (await c.pod(name))["status"]["nominatedNodeName"]
    reclaimed = await c.events(reason="Evict")
    pod_events = [e for e in reclaimed if e["involvedObject"]["kind"] == "Pod"]
    assert len(pod_events) == 4
    assert {e["message"] for e in pod_events} == {"Pod is evicted, because of reclaim"}
    # ... and bound in the next cycle, while the batch queue keeps its half.
    await c.run()
    assert all([await c.node_of(name) for name in names("gang", 4)])
    assert len(await alive(c, "hog", 8)) == 4
    assert (await c.run()).evicted == 0


async def test_reclaim_stops_at_the_deserved_share(tmp_path: Path) -> None:
    c = await two_queues(tmp_path)
    # Six single-pod jobs: each starves, but the queue deserves only four cpu.
    for i in range(6):
        await c.add(*job(f"solo{i}", "team", 1))
    assert (await c.run()).evicted == 4
    await c.run()
    bound = [i for i in range(6) if await c.node_of(f"solo{i}-0")]
    assert len(bound) == 4
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert len(await alive(c, "hog", 8)) == 4


async def test_unreclaimable_queue_is_protected(tmp_path: Path) -> None:
    c = await two_queues(tmp_path, batch=queue("batch", reclaimable=False))
    await c.add(*job("gang", "team", 4, 4))
    for _ in range(3):
        assert (await c.run()).evicted == 0
    assert len(await alive(c, "hog", 8)) == 8


async def test_preemptable_false_pods_are_not_reclaimed(tmp_path: Path) -> None:
    c = await two_queues(tmp_path, annotations={"volcano.sh/preemptable": "false"})
    await c.add(*job("gang", "team", 4, 4))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_no_reclaim_within_one_queue(tmp_path: Path) -> None:
    c = await two_queues(tmp_path)
    await c.add(*job("late", "batch", 1))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_no_reclaim_when_resources_are_enough(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        queue("batch"),
        queue("team"),
        *job("hog", "batch", 4),
    )
    await fill(c, "hog", 4)
    await c.add(*job("gang", "team", 4, 4))
    stats = await c.run()
    assert (stats.evicted, stats.bound) == (0, 4)


async def test_no_reclaim_for_a_pending_podgroup(tmp_path: Path) -> None:
    c = await two_queues(tmp_path)
    gang = job("gang", "team", 4, 4)
    gang[0]["spec"]["minResources"] = {"cpu": "100"}
    await c.add(*gang)
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_no_reclaim_beyond_the_deserved_share(tmp_path: Path) -> None:
    c = await two_queues(tmp_path)
    # Each member needs a whole node: the first fits the team's half, the second would not
    # (``preemptive``), so the gang cannot be pipelined and nothing is taken.
    await c.add(*job("big", "team", 2, 2, cpu="4"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert len(await alive(c, "hog", 8)) == 8


async def test_no_reclaim_when_idle_and_victims_are_not_enough(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        node("n1", cpu="4"),
        queue("batch"),
        queue("team", weight=3),
        *job("hog", "batch", 2),
        *job("kept", "batch", 2, annotations={"volcano.sh/preemptable": "false"}),
    )
    await c.run()
    for name in [*names("hog", 2), *names("kept", 2)]:
        await c.set_phase(name, "Running")
    # The team deserves 3 cpu, but only 2 cpu of the node may be taken.
    await c.add(*job("wide", "team", 1, cpu="3"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert len(await alive(c, "hog", 2)) == 2


async def test_priority_does_not_protect_from_reclaim(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        priority_class("vip", 100000),
        node("n1", cpu="4"),
        queue("batch"),
        queue("team"),
        podgroup("hog", 1, queue="batch", priority_class="vip"),
        *[pod(f"hog-{i}", group="hog", cpu="1", priority=100000) for i in range(4)],
    )
    await fill(c, "hog", 4)
    await c.add(*job("gang", "team", 2, 2))
    assert (await c.run()).evicted == 2


async def test_overused_queue_does_not_reclaim(tmp_path: Path) -> None:
    c = await two_queues(tmp_path)
    # batch already holds more than its half: another batch job's task may not reclaim.
    await c.add(queue("third"), *job("late", "batch", 1))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_preemption_policy_never_does_not_reclaim(tmp_path: Path) -> None:
    c = await two_queues(tmp_path)
    gang = job("gang", "team", 1)
    gang[1]["spec"]["preemptionPolicy"] = "Never"
    await c.add(*gang)
    assert (await c.run()).evicted == 0


def test_reclaim_example() -> None:
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            str(EXAMPLES / "reclaim.yaml"),
            "--scheduler-conf",
            str(EXAMPLES / "preempt-conf.yaml"),
            "--output",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    state = orjson.loads(result.stdout)
    pods = {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == "Pod"}
    events = [o for o in state["items"] if o["kind"] == "Event" and o["reason"] == "Evict"]
    evicted = sorted(
        e["involvedObject"]["name"] for e in events if e["involvedObject"]["kind"] == "Pod"
    )
    assert evicted == [f"batch-job-{i}" for i in (0, 2, 4, 6)]
    assert {e["message"] for e in events if e["involvedObject"]["kind"] == "Pod"} == {
        "Pod is evicted, because of reclaim"
    }
    for i in range(4):
        member = pods[f"team-gang-{i}"]
        assert member["spec"]["nodeName"] == "node-0"
        assert member["status"]["startTime"] == "1970-01-01T00:00:21Z"
        assert member["status"]["phase"] == "Succeeded"
    for i in (1, 3, 5, 7):
        kept = pods[f"batch-job-{i}"]
        assert kept["spec"]["nodeName"] == "node-1"
        assert kept["status"]["startTime"] == "1970-01-01T00:00:00Z"
    assert not {f"batch-job-{i}" for i in (0, 2, 4, 6)} & set(pods)
