"""gangpreempt through the real scheduler on an in-memory store (reference §3.4; the e2e
checklist's GP-1..GP-8 and GP-R1 without HyperNodes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stromboli.core.scheduler.conf import ConfigError, parse_config
from stromboli.core.scheduler.framework.arguments import ArgumentError
from stromboli.core.scheduler.scheduler import CycleStats

from .builders import Cluster, conf, make_session, node, pod, podgroup, priority_class, queue

HIGH, MID, LOW = 1000, 100, 10
TIERS = (
    ["priority", "gang", "conformance"],
    ["overcommit", {"name": "drf", "enablePreemptable": False}, "predicates", "proportion"],
)
GANG_CONF = conf("enqueue, allocate, gangpreempt, backfill", *TIERS)


def config(**arguments: Any) -> str:
    """GANG_CONF with ``arguments`` for gangpreempt."""
    lines = [f"    {key}: {value}" for key, value in arguments.items()]
    return GANG_CONF + "configurations:\n- name: gangpreempt\n  arguments:\n" + "\n".join(lines)


async def cluster(tmp_path: Path, *objects: dict, config: str = GANG_CONF) -> Cluster:
    c = await Cluster(tmp_path, config).start()
    await c.add(
        priority_class("high", HIGH), priority_class("mid", MID), priority_class("low", LOW)
    )
    await c.add(*objects)
    return c


def gang(
    name: str,
    replicas: int,
    min_member: int,
    *,
    level: str = "low",
    cpu: str = "1",
    queue_name: str | None = None,
    roles: dict[str, int] | None = None,
    min_task_member: dict[str, int] | None = None,
    **pod_args: Any,
) -> list[dict]:
    """A PodGroup of ``replicas`` pods ``<name>-<i>`` at PriorityClass ``level``; ``roles``
    (role: count) assigns roles in order instead."""
    value = {"high": HIGH, "mid": MID, "low": LOW}[level]
    pg = podgroup(
        name, min_member, priority_class=level, queue=queue_name, min_task_member=min_task_member
    )
    role_of = [r for r, n in (roles or {}).items() for _ in range(n)] or [None] * replicas
    pods = [
        pod(f"{name}-{i}", group=name, cpu=cpu, priority=value, role=role_of[i], **pod_args)
        for i in range(replicas)
    ]
    return [pg, *pods]


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{i}" for i in range(count)]


async def running(c: Cluster, *pods: str) -> None:
    await c.run()
    for name in pods:
        assert await c.node_of(name), f"{name} was not bound"
        await c.set_phase(name, "Running")


async def alive(c: Cluster, *pods: str) -> list[str]:
    return [name for name in pods if await c.exists("Pod", name)]


def evicted(stats: CycleStats) -> list[tuple[str, str]]:
    """(pod, action) of every eviction the cycle decided."""
    assert stats.session is not None
    return sorted((e.task.name, e.action) for e in stats.session.outcome.evictions)


async def placed(c: Cluster, *pods: str) -> bool:
    await c.run()
    return all([await c.node_of(name) for name in pods])


# -- GP-1, GP-2: safe bundles ----------------------------------------------------------------------


async def test_safe_bundle_evicts_only_the_surplus(tmp_path: Path) -> None:
    """GP-1: the victim gang loses the pods above its minimum and keeps running."""
    c = await cluster(tmp_path, node("n1", cpu="6"), *gang("low", 6, 3))
    await running(c, *names("low", 6))
    await c.add(*gang("high", 3, 3, level="high"))

    stats = await c.run()
    assert [action for _, action in evicted(stats)] == ["gangpreempt"] * 3
    assert stats.session is not None
    assert stats.session.eviction_figures["transactions/gangpreempt"] == 1
    assert len(await alive(c, *names("low", 6))) == 3
    for name in names("high", 3):
        assert (await c.pod(name))["status"]["nominatedNodeName"] == "n1"
    assert await placed(c, *names("high", 3))
    assert len(await alive(c, *names("low", 6))) == 3
    assert (await c.run()).evicted == 0


async def test_safe_bundles_are_taken_across_gangs_before_breaking_one(tmp_path: Path) -> None:
    """GP-2: two gangs each give their surplus; neither is broken."""
    c = await cluster(tmp_path, node("n1", cpu="8"), *gang("a", 4, 2), *gang("b", 4, 2))
    await running(c, *names("a", 4), *names("b", 4))
    await c.add(*gang("high", 4, 4, level="high"))

    assert (await c.run()).evicted == 4
    assert len(await alive(c, *names("a", 4))) == 2
    assert len(await alive(c, *names("b", 4))) == 2
    assert await placed(c, *names("high", 4))


# -- GP-3, GP-4: whole bundles ---------------------------------------------------------------------


async def test_whole_bundle_breaks_exactly_one_gang(tmp_path: Path) -> None:
    """GP-3: without surplus, one victim gang is evicted entirely, the other kept whole."""
    c = await cluster(tmp_path, node("n1", cpu="8"), *gang("a", 4, 4), *gang("b", 4, 4))
    await running(c, *names("a", 4), *names("b", 4))
    await c.add(*gang("high", 4, 4, level="high"))

    assert (await c.run()).evicted == 4
    # The job that would be scheduled last (created last) goes.
    assert await alive(c, *names("a", 4)) == names("a", 4)
    assert await alive(c, *names("b", 4)) == []
    assert await placed(c, *names("high", 4))


async def test_whole_bundles_break_both_gangs_for_a_large_preemptor(tmp_path: Path) -> None:
    """GP-4."""
    c = await cluster(tmp_path, node("n1", cpu="8"), *gang("a", 4, 4), *gang("b", 4, 4))
    await running(c, *names("a", 4), *names("b", 4))
    await c.add(*gang("high", 8, 8, level="high"))

    assert (await c.run()).evicted == 8
    assert await placed(c, *names("high", 8))


async def test_no_whole_bundle_when_not_allowed(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path,
        node("n1", cpu="8"),
        *gang("a", 4, 4),
        *gang("b", 4, 4),
        config=config(allowWholeBundle="false"),
    )
    await running(c, *names("a", 4), *names("b", 4))
    await c.add(*gang("high", 4, 4, level="high"))
    for _ in range(3):
        assert (await c.run()).evicted == 0
    assert await c.node_of("high-0") == ""


async def test_surplus_and_rest_go_together_rather_than_break_the_gang(tmp_path: Path) -> None:
    """GP-5: the preemptor needs more than the surplus: the whole victim gang goes, never just
    enough of it to leave it running below its minimum."""
    c = await cluster(tmp_path, node("n1", cpu="4"), *gang("low", 4, 2))
    await running(c, *names("low", 4))
    await c.add(*gang("high", 3, 3, level="high"))

    assert (await c.run()).evicted == 4
    assert await alive(c, *names("low", 4)) == []
    assert await placed(c, *names("high", 3))


async def test_surplus_is_spared_when_a_whole_gang_must_go_anyway(tmp_path: Path) -> None:
    """Safe pods are tried first, but when a whole gang has to go and frees enough on its own,
    the surplus taken before it is given back: four pods go, not six."""
    c = await cluster(tmp_path, node("n1", cpu="8"), *gang("etl", 4, 2), *gang("sim", 4, 4))
    await running(c, *names("etl", 4), *names("sim", 4))
    await c.add(*gang("high", 4, 4, level="high"))

    assert (await c.run()).evicted == 4
    assert await alive(c, *names("etl", 4)) == names("etl", 4)
    assert await alive(c, *names("sim", 4)) == []
    assert await placed(c, *names("high", 4))


async def test_only_the_surplus_when_whole_bundles_are_off(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path, node("n1", cpu="4"), *gang("low", 4, 2), config=config(allowWholeBundle=False)
    )
    await running(c, *names("low", 4))
    await c.add(*gang("high", 3, 3, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert len(await alive(c, *names("low", 4))) == 4


async def test_a_gang_with_a_protected_pod_is_never_evicted_whole(tmp_path: Path) -> None:
    objects = gang("low", 4, 4)
    objects[1]["metadata"]["annotations"]["volcano.sh/preemptable"] = "false"
    c = await cluster(tmp_path, node("n1", cpu="4"), *objects)
    await running(c, *names("low", 4))
    await c.add(*gang("high", 2, 2, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0


async def test_a_podgroup_marked_not_preemptable_is_protected(tmp_path: Path) -> None:
    objects = gang("low", 4, 2)
    objects[0]["metadata"]["annotations"] = {"volcano.sh/preemptable": "false"}
    c = await cluster(tmp_path, node("n1", cpu="4"), *objects)
    await running(c, *names("low", 4))
    await c.add(*gang("high", 2, 2, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0


# -- GP-6..GP-8: who may preempt whom --------------------------------------------------------------


async def test_no_preemption_across_queues(tmp_path: Path) -> None:
    """GP-6."""
    c = await cluster(
        tmp_path, queue("other"), node("n1", cpu="4"), *gang("low", 4, 2, queue_name="other")
    )
    await running(c, *names("low", 4))
    await c.add(*gang("high", 2, 2, level="high"))
    for _ in range(3):
        assert (await c.run()).evicted == 0
    assert await c.node_of("high-0") == ""


async def test_equal_priority_is_not_preempted(tmp_path: Path) -> None:
    """GP-7."""
    c = await cluster(tmp_path, node("n1", cpu="4"), *gang("first", 4, 2))
    await running(c, *names("first", 4))
    await c.add(*gang("second", 2, 2))
    for _ in range(3):
        assert (await c.run()).evicted == 0


async def test_medium_priority_cannot_evict_high_priority(tmp_path: Path) -> None:
    """GP-8: the medium gang may take the low gang's pods but not the high gang's."""
    c = await cluster(
        tmp_path, node("n1", cpu="4"), *gang("top", 2, 2, level="high"), *gang("low", 2, 2)
    )
    await running(c, *names("top", 2), *names("low", 2))
    await c.add(*gang("medium", 4, 4, level="mid"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    await c.add(*gang("small", 2, 2, level="mid"))
    assert (await c.run()).evicted == 2
    assert await alive(c, *names("low", 2)) == []
    assert await alive(c, *names("top", 2)) == names("top", 2)


async def test_per_role_minimum_is_kept(tmp_path: Path) -> None:
    """GP-R1: the surplus is taken from the role that has one."""
    c = await cluster(
        tmp_path,
        node("n1", cpu="6"),
        *gang(
            "low",
            6,
            4,
            roles={"ps": 2, "worker": 4},
            min_task_member={"ps": 2, "worker": 2},
        ),
    )
    await running(c, *names("low", 6))
    await c.add(*gang("high", 2, 2, level="high"))
    assert (await c.run()).evicted == 2
    # Pods 0 and 1 are the parameter servers; both stay.
    kept = await alive(c, *names("low", 6))
    assert {"low-0", "low-1"} <= set(kept)
    assert len(kept) == 4


async def test_nothing_is_evicted_when_the_gang_cannot_fit(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="4"), *gang("low", 4, 2))
    await running(c, *names("low", 4))
    await c.add(*gang("huge", 5, 5, level="high"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert len(await alive(c, *names("low", 4))) == 4


# -- configuration ---------------------------------------------------------------------------------


def test_actions_and_arguments_are_accepted() -> None:
    parsed = parse_config(
        conf("enqueue, allocate, gangpreempt, gangreclaim, backfill", *TIERS)
        + "configurations:\n"
        + "- name: gangpreempt\n  arguments: {maxDomains: 2, allowWholeBundle: false}\n"
        + "- name: gangreclaim\n  arguments: {maxDomains: 1}\n",
        "<test>",
    )
    assert parsed.actions == ["enqueue", "allocate", "gangpreempt", "gangreclaim", "backfill"]
    assert parsed.action_args("gangpreempt").get_int("maxDomains", 8) == 2


def test_unknown_argument_is_named() -> None:
    with pytest.raises(ConfigError, match="maxDomain"):
        parse_config(config(maxDomain=2), "<test>")


@pytest.mark.parametrize(
    ("arguments", "key"),
    [
        ({"maxDomains": 0}, "maxDomains"),
        ({"maxDomains": "many"}, "maxDomains"),
        ({"allowWholeBundle": "maybe"}, "allowWholeBundle"),
    ],
)
def test_bad_argument_values_are_named(arguments: dict[str, Any], key: str) -> None:
    from stromboli.core.scheduler.framework.plugin import ACTIONS

    ssn = make_session([node("n1")], config(**arguments))
    with pytest.raises(ArgumentError, match=f"gangpreempt: argument '{key}'"):
        ACTIONS["gangpreempt"]().execute(ssn)


# -- how much is taken -------------------------------------------------------------------------


async def test_only_what_the_gang_needs_is_taken_from_a_large_surplus(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="4"), node("n2", cpu="4"), *gang("low", 8, 2))
    await running(c, *names("low", 8))
    await c.add(*gang("high", 2, 2, level="high"))
    assert (await c.run()).evicted == 2
    assert len(await alive(c, *names("low", 8))) == 6


@pytest.mark.parametrize("target", ["n1", "n2"])
async def test_victims_are_taken_where_the_gang_can_run(tmp_path: Path, target: str) -> None:
    c = await cluster(tmp_path, node("n1", cpu="4"), node("n2", cpu="4"), *gang("low", 8, 2))
    await running(c, *names("low", 8))
    on_node = {name: await c.node_of(name) for name in names("low", 8)}
    objects = gang("high", 2, 2, level="high")
    for obj in objects[1:]:
        obj["spec"]["nodeSelector"] = {"kubernetes.io/hostname": target}
    await c.add(*objects)

    stats = await c.run()
    assert stats.evicted == 2
    assert {on_node[name] for name, _ in evicted(stats)} == {target}
    assert await placed(c, *names("high", 2))
    assert {await c.node_of(name) for name in names("high", 2)} == {target}


# -- reservation -----------------------------------------------------------------------------------


@pytest.mark.parametrize("reserving", [False, True])
async def test_room_reserved_for_an_overdue_gang_is_not_preempted_for(
    tmp_path: Path, reserving: bool
) -> None:
    """With the ``reservation`` plugin holding the node for an overdue gang (which may not
    preempt: its priority equals the running job's), a higher-priority gang cannot take that
    room, so nothing is evicted for it; without the plugin it preempts as usual."""
    first = ["priority", "gang", "conformance", *(["reservation"] if reserving else [])]
    config = conf("enqueue, allocate, gangpreempt, backfill", first, TIERS[1])
    c = await cluster(tmp_path, node("n1", cpu="4"), *gang("low", 4, 1), config=config)
    await running(c, *names("low", 4))
    overdue = gang("big", 4, 4)
    overdue[0]["metadata"]["annotations"] = {"volcano.sh/sla-waiting-time": "1s"}
    await c.add(*overdue)
    await c.run(2)
    await c.add(*gang("urgent", 2, 2, level="high"))

    stats = await c.run()
    assert stats.evicted == (0 if reserving else 2)
    if reserving:
        assert stats.session is not None
        target = stats.session.plugins["reservation"].target  # type: ignore[attr-defined]
        assert target is not None and target.name == "big"
    assert len(await alive(c, *names("low", 4))) == (4 if reserving else 2)
