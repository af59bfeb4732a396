"""pdb: evictions keep PodDisruptionBudgets whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.framework.session import PERMIT, Session, VictimFilter
from stromboli.core.scheduler.plugins.pdb import live_allowed

from ..builders import (
    Cluster,
    conf,
    make_session,
    node,
    pod,
    podgroup,
    priority_class,
    session_task,
    task,
)


def budget(
    name: str = "budget",
    *,
    allowed: int | None = None,
    selector: dict | None = None,
    namespace: str = "default",
    disrupted: list[str] = (),  # type: ignore[assignment]
    **spec: Any,
) -> dict:
    obj: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {**spec},
    }
    if selector is not None:
        obj["spec"]["selector"] = selector
    status: dict[str, Any] = {}
    if allowed is not None:
        status["disruptionsAllowed"] = allowed
    if disrupted:
        status["disruptedPods"] = {p: "1970-01-01T00:00:00Z" for p in disrupted}
    if status:
        obj["status"] = status
    return obj


WEB = {"matchLabels": {"app": "web"}}


def session(*budgets: dict, count: int = 4, labels: dict[str, str] | None = None) -> Session:
    objects = [
        node("n1"),
        podgroup("pg", 1, phase="Running"),
        *[
            pod(
                f"web-{i}",
                group="pg",
                uid=f"web-{i}",
                cpu="1",
                node_name="n1",
                phase="Running",
                labels={"app": "web"} if labels is None else labels,
            )
            for i in range(count)
        ],
        pod("p", group="pg", uid="p", cpu="1"),
        *budgets,
    ]
    return make_session(objects, conf("preempt", ["pdb"]))


def candidates(ssn: Session, count: int = 4) -> list[TaskInfo]:
    return [session_task(ssn, f"web-{i}") for i in range(count)]


def victims(ssn: Session, point: str = "preemptable") -> list[str]:
    fn = ssn._callbacks[point]["pdb"]
    chosen, vote = fn(session_task(ssn, "p"), candidates(ssn))
    assert vote == PERMIT
    return [t.name for t in chosen]


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_budget_allows_as_many_disruptions_as_its_status(point: str) -> None:
    ssn = session(budget(allowed=2, selector=WEB))
    assert victims(ssn, point) == ["web-0", "web-1"]


def test_no_budget_no_limit() -> None:
    assert victims(session()) == ["web-0", "web-1", "web-2", "web-3"]


def test_budget_without_status_allows_nothing() -> None:
    assert victims(session(budget(selector=WEB))) == []


def test_other_namespaces_and_labels_are_not_covered() -> None:
    assert len(victims(session(budget(allowed=0, selector=WEB, namespace="prod")))) == 4
    other = {"matchLabels": {"app": "db"}}
    assert len(victims(session(budget(allowed=0, selector=other)))) == 4


def test_empty_selector_covers_the_namespace_and_absent_selects_nothing() -> None:
    assert victims(session(budget(allowed=1, selector={}), labels={})) == ["web-0"]
    assert len(victims(session(budget(allowed=0), labels={}))) == 4


def test_already_disrupted_pods_spend_nothing() -> None:
    ssn = session(budget(allowed=1, selector=WEB, disrupted=["web-0"]))
    assert victims(ssn) == ["web-0", "web-1"]


def test_every_covering_budget_must_allow() -> None:
    ssn = session(
        budget("a", allowed=3, selector=WEB),
        budget(
            "b", allowed=1, selector={"matchExpressions": [{"key": "app", "operator": "Exists"}]}
        ),
    )
    assert victims(ssn) == ["web-0"]


def test_min_available_caps_a_stale_status() -> None:
    ssn = session(budget(allowed=3, selector=WEB, minAvailable=3))
    assert victims(ssn) == ["web-0"]
    ssn = session(budget(selector=WEB, minAvailable="50%"))
    assert victims(ssn) == ["web-0", "web-1"]
    ssn = session(budget(selector=WEB, maxUnavailable=1))
    assert victims(ssn) == ["web-0"]


def test_live_allowed_counts_healthy_pods_only() -> None:
    running = [task(f"r{i}", phase="Running") for i in range(3)]
    pending = [task("p0")]
    finished = [task("s0", phase="Succeeded")]
    pods = running + pending + finished
    assert live_allowed({"minAvailable": 2}, pods) == 1
    assert live_allowed({"maxUnavailable": 1}, pods) == 0  # one of four is already down
    assert live_allowed({"maxUnavailable": "50%"}, pods) == 1
    assert live_allowed({}, pods) is None
    with pytest.raises(ValueError, match=r"spec\.minAvailable"):
        live_allowed({"minAvailable": "lots"}, pods)


def test_evictions_of_the_session_spend_the_budget() -> None:
    ssn = session(budget(allowed=2, selector=WEB))
    stmt = ssn.statement()
    stmt.evict(session_task(ssn, "web-3"), "preempt")
    assert victims(ssn) == ["web-0"]
    stmt.discard()
    assert victims(ssn) == ["web-0", "web-1"]


def test_victim_tasks_only_vetoes() -> None:
    ssn = session(budget(allowed=1, selector=WEB))
    registered = ssn._callbacks["victim_tasks"]["pdb"]
    assert isinstance(registered, VictimFilter)
    assert [t.name for t in registered.fn(candidates(ssn))] == ["web-0"]
    assert ssn.victim_tasks(candidates(ssn)) == []


# -- through the scheduler ------------------------------------------------------------------------

CONF = conf(
    "enqueue, allocate, preempt, reclaim",
    ["priority", "gang", "conformance", "pdb"],
    ["overcommit", "proportion"],
)


async def cluster(tmp_path: Path, *objects: dict) -> Cluster:
    c = await Cluster(tmp_path, CONF).start()
    for obj in objects:
        status = obj.get("status")
        [made] = await c.add(obj)
        if obj["kind"] == "PodDisruptionBudget" and status:
            made["status"] = status
            await c.store.update_status(made)
    return c


async def low_job(c: Cluster, count: int) -> None:
    await c.add(
        priority_class("high", 1000),
        podgroup("low", 1),
        *[pod(f"low-{i}", group="low", cpu="1", labels={"app": "web"}) for i in range(count)],
    )
    await c.run()
    for i in range(count):
        await c.set_phase(f"low-{i}", "Running")


async def test_budget_blocks_preemption(tmp_path: Path) -> None:
    c = await cluster(tmp_path, node("n1", cpu="2"), budget(allowed=0, selector=WEB))
    await low_job(c, 2)
    await c.add(podgroup("high", 1, priority_class="high"), pod("high-0", group="high", cpu="1"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
    assert await c.exists("Pod", "low-0") and await c.exists("Pod", "low-1")


async def test_budget_limits_how_many_go(tmp_path: Path) -> None:
    c = await cluster(
        tmp_path, node("n1", cpu="3"), budget(allowed=1, selector=WEB, minAvailable=2)
    )
    await low_job(c, 3)
    await c.add(
        podgroup("high", 2, priority_class="high"),
        *[pod(f"high-{i}", group="high", cpu="1") for i in range(2)],
    )
    # Two evictions would be needed, the budget allows one: the gang gets nothing.
    for _ in range(2):
        assert (await c.run()).evicted == 0
    await c.add(podgroup("solo", 1, priority_class="high"), pod("solo-0", group="solo", cpu="1"))
    assert (await c.run()).evicted == 1
    await c.run()
    assert await c.node_of("solo-0") == "n1"
    # With one web pod gone, minAvailable 2 allows no further disruption.
    await c.add(podgroup("next", 1, priority_class="high"), pod("next-0", group="next", cpu="1"))
    for _ in range(2):
        assert (await c.run()).evicted == 0
