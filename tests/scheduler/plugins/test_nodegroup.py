"""nodegroup: queue affinity to groups of nodes labelled ``volcano.sh/nodegroup-name``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.plugins.nodegroup import (
    AFFINITY_NOT_SPECIFIED,
    LABEL_NOT_FOUND,
    LIMIT_EXCEEDED,
    LIMIT_INVALID,
    NOT_SATISFIED,
    GroupAffinity,
)

from ..builders import Cluster, conf, make_session, node, pod, podgroup, queue, session_task

GROUP = "volcano.sh/nodegroup-name"


def gqueue(
    name: str,
    *,
    required: list[str] | None = None,
    preferred: list[str] | None = None,
    anti_required: list[str] | None = None,
    anti_preferred: list[str] | None = None,
    limits: dict | None = None,
    **kwargs: Any,
) -> dict:
    obj = queue(name, **kwargs)
    affinity: dict[str, Any] = {}
    if required or preferred:
        affinity["nodeGroupAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": required or [],
            "preferredDuringSchedulingIgnoredDuringExecution": preferred or [],
        }
    if anti_required or anti_preferred:
        affinity["nodeGroupAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": anti_required or [],
            "preferredDuringSchedulingIgnoredDuringExecution": anti_preferred or [],
        }
    if affinity:
        obj["spec"]["affinity"] = affinity
    if limits is not None:
        obj["metadata"]["annotations"] = {
            "volcano.sh/nodegroup-resource-limits": limits
            if isinstance(limits, str)
            else json.dumps(limits)
        }
    return obj


def nodes() -> list[dict]:
    return [
        node("a1", labels={GROUP: "a"}),
        node("a2", labels={GROUP: "a"}),
        node("b1", labels={GROUP: "b"}),
        node("c1", labels={GROUP: "c"}),
        node("plain"),
    ]


def session(*objects: dict, **arguments: Any) -> Session:
    entry: dict[str, Any] = {"name": "nodegroup"}
    if "hierarchy" in arguments:
        entry["enableHierarchy"] = arguments.pop("hierarchy")
    if arguments:
        entry["arguments"] = arguments
    return make_session([*nodes(), *objects], conf("allocate", [entry]))


def job_in(q: str, name: str = "j", cpu: str = "1") -> list[dict]:
    return [
        podgroup(name, 1, queue=q, phase="Inqueue"),
        pod(f"{name}-0", group=name, uid=name, cpu=cpu),
    ]


def verdict(ssn: Session, task: str = "j-0") -> dict[str, str | None]:
    """Node name → first failure reason (None when it passes)."""
    result = ssn.predicate(session_task(ssn, task))
    out: dict[str, str | None] = {}
    for i, info in enumerate(ssn.nodes.nodes):
        reasons = [r for mask, r, _ in result.reasons if mask[i]]
        out[info.name] = reasons[0] if reasons else None
    return out


def scores(ssn: Session, task: str = "j-0") -> dict[str, float]:
    positions = np.arange(len(ssn.nodes))
    values = ssn.node_scores(session_task(ssn, task), positions)
    return {info.name: float(values[i]) for i, info in enumerate(ssn.nodes.nodes)}


def test_affinity_rules() -> None:
    affinity = GroupAffinity(
        required={"a"}, preferred=["b", "c"], anti_required={"c", "d"}, anti_preferred={"e"}
    )
    assert affinity.admits("a") and affinity.admits("b")
    assert not affinity.admits("c")  # required anti-affinity beats preferred affinity
    assert not affinity.admits("d")
    assert affinity.admits("e")  # preferred anti-affinity is only a preference
    assert not affinity.admits("z")
    assert affinity.score("a", False) == 100
    assert affinity.score("b", False) == 50
    assert affinity.score("b", True) == 50
    assert affinity.score("c", True) == 25
    assert affinity.score("e", False) == -1


def test_required_and_preferred_groups_pass_others_fail() -> None:
    ssn = session(gqueue("q", required=["a"], preferred=["b"]), *job_in("q"))
    assert verdict(ssn) == {
        "a1": None,
        "a2": None,
        "b1": None,
        "c1": NOT_SATISFIED,
        "plain": LABEL_NOT_FOUND,
    }
    assert scores(ssn) == {"a1": 100, "a2": 100, "b1": 50, "c1": 0, "plain": 0}


def test_required_anti_affinity_excludes_a_group() -> None:
    ssn = session(gqueue("q", preferred=["a", "b"], anti_required=["b"]), *job_in("q"))
    result = verdict(ssn)
    assert result["a1"] is None
    assert result["b1"] == NOT_SATISFIED


def test_preferred_anti_affinity_admits_but_scores_below_zero() -> None:
    ssn = session(gqueue("q", required=["a"], anti_preferred=["c"]), *job_in("q"))
    assert verdict(ssn)["c1"] is None
    assert scores(ssn)["c1"] == -1


def test_queue_without_affinity_in_strict_mode_fits_nowhere() -> None:
    ssn = session(queue("q"), *job_in("q"))
    result = verdict(ssn)
    assert result["a1"] == AFFINITY_NOT_SPECIFIED
    assert result["plain"] == LABEL_NOT_FOUND
    assert all(result[name] for name in result)


def test_non_strict_lets_queues_without_affinity_use_ungrouped_nodes() -> None:
    ssn = session(
        queue("q"), gqueue("r", required=["a"]), *job_in("q"), *job_in("r", "k"), strict=False
    )
    assert verdict(ssn)["plain"] is None
    assert verdict(ssn)["a1"] == AFFINITY_NOT_SPECIFIED
    # A queue with affinity still needs a labelled node.
    assert verdict(ssn, "k-0")["plain"] == LABEL_NOT_FOUND


def test_preferred_order_scores_by_list_position() -> None:
    ssn = session(gqueue("q", preferred=["c", "a", "b"]), *job_in("q"), enablePreferredOrder=True)
    result = scores(ssn)
    assert result["c1"] == pytest.approx(50)
    assert result["a1"] == pytest.approx(100 / 3)
    assert result["b1"] == pytest.approx(50 / 3)


def test_scores_depend_on_the_queue_not_the_pod_shape() -> None:
    ssn = session(
        gqueue("qa", required=["a"], preferred=["b"]),
        gqueue("qb", required=["b"], preferred=["a"]),
        *job_in("qa", "x"),
        *job_in("qb", "y"),
    )
    assert scores(ssn, "x-0")["a1"] == 100
    assert scores(ssn, "y-0")["a1"] == 50


def test_hierarchy_inherits_the_nearest_ancestor_affinity() -> None:
    objects = [
        gqueue("team", required=["b"]),
        queue("child", parent="team"),
        gqueue("own", parent="team", required=["a"]),
        *job_in("child", "c"),
        *job_in("own", "o"),
    ]
    flat = session(*objects)
    assert verdict(flat, "c-0")["b1"] == AFFINITY_NOT_SPECIFIED
    tree = session(*objects, hierarchy=True)
    assert verdict(tree, "c-0")["b1"] is None
    assert verdict(tree, "c-0")["a1"] == NOT_SATISFIED
    assert verdict(tree, "o-0")["a1"] is None


def test_resource_limit_per_group() -> None:
    ssn = session(
        gqueue("q", required=["a", "b"], limits={"a": {"cpu": "2"}}),
        podgroup("run", 1, queue="q", phase="Running"),
        pod("run-0", group="run", uid="run-0", cpu="1", node_name="a1", phase="Running"),
        *job_in("q", cpu="1"),
        *job_in("q", "big", cpu="2"),
    )
    assert verdict(ssn)["a1"] is None  # 1 + 1 ≤ 2
    assert verdict(ssn, "big-0")["a2"] == LIMIT_EXCEEDED  # 1 + 2 > 2
    assert verdict(ssn, "big-0")["b1"] is None
    ssn.statement().allocate(session_task(ssn, "j-0"), "a2")
    extra = session_task(ssn, "big-0")
    assert ssn.predicate(extra).passed.tolist() == [False, False, True, False, False]


def test_invalid_limit_annotation_fails_every_node() -> None:
    ssn = session(gqueue("q", required=["a"], limits="{not json"), *job_in("q"))
    assert set(verdict(ssn).values()) == {LIMIT_INVALID}


def test_failures_are_unresolvable() -> None:
    ssn = session(gqueue("q", required=["a"]), *job_in("q"))
    result = ssn.predicate(session_task(ssn, "j-0"))
    assert result.reasons and all(unresolvable for _, _, unresolvable in result.reasons)


async def test_queue_jobs_land_in_their_node_group(tmp_path: Path) -> None:
    config = conf("enqueue, allocate", ["priority", "gang"], ["predicates", "nodegroup"])
    c = await Cluster(tmp_path, config).start()
    await c.add(
        node("a1", cpu="4", labels={GROUP: "a"}),
        node("b1", cpu="4", labels={GROUP: "b"}),
        node("b2", cpu="4", labels={GROUP: "b"}),
        gqueue("qa", required=["a"]),
        gqueue("qb", required=["b"], preferred=["a"]),
        podgroup("x", 1, queue="qa"),
        *[pod(f"x-{i}", group="x", cpu="1") for i in range(6)],
        podgroup("y", 1, queue="qb"),
        *[pod(f"y-{i}", group="y", cpu="1") for i in range(3)],
    )
    await c.run()
    x_nodes = {await c.node_of(f"x-{i}") for i in range(6)}
    y_nodes = {await c.node_of(f"y-{i}") for i in range(3)}
    assert x_nodes == {"a1", ""}  # four fit in group a; the rest wait
    assert y_nodes <= {"b1", "b2"}
