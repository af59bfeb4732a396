"""The extension points a plugin may register callbacks on, and the shape of each callback.

Every point here is dispatched by the session (``Session.<point>`` or ``Session.node_scores``
for the two score points); ``Session.register`` refuses any other name, so a misspelt point is
an error at session open instead of a callback that is silently never called. The names are
those of Volcano's scheduler framework in snake case (``jobOrder`` is ``job_order``); a point's
YAML switch is in ``framework/options.py``.

Volcano has a few more points that no Stromboli plugin registers and no Stromboli action would
call yet: ``targetJob`` and ``reservedNodes`` (of the elect/reserve actions Volcano dropped),
``hyperNodeGradientForJob`` (the gradients are ``util/hypernodes.gradients``, one rule for
every plugin), and the ``subJob*`` points (partitioned gangs). They are not listed; their
YAML switches are still accepted (``options.INERT_SWITCHES``) so that a Volcano configuration
file loads unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

import numpy as np

from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.framework.filters import Filter

#: Votes of ``job_pipelined``, ``job_enqueueable`` and the victim points.
PERMIT = 1
ABSTAIN = 0
REJECT = -1


class ExtensionPoint(StrEnum):
    """A named place in the cycle where plugins' callbacks are called and combined.

    Members are strings, so ``"job_order"`` and ``ExtensionPoint.JOB_ORDER`` are the same key.
    """

    JOB_ORDER = "job_order"
    QUEUE_ORDER = "queue_order"
    TASK_ORDER = "task_order"
    VICTIM_QUEUE_ORDER = "victim_queue_order"
    JOB_VALID = "job_valid"
    JOB_READY = "job_ready"
    JOB_PIPELINED = "job_pipelined"
    JOB_ENQUEUEABLE = "job_enqueueable"
    JOB_ENQUEUED = "job_enqueued"
    JOB_STARVING = "job_starving"
    OVERUSED = "overused"
    ALLOCATABLE = "allocatable"
    PREEMPTIVE = "preemptive"
    PRE_PREDICATE = "pre_predicate"
    PREDICATE = "predicate"
    NODE_ORDER = "node_order"
    BATCH_NODE_ORDER = "batch_node_order"
    BEST_NODE = "best_node"
    PREEMPTABLE = "preemptable"
    RECLAIMABLE = "reclaimable"
    VICTIM_TASKS = "victim_tasks"
    HYPER_NODE_ORDER = "hyper_node_order"


@dataclass(frozen=True, slots=True)
class VictimFilter:
    """A ``victim_tasks`` callback that only vetoes: given the nominated victims it returns
    those that may go. Register it wrapped, ``ssn.register("victim_tasks", name,
    VictimFilter(fn))``, so that it never nominates tasks itself."""

    fn: Callable[[list[TaskInfo]], list[TaskInfo]]


# -- callback signatures, one per point -------------------------------------------------------

#: Order: negative when ``left`` goes first, positive when ``right`` does, 0 for no opinion.
JobOrderFn: TypeAlias = Callable[[JobInfo, JobInfo], int]
QueueOrderFn: TypeAlias = Callable[[QueueInfo, QueueInfo], int]
TaskOrderFn: TypeAlias = Callable[[TaskInfo, TaskInfo], int]
#: Victims' queues: (left, right, the preemptor's queue or None) → order.
VictimQueueOrderFn: TypeAlias = Callable[[QueueInfo, QueueInfo, QueueInfo | None], int]
#: None when the job is valid, else (reason, message).
JobValidFn: TypeAlias = Callable[[JobInfo], tuple[str, str] | None]
JobPredicateFn: TypeAlias = Callable[[JobInfo], bool]
#: PERMIT, ABSTAIN or REJECT.
JobVoteFn: TypeAlias = Callable[[JobInfo], int]
JobEnqueuedFn: TypeAlias = Callable[[JobInfo], None]
OverusedFn: TypeAlias = Callable[[QueueInfo], bool]
QueueTaskFn: TypeAlias = Callable[[QueueInfo, TaskInfo], bool]
#: None when the task may go on to the predicates, else the reason it may not.
PrePredicateFn: TypeAlias = Callable[[TaskInfo], str | None]
#: Which of the session's nodes pass, and why the others fail.
PredicateFn: TypeAlias = Callable[[TaskInfo], Filter]
#: Scores of the nodes at the given positions of ``ssn.nodes``, in that order.
NodeOrderFn: TypeAlias = Callable[[TaskInfo, np.ndarray], np.ndarray]
#: (task, candidate positions, their summed scores) → the chosen position, or None.
BestNodeFn: TypeAlias = Callable[[TaskInfo, np.ndarray, np.ndarray], int | None]
#: (evictor, candidates) → (victims among the candidates, vote).
VictimsFn: TypeAlias = Callable[[TaskInfo, list[TaskInfo]], tuple[list[TaskInfo], int]]
#: (job, HyperNode name, positions of its nodes) → score of the job's trial placement there.
HyperNodeOrderFn: TypeAlias = Callable[[JobInfo, str, np.ndarray], float]
VictimTasksFn: TypeAlias = Callable[[list[TaskInfo]], list[TaskInfo]] | VictimFilter

#: Any one callback.
Callback: TypeAlias = Callable[..., Any] | VictimFilter


@dataclass(frozen=True, slots=True)
class PointSpec:
    """What a point's callbacks take and return."""

    signature: str
    #: Positional arguments the session passes.
    arity: int


SPECS: dict[ExtensionPoint, PointSpec] = {
    ExtensionPoint.JOB_ORDER: PointSpec("(JobInfo, JobInfo) -> int", 2),
    ExtensionPoint.QUEUE_ORDER: PointSpec("(QueueInfo, QueueInfo) -> int", 2),
    ExtensionPoint.TASK_ORDER: PointSpec("(TaskInfo, TaskInfo) -> int", 2),
    ExtensionPoint.VICTIM_QUEUE_ORDER: PointSpec(
        "(QueueInfo, QueueInfo, QueueInfo | None) -> int", 3
    ),
    ExtensionPoint.JOB_VALID: PointSpec("(JobInfo) -> tuple[str, str] | None", 1),
    ExtensionPoint.JOB_READY: PointSpec("(JobInfo) -> bool", 1),
    ExtensionPoint.JOB_PIPELINED: PointSpec("(JobInfo) -> vote", 1),
    ExtensionPoint.JOB_ENQUEUEABLE: PointSpec("(JobInfo) -> vote", 1),
    ExtensionPoint.JOB_ENQUEUED: PointSpec("(JobInfo) -> None", 1),
    ExtensionPoint.JOB_STARVING: PointSpec("(JobInfo) -> bool", 1),
    ExtensionPoint.OVERUSED: PointSpec("(QueueInfo) -> bool", 1),
    ExtensionPoint.ALLOCATABLE: PointSpec("(QueueInfo, TaskInfo) -> bool", 2),
    ExtensionPoint.PREEMPTIVE: PointSpec("(QueueInfo, TaskInfo) -> bool", 2),
    ExtensionPoint.PRE_PREDICATE: PointSpec("(TaskInfo) -> str | None", 1),
    ExtensionPoint.PREDICATE: PointSpec("(TaskInfo) -> Filter", 1),
    ExtensionPoint.NODE_ORDER: PointSpec("(TaskInfo, positions) -> scores", 2),
    ExtensionPoint.BATCH_NODE_ORDER: PointSpec("(TaskInfo, positions) -> scores", 2),
    ExtensionPoint.BEST_NODE: PointSpec("(TaskInfo, positions, scores) -> int | None", 3),
    ExtensionPoint.PREEMPTABLE: PointSpec(
        "(TaskInfo, list[TaskInfo]) -> (list[TaskInfo], vote)", 2
    ),
    ExtensionPoint.RECLAIMABLE: PointSpec(
        "(TaskInfo, list[TaskInfo]) -> (list[TaskInfo], vote)", 2
    ),
    ExtensionPoint.VICTIM_TASKS: PointSpec(
        "(list[TaskInfo]) -> list[TaskInfo], or a VictimFilter of that", 1
    ),
    ExtensionPoint.HYPER_NODE_ORDER: PointSpec("(JobInfo, str, positions) -> float", 3),
}


class ExtensionPointError(ValueError):
    """A callback registered on a point that does not exist, or one of the wrong shape."""


def extension_point(point: str, plugin: str) -> ExtensionPoint:
    """``point`` as an :class:`ExtensionPoint`; an unknown name is an error naming it."""
    try:
        return ExtensionPoint(point)
    except ValueError:
        known = ", ".join(p.value for p in ExtensionPoint)
        raise ExtensionPointError(
            f"plugin {plugin!r}: unknown extension point {point!r} (known: {known})"
        ) from None


#: Callables already checked, by code object and whether they are bound (see ``check``).
_checked: dict[tuple[object, bool, int], bool] = {}


def check_callback(point: ExtensionPoint, plugin: str, fn: Callback) -> None:
    """Refuse a callback that is not callable with the arguments ``point`` passes.

    Only the number of positional arguments can be checked before the call; the types are
    documented by the aliases above.
    """
    spec = SPECS[point]
    target = fn.fn if isinstance(fn, VictimFilter) else fn
    if isinstance(fn, VictimFilter) and point is not ExtensionPoint.VICTIM_TASKS:
        raise ExtensionPointError(
            f"plugin {plugin!r}: a VictimFilter is a victim_tasks callback, not a {point} one"
        )
    if not callable(target):
        raise ExtensionPointError(
            f"plugin {plugin!r}: callback on {point} is {type(target).__name__}, not callable"
        )
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    if hasattr(target, "__wrapped__"):
        code = None  # a wrapper's signature is its wrapped function's: check every one
    key = (code, hasattr(target, "__self__"), spec.arity)
    if code is not None and _checked.get(key):
        return
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return  # a builtin without a signature: nothing to check
    try:
        signature.bind(*([None] * spec.arity))
    except TypeError:
        raise ExtensionPointError(
            f"plugin {plugin!r}: callback on {point} takes {signature}, but the point calls "
            f"it as {spec.signature}"
        ) from None
    if code is not None:
        _checked[key] = True
