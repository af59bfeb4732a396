"""tdm: revocable nodes lent to revocable work during their zone's daily window."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.tdm import (
    NOT_ALLOWED,
    TdmPlugin,
    Window,
    budget_evictions,
    int_or_percent,
    task_revocable_zone,
)

from ..builders import (
    Cluster,
    conf,
    job_info,
    make_session,
    node,
    pod,
    podgroup,
    session_task,
    task,
)

ZONE = "volcano.sh/revocable-zone"
DAY = datetime(1970, 1, 2, tzinfo=UTC)
NOON = DAY + timedelta(hours=12)
NIGHT = DAY + timedelta(hours=23)


@pytest.fixture(autouse=True)
def fresh_eviction_clock() -> Iterator[None]:
    TdmPlugin.last_evict_at = None
    yield
    TdmPlugin.last_evict_at = None


def at(hh_mm: str) -> datetime:
    hours, minutes = hh_mm.split(":")
    return DAY + timedelta(hours=int(hours), minutes=int(minutes))


@pytest.mark.parametrize(
    ("window", "now", "active"),
    [
        ("10:00-21:00", "12:00", True),
        ("10:00-21:00", "10:00", True),
        ("10:00-21:00", "21:00", True),
        ("10:00-21:00", "21:01", False),
        ("10:00-21:00", "09:59", False),
        ("22:00-06:00", "23:30", True),
        ("22:00-06:00", "03:00", True),  # the window that opened yesterday
        ("22:00-06:00", "12:00", False),
        ("00:00-00:00", "15:00", True),  # a whole day
    ],
)
def test_windows(window: str, now: str, active: bool) -> None:
    assert Window.parse(window).active(at(now)) is active


@pytest.mark.parametrize("text", ["10:00", "10-12", "25:00-26:00", "10:00-12:00-14:00"])
def test_bad_windows(text: str) -> None:
    with pytest.raises(ValueError, match="HH:MM-HH:MM"):
        Window.parse(text)


def test_task_revocable_zone_from_annotations() -> None:
    assert task_revocable_zone(task("a", annotations={ZONE: "*"})) == "*"
    assert task_revocable_zone(task("b", annotations={ZONE: "rz1"})) == ""
    assert task_revocable_zone(task("c", annotations={"volcano.sh/preemptable": "true"})) == "*"
    # An explicit revocable-zone annotation wins over preemptable.
    assert (
        task_revocable_zone(task("d", annotations={ZONE: "no", "volcano.sh/preemptable": "true"}))
        == ""
    )
    # Pods are preemptable by default, but that alone does not make them revocable.
    assert task_revocable_zone(task("e")) == ""


def test_disruption_budgets() -> None:
    def job(notes: dict[str, str] | None, running: int, pending: int = 0) -> Any:
        tasks = [task(f"r{i}", phase="Running", node_name="n1") for i in range(running)]
        tasks += [task(f"p{i}") for i in range(pending)]
        built = job_info(1, tasks)
        if notes:
            built.podgroup["metadata"]["annotations"] = notes
        return built

    assert budget_evictions(job(None, 4)) == 1
    assert budget_evictions(job({"volcano.sh/jdb-min-available": "3"}, 4)) == 1
    assert budget_evictions(job({"volcano.sh/jdb-min-available": "50%"}, 4)) == 2
    assert budget_evictions(job({"volcano.sh/jdb-min-available": "5"}, 4)) == 0
    assert budget_evictions(job({"volcano.sh/jdb-max-unavailable": "2"}, 4)) == 2
    assert budget_evictions(job({"volcano.sh/jdb-max-unavailable": "2"}, 3, 1)) == 1
    assert int_or_percent("25%", 10) == 3
    assert int_or_percent("x", 10) == 0


def tdm_session(*objects: dict, now: datetime = NOON, **arguments: Any) -> Session:
    args = {"tdm.revocable-zone.rz1": "10:00-21:00", **arguments}
    return make_session(
        [
            node("normal"),
            node("rev", labels={ZONE: "rz1"}),
            node("unknown", labels={ZONE: "rz9"}),
            *objects,
        ],
        conf("allocate, shuffle", [{"name": "tdm", "arguments": args}]),
        now=now,
    )


def reasons(ssn: Session, name: str) -> dict[str, str | None]:
    result = ssn.predicate(session_task(ssn, name))
    out: dict[str, str | None] = {}
    for i, info in enumerate(ssn.nodes.nodes):
        found = [r for mask, r, _ in result.reasons if mask[i]]
        out[info.name] = found[0] if found else None
    return out


def pending(name: str, **notes: str) -> list[dict]:
    return [
        podgroup(name, 1, phase="Inqueue"),
        pod(f"{name}-0", group=name, uid=name, cpu="1", annotations=notes or None),
    ]


def test_revocable_nodes_take_only_revocable_tasks_in_their_window() -> None:
    ssn = tdm_session(*pending("plain"), *pending("rev", **{ZONE: "*"}))
    assert reasons(ssn, "plain-0") == {
        "normal": None,
        "rev": NOT_ALLOWED,
        "unknown": "revocable zone rz9 not support",
    }
    assert reasons(ssn, "rev-0")["rev"] is None


def test_outside_the_window_nobody_uses_the_zone() -> None:
    ssn = tdm_session(*pending("rev", **{ZONE: "*"}), now=NIGHT)
    assert reasons(ssn, "rev-0")["rev"] == "current time beyond revocable zone rz1:10:00-21:00"


def test_revocable_tasks_prefer_revocable_nodes() -> None:
    ssn = tdm_session(*pending("plain"), *pending("rev", **{ZONE: "*"}))
    positions = np.arange(3)
    assert ssn.node_scores(session_task(ssn, "rev-0"), positions).tolist() == [0, 100, 0]
    assert ssn.node_scores(session_task(ssn, "plain-0"), positions).tolist() == [0, 0, 0]


def test_job_order_and_starving_and_pipelined() -> None:
    ssn = tdm_session(
        podgroup("soft", 1, phase="Inqueue", annotations={"volcano.sh/preemptable": "true"}),
        pod("soft-0", group="soft", uid="soft-0", cpu="1"),
        *pending("hard"),
    )
    soft, hard = ssn.jobs["default/soft"], ssn.jobs["default/hard"]
    ordered = sorted([soft, hard], key=functools.cmp_to_key(TdmPlugin.job_order))
    assert [j.name for j in ordered] == ["hard", "soft"]
    assert ssn.job_starving(hard) and not ssn.job_starving(soft)
    assert TdmPlugin.job_pipelined(hard) == REJECT
    ssn.statement().pipeline(session_task(ssn, "hard-0"), "normal")
    assert TdmPlugin.job_pipelined(hard) == PERMIT


def running_on(name: str, node_name: str, count: int, **notes: str) -> list[dict]:
    return [
        podgroup(name, 1, phase="Running", annotations=notes or None),
        *[
            pod(
                f"{name}-{i}",
                group=name,
                uid=f"{name}-{i}",
                cpu="1",
                node_name=node_name,
                phase="Running",
            )
            for i in range(count)
        ],
    ]


def test_preemptable_victims_come_from_ordinary_nodes_within_budgets() -> None:
    ssn = tdm_session(
        *running_on("ord", "normal", 3, **{"volcano.sh/jdb-max-unavailable": "2"}),
        *running_on("onrev", "rev", 2),
        *pending("hard", **{"volcano.sh/preemptable": "false"}),
        *pending("soft", **{"volcano.sh/preemptable": "true"}),
    )
    fn = ssn._callbacks["preemptable"]["tdm"]
    candidates = [session_task(ssn, n) for n in ("ord-0", "ord-1", "ord-2", "onrev-0")]
    chosen, vote = fn(session_task(ssn, "hard-0"), candidates)
    assert vote == PERMIT
    assert [t.name for t in chosen] == ["ord-0", "ord-1"]
    # A task that may itself be revoked does not preempt; pods are preemptable by default.
    assert fn(session_task(ssn, "soft-0"), candidates) == ([], REJECT)
    assert fn(session_task(ssn, "ord-0"), candidates) == ([], REJECT)


def test_shuffle_victims_outside_the_window_once_per_period() -> None:
    ssn = tdm_session(*running_on("onrev", "rev", 3), *running_on("ord", "normal", 2), now=NIGHT)
    victims = ssn.victim_tasks([t for j in ssn.jobs.values() for t in j.tasks.values()])
    assert [t.name for t in victims] == ["onrev-0"]  # one per job without a budget
    again = tdm_session(*running_on("onrev", "rev", 3), now=NIGHT + timedelta(seconds=30))
    assert again.victim_tasks(list(again.jobs["default/onrev"].tasks.values())) == []
    later = tdm_session(*running_on("onrev", "rev", 3), now=NIGHT + timedelta(minutes=2))
    assert len(later.victim_tasks(list(later.jobs["default/onrev"].tasks.values()))) == 1


def test_no_victims_while_the_window_is_open() -> None:
    ssn = tdm_session(*running_on("onrev", "rev", 3))
    assert ssn.victim_tasks(list(ssn.jobs["default/onrev"].tasks.values())) == []


def test_evict_period_argument() -> None:
    ssn = tdm_session(**{"tdm.evict.period": "5m"})
    assert ssn.plugins["tdm"].evict_period == timedelta(minutes=5)  # type: ignore[attr-defined]
    broken = tdm_session(**{"tdm.evict.period": "soon"})
    assert broken.plugins["tdm"].evict_period == timedelta(minutes=1)  # type: ignore[attr-defined]


async def test_revocable_pods_fill_the_revocable_node_first(tmp_path: Path) -> None:
    # Noon on the virtual clock's second day.
    start = NOON.timestamp()
    config = conf(
        "enqueue, allocate",
        ["priority", "gang"],
        [
            "predicates",
            {"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "10:00-21:00"}},
        ],
    )
    c = await Cluster(tmp_path, config, start=start).start()
    await c.add(
        node("normal", cpu="4"),
        node("rev", cpu="2", labels={ZONE: "rz1"}),
        podgroup("batch", 1),
        *[pod(f"batch-{i}", group="batch", cpu="1", annotations={ZONE: "*"}) for i in range(2)],
        podgroup("svc", 1),
        *[pod(f"svc-{i}", group="svc", cpu="1") for i in range(2)],
    )
    await c.run()
    assert {await c.node_of(f"batch-{i}") for i in range(2)} == {"rev"}
    assert {await c.node_of(f"svc-{i}") for i in range(2)} == {"normal"}


async def test_shuffle_evicts_from_a_closed_zone(tmp_path: Path) -> None:
    start = NIGHT.timestamp()
    config = conf(
        "shuffle",
        [{"name": "tdm", "arguments": {"tdm.revocable-zone.rz1": "10:00-21:00"}}],
    )
    c = await Cluster(tmp_path, config, start=start).start()
    await c.add(
        node("rev", cpu="4", labels={ZONE: "rz1"}),
        podgroup("batch", 1, phase="Running"),
        pod("batch-0", group="batch", cpu="1", node_name="rev", phase="Running"),
    )
    await c.run()
    gone = not await c.exists("Pod", "batch-0")
    if not gone:
        obj = await c.pod("batch-0")
        gone = bool(obj["metadata"].get("deletionTimestamp"))
    assert gone
