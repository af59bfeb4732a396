"""How a session combines plugin callbacks across tiers (reference §3.3)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from stromboli.core.scheduler.framework.filters import Filter, FitErrors
from stromboli.core.scheduler.framework.plugin import Plugin, register_plugin
from stromboli.core.scheduler.framework.session import ABSTAIN, PERMIT, REJECT, Session

from .builders import (
    conf,
    make_session,
    node,
    pod,
    podgroup,
    queue,
    session_task,
    timestamp,
)

#: Callbacks of the fake plugins, by plugin name then extension point; set per test.
BEHAVIOUR: dict[str, dict[str, Callable[..., Any]]] = {}
#: Names of fake plugins whose callbacks ran, in call order.
CALLS: list[str] = []


def fake(name: str) -> str:
    """Register (once) a plugin that registers whatever ``BEHAVIOUR[name]`` holds."""

    def open_session(self: Plugin, ssn: Session) -> None:
        for point, fn in BEHAVIOUR.get(name, {}).items():
            ssn.register(point, name, traced(name, fn))

    register_plugin(
        type(f"Fake_{name}", (Plugin,), {"name": name, "on_session_open": open_session})
    )
    return name


def traced(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        CALLS.append(name)
        return fn(*args)

    return call


A, B, C, D = (fake(f"test-session-{x}") for x in "abcd")


def session(tiers: list[list[str | dict]], **behaviour: dict[str, Callable[..., Any]]) -> Session:
    BEHAVIOUR.clear()
    CALLS.clear()
    for short, points in behaviour.items():
        BEHAVIOUR[f"test-session-{short}"] = points
    objects = [
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("j1", 1, created=timestamp(1), uid="u-j1"),
        podgroup("j2", 1, created=timestamp(2), uid="u-j2"),
        pod("j1-t-0", group="j1", uid="p1", cpu="1"),
        pod("j2-t-0", group="j2", uid="p2", cpu="1"),
    ]
    return make_session(objects, conf("allocate", *tiers))


def jobs(ssn: Session):  # type: ignore[no-untyped-def]
    return ssn.jobs["default/j1"], ssn.jobs["default/j2"]


# -- order functions ---------------------------------------------------------------------------


def test_job_order_first_non_zero_wins_within_a_tier() -> None:
    ssn = session([[A, B]], a={"job_order": lambda x, y: 0}, b={"job_order": lambda x, y: 1})
    j1, j2 = jobs(ssn)
    assert ssn.job_compare(j1, j2) == 1
    assert CALLS == [A, B]


def test_job_order_earlier_plugin_decides() -> None:
    ssn = session([[A, B]], a={"job_order": lambda x, y: -1}, b={"job_order": lambda x, y: 1})
    j1, j2 = jobs(ssn)
    assert ssn.job_compare(j1, j2) == -1
    assert CALLS == [A]


def test_job_order_later_tier_decides_when_earlier_is_indifferent() -> None:
    def j2_first(left: Any, right: Any) -> int:
        return (right.name == "j2") - (left.name == "j2")

    ssn = session([[A], [B]], a={"job_order": lambda x, y: 0}, b={"job_order": j2_first})
    j1, j2 = jobs(ssn)
    # Creation order alone would put j1 first.
    assert ssn.job_less(j2, j1)
    assert not ssn.job_less(j1, j2)


def test_job_order_falls_back_to_creation_time() -> None:
    ssn = session([[A]], a={"job_order": lambda x, y: 0})
    j1, j2 = jobs(ssn)
    assert ssn.job_compare(j1, j2) == -1
    assert ssn.job_compare(j2, j1) == 1


def test_job_order_falls_back_to_uid_on_equal_creation() -> None:
    ssn = session([[A]])
    j1, j2 = jobs(ssn)
    j1.creation = j2.creation = timestamp(5)
    # Job uids are namespace/name: default/j1 < default/j2.
    assert ssn.job_compare(j1, j2) == -1
    assert ssn.job_compare(j1, j1) == 0


def test_disabled_job_order_is_skipped() -> None:
    ssn = session([[{"name": A, "enableJobOrder": False}]], a={"job_order": lambda x, y: 1})
    j1, j2 = jobs(ssn)
    assert ssn.job_compare(j1, j2) == -1  # creation order, not the plugin's verdict
    assert CALLS == []


def test_task_order_falls_back_to_index_then_creation_then_uid() -> None:
    ssn = session([[A]])
    t = session_task(ssn, "j1-t-0")
    other = t.clone()
    other.index, other.creation, other.uid = 3, "", "zz"
    t.index = 1
    assert ssn.task_compare(t, other) == -1
    other.index = 1
    t.creation, other.creation = timestamp(9), timestamp(2)
    assert ssn.task_compare(t, other) == 1
    other.creation = t.creation
    assert ssn.task_compare(t, other) == -1  # "p1" < "zz"


def test_task_order_plugin_beats_index() -> None:
    ssn = session([[A]], a={"task_order": lambda x, y: -1 if x.priority > y.priority else 0})
    t = session_task(ssn, "j1-t-0")
    other = t.clone()
    other.index, t.index = 0, 5
    t.priority, other.priority = 10, 1
    assert ssn.task_less(t, other)


def test_sorted_tasks_uses_task_order() -> None:
    ssn = session([[A]])
    t = session_task(ssn, "j1-t-0")
    clones = []
    for i in (3, 0, 2):
        c = t.clone()
        c.index, c.uid = i, f"c{i}"
        clones.append(c)
    assert [c.index for c in ssn.sorted_tasks(clones)] == [0, 2, 3]


def test_queue_order_falls_back_to_creation_then_uid() -> None:
    ssn = make_session(
        [queue("qa", created=timestamp(5)), queue("qb", created=timestamp(3))],
        conf("allocate", [A]),
    )
    qa, qb = ssn.queues["qa"], ssn.queues["qb"]
    assert ssn.queue_less(qb, qa)
    qa.creation = qb.creation
    assert ssn.queue_less(qa, qb)


# -- votes -------------------------------------------------------------------------------------


def constant(value: int) -> Callable[..., int]:
    return lambda job: value


def votes(tiers: list[list[str]], **by_plugin: int) -> tuple[bool, list[str]]:
    ssn = session(tiers, **{p: {"job_enqueueable": constant(v)} for p, v in by_plugin.items()})
    j1, _ = jobs(ssn)
    return ssn.job_enqueueable(j1), list(CALLS)


def test_vote_no_callbacks_permits() -> None:
    assert votes([[A]])[0] is True


def test_vote_all_abstain_permits() -> None:
    assert votes([[A, B], [C]], a=ABSTAIN, b=ABSTAIN, c=ABSTAIN) == (True, [A, B, C])


def test_vote_any_reject_in_a_tier_rejects() -> None:
    assert votes([[A, B]], a=PERMIT, b=REJECT)[0] is False


def test_vote_reject_stops_at_once() -> None:
    assert votes([[A, B]], a=REJECT, b=PERMIT) == (False, [A])


def test_vote_tier_with_a_permit_decides_and_skips_later_tiers() -> None:
    assert votes([[A, B], [C]], a=PERMIT, b=ABSTAIN, c=REJECT) == (True, [A, B])


def test_vote_abstaining_tier_passes_to_the_next() -> None:
    assert votes([[A], [B]], a=ABSTAIN, b=REJECT) == (False, [A, B])
    assert votes([[A], [B]], a=ABSTAIN, b=PERMIT) == (True, [A, B])


def test_job_pipelined_votes_the_same_way() -> None:
    ssn = session(
        [[A], [B]], a={"job_pipelined": lambda j: ABSTAIN}, b={"job_pipelined": lambda j: REJECT}
    )
    j1, _ = jobs(ssn)
    assert ssn.job_pipelined(j1) is False


def test_disabled_enqueue_switch_silences_the_vote() -> None:
    ssn = session(
        [[{"name": A, "enableJobEnqueued": False}]],
        a={"job_enqueueable": lambda j: REJECT, "job_enqueued": lambda j: None},
    )
    j1, _ = jobs(ssn)
    assert ssn.job_enqueueable(j1) is True
    ssn.job_enqueued(j1)
    assert CALLS == []


def test_job_enqueued_calls_every_plugin() -> None:
    seen: list[str] = []
    ssn = session(
        [[A], [B]],
        a={"job_enqueued": lambda j: seen.append("a")},
        b={"job_enqueued": lambda j: seen.append("b")},
    )
    ssn.job_enqueued(jobs(ssn)[0])
    assert seen == ["a", "b"]


# -- starving, ready, valid --------------------------------------------------------------------


def test_job_starving_without_callbacks_is_false() -> None:
    ssn = session([[A]])
    assert ssn.job_starving(jobs(ssn)[0]) is False


def test_job_starving_first_tier_with_callbacks_decides() -> None:
    ssn = session(
        [[A], [B], [C]],
        b={"job_starving": lambda j: True},
        c={"job_starving": lambda j: False},
    )
    assert ssn.job_starving(jobs(ssn)[0]) is True
    assert CALLS == [B]


def test_job_starving_is_and_within_the_tier() -> None:
    ssn = session([[A, B]], a={"job_starving": lambda j: True}, b={"job_starving": lambda j: False})
    assert ssn.job_starving(jobs(ssn)[0]) is False


def test_disabled_starving_tier_passes_to_the_next() -> None:
    ssn = session(
        [[{"name": A, "enableJobStarving": False}], [B]],
        a={"job_starving": lambda j: False},
        b={"job_starving": lambda j: True},
    )
    assert ssn.job_starving(jobs(ssn)[0]) is True


def test_job_ready_is_and_over_all_tiers() -> None:
    ssn = session([[A], [B]], a={"job_ready": lambda j: True}, b={"job_ready": lambda j: False})
    assert ssn.job_ready(jobs(ssn)[0]) is False
    ssn = session([[A], [B]], a={"job_ready": lambda j: True}, b={"job_ready": lambda j: True})
    assert ssn.job_ready(jobs(ssn)[0]) is True


def test_job_ready_without_callbacks_is_true() -> None:
    ssn = session([[A]])
    assert ssn.job_ready(jobs(ssn)[0]) is True


def test_job_valid_returns_first_objection() -> None:
    ssn = session(
        [[A], [B], [C]],
        a={"job_valid": lambda j: None},
        b={"job_valid": lambda j: ("R1", "first")},
        c={"job_valid": lambda j: ("R2", "second")},
    )
    assert ssn.job_valid(jobs(ssn)[0]) == ("R1", "first")
    assert CALLS == [A, B]


def test_overused_is_or_and_allocatable_is_and() -> None:
    ssn = session(
        [[A, B]],
        a={"overused": lambda q: False, "allocatable": lambda q, t: True},
        b={"overused": lambda q: True, "allocatable": lambda q, t: False},
    )
    q = ssn.queues["default"]
    t = session_task(ssn, "j1-t-0")
    assert ssn.overused(q) is True
    assert ssn.allocatable(q, t) is False


# -- predicates and scores ---------------------------------------------------------------------


def test_pre_predicate_returns_first_error() -> None:
    ssn = session(
        [[A, B]], a={"pre_predicate": lambda t: None}, b={"pre_predicate": lambda t: "no way"}
    )
    assert ssn.pre_predicate(session_task(ssn, "j1-t-0")) == "no way"


def test_predicates_must_all_pass() -> None:
    def only_first(task: Any) -> Filter:
        f = Filter.all_pass(2)
        f.fail(np.array([False, True]), "not n2")
        return f

    def only_second(task: Any) -> Filter:
        f = Filter.all_pass(2)
        f.fail(np.array([True, False]), "not n1")
        return f

    ssn = session([[A], [B]], a={"predicate": only_first}, b={"predicate": only_second})
    verdict = ssn.predicate(session_task(ssn, "j1-t-0"))
    assert verdict.passed.tolist() == [False, False]
    reasons = {reason: mask.tolist() for mask, reason, _ in verdict.reasons}
    assert reasons == {"not n2": [False, True], "not n1": [True, False]}


def test_a_node_reports_only_the_first_failing_predicate() -> None:
    def fail_all(reason: str) -> Callable[[Any], Filter]:
        def fn(task: Any) -> Filter:
            f = Filter.all_pass(2)
            f.fail(np.array([True, True]), reason)
            return f

        return fn

    ssn = session([[A, B]], a={"predicate": fail_all("first")}, b={"predicate": fail_all("second")})
    verdict = ssn.predicate(session_task(ssn, "j1-t-0"))
    assert [reason for _, reason, _ in verdict.reasons] == ["first"]


def test_no_predicates_pass_every_node() -> None:
    ssn = session([[A]])
    assert ssn.predicate(session_task(ssn, "j1-t-0")).passed.tolist() == [True, True]


def test_disabled_predicate_is_skipped() -> None:
    def reject(task: Any) -> Filter:
        f = Filter.all_pass(2)
        f.fail(np.array([True, True]), "no")
        return f

    ssn = session(
        [[{"name": A, "enablePredicate": False}]],
        a={"predicate": reject, "pre_predicate": lambda t: "no"},
    )
    t = session_task(ssn, "j1-t-0")
    assert ssn.predicate(t).passed.all()
    assert ssn.pre_predicate(t) is None


def test_node_scores_add_up() -> None:
    ssn = session(
        [[A], [B]],
        a={"node_order": lambda t, pos: np.array([1.0, 2.0])},
        b={"batch_node_order": lambda t, pos: np.array([10.0, 0.0])},
    )
    scores = ssn.node_scores(session_task(ssn, "j1-t-0"), np.array([0, 1]))
    assert scores.tolist() == [11.0, 2.0]
    assert ssn.has_scorers()


def test_no_scorers() -> None:
    assert not session([[A]]).has_scorers()


# -- fit errors --------------------------------------------------------------------------------


def test_fit_errors_message_is_sorted_histogram() -> None:
    errors = FitErrors(3)
    errors.add(np.array([True, True, False]), "Insufficient cpu")
    errors.add(np.array([False, False, True]), "node(s) had untolerated taint")
    errors.add_count("Insufficient memory", 1)
    assert errors.message() == (
        "0/3 nodes are unavailable: 1 Insufficient memory, 1 node(s) had untolerated taint, "
        "2 Insufficient cpu."
    )


def test_fit_errors_only_count_considered_nodes() -> None:
    errors = FitErrors(2)
    errors.add(np.array([True, True]), "x", considered=np.array([True, False]))
    assert errors.message() == "0/2 nodes are unavailable: 1 x."


def test_fit_errors_prefix() -> None:
    errors = FitErrors(1)
    errors.add_count("Insufficient cpu", 1)
    assert errors.message("In hyperNode s0: ").startswith("In hyperNode s0: 0/1 nodes")


# -- session basics ------------------------------------------------------------------------------


def test_total_resource_sums_node_allocatable() -> None:
    ssn = session([[A]])
    assert ssn.total_resource.milli_cpu == 8000
    assert ssn.total_resource.get("pods") == 220


def test_plugins_are_fresh_per_session() -> None:
    first = session([[A]])
    second = session([[A]])
    assert first.plugins[A] is not second.plugins[A]


def test_close_calls_every_plugin() -> None:
    closed: list[str] = []

    @register_plugin
    class Closing(Plugin):
        name = "test-session-closing"

        def on_session_close(self, ssn: Session) -> None:
            closed.append(self.name)

    ssn = session([["test-session-closing"]])
    ssn.close()
    assert closed == ["test-session-closing"]
    assert ("test-session-closing", "OnSessionClose") in ssn.plugin_seconds


def test_jobs_need_a_known_queue() -> None:
    ssn = make_session(
        [podgroup("lost", 1, queue="nowhere"), pod("lost-0", group="lost", uid="l0")],
        conf("allocate", [A]),
    )
    assert "default/lost" not in ssn.jobs


def test_pods_without_podgroup_object_are_not_jobs() -> None:
    ssn = make_session([pod("orphan-0", group="ghost", uid="o0")], conf("allocate", [A]))
    assert ssn.jobs == {}


def test_job_priority_from_priority_class() -> None:
    from .builders import priority_class

    ssn = make_session(
        [
            priority_class("high", 1000),
            priority_class("base", 5, global_default=True),
            podgroup("hi", 1, priority_class="high"),
            podgroup("plain", 1),
            podgroup("unknown", 1, priority_class="missing"),
        ],
        conf("allocate", [A]),
    )
    assert ssn.jobs["default/hi"].priority == 1000
    assert ssn.jobs["default/plain"].priority == 5
    assert ssn.jobs["default/unknown"].priority == 5


def test_job_fields_from_podgroup() -> None:
    ssn = make_session(
        [
            podgroup(
                "pg",
                3,
                queue="default",
                min_resources={"cpu": "3"},
                min_task_member={"ps": 1, "worker": 2},
            )
        ],
        conf("allocate", [A]),
    )
    job = ssn.jobs["default/pg"]
    assert job.min_available == 3
    assert job.min_resources is not None and job.min_resources.milli_cpu == 3000
    assert job.min_task_member == {"ps": 1, "worker": 2}
    assert job.preemptable is False
    assert job.is_pending()


def test_podgroup_without_queue_goes_to_default() -> None:
    ssn = make_session([podgroup("pg", 1)], conf("allocate", [A]))
    assert ssn.jobs["default/pg"].queue == "default"
    assert ssn.jobs["default/pg"].min_resources is None
