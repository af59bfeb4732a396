"""Typed extension points: ``Session.register`` refuses unknown points and callbacks of the
wrong shape, and every listed point is dispatched by the session."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.scheduler.conf import parse_config
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.options import (
    INERT_SWITCHES,
    KNOWN_SWITCHES,
    OFF_BY_DEFAULT,
    SWITCHES,
    PluginOption,
)
from stromboli.core.scheduler.framework.plugin import Plugin, register_plugin
from stromboli.core.scheduler.framework.points import (
    ABSTAIN,
    SPECS,
    ExtensionPoint,
    ExtensionPointError,
    VictimFilter,
)
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.placement import Placement, place

from .builders import conf, make_session, node, pod, podgroup, session_task, timestamp

P = ExtensionPoint
SPY = "test-points-spy"
#: What the spy plugin registers, per point (set by each test before the session opens).
REGISTER: dict[ExtensionPoint, Callable[..., Any]] = {}
CALLED: list[ExtensionPoint] = []


def _open(self: Plugin, ssn: Session) -> None:
    for point, fn in REGISTER.items():
        ssn.register(point, SPY, fn)


register_plugin(type("SpyPlugin", (Plugin,), {"name": SPY, "on_session_open": _open}))


def spy_session(**register: Callable[..., Any]) -> Session:
    REGISTER.clear()
    CALLED.clear()
    REGISTER.update({P(point): fn for point, fn in register.items()})
    objects = [
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("j1", 1, created=timestamp(1), uid="u-j1"),
        podgroup("j2", 1, created=timestamp(2), uid="u-j2"),
        pod("j1-t-0", group="j1", uid="p1", cpu="1"),
        pod("j2-t-0", group="j2", uid="p2", cpu="1"),
    ]
    return make_session(objects, conf("allocate", [SPY]))


def recorder(point: ExtensionPoint, result: Callable[..., Any]) -> Callable[..., Any]:
    def callback(*args: Any) -> Any:
        CALLED.append(point)
        return result(*args)

    return callback


def _neutral(ssn: Session) -> dict[ExtensionPoint, Callable[..., Any]]:
    """A callback per point that answers without changing any verdict."""
    count = len(ssn.nodes)
    return {
        P.JOB_ORDER: lambda a, b: 0,
        P.QUEUE_ORDER: lambda a, b: 0,
        P.TASK_ORDER: lambda a, b: 0,
        P.VICTIM_QUEUE_ORDER: lambda a, b, c: 0,
        P.JOB_VALID: lambda j: None,
        P.JOB_READY: lambda j: True,
        P.JOB_PIPELINED: lambda j: ABSTAIN,
        P.JOB_ENQUEUEABLE: lambda j: ABSTAIN,
        P.JOB_ENQUEUED: lambda j: None,
        P.JOB_STARVING: lambda j: True,
        P.OVERUSED: lambda q: False,
        P.ALLOCATABLE: lambda q, t: True,
        P.PREEMPTIVE: lambda q, t: True,
        P.PRE_PREDICATE: lambda t: None,
        P.PREDICATE: lambda t: Filter.all_pass(count),
        P.NODE_ORDER: lambda t, positions: np.zeros(len(positions)),
        P.BATCH_NODE_ORDER: lambda t, positions: np.zeros(len(positions)),
        P.BEST_NODE: lambda t, positions, scores: None,
        P.PREEMPTABLE: lambda t, candidates: ([], ABSTAIN),
        P.RECLAIMABLE: lambda t, candidates: ([], ABSTAIN),
        P.VICTIM_TASKS: lambda tasks: [],
        P.HYPER_NODE_ORDER: lambda job, hypernode, positions: 0.0,
    }


#: How the session is made to dispatch each point.
DISPATCH: dict[ExtensionPoint, Callable[[Session], object]] = {
    P.JOB_ORDER: lambda s: s.job_compare(*s.jobs.values()),
    P.QUEUE_ORDER: lambda s: s.queue_compare(*list(s.queues.values())[:2]),
    P.TASK_ORDER: lambda s: s.task_compare(session_task(s, "j1-t-0"), session_task(s, "j2-t-0")),
    P.VICTIM_QUEUE_ORDER: lambda s: s.victim_queue_compare(*list(s.queues.values())[:2], None),
    P.JOB_VALID: lambda s: s.job_valid(s.jobs["default/j1"]),
    P.JOB_READY: lambda s: s.job_ready(s.jobs["default/j1"]),
    P.JOB_PIPELINED: lambda s: s.job_pipelined(s.jobs["default/j1"]),
    P.JOB_ENQUEUEABLE: lambda s: s.job_enqueueable(s.jobs["default/j1"]),
    P.JOB_ENQUEUED: lambda s: s.job_enqueued(s.jobs["default/j1"]),
    P.JOB_STARVING: lambda s: s.job_starving(s.jobs["default/j1"]),
    P.OVERUSED: lambda s: s.overused(s.queues["default"]),
    P.ALLOCATABLE: lambda s: s.allocatable(s.queues["default"], session_task(s, "j1-t-0")),
    P.PREEMPTIVE: lambda s: s.preemptive(s.queues["default"], session_task(s, "j1-t-0")),
    P.PRE_PREDICATE: lambda s: s.pre_predicate(session_task(s, "j1-t-0")),
    P.PREDICATE: lambda s: s.predicate(session_task(s, "j1-t-0")),
    P.NODE_ORDER: lambda s: s.node_scores(session_task(s, "j1-t-0"), np.arange(len(s.nodes))),
    P.BATCH_NODE_ORDER: lambda s: s.node_scores(session_task(s, "j1-t-0"), np.arange(len(s.nodes))),
    P.BEST_NODE: lambda s: place(s, session_task(s, "j1-t-0")),
    P.PREEMPTABLE: lambda s: s.preemptable(session_task(s, "j1-t-0"), [session_task(s, "j2-t-0")]),
    P.RECLAIMABLE: lambda s: s.reclaimable(session_task(s, "j1-t-0"), [session_task(s, "j2-t-0")]),
    P.VICTIM_TASKS: lambda s: s.victim_tasks([session_task(s, "j1-t-0")]),
    P.HYPER_NODE_ORDER: lambda s: s.hyper_node_score(
        s.jobs["default/j1"], "<cluster-top-hypernode>", np.arange(len(s.nodes))
    ),
}


# -- every point is dispatched --------------------------------------------------------------------


def test_every_point_has_a_signature_and_a_dispatch_test() -> None:
    assert set(SPECS) == set(ExtensionPoint)
    assert set(DISPATCH) == set(ExtensionPoint)


@pytest.mark.parametrize("point", list(ExtensionPoint))
def test_every_point_is_dispatched(point: ExtensionPoint) -> None:
    template = spy_session()
    ssn = spy_session(**{point.value: recorder(point, _neutral(template)[point])})
    DISPATCH[point](ssn)
    assert CALLED and set(CALLED) == {point}


def test_points_volcano_has_but_nobody_dispatches_are_not_listed() -> None:
    for name in ("target_job", "reserved_nodes", "hypernode_order", "subjob_ready"):
        with pytest.raises(ValueError):
            ExtensionPoint(name)


# -- best_node ------------------------------------------------------------------------------------


def test_best_node_choice_is_placed() -> None:
    ssn = spy_session(best_node=lambda task, positions, scores: int(positions[-1]))
    chosen = place(ssn, session_task(ssn, "j1-t-0"))
    assert isinstance(chosen, Placement)
    assert chosen.node == "n2"  # without the callback: the first of equal scores, n1


def test_best_node_without_opinion_leaves_the_highest_score() -> None:
    ssn = spy_session(
        best_node=lambda task, positions, scores: None,
        node_order=lambda task, positions: np.where(positions == 1, 10.0, 0.0),
    )
    chosen = place(ssn, session_task(ssn, "j1-t-0"))
    assert isinstance(chosen, Placement)
    assert chosen.node == "n2"


def test_best_node_outside_the_candidates_is_an_error() -> None:
    ssn = spy_session(best_node=lambda task, positions, scores: 99)
    with pytest.raises(ValueError, match=r"best_node.*99.*j1-t-0|best_node.*99"):
        place(ssn, session_task(ssn, "j1-t-0"))


def test_best_node_switch_turns_it_off() -> None:
    REGISTER.clear()
    REGISTER[P.BEST_NODE] = lambda task, positions, scores: int(positions[-1])
    objects = [
        node("n1", cpu="4"),
        node("n2", cpu="4"),
        podgroup("j1", 1),
        pod("j1-t-0", group="j1"),
    ]
    ssn = make_session(objects, conf("allocate", [{"name": SPY, "enableBestNode": False}]))
    chosen = place(ssn, session_task(ssn, "j1-t-0"))
    assert isinstance(chosen, Placement) and chosen.node == "n1"


# -- registration is checked ----------------------------------------------------------------------


def test_unknown_point_is_an_error_naming_plugin_and_point() -> None:
    ssn = spy_session()
    with pytest.raises(ExtensionPointError, match=r"'myplugin'.*'job_oder'"):
        ssn.register("job_oder", "myplugin", lambda a, b: 0)


@given(st.text(max_size=40))
def test_only_listed_points_are_accepted(name: str) -> None:
    def fn(*args: object) -> None:
        return None

    if name in {p.value for p in ExtensionPoint}:
        SESSION.register(name, "anyone", fn)
    else:
        with pytest.raises(ExtensionPointError, match="unknown extension point"):
            SESSION.register(name, "anyone", fn)


@given(st.sampled_from(list(ExtensionPoint)), st.integers(min_value=0, max_value=5))
def test_a_callback_must_take_the_points_arguments(point: ExtensionPoint, arity: int) -> None:
    names = ", ".join(f"a{i}" for i in range(arity))
    namespace: dict[str, Any] = {}
    exec(f"def fn({names}):\n    return None\n", namespace)
    fn = namespace["fn"]
    if point is P.VICTIM_TASKS:
        fn = VictimFilter(fn) if arity % 2 else fn
    if arity == SPECS[point].arity:
        SESSION.register(point, "anyone", fn)
    else:
        with pytest.raises(ExtensionPointError, match=rf"{point.value}.*calls it as"):
            SESSION.register(point, "anyone", fn)


def test_wrong_arity_message_names_the_expected_signature() -> None:
    with pytest.raises(ExtensionPointError, match=r"'p'.*job_order.*\(JobInfo, JobInfo\) -> int"):
        SESSION.register(P.JOB_ORDER, "p", lambda job: 0)


def test_bound_methods_partials_and_varargs_are_accepted() -> None:
    class Holder:
        def order(self, left: object, right: object) -> int:
            return 0

    SESSION.register(P.JOB_ORDER, "p", Holder().order)
    SESSION.register(P.JOB_ORDER, "p", functools.partial(lambda x, a, b: 0, 1))
    SESSION.register(P.JOB_ORDER, "p", lambda *args: 0)
    with pytest.raises(ExtensionPointError):
        SESSION.register(P.JOB_ORDER, "p", functools.partial(lambda x, a, b: 0, 1, 2))


def test_victim_filter_only_on_victim_tasks() -> None:
    SESSION.register(P.VICTIM_TASKS, "p", VictimFilter(lambda tasks: tasks))
    with pytest.raises(ExtensionPointError, match="VictimFilter"):
        SESSION.register(P.PREEMPTABLE, "p", VictimFilter(lambda tasks: tasks))


def test_a_non_callable_is_refused() -> None:
    with pytest.raises(ExtensionPointError, match="not callable"):
        SESSION.register(P.JOB_READY, "p", 42)  # type: ignore[arg-type]


def test_a_misspelt_point_fails_the_session_open() -> None:
    REGISTER.clear()
    bad = "test-points-misspelt"

    def open_session(self: Plugin, ssn: Session) -> None:
        ssn.register("job_ordr", bad, lambda a, b: 0)

    register_plugin(type("Misspelt", (Plugin,), {"name": bad, "on_session_open": open_session}))
    ssn = make_session([], conf("allocate", [bad]), open_plugins=False)
    with pytest.raises(ExtensionPointError, match="job_ordr"):
        ssn.open()


def test_string_and_member_are_one_key() -> None:
    ssn = spy_session(job_ready=lambda job: False)
    assert ssn.callbacks("job_ready") == ssn.callbacks(P.JOB_READY)
    assert [name for name, _ in ssn.callbacks(P.JOB_READY)] == [SPY]


# -- switches -------------------------------------------------------------------------------------

#: Every per-plugin switch of Volcano's configuration file (reference §3.2).
VOLCANO_SWITCHES = {
    "enableJobOrder",
    "enableJobReady",
    "enableJobPipelined",
    "enableJobEnqueued",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
    "enableHierarchy",
    "enabledClusterOrder",
}


def test_every_volcano_switch_is_known() -> None:
    assert VOLCANO_SWITCHES == KNOWN_SWITCHES
    entry = {"name": "gang"} | dict.fromkeys(VOLCANO_SWITCHES - OFF_BY_DEFAULT, False)
    parse_config(conf("allocate", [entry]))


def test_every_point_has_its_switch_but_the_volcano_ones_without() -> None:
    assert set(ExtensionPoint) - set(SWITCHES) == {P.JOB_VALID, P.VICTIM_QUEUE_ORDER}


def test_inert_switches_turn_no_point_off() -> None:
    option = PluginOption("x", Arguments("x"), dict.fromkeys(INERT_SWITCHES, False))
    assert all(option.enabled(point) for point in ExtensionPoint)


SESSION = make_session([], conf("allocate", ["priority"]))
