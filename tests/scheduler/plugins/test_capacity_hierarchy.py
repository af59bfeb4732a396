"""capacity with ``enableHierarchy: true``: a queue tree through ``spec.parent``."""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.capacity import (
    INVALID_HIERARCHY_REASON,
    NOT_LEAF_REASON,
    CapacityPlugin,
)

from ..builders import Cluster, conf, make_session, node, pod, podgroup, session_task
from .test_capacity import cqueue, running

CPU = 1000.0


def tree_conf(actions: str = "enqueue, allocate", **arguments: Any) -> str:
    entry: dict[str, Any] = {"name": "capacity", "enableHierarchy": True}
    if arguments:
        entry["arguments"] = arguments
    return conf(actions, ["priority", "gang"], [entry])


def plugin(ssn: Session) -> CapacityPlugin:
    found = ssn.plugins["capacity"]
    assert isinstance(found, CapacityPlugin)
    return found


def tree(*extra: dict, config: str | None = None) -> Session:
    """root → eng (capability 6 cpu) → {dev (guarantee 2), prod}; root → ops."""
    return make_session(
        [
            node("n1", cpu="8", memory="16Gi"),
            node("n2", cpu="8", memory="16Gi"),
            cqueue("eng", capability={"cpu": "6"}, deserved={"cpu": "6"}, created=_t(1)),
            cqueue(
                "dev", parent="eng", guarantee={"cpu": "2"}, deserved={"cpu": "2"}, created=_t(2)
            ),
            cqueue("prod", parent="eng", deserved={"cpu": "4"}, created=_t(3)),
            cqueue("ops", deserved={"cpu": "4"}, created=_t(4)),
            *extra,
        ],
        config or tree_conf(),
    )


def _t(seconds: int) -> str:
    return f"1970-01-01T00:00:{seconds:02d}Z"


def test_tree_shape_and_real_capabilities() -> None:
    ssn = tree()
    attrs = plugin(ssn).attrs
    assert attrs["dev"].ancestors == ["root", "eng"]
    assert sorted(attrs["eng"].children) == ["dev", "prod"]
    assert sorted(attrs["root"].children) == ["default", "eng", "ops"]
    # The root is unlimited; eng is held to its capability.
    assert attrs["root"].real_capability.get("cpu") == math.inf
    assert attrs["eng"].real_capability.get("cpu") == 6 * CPU
    # dev's guarantee is set aside from eng's capability for prod, not for dev.
    assert attrs["prod"].real_capability.get("cpu") == 4 * CPU
    assert attrs["dev"].real_capability.get("cpu") == 6 * CPU
    # The root deserves and is guaranteed what its children are.
    assert attrs["root"].deserved.get("cpu") == 10 * CPU
    assert attrs["eng"].guarantee == Resource()


def test_usage_rolls_up_to_every_ancestor() -> None:
    ssn = tree(
        podgroup("d", 1, queue="dev", phase="Running"),
        running("d-0", "d", cpu="2"),
        pod("d-1", group="d", uid="d-1", cpu="1"),
    )
    attrs = plugin(ssn).attrs
    for name in ("dev", "eng", "root"):
        assert attrs[name].allocated.get("cpu") == 2 * CPU
        assert attrs[name].request.get("cpu") == 3 * CPU
    ssn.statement().allocate(session_task(ssn, "d-1"), "n1")
    assert attrs["eng"].allocated.get("cpu") == 3 * CPU
    assert attrs["eng"].share == 0.5
    assert ssn.queue_figures["eng"]["allocated"] is attrs["eng"].allocated


def test_a_child_cannot_exceed_its_parents_capability() -> None:
    ssn = tree(
        podgroup("p", 1, queue="prod", phase="Running"),
        *[running(f"p-{i}", "p") for i in range(3)],
        podgroup("d", 1, queue="dev", phase="Inqueue"),
        *[pod(f"d-{i}", group="d", uid=f"d-{i}", cpu="1") for i in range(4)],
    )
    dev = ssn.queues["dev"]
    stmt = ssn.statement()
    # eng holds 3 of 6: dev (no capability of its own) gets 3 more, not 4.
    for i in range(3):
        assert ssn.allocatable(dev, session_task(ssn, f"d-{i}"))
        stmt.allocate(session_task(ssn, f"d-{i}"), "n2")
    assert not ssn.allocatable(dev, session_task(ssn, "d-3"))


def test_non_leaf_queue_rejects_jobs_with_a_reason() -> None:
    ssn = tree(
        podgroup("j", 1, queue="eng"),
        pod("j-0", group="j", uid="j-0", cpu="1"),
        config=tree_conf("enqueue, allocate"),
    )
    job = ssn.jobs["default/j"]
    assert ssn._callbacks["job_enqueueable"]["capacity"](job) == REJECT
    uid, kind, reason, message = ssn.job_events[-1]
    assert (uid, kind, reason) == ("default/j", "Normal", "Unschedulable")
    assert "queue eng is not a leaf queue" in message
    valid = ssn.job_valid(job)
    assert valid is not None and valid[0] == NOT_LEAF_REASON
    assert not ssn.allocatable(ssn.queues["eng"], session_task(ssn, "j-0"))


def test_enqueue_walks_up_the_ancestors() -> None:
    ssn = tree(
        podgroup("p", 1, queue="prod", phase="Running", min_resources={"cpu": "2"}),
        *[running(f"p-{i}", "p") for i in range(2)],
        podgroup("fits", 1, queue="dev", min_resources={"cpu": "4"}),
        podgroup("over", 1, queue="dev", min_resources={"cpu": "5"}),
        config=tree_conf("enqueue"),
    )
    vote = ssn._callbacks["job_enqueueable"]["capacity"]
    assert vote(ssn.jobs["default/fits"]) == PERMIT
    assert vote(ssn.jobs["default/over"]) == REJECT
    ssn.job_enqueued(ssn.jobs["default/fits"])
    attrs = plugin(ssn).attrs
    assert attrs["eng"].inqueue.get("cpu") == 4 * CPU
    assert attrs["root"].inqueue.get("cpu") == 4 * CPU


def test_missing_parent_and_cycles_make_a_queue_unusable() -> None:
    ssn = tree(
        cqueue("orphan", parent="nowhere"),
        cqueue("a", parent="b"),
        cqueue("b", parent="a"),
        podgroup("o", 1, queue="orphan"),
        podgroup("c", 1, queue="a"),
        podgroup("fine", 1, queue="ops"),
    )
    attrs = plugin(ssn).attrs
    assert "nowhere" in attrs["orphan"].broken
    assert "cycle" in attrs["a"].broken and "cycle" in attrs["b"].broken
    job_valid = plugin(ssn).job_valid
    for name in ("o", "c"):
        valid = job_valid(ssn.jobs[f"default/{name}"])
        assert valid is not None and valid[0] == INVALID_HIERARCHY_REASON
    # The rest of the tree is unaffected.
    assert job_valid(ssn.jobs["default/fine"]) is None


def test_leaves_are_ordered_by_the_shares_of_their_branches() -> None:
    ssn = tree(
        podgroup("p", 1, queue="prod", phase="Running"),
        *[running(f"p-{i}", "p") for i in range(2)],
        podgroup("o", 1, queue="ops", phase="Running"),
        running("o-0", "o", node_name="n2"),
        *[podgroup(q, 1, queue=q, phase="Inqueue") for q in ("dev", "default")],
    )
    order = functools.cmp_to_key(ssn.queue_compare)
    names = [q.name for q in sorted((ssn.queues[n] for n in ("prod", "dev", "ops")), key=order)]
    # ops (1/4) before the eng branch (2/6); inside eng, dev (0/2) before prod (2/4).
    assert names == ["ops", "dev", "prod"]
    # Leaves go before inner queues.
    assert ssn.queue_less(ssn.queues["prod"], ssn.queues["eng"])


def test_victim_queues_nearest_the_reclaimer_go_first() -> None:
    ssn = tree()
    dev, prod, ops = ssn.queues["dev"], ssn.queues["prod"], ssn.queues["ops"]
    assert ssn.victim_queue_compare(prod, ops, dev) < 0
    assert ssn.victim_queue_compare(ops, prod, dev) > 0


def test_ancestor_reclaim_level_lets_a_queue_reclaim_through_its_parent() -> None:
    objects = [
        cqueue("team", deserved={"cpu": "8"}, created=_t(5)),
        cqueue("greedy", parent="team", created=_t(6)),
        podgroup("g", 1, queue="greedy", phase="Inqueue"),
        pod("g-0", group="g", uid="g-0", cpu="1"),
    ]
    flat = tree(*objects)
    task = session_task(flat, "g-0")
    # greedy deserves nothing itself ...
    assert not flat.preemptive(flat.queues["greedy"], task)
    # ... but its parent is below its deserved amount.
    leveled = tree(*objects, config=tree_conf(ancestorReclaimLevel=1))
    assert leveled.preemptive(leveled.queues["greedy"], session_task(leveled, "g-0"))


def test_ancestor_reclaim_level_spares_a_sibling_when_nobody_deserves_it() -> None:
    objects = [
        cqueue("team", deserved={"cpu": "8"}, created=_t(5)),
        cqueue("x", parent="team", created=_t(6)),
        cqueue("y", parent="team", created=_t(7)),
        podgroup("x", 1, queue="x", phase="Running"),
        podgroup("y", 1, queue="y", phase="Inqueue"),
        running("x-0", "x"),
        pod("y-0", group="y", uid="y-0", cpu="1"),
    ]
    fn_flat = tree(*objects)
    chosen, _ = fn_flat._callbacks["reclaimable"]["capacity"](
        session_task(fn_flat, "y-0"), [session_task(fn_flat, "x-0")]
    )
    assert [t.name for t in chosen] == ["x-0"]
    leveled = tree(*objects, config=tree_conf(ancestorReclaimLevel=1))
    chosen, _ = leveled._callbacks["reclaimable"]["capacity"](
        session_task(leveled, "y-0"), [session_task(leveled, "x-0")]
    )
    assert chosen == []


# -- through the scheduler ----------------------------------------------------------------------

HIERARCHY_CONF = tree_conf()


async def test_parent_capability_holds_for_its_children_together(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, HIERARCHY_CONF).start()
    await c.add(
        node("n1", cpu="16"),
        cqueue("team", capability={"cpu": "4"}),
        cqueue("alpha", parent="team"),
        cqueue("beta", parent="team"),
        podgroup("a", 1, queue="alpha"),
        podgroup("b", 1, queue="beta"),
        *[pod(f"a-{i}", group="a", cpu="1") for i in range(4)],
        *[pod(f"b-{i}", group="b", cpu="1") for i in range(4)],
    )
    assert (await c.run()).bound == 4
    assert (await c.run(2)).bound == 0
    team = (await c.queue("team"))["status"]["allocated"]
    assert team == {"cpu": "4", "memory": "0", "pods": "4"}


async def test_only_leaf_queues_accept_jobs(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, HIERARCHY_CONF).start()
    await c.add(
        node("n1", cpu="8"),
        cqueue("team"),
        cqueue("leaf", parent="team"),
        podgroup("inner", 1, queue="team", min_resources={"cpu": "1"}),
        pod("inner-0", group="inner", cpu="1"),
        podgroup("loose", 1, queue="team"),
        pod("loose-0", group="loose", cpu="1"),
        podgroup("outer", 1, queue="leaf"),
        pod("outer-0", group="outer", cpu="1"),
    )
    assert (await c.run()).bound == 1
    assert await c.node_of("outer-0") == "n1"
    assert await c.node_of("inner-0") == ""
    assert await c.node_of("loose-0") == ""
    # Admission votes on groups with minResources: this one is held back, with an event.
    assert (await c.pg("inner"))["status"]["phase"] == "Pending"
    events = await c.events(reason="Unschedulable", name="inner")
    assert any("not a leaf queue" in e["message"] for e in events)
    # One without minResources is admitted without a vote, then refused by allocate.
    conditions = (await c.pg("loose"))["status"].get("conditions") or []
    assert any(x.get("reason") == NOT_LEAF_REASON for x in conditions)


async def test_non_leaf_job_gets_a_condition_without_enqueue(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, tree_conf("allocate")).start()
    await c.add(
        node("n1", cpu="8"),
        cqueue("team"),
        cqueue("leaf", parent="team"),
        podgroup("inner", 1, queue="team"),
        pod("inner-0", group="inner", cpu="1"),
    )
    assert (await c.run()).bound == 0
    conditions = (await c.pg("inner"))["status"].get("conditions") or []
    assert any(x.get("reason") == NOT_LEAF_REASON for x in conditions)


async def test_sibling_guarantee_is_reserved_inside_the_parent(tmp_path: Path) -> None:
    c = await Cluster(tmp_path, HIERARCHY_CONF).start()
    await c.add(
        node("n1", cpu="16"),
        cqueue("team", capability={"cpu": "6"}),
        cqueue("kept", parent="team", guarantee={"cpu": "2"}),
        cqueue("crowd", parent="team"),
        podgroup("crowd-job", 1, queue="crowd"),
        *[pod(f"crowd-{i}", group="crowd-job", cpu="1") for i in range(8)],
    )
    assert (await c.run()).bound == 4
    await c.add(
        podgroup("kept-job", 2, queue="kept"),
        *[pod(f"kept-{i}", group="kept-job", cpu="1") for i in range(2)],
    )
    assert (await c.run()).bound == 2


def test_a_stored_chain_deeper_than_the_recursion_limit_opens_a_session() -> None:
    # The webhook refuses such a chain; a store written around it must not stop every cycle.
    depth = 3000
    queues = [cqueue("q0", deserved={"cpu": "1"})] + [
        cqueue(f"q{i}", parent=f"q{i - 1}", deserved={"cpu": "1"}) for i in range(1, depth)
    ]
    ssn = make_session([node("n1"), *queues], tree_conf())
    attrs = plugin(ssn).attrs
    assert attrs[f"q{depth - 1}"].ancestors[0] == "root"
    assert len(attrs[f"q{depth - 1}"].ancestors) == depth
    assert attrs["q0"].children == ["q1"]
