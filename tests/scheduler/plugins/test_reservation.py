"""reservation: a gang past its waiting time gets nodes held for it and goes first."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from stromboli.core.scheduler.framework.plugin import ACTIONS
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.plugins.reservation import ReservationPlugin

from ..builders import BASIC_CONF, conf, make_session, node, pod, podgroup, session_task

NOW = datetime(1970, 1, 1, 0, 30, tzinfo=UTC)  # 00:30
REASON = "node(s) reserved for starving job default/big"


def config(wait: str | None = None, *, predicates: bool = False) -> str:
    entry: dict = {"name": "reservation"}
    if wait is not None:
        entry["arguments"] = {"reservation.waiting-time": wait}
    first: list[str | dict] = [entry, "priority", "gang", "conformance"]
    second: list[str | dict] = ["drf", "proportion"]
    if predicates:
        second.append("predicates")
    return conf("enqueue, allocate, backfill", first, second)


def gang(
    name: str = "big",
    members: int = 4,
    *,
    created_min: int = 0,
    cpu: str = "1",
    annotations: dict[str, str] | None = None,
    running: dict[int, str] | None = None,
) -> list[dict]:
    objects = [
        podgroup(
            name,
            members,
            created=f"1970-01-01T00:{created_min:02d}:00Z",
            annotations=annotations,
            phase="Inqueue",
        )
    ]
    for i in range(members):
        where = (running or {}).get(i)
        objects.append(
            pod(
                f"{name}-{i}",
                group=name,
                cpu=cpu,
                phase="Running" if where else None,
                node_name=where,
            )
        )
    return objects


def small(name: str, *, node_name: str | None = None, cpu: str = "1") -> list[dict]:
    return [
        podgroup(name, 1, created="1970-01-01T00:29:00Z", phase="Inqueue"),
        pod(
            name,
            group=name,
            cpu=cpu,
            phase="Running" if node_name else None,
            node_name=node_name,
        ),
    ]


def session(*groups: list[dict], wait: str | None = None, now: datetime = NOW, **kw) -> Session:
    objects = [o for group in groups for o in group]
    return make_session(objects, config(wait, **kw), now=now)


def plugin(ssn: Session) -> ReservationPlugin:
    found = ssn.plugins["reservation"]
    assert isinstance(found, ReservationPlugin)
    return found


def nodes(*names: str, cpu: str = "4") -> list[dict]:
    return [node(n, cpu=cpu) for n in names]


def blocked(ssn: Session, task_name: str) -> list[str]:
    verdict = ssn.predicate(session_task(ssn, task_name))
    return [ssn.nodes.nodes[p].name for p in np.flatnonzero(~verdict.passed)]


# -- which job starves --------------------------------------------------------------------


def test_a_gang_within_its_waiting_time_is_not_starving() -> None:
    ssn = session(nodes("a"), gang(created_min=28), wait="5m")
    assert plugin(ssn).target is None


def test_a_gang_past_the_default_waiting_time_is_starving() -> None:
    ssn = session(nodes("a"), gang(created_min=20))
    target = plugin(ssn).target
    assert target is not None and target.uid == "default/big"


def test_the_default_waiting_time_is_five_minutes() -> None:
    assert plugin(session(nodes("a"), gang(created_min=26))).target is None
    assert plugin(session(nodes("a"), gang(created_min=25))).target is not None


def test_the_argument_sets_the_waiting_time() -> None:
    assert plugin(session(nodes("a"), gang(created_min=28), wait="1m")).target is not None
    assert plugin(session(nodes("a"), gang(created_min=28), wait="1h")).target is None


def test_the_podgroup_annotation_overrides_the_argument() -> None:
    notes = {"volcano.sh/sla-waiting-time": "1m"}
    ssn = session(nodes("a"), gang(created_min=28, annotations=notes), wait="1h")
    assert plugin(ssn).target is not None


def test_the_bare_annotation_is_read_too() -> None:
    notes = {"sla-waiting-time": "2h"}
    ssn = session(nodes("a"), gang(created_min=0, annotations=notes), wait="1m")
    assert plugin(ssn).target is None


def test_an_unreadable_annotation_falls_back_to_the_argument() -> None:
    notes = {"volcano.sh/sla-waiting-time": "soon"}
    ssn = session(nodes("a"), gang(created_min=28, annotations=notes), wait="1m")
    assert plugin(ssn).target is not None


def test_a_bad_argument_disables_the_default() -> None:
    assert plugin(session(nodes("a"), gang(created_min=0), wait="never")).target is None
    assert plugin(session(nodes("a"), gang(created_min=0), wait="-5m")).target is None


def test_a_single_pod_job_is_never_a_target() -> None:
    ssn = session(nodes("a"), gang(members=1, created_min=0))
    assert plugin(ssn).target is None


def test_a_ready_gang_is_not_starving() -> None:
    running = {i: "a" for i in range(4)}
    ssn = session(nodes("a"), gang(created_min=0, running=running))
    assert plugin(ssn).target is None


def test_the_most_overdue_gang_is_chosen() -> None:
    ssn = session(nodes("a"), gang("late", created_min=10), gang("early", created_min=3))
    target = plugin(ssn).target
    assert target is not None and target.name == "early"


def test_ties_are_broken_by_name() -> None:
    ssn = session(nodes("a"), gang("b", created_min=3), gang("a", created_min=3))
    target = plugin(ssn).target
    assert target is not None and target.name == "a"


def test_without_a_target_nothing_is_registered() -> None:
    ssn = session(nodes("a"), gang(created_min=29))
    for point in ("predicate", "job_order"):
        assert "reservation" not in ssn._callbacks.get(point, {})


def test_the_plugin_accepts_its_argument_in_the_configuration() -> None:
    ssn = make_session([], config("90s"))
    assert plugin(ssn).default_wait is not None
    assert plugin(ssn).default_wait.total_seconds() == 90


# -- order ------------------------------------------------------------------------------------


def test_the_starving_job_goes_first() -> None:
    ssn = session(nodes("a"), small("tiny"), gang(created_min=0))
    big, tiny = ssn.jobs["default/big"], ssn.jobs["default/tiny"]
    assert ssn.job_less(big, tiny)
    assert not ssn.job_less(tiny, big)


def test_other_jobs_keep_their_order() -> None:
    ssn = session(nodes("a"), small("x"), small("y"), gang(created_min=0))
    assert plugin(ssn).job_order(ssn.jobs["default/x"], ssn.jobs["default/y"]) == 0


# -- reserved nodes -----------------------------------------------------------------------------


def test_other_jobs_are_kept_off_the_reserved_nodes() -> None:
    ssn = session(nodes("a", "b"), small("tiny"), gang(members=8, created_min=0))
    assert blocked(ssn, "tiny") == ["a", "b"]


def test_the_reason_names_the_starving_job() -> None:
    ssn = session(nodes("a"), small("tiny"), gang(created_min=0))
    verdict = ssn.predicate(session_task(ssn, "tiny"))
    assert [reason for _, reason, _ in verdict.reasons] == [REASON]
    assert not any(unresolvable for _, _, unresolvable in verdict.reasons)


def test_the_starving_jobs_own_tasks_pass() -> None:
    ssn = session(nodes("a", "b"), small("tiny"), gang(members=8, created_min=0))
    assert blocked(ssn, "big-0") == []


def test_only_as_many_nodes_as_the_gang_needs_are_held() -> None:
    ssn = session(nodes("a", "b", "c"), small("tiny"), gang(members=4, created_min=0))
    assert len(blocked(ssn, "tiny")) == 1


def test_nodes_with_most_free_room_are_held_first() -> None:
    ssn = session(
        nodes("a", "b", "c"),
        small("r1", node_name="a", cpu="3"),
        small("r2", node_name="c", cpu="1"),
        small("tiny"),
        gang(members=4, created_min=0),
    )
    assert blocked(ssn, "tiny") == ["b"]
    reserved = plugin(ssn).reserved
    assert reserved is not None and list(reserved) == [False, True, False]


def test_busy_nodes_are_held_when_the_gang_needs_them() -> None:
    # The gang needs all 8 cpu; node a is busy now but its pod will leave.
    ssn = session(
        nodes("a", "b"),
        small("r1", node_name="a", cpu="2"),
        small("tiny"),
        gang(members=8, created_min=0),
    )
    assert blocked(ssn, "tiny") == ["a", "b"]


def test_a_task_may_use_room_the_gang_does_not_need() -> None:
    # 2 gang pods of 3 cpu on two 4-cpu nodes leave 1 cpu free on each.
    ssn = session(nodes("a", "b"), small("tiny"), gang(members=2, cpu="3", created_min=0))
    assert blocked(ssn, "tiny") == []


def test_a_task_bigger_than_the_room_left_is_kept_off() -> None:
    ssn = session(nodes("a", "b"), small("wide", cpu="2"), gang(members=2, cpu="3", created_min=0))
    assert blocked(ssn, "wide") == ["a", "b"]


def test_room_left_counts_pods_running_now() -> None:
    # Node a: 1 cpu running; the gang's 3-cpu share leaves nothing for a 1-cpu task now.
    ssn = session(
        nodes("a", "b"),
        small("r1", node_name="a"),
        small("tiny"),
        gang(members=2, cpu="3", created_min=0),
    )
    assert blocked(ssn, "tiny") == ["a"]


def test_nodes_the_gang_cannot_use_are_not_held() -> None:
    objects = [node("a", cpu="4"), node("b", cpu="4", unschedulable=True)]
    ssn = session(objects, small("tiny"), gang(members=4, created_min=0), predicates=True)
    reserved = ssn.predicate(session_task(ssn, "tiny"))
    assert plugin(ssn).reserved is not None
    assert list(plugin(ssn).reserved) == [True, False]
    assert any(reason == REASON for _, reason, _ in reserved.reasons)


def test_a_gang_that_fits_nowhere_holds_what_it_can() -> None:
    ssn = session(nodes("a", cpu="2"), small("tiny"), gang(members=4, created_min=0))
    assert blocked(ssn, "tiny") == ["a"]


def test_ready_members_are_not_counted_again() -> None:
    # 2 of 4 members already run on a; the other two need b only.
    running = {0: "a", 1: "a"}
    ssn = session(
        nodes("a", "b"), small("tiny"), gang(members=4, cpu="2", created_min=0, running=running)
    )
    assert blocked(ssn, "tiny") == ["b"]


def test_the_gangs_own_placements_shrink_its_share() -> None:
    ssn = session(nodes("a", "b"), small("tiny"), gang(members=2, cpu="3", created_min=0))
    reservation = plugin(ssn)
    assert blocked(ssn, "tiny") == []
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "big-0"), "a")
    assert reservation.placed is not None
    assert reservation.placed[0][0] == 3000  # millicores
    # a: 1 cpu idle, the gang's share there is placed: the 1-cpu task still fits.
    assert blocked(ssn, "tiny") == []
    stmt.discard()
    assert reservation.placed[0][0] == 0


# -- allocation ---------------------------------------------------------------------------------


def run_actions(ssn: Session) -> dict[str, str]:
    for name in ssn.config.actions:
        ACTIONS[name]().execute(ssn)
    return {task.name: node_name for task, node_name in ssn.outcome.binds}


def test_allocate_keeps_small_jobs_off_and_places_the_gang_when_it_fits() -> None:
    ssn = session(nodes("a", "b"), small("tiny"), gang(members=8, created_min=0))
    binds = run_actions(ssn)
    assert "tiny" not in binds
    assert sorted(n for n, _ in binds.items() if n.startswith("big-")) == [
        f"big-{i}" for i in range(8)
    ]


def test_allocate_holds_room_while_the_gang_waits() -> None:
    ssn = session(
        nodes("a", "b"),
        small("r1", node_name="a"),
        small("tiny"),
        gang(members=8, created_min=0),
    )
    binds = run_actions(ssn)
    assert binds == {}
    assert "default/tiny" in {job.uid for job in ssn.jobs.values() if job.fit_errors}
    assert REASON in next(iter(ssn.jobs["default/tiny"].fit_errors.values()))


def test_allocate_backfills_room_the_gang_does_not_need() -> None:
    # Three 3-cpu gang pods need a, b and c; a is busy now; b and c keep 1 cpu spare.
    ssn = session(
        nodes("a", "b", "c"),
        small("r1", node_name="a", cpu="2"),
        small("tiny"),
        gang(members=3, cpu="3", created_min=0),
    )
    binds = run_actions(ssn)
    assert binds.get("tiny") in {"b", "c"}
    assert not any(name.startswith("big-") for name in binds)


def test_without_the_plugin_small_jobs_take_the_free_room() -> None:
    objects = [*nodes("a", "b"), *small("r1", node_name="a"), *small("tiny")]
    objects += gang(members=8, created_min=0)
    ssn = make_session(objects, BASIC_CONF, now=NOW)
    assert "tiny" in run_actions(ssn)
