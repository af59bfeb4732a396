"""drf with ``enableHierarchy: true``: hierarchical DRF over the ``volcano.sh/hierarchy`` tree."""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api import constants as k
from stromboli.core.scheduler.api.resource import Resource
from stromboli.core.scheduler.framework.session import PERMIT, Session
from stromboli.core.scheduler.plugins.drf import DrfPlugin
from stromboli.core.scheduler.util.hdrf import (
    HierarchyError,
    HierarchyTree,
    QueuePath,
    parse_hierarchy,
)

from ..builders import Cluster, conf, make_session, node, pod, podgroup, queue, session_task

HDRF = conf("enqueue, allocate", ["priority", "gang"], [{"name": "drf", "enableHierarchy": True}])
CPU = 1000.0


def hqueue(name: str, hierarchy: str | None = None, weights: str | None = None) -> dict:
    """A queue with the hierarchy annotations (either may be left out)."""
    obj = queue(name)
    notes = {}
    if hierarchy is not None:
        notes[k.HIERARCHY_KEY] = hierarchy
    if weights is not None:
        notes[k.HIERARCHY_WEIGHTS_KEY] = weights
    if notes:
        obj["metadata"]["annotations"] = notes
    return obj


def job(
    name: str, queue_name: str, running: int, pending: int = 0, cpu: str = "1"
) -> list[dict[str, Any]]:
    """A one-member podgroup with ``running`` pods on n1 and ``pending`` pods waiting."""
    pods = [
        pod(f"{name}-{i}", group=name, uid=f"{name}{i}", cpu=cpu, node_name="n1", phase="Running")
        for i in range(running)
    ]
    pods += [
        pod(f"{name}-{i}", group=name, uid=f"{name}{i}", cpu=cpu)
        for i in range(running, running + pending)
    ]
    phase = "Running" if running else "Inqueue"
    return [podgroup(name, 1, queue=queue_name, phase=phase), *pods]


def departments(*jobs: list[dict], cpu: str = "16") -> Session:
    """root → eng (weight 3) → {dev, prod}; root → research (weight 1) → lab; one node."""
    objects: list[dict] = [
        node("n1", cpu=cpu, memory="64Gi"),
        hqueue("dev", "root/eng/dev", "1/3/1"),
        hqueue("prod", "root/eng/prod", "1/3/1"),
        hqueue("lab", "root/research/lab", "1/1/1"),
    ]
    for group in jobs:
        objects.extend(group)
    return make_session(objects, HDRF)


def tree_of(ssn: Session) -> HierarchyTree:
    plugin = ssn.plugins["drf"]
    assert isinstance(plugin, DrfPlugin) and plugin.tree is not None
    return plugin.tree


def share(ssn: Session, *names: str) -> float:
    found = tree_of(ssn).node(QueuePath(names, (1.0,) * len(names)))
    assert found is not None, names
    return found.share


def queue_order(ssn: Session, *names: str) -> list[str]:
    queues = [ssn.queues[n] for n in names]
    return [q.name for q in sorted(queues, key=functools.cmp_to_key(ssn.queue_compare))]


def reclaim(ssn: Session, reclaimer: str, *candidates: str) -> list[str]:
    fn = ssn._callbacks["reclaimable"]["drf"]
    chosen, vote = fn(session_task(ssn, reclaimer), [session_task(ssn, c) for c in candidates])
    assert vote == PERMIT
    return [t.name for t in chosen]


# -- reading the annotations -------------------------------------------------------------------


def test_path_and_weights_below_the_root() -> None:
    path = parse_hierarchy(
        "dev", {k.HIERARCHY_KEY: "root/eng/dev", k.HIERARCHY_WEIGHTS_KEY: "1/2/8"}
    )
    assert path == QueuePath(("eng", "dev"), (2.0, 8.0))
    assert str(path) == "root/eng/dev"


def test_queue_without_annotations_sits_under_the_root() -> None:
    assert parse_hierarchy("plain", {}) == QueuePath(("plain",), (1.0,))
    assert parse_hierarchy("blank", {k.HIERARCHY_KEY: "", k.HIERARCHY_WEIGHTS_KEY: ""}) == (
        QueuePath(("blank",), (1.0,))
    )


def test_path_without_root_is_taken_as_below_it() -> None:
    path = parse_hierarchy("dev", {k.HIERARCHY_KEY: "eng/dev", k.HIERARCHY_WEIGHTS_KEY: "2/8"})
    assert path == QueuePath(("eng", "dev"), (2.0, 8.0))


def test_path_of_just_the_root_hangs_jobs_on_the_root() -> None:
    path = parse_hierarchy("top", {k.HIERARCHY_KEY: "root", k.HIERARCHY_WEIGHTS_KEY: "1"})
    assert path == QueuePath((), ())
    ssn = make_session(
        [node("n1", cpu="16"), hqueue("top", "root", "1"), *job("t", "top", 2)], HDRF
    )
    root = tree_of(ssn).root
    assert root.children is not None and list(root.children) == ["default/t"]
    assert root.share == pytest.approx(2 / 16)


def test_weights_below_one_count_as_one() -> None:
    path = parse_hierarchy("dev", {k.HIERARCHY_KEY: "root/eng", k.HIERARCHY_WEIGHTS_KEY: "1/0.5"})
    assert path.weights == (1.0,)


@pytest.mark.parametrize(
    ("hierarchy", "weights", "message"),
    [
        ("root/eng", None, "volcano.sh/hierarchy is set but volcano.sh/hierarchy-weights is not"),
        (None, "1/2", "volcano.sh/hierarchy-weights is set but volcano.sh/hierarchy is not"),
        ("root/eng/dev", "1/2", "'root/eng/dev' has 3 levels but volcano.sh/hierarchy-weights"),
        ("root/eng", "1/two", "'two' in '1/two' is not a number"),
        ("root/eng", "1/0", "'0' in '1/0' must be a number above 0"),
        ("root/eng", "1/-2", "'-2' in '1/-2' must be a number above 0"),
        ("root/eng", "1/inf", "'inf' in '1/inf' must be a number above 0"),
        ("root//dev", "1/1/1", "'root//dev' has an empty level"),
    ],
)
def test_malformed_annotations_name_queue_and_field(
    hierarchy: str | None, weights: str | None, message: str
) -> None:
    notes = {}
    if hierarchy is not None:
        notes[k.HIERARCHY_KEY] = hierarchy
    if weights is not None:
        notes[k.HIERARCHY_WEIGHTS_KEY] = weights
    with pytest.raises(HierarchyError, match=r"queue broken: metadata\.annotations") as info:
        parse_hierarchy("broken", notes)
    assert message in str(info.value)


def test_malformed_queue_is_placed_under_the_root_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        ssn = make_session(
            [
                node("n1", cpu="16"),
                hqueue("odd-one", "root/eng/odd", "1/x/1"),
                *job("o", "odd-one", 2),
            ],
            HDRF,
        )
    assert "queue odd-one: metadata.annotations[volcano.sh/hierarchy-weights]" in caplog.text
    assert share(ssn, "odd-one") == pytest.approx(2 / 16)
    assert "eng" not in (tree_of(ssn).root.children or {})


# -- the tree ----------------------------------------------------------------------------------


def test_tree_follows_the_annotations() -> None:
    ssn = departments(job("d", "dev", 1), job("l", "lab", 1), job("x", "default", 1))
    root = tree_of(ssn).root
    assert root.children is not None
    assert sorted(root.children) == ["default", "eng", "research"]
    eng = root.children["eng"]
    assert eng.weight == 3.0 and eng.children is not None
    # Queues with no job have no node yet.
    assert sorted(eng.children) == ["dev"]
    dev = eng.children["dev"]
    assert dev.children is not None and list(dev.children) == ["default/d"]
    assert dev.children["default/d"].is_leaf
    # A queue without annotations sits right under the root with weight 1.
    assert root.children["default"].weight == 1.0


def test_first_queue_to_name_a_level_sets_its_weight(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        ssn = make_session(
            [
                node("n1", cpu="16"),
                hqueue("alpha", "root/ops/alpha", "1/2/1"),
                hqueue("beta", "root/ops/beta", "1/5/1"),
                *job("a", "alpha", 1),
                *job("b", "beta", 1),
            ],
            HDRF,
        )
    root = tree_of(ssn).root
    assert root.children is not None and root.children["ops"].weight == 2.0
    assert "root/ops already has weight 2; ignoring weight 5" in caplog.text


def test_leaf_share_is_the_jobs_dominant_share() -> None:
    ssn = departments(job("d", "dev", 4, 4))
    assert share(ssn, "eng", "dev") == pytest.approx(4 / 16)
    assert share(ssn, "eng") == pytest.approx(4 / 16)
    assert tree_of(ssn).root.share == pytest.approx(4 / 16)


def test_department_scales_teams_to_the_poorest_demanding_one() -> None:
    # dev holds 4 of 8 wanted, prod 1 of 2: both still demand. eng counts each team as if it
    # held prod's 1/16: 2 cpu in all, not the 5 it holds.
    ssn = departments(job("d", "dev", 4, 4), job("p", "prod", 1, 1))
    assert share(ssn, "eng") == pytest.approx(2 / 16)
    assert not tree_of(ssn).node(QueuePath(("eng",), (3.0,))).saturated  # type: ignore[union-attr]


def test_saturated_team_counts_with_what_it_holds() -> None:
    # prod's job holds all it asks for (1 cpu): it is saturated and not scaled, so eng is
    # dev's 4 plus prod's 1.
    ssn = departments(job("d", "dev", 4, 4), job("p", "prod", 1))
    tree = tree_of(ssn)
    prod = tree.node(QueuePath(("eng", "prod"), (3.0, 1.0)))
    assert prod is not None and prod.saturated
    assert share(ssn, "eng") == pytest.approx(5 / 16)


def test_team_holding_nothing_does_not_count() -> None:
    ssn = departments(job("d", "dev", 4, 4), job("p", "prod", 0, 2))
    assert share(ssn, "eng") == pytest.approx(4 / 16)
    assert share(ssn, "eng", "prod") == 0.0


def test_full_resource_saturates_every_job_holding_it() -> None:
    ssn = departments(job("d", "dev", 12, 4), job("l", "lab", 4, 4))
    tree = tree_of(ssn)
    assert tree.full == frozenset({"cpu"})
    assert all(n.saturated for n in tree.walk())


# -- queue order -------------------------------------------------------------------------------


def test_departments_are_ordered_by_share_per_weight() -> None:
    # eng holds 6/16 but weighs 3 (0.125); research holds 3/16 (0.1875).
    ssn = departments(job("d", "dev", 6, 4), job("l", "lab", 3, 4))
    assert queue_order(ssn, "lab", "dev") == ["dev", "lab"]


def test_the_first_differing_level_decides() -> None:
    # eng holds 12 of 16 cpu but counts as two teams at prod's 1/16: 2/16 over weight 3 is
    # below research's 2/16, so both eng queues go before lab; within eng, prod (1/16) before
    # dev (11/16).
    ssn = departments(job("d", "dev", 11, 4), job("p", "prod", 1, 4), job("l", "lab", 2, 4))
    assert queue_order(ssn, "lab", "dev", "prod") == ["prod", "dev", "lab"]


def test_siblings_are_compared_by_their_own_weights() -> None:
    ssn = make_session(
        [
            node("n1", cpu="16", memory="64Gi"),
            hqueue("small", "root/eng/small", "1/1/1"),
            hqueue("big", "root/eng/big", "1/1/4"),
            *job("s", "small", 1, 4),
            *job("b", "big", 3, 4),
        ],
        HDRF,
    )
    # big holds three times as much but weighs four times: 3/16/4 < 1/16.
    assert queue_order(ssn, "small", "big") == ["big", "small"]


def test_saturated_queue_goes_after_a_demanding_one() -> None:
    # prod's job is fully served; dev holds more but still wants more.
    ssn = departments(job("d", "dev", 4, 4), job("p", "prod", 1))
    assert queue_order(ssn, "prod", "dev") == ["dev", "prod"]


def test_queue_without_jobs_goes_first() -> None:
    ssn = departments(job("d", "dev", 1, 1))
    assert queue_order(ssn, "dev", "lab") == ["lab", "dev"]


def test_order_follows_allocations_in_the_session() -> None:
    ssn = departments(job("d", "dev", 3, 4), job("l", "lab", 1, 4))
    # eng 3/16/3 = research 1/16: equal per weight; dev (3/16) vs lab (1/16) decides.
    assert queue_order(ssn, "dev", "lab") == ["lab", "dev"]
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "l-1"), "n1")
    assert share(ssn, "research") == pytest.approx(2 / 16)
    assert queue_order(ssn, "dev", "lab") == ["dev", "lab"]
    stmt.discard()
    assert share(ssn, "research") == pytest.approx(1 / 16)
    assert queue_order(ssn, "dev", "lab") == ["lab", "dev"]


def test_without_hierarchy_drf_leaves_queues_alone() -> None:
    ssn = make_session(
        [node("n1"), hqueue("dev", "root/eng/dev", "1/3/1"), *job("d", "dev", 1)],
        conf("allocate", ["gang"], ["drf"]),
    )
    plugin = ssn.plugins["drf"]
    assert isinstance(plugin, DrfPlugin) and plugin.tree is None
    assert "drf" not in ssn._callbacks.get("queue_order", {})
    assert "drf" not in ssn._callbacks.get("reclaimable", {})
    assert "drf" in ssn._callbacks["job_order"]


# -- reclaim -----------------------------------------------------------------------------------


def test_reclaim_from_a_department_richer_per_weight() -> None:
    # research holds all 16 cpu; eng (weight 3) holds nothing.
    ssn = departments(job("l", "lab", 16), job("d", "dev", 0, 2))
    assert reclaim(ssn, "d-0", "l-0", "l-1") == ["l-0", "l-1"]


def test_no_reclaim_that_would_turn_the_order_around() -> None:
    # research (4/16, weight 1) after taking one more: 0.3125; eng after losing one: 11/16/3
    # = 0.229. research would end up richer per weight, so no victim.
    ssn = departments(job("d", "dev", 12), job("l", "lab", 4, 1))
    assert reclaim(ssn, "l-4", "d-0") == []


def test_teams_of_one_department_compare_below_it() -> None:
    # eng as a whole is far richer than research, yet dev may take from its sibling prod.
    ssn = departments(job("p", "prod", 14), job("l", "lab", 2), job("d", "dev", 0, 1))
    assert reclaim(ssn, "d-0", "p-0") == ["p-0"]


def test_reclaim_refused_when_shares_end_equal() -> None:
    ssn = make_session(
        [
            node("n1", cpu="2"),
            queue("left"),
            queue("right"),
            *job("a", "left", 2),
            *job("b", "right", 0, 1),
        ],
        HDRF,
    )
    # Both queues would end with 1 of 2 cpu: a tie protects the victim (strict, as Volcano).
    assert reclaim(ssn, "b-0", "a-0") == []


def test_each_victim_is_weighed_alone_and_the_tree_is_restored() -> None:
    ssn = departments(job("l", "lab", 16), job("d", "dev", 0, 2))
    before = {n.name: (n.share, n.saturated) for n in tree_of(ssn).walk()}
    reclaim(ssn, "d-0", *[f"l-{i}" for i in range(16)])
    after = {n.name: (n.share, n.saturated) for n in tree_of(ssn).walk()}
    assert after == before
    assert tree_of(ssn).total_allocated.get("cpu") == pytest.approx(16 * CPU)


def test_reclaimer_that_would_be_served_yields_to_a_demanding_victim() -> None:
    # Volcano's saturation rule: the cluster has room left, dev's single pod would complete
    # its job (saturated) while lab still wants more, so saturated dev orders after lab and
    # may not take from it, whatever the shares.
    ssn = departments(job("l", "lab", 8, 4), job("d", "dev", 0, 1))
    assert reclaim(ssn, "d-0", "l-0") == []


def test_reclaimer_with_unknown_job_gets_nothing() -> None:
    ssn = departments(job("l", "lab", 16), job("d", "dev", 0, 1))
    task = session_task(ssn, "d-0")
    tree_of(ssn).leaves.pop(task.job_id)
    assert reclaim(ssn, "d-0", "l-0") == []


# -- through the scheduler ---------------------------------------------------------------------


def elastic(name: str, queue_name: str, replicas: int, min_member: int = 1) -> list[dict]:
    pods = [pod(f"{name}-{i}", group=name, cpu="1") for i in range(replicas)]
    return [podgroup(name, min_member, queue=queue_name), *pods]


async def run_departments(tmp_path: Path, config: str) -> dict[str, int]:
    c = await Cluster(tmp_path, config).start()
    await c.add(
        node("n1", cpu="8", memory="64Gi"),
        hqueue("lab", "root/research/lab", "1/1/1"),
        hqueue("dev", "root/eng/dev", "1/3/1"),
        *elastic("l", "lab", 8),
        *elastic("d", "dev", 8),
    )
    await c.run()
    bound = {"l": 0, "d": 0}
    for prefix in bound:
        for i in range(8):
            if await c.node_of(f"{prefix}-{i}"):
                bound[prefix] += 1
    return bound


async def test_allocate_shares_the_cluster_by_department_weight(tmp_path: Path) -> None:
    assert await run_departments(tmp_path, HDRF) == {"l": 2, "d": 6}


async def test_without_hierarchy_the_first_queue_takes_all(tmp_path: Path) -> None:
    plain = conf("enqueue, allocate", ["priority", "gang"], ["drf"])
    assert await run_departments(tmp_path, plain) == {"l": 8, "d": 0}


async def test_reclaim_evicts_from_the_richer_department(tmp_path: Path) -> None:
    config = conf(
        "enqueue, allocate, reclaim",
        ["priority", "gang"],
        [{"name": "drf", "enableHierarchy": True}, "predicates"],
    )
    c = await Cluster(tmp_path, config).start()
    await c.add(
        node("n1", cpu="4", memory="64Gi"),
        hqueue("lab", "root/research/lab", "1/1/1"),
        hqueue("dev", "root/eng/dev", "1/3/1"),
        *elastic("l", "lab", 4),
    )
    await c.run()
    for i in range(4):
        await c.set_phase(f"l-{i}", "Running")
    await c.add(*elastic("d", "dev", 3, min_member=3))
    evicted = 0
    for _ in range(4):
        evicted += (await c.run()).evicted
    # The gang of 3 takes 3 cpu: eng (weight 3) then holds 3/4 (1/4 per weight), as much as
    # research's 1/4; evictions stop there.
    assert evicted == 3
    assert all([await c.node_of(f"d-{i}") for i in range(3)])
    assert (await c.run()).evicted == 0


def test_tree_arithmetic_without_a_session() -> None:
    tree = HierarchyTree(Resource({"cpu": 10 * CPU, "memory": 10.0}))
    a = QueuePath(("a",), (1.0,))
    b = QueuePath(("b",), (2.0,))
    tree.add_job("j1", a, Resource({"cpu": 2 * CPU}), Resource({"cpu": 5 * CPU}))
    tree.add_job("j2", b, Resource({"memory": 3.0}), Resource({"memory": 6.0}))
    tree.refresh()
    # a: 0.2 per weight 1; b: 0.3 per weight 2 = 0.15.
    assert tree.compare(a, b) == pytest.approx(0.05)
    tree.set_allocated("j1", Resource({"cpu": 1 * CPU}))
    assert tree.compare(a, b) == pytest.approx(-0.05)
    # The root scales b down to a's 0.1: 1 cpu and 1 of memory, a dominant share of 0.1.
    assert tree.root.allocated == Resource({"cpu": 1 * CPU, "memory": 1.0})
    assert tree.root.share == pytest.approx(0.1)


def test_updates_along_one_path_match_a_full_recount() -> None:
    total = Resource({"cpu": 8 * CPU, "memory": 8.0})
    paths = {
        "j1": QueuePath(("eng", "dev"), (3.0, 1.0)),
        "j2": QueuePath(("eng", "prod"), (3.0, 2.0)),
        "j3": QueuePath(("lab",), (1.0,)),
        "j4": QueuePath(("eng", "dev"), (3.0, 1.0)),
    }
    request = Resource({"cpu": 4 * CPU, "memory": 4.0})
    steps = [
        ("j1", {"cpu": 1 * CPU}),
        ("j2", {"memory": 2.0}),
        ("j3", {"cpu": 3 * CPU, "memory": 1.0}),
        ("j4", {"cpu": 4 * CPU}),  # j4 is served, and the cpu is all used
        ("j2", {"memory": 4.0, "cpu": 0.5 * CPU}),
        ("j4", {"cpu": 2 * CPU}),  # cpu frees up again
        ("j1", {}),
    ]
    live = HierarchyTree(total)
    for uid, path in paths.items():
        live.add_job(uid, path, Resource(), request)
    live.refresh()
    held: dict[str, Resource] = {uid: Resource() for uid in paths}
    for uid, amounts in steps:
        held[uid] = Resource(amounts)
        live.set_allocated(uid, held[uid])
        fresh = HierarchyTree(total)
        for other, path in paths.items():
            fresh.add_job(other, path, held[other], request)
        fresh.refresh()
        assert live.full == fresh.full
        state = {(n.name, n.share, n.saturated) for n in live.walk()}
        assert state == {(n.name, n.share, n.saturated) for n in fresh.walk()}
