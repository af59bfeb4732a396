"""The fast paths of ``util/placement`` decide as a search from scratch would.

A fit kept per request and brought up to date from the node change log must equal the fit
computed afresh (and count its nodes right) after any sequence of placements and removals;
and a whole allocate run, every task's search checked against a reference search that keeps
nothing between tasks (fit afresh, every predicate, every scorer called on the window), must
choose the same node and leave the same next window start, task after task.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.actions import allocate as allocate_module
from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.api import node as node_module
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.resource import EPSILON
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.filters import FitErrors
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.placement import (
    Placement,
    _current_fit,
    _fits,
    place,
    requested_columns,
    sample,
)
from tests.scheduler.builders import conf, make_session, node, pod, podgroup, session_task

_FIRST = ["priority", "gang", "conformance"]
CONF = conf("allocate", _FIRST, ["overcommit", "drf", "predicates", "proportion", "nodeorder"])
UNSCORED = conf("allocate", _FIRST, ["overcommit", "drf", "predicates", "proportion"])


@contextlib.contextmanager
def short_change_log(entries: int) -> Iterator[None]:
    """A change log that starts afresh after ``entries`` (the epoch path, reached quickly)."""
    kept = node_module.CHANGE_LOG
    node_module.CHANGE_LOG = entries
    try:
        yield
    finally:
        node_module.CHANGE_LOG = kept


def _afresh(ssn: Session, vector: np.ndarray, use_future_idle: bool) -> tuple[np.ndarray, ...]:
    nodes = ssn.nodes
    columns = requested_columns(vector)
    need = vector[columns] - EPSILON
    room = nodes.future if use_future_idle else nodes.idle_now
    return _fits(room, need, columns), _fits(nodes.idle_now, need, columns)


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.integers(min_value=1, max_value=40),
    steps=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=39),  # node
            st.integers(min_value=0, max_value=2),  # which pod shape
            st.sampled_from(["add", "remove", "ask", "ask-now"]),
            st.sampled_from([TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RELEASING]),
        ),
        max_size=120,
    ),
    log=st.sampled_from([5, 17, 1 << 16]),
)
def test_kept_fit_equals_fit_afresh(
    nodes: int,
    steps: list[tuple[int, int, str, TaskStatus]],
    log: int,
) -> None:
    with short_change_log(log):
        objects = [node(f"n{i}", cpu="4", memory="8Gi", pods="5") for i in range(nodes)]
        shapes = [("1", "1Gi"), ("2500m", "3Gi"), ("500m", "7Gi")]
        objects.append(podgroup("templates", min_member=len(shapes)))
        objects += [
            pod(f"p{i}", group="templates", cpu=c, memory=m) for i, (c, m) in enumerate(shapes)
        ]
        ssn = make_session(objects, CONF)
        templates = [session_task(ssn, f"p{i}") for i in range(len(shapes))]
        placed: list[tuple[str, TaskInfo]] = []
        table = ssn.nodes
        for count, (where, shape, op, status) in enumerate(steps):
            if op == "add":
                task = templates[shape].clone()
                task.uid = f"{task.uid}-{count}"
                task.status = status
                name = table.nodes[where % nodes].name
                table.add_task(name, task)
                placed.append((name, task))
            elif op == "remove" and placed:
                name, task = placed.pop(where % len(placed))
                table.remove_task(name, task)
            else:
                vector = table.task_vector(templates[shape])
                use_future_idle = op == "ask"
                fit = _current_fit(ssn, vector, use_future_idle)
                want_later, want_now = _afresh(ssn, vector, use_future_idle)
                assert np.array_equal(fit.resource_ok, want_later)
                if use_future_idle:
                    assert np.array_equal(fit.idle_ok, want_now)
                assert fit.resource_count == int(np.count_nonzero(fit.resource_ok))
                assert fit.idle_count == int(np.count_nonzero(fit.idle_ok))


def reference_place(ssn: Session, task: TaskInfo) -> Placement | None:
    """The search with nothing kept between tasks: None where no node fits."""
    nodes = ssn.nodes
    if ssn.pre_predicate(task):
        return None
    vector = nodes.task_vector(task)
    resource_ok, idle_ok = _afresh(ssn, vector, True)
    feasible = resource_ok & ssn.predicate(task).passed
    if not feasible.any():
        return None
    idle_ok = feasible & idle_ok
    positions = sample(ssn, idle_ok if idle_ok.any() else feasible)
    best = int(positions[0])
    if positions.shape[0] > 1:
        scores = np.zeros(positions.shape[0])
        for tier in ssn.chain(ExtensionPoint.NODE_ORDER):
            for fn in tier:
                scores += fn(task, positions)
        for tier in ssn.chain(ExtensionPoint.BATCH_NODE_ORDER):
            for fn in tier:
                scores += fn(task, positions)
        best = int(positions[int(np.argmax(scores))])
    return Placement(nodes.nodes[best].name, bool(idle_ok[best]))


@contextlib.contextmanager
def checked_place(searches: list[str]) -> Iterator[None]:
    """allocate's ``place``, each call compared with ``reference_place`` from the same start."""
    real = allocate_module.place

    def place(ssn: Session, task: TaskInfo, **kwargs: object) -> Placement | FitErrors:
        start = ssn.next_start_node
        expected = reference_place(ssn, task)
        after = ssn.next_start_node
        ssn.next_start_node = start
        got = real(ssn, task, **kwargs)  # type: ignore[arg-type]
        if expected is None:
            assert isinstance(got, FitErrors)
        else:
            assert got == expected
            assert ssn.next_start_node == after
            searches.append(got.node)
        return got

    allocate_module.place = place  # type: ignore[assignment]
    try:
        yield
    finally:
        allocate_module.place = real


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.integers(min_value=1, max_value=150),
    busy=st.lists(
        st.tuples(st.integers(min_value=0, max_value=149), st.sampled_from(["Running", "gone"])),
        max_size=30,
    ),
    jobs=st.lists(
        st.tuples(st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=25,
    ),
    cordoned=st.integers(min_value=0, max_value=3),
    log=st.sampled_from([7, 1 << 16]),
    scored=st.booleans(),
)
def test_allocate_places_every_task_as_a_search_from_scratch(
    nodes: int,
    busy: list[tuple[int, str]],
    jobs: list[tuple[int, int]],
    cordoned: int,
    log: int,
    scored: bool,
) -> None:
    shapes = [("500m", "1Gi"), ("2", "2Gi"), ("3", "6Gi"), ("1", "12Gi")]
    objects: list[dict] = [
        node(f"n{i:03d}", cpu="4", memory="16Gi", pods="4", unschedulable=i < cordoned)
        for i in range(nodes)
    ]
    for i, (where, phase) in enumerate(busy):
        running = pod(
            f"busy-{i}",
            cpu="3",  # one leaving makes room later that is not there now
            memory="4Gi",
            phase="Running",
            node_name=f"n{where % nodes:03d}",
            deleting=phase == "gone",
        )
        objects.append(running)
    for j, (size, shape) in enumerate(jobs):
        cpu, memory = shapes[shape]
        objects.append(podgroup(f"job-{j}", min_member=size))
        objects += [
            pod(f"job-{j}-{i}", group=f"job-{j}", cpu=cpu, memory=memory) for i in range(size)
        ]
    searches: list[str] = []
    with short_change_log(log):
        ssn = make_session(objects, CONF if scored else UNSCORED)
        with checked_place(searches):
            AllocateAction().execute(ssn)
    assert len(searches) <= sum(size for size, _ in jobs)


def test_a_node_with_room_now_beats_one_whose_room_is_being_released() -> None:
    """Every node fits the task once releasing pods leave, one only fits it now: the counts
    must not take that for a roomy cluster (its search would start at the leaving one)."""
    objects = [
        node("n0", cpu="4", memory="16Gi"),
        node("n1", cpu="4", memory="16Gi"),
        pod("leaving", cpu="3", memory="1Gi", phase="Running", node_name="n0", deleting=True),
        podgroup("job", min_member=1),
        pod("job-0", group="job", cpu="2", memory="1Gi"),
    ]
    ssn = make_session(objects, UNSCORED)
    task = session_task(ssn, "job-0")
    assert place(ssn, task) == Placement("n1", True)
