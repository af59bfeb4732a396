"""Figures for the simulation report: per job, per queue, utilisation and why pods wait.

Pure functions over a :class:`SimulationResult` and the final state as a Kubernetes ``List``
(what ``--output json`` prints). Times are virtual seconds since the epoch the simulation's
clock starts at (1970-01-01T00:00:00Z).

- A job is a PodGroup. It is submitted when its PodGroup was created, starts when its first
  pod starts running and ends when its last pod finishes, once all of its pods have finished.
- Queue shares are dominant-resource shares of the cluster (held vs deserved) as the timeline
  sampled them; time averages weight each sample by how long it held (until the next sample).
- A pending pod's reason is its ``PodScheduled=False`` condition message, else its PodGroup's
  ``Unschedulable`` condition message, else its last ``FailedScheduling`` event.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from stromboli.core.api import constants as k
from stromboli.core.api.keys import key_text
from stromboli.core.clock import EPOCH, parse_time
from stromboli.core.scheduler.api.plaingroup import MEMORY, plain_group_name
from stromboli.core.simulate.engine import SimulationResult
from stromboli.core.simulate.lifecycle import PodTimes
from stromboli.core.simulate.timeline import Sample

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
#: Pod phases in the order the report lists them.
POD_PHASES = ("Running", "Pending", "Succeeded", "Failed", "Unknown")
#: Queues that exist only as the root of the hierarchy; left out of the queue summary.
ROOT_QUEUE = "root"


@dataclass(slots=True)
class JobFigures:
    namespace: str
    name: str
    #: What the report calls the job: the PodGroup's owner (vcjob, pod, ...) when it has one.
    label: str
    queue: str
    #: PodGroup phase (Pending, Inqueue, Running, Completed, ...).
    phase: str
    min_member: int
    #: Kind and state of the owning object when the PodGroup has a controller owner.
    owner_kind: str | None = None
    owner_state: str | None = None
    submit: float = 0.0
    start: float | None = None
    end: float | None = None
    #: Pods of the job in the final state, by phase.
    pods: dict[str, int] = field(default_factory=dict)

    @property
    def wait(self) -> float | None:
        """Seconds from submission to the first pod running; None if it never started."""
        return None if self.start is None else max(self.start - self.submit, 0.0)

    @property
    def run(self) -> float | None:
        """Seconds from the first pod start to the last pod finish; None until all finished."""
        return None if self.start is None or self.end is None else max(self.end - self.start, 0.0)

    @property
    def pod_count(self) -> int:
        return sum(self.pods.values())

    @property
    def state(self) -> str:
        """The owner's state when there is one (a vcjob's), else the PodGroup phase."""
        return self.owner_state or self.phase

    def waited(self, end_time: float) -> float:
        """The wait, or for a job that never started, how long it had waited at ``end_time``."""
        wait = self.wait
        return wait if wait is not None else max(end_time - self.submit, 0.0)

    def ran(self, end_time: float) -> float | None:
        """The run time, or for a job still running, how long it had run at ``end_time``."""
        run = self.run
        if run is not None or self.start is None:
            return run
        return max(end_time - self.start, 0.0)


@dataclass(slots=True)
class QueueFigures:
    name: str
    weight: int
    jobs: int = 0
    #: Jobs that started running at some point.
    started: int = 0
    mean_wait: float | None = None
    p95_wait: float | None = None
    #: Dominant-resource share of the cluster held and deserved in the last sample.
    held_end: float = 0.0
    deserved_end: float = 0.0
    #: Time-weighted means over the timeline, and the highest share held.
    held_mean: float = 0.0
    deserved_mean: float = 0.0
    held_peak: float = 0.0

    @property
    def waiting(self) -> int:
        """Jobs that never started."""
        return self.jobs - self.started


@dataclass(slots=True)
class Utilisation:
    #: Time-weighted mean fraction of allocatable cpu and memory in use.
    cpu_mean: float = 0.0
    memory_mean: float = 0.0
    cpu_peak: float = 0.0
    memory_peak: float = 0.0
    pending_peak: int = 0
    running_peak: int = 0
    #: Virtual seconds the timeline covers.
    span: float = 0.0


@dataclass(slots=True)
class PendingPod:
    namespace: str
    name: str
    job: str
    queue: str
    reason: str


@dataclass(slots=True)
class PendingReason:
    """Pending pods that share one reason."""

    reason: str
    pods: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.pods)


@dataclass(slots=True)
class Figures:
    """Everything the report and the HTML page show."""

    jobs: list[JobFigures]
    queues: list[QueueFigures]
    utilisation: Utilisation
    pending: list[PendingPod]
    end_time: float


# -- helpers --------------------------------------------------------------------------------------


def seconds_of(timestamp: str | None) -> float | None:
    """Virtual seconds of a Kubernetes timestamp; None when absent or unreadable."""
    if not timestamp:
        return None
    try:
        return (parse_time(timestamp) - EPOCH).total_seconds()
    except (ValueError, TypeError):
        return None


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile (``fraction`` in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(fraction * len(ordered)), 1)
    return ordered[min(rank, len(ordered)) - 1]


def time_weighted_mean(times: Sequence[float], values: Sequence[float]) -> float:
    """Mean of a step function: each value holds from its time until the next one.

    The last value holds for no time; when all samples share one instant, a plain mean.
    """
    if not values:
        return 0.0
    span = times[-1] - times[0]
    if span <= 0:
        return sum(values) / len(values)
    total = sum(v * (times[i + 1] - times[i]) for i, v in enumerate(values[:-1]))
    return total / span


def _items(final: dict, kind: str) -> Iterable[dict]:
    return (o for o in final.get("items") or () if o.get("kind") == kind)


def pod_group_name(pod: dict) -> str | None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(k.GROUP_NAME_ANNOTATION) or annotations.get(
        k.VOLCANO_GROUP_NAME_ANNOTATION
    )


def _podgroups(result: SimulationResult, final: dict) -> list[dict]:
    """The stored PodGroups, then the scheduler's in-memory groups of plain pods
    (``--plain-pod-groups=memory``), which the report lists as any other."""
    stored = list(_items(final, "PodGroup"))
    cache = result.scheduler.cache
    return stored + [e.podgroup for e in cache.jobs.values() if e.in_memory and e.podgroup]


def _group_of(pod: dict, result: SimulationResult | None) -> str | None:
    """The pod's group: the one it names, else its in-memory one when the run keeps them."""
    named = pod_group_name(pod)
    if named or result is None or result.scheduler.cache.plain_pod_groups != MEMORY:
        return named
    return plain_group_name(pod)


def _owner(obj: dict) -> dict | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return next((r for r in refs if r.get("controller")), None)


def _owner_state(final: dict, namespace: str, owner: dict) -> str | None:
    """The state of a vcjob owner (``status.state.phase``), or another owner's ``status.phase``."""
    for obj in final.get("items") or ():
        meta = obj.get("metadata") or {}
        if (
            obj.get("kind") == owner.get("kind")
            and meta.get("name") == owner.get("name")
            and (meta.get("namespace") or "default") == namespace
        ):
            status = obj.get("status") or {}
            state = status.get("state")
            if isinstance(state, dict) and state.get("phase"):
                return str(state["phase"])
            if isinstance(status.get("phase"), str) and owner.get("kind") != "Pod":
                return status["phase"]
            return None
    return None


def _condition(obj: dict, kind: str, status: str) -> dict | None:
    conditions = (obj.get("status") or {}).get("conditions") or ()
    matching = [c for c in conditions if c.get("type") == kind and c.get("status") == status]
    return matching[-1] if matching else None


def _finished_at(pod: dict) -> float | None:
    latest = None
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        at = seconds_of(((status.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        if at is not None and (latest is None or at > latest):
            latest = at
    return latest


# -- jobs -----------------------------------------------------------------------------------------


def job_figures(result: SimulationResult, final: dict) -> list[JobFigures]:
    """One entry per PodGroup in the final state, in submission order."""
    live: dict[str, list[dict]] = {}
    for pod in _items(final, "Pod"):
        group = _group_of(pod, result)
        if group:
            namespace = (pod.get("metadata") or {}).get("namespace") or "default"
            live.setdefault(f"{namespace}/{group}", []).append(pod)
    history: dict[str, list[PodTimes]] = {}
    for times in result.lifecycle.times.values():
        history.setdefault(times.job, []).append(times)

    jobs: list[JobFigures] = []
    for pg in _podgroups(result, final):
        meta = pg.get("metadata") or {}
        spec = pg.get("spec") or {}
        namespace = meta.get("namespace") or "default"
        key = key_text(pg)
        owner = _owner(pg)
        label = f"{namespace}/{owner['name']}" if owner and owner.get("name") else key
        job = JobFigures(
            namespace=namespace,
            name=meta.get("name", ""),
            label=label,
            queue=spec.get("queue") or k.DEFAULT_QUEUE,
            phase=(pg.get("status") or {}).get("phase") or "Pending",
            min_member=int(spec.get("minMember") or 0),
            owner_kind=owner.get("kind") if owner else None,
            owner_state=_owner_state(final, namespace, owner) if owner else None,
            submit=seconds_of(meta.get("creationTimestamp")) or 0.0,
        )
        pods = live.get(key, [])
        past = history.get(key, [])
        starts = [t.started for t in past if t.started is not None]
        starts += [
            s
            for p in pods
            if (s := seconds_of((p.get("status") or {}).get("startTime"))) is not None
        ]
        job.start = min(starts) if starts else None
        job.pods = dict(Counter((p.get("status") or {}).get("phase") or "Pending" for p in pods))
        job.end = _job_end(pods, past, result)
        jobs.append(job)
    jobs.extend(_finished_vcjobs(result, final, live, history, {j.label for j in jobs}))
    jobs.sort(key=lambda j: (j.submit, j.label))
    return jobs


def _finished_vcjobs(
    result: SimulationResult,
    final: dict,
    live: dict[str, list[dict]],
    history: dict[str, list[PodTimes]],
    seen: set[str],
) -> list[JobFigures]:
    """vcjobs whose PodGroup is gone (the controller deletes it when the job finishes)."""
    out: list[JobFigures] = []
    for vcjob in _items(final, "Job"):
        if vcjob.get("apiVersion") != k.BATCH_V1ALPHA1:
            continue
        meta = vcjob.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        label = f"{namespace}/{meta.get('name', '')}"
        if label in seen:
            continue
        key = f"{namespace}/{meta.get('name', '')}-{meta.get('uid', '')}"
        pods, past = live.get(key, []), history.get(key, [])
        starts = [t.started for t in past if t.started is not None]
        job = JobFigures(
            namespace=namespace,
            name=meta.get("name", ""),
            label=label,
            queue=(vcjob.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE,
            phase=(((vcjob.get("status") or {}).get("state") or {}).get("phase")) or "Pending",
            min_member=int((vcjob.get("spec") or {}).get("minAvailable") or 0),
            owner_kind="Job",
            owner_state=(((vcjob.get("status") or {}).get("state") or {}).get("phase")),
            submit=seconds_of(meta.get("creationTimestamp")) or 0.0,
        )
        job.start = min(starts) if starts else None
        job.pods = dict(Counter((p.get("status") or {}).get("phase") or "Pending" for p in pods))
        job.end = _job_end(pods, past, result)
        out.append(job)
    return out


def _job_end(pods: list[dict], past: list[PodTimes], result: SimulationResult) -> float | None:
    """The last finish once every pod of the job has finished, else None."""
    if pods:
        finishes: list[float] = []
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
                return None
            uid = (pod.get("metadata") or {}).get("uid")
            times = result.lifecycle.times.get(uid) if uid else None
            at = times.finished if times is not None else None
            if at is None:
                at = _finished_at(pod)
            if at is not None:
                finishes.append(at)
        return max(finishes) if finishes else None
    # Every pod is gone (deleted after finishing): judge by what the lifecycle recorded.
    if not past or any(t.phase not in TERMINAL_PHASES for t in past):
        return None
    finishes = [t.finished for t in past if t.finished is not None]
    return max(finishes) if finishes else None


# -- queues and utilisation -----------------------------------------------------------------------


def _queue_series(timeline: Sequence[Sample], name: str) -> tuple[list[float], list[float]]:
    held = [s.queues.get(name, (0.0, 0.0))[0] for s in timeline]
    deserved = [s.queues.get(name, (0.0, 0.0))[1] for s in timeline]
    return held, deserved


def queue_figures(
    result: SimulationResult, final: dict, jobs: list[JobFigures] | None = None
) -> list[QueueFigures]:
    """Queues that had jobs or a share in the timeline, by name (the root queue left out)."""
    jobs = job_figures(result, final) if jobs is None else jobs
    weights = {
        (q.get("metadata") or {}).get("name", ""): int((q.get("spec") or {}).get("weight") or 1)
        for q in _items(final, "Queue")
    }
    timeline = result.timeline
    names = {j.queue for j in jobs}
    for sample in timeline:
        names.update(sample.queues)
    names.discard(ROOT_QUEUE)
    times = [s.time for s in timeline]
    figures: list[QueueFigures] = []
    for name in sorted(names):
        mine = [j for j in jobs if j.queue == name]
        waits = [j.wait for j in mine if j.wait is not None]
        held, deserved = _queue_series(timeline, name)
        figures.append(
            QueueFigures(
                name=name,
                weight=weights.get(name, 1),
                jobs=len(mine),
                started=len(waits),
                mean_wait=sum(waits) / len(waits) if waits else None,
                p95_wait=percentile(waits, 0.95),
                held_end=held[-1] if held else 0.0,
                deserved_end=deserved[-1] if deserved else 0.0,
                held_mean=time_weighted_mean(times, held),
                deserved_mean=time_weighted_mean(times, deserved),
                held_peak=max(held, default=0.0),
            )
        )
    return figures


def utilisation(result: SimulationResult) -> Utilisation:
    timeline = result.timeline
    if not timeline:
        return Utilisation()
    times = [s.time for s in timeline]
    return Utilisation(
        cpu_mean=time_weighted_mean(times, [s.cpu for s in timeline]),
        memory_mean=time_weighted_mean(times, [s.memory for s in timeline]),
        cpu_peak=max(s.cpu for s in timeline),
        memory_peak=max(s.memory for s in timeline),
        pending_peak=max(s.pending_pods for s in timeline),
        running_peak=max(s.running_pods for s in timeline),
        span=times[-1] - times[0],
    )


# -- pending pods ---------------------------------------------------------------------------------


def _last_failed_scheduling(final: dict) -> dict[str, str]:
    """Per pod (``ns/name``), the message of its latest FailedScheduling event."""
    latest: dict[str, tuple[float, str]] = {}
    for event in _items(final, "Event"):
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "Pod" or event.get("reason") != "FailedScheduling":
            continue
        key = f"{involved.get('namespace') or 'default'}/{involved.get('name', '')}"
        at = seconds_of(event.get("lastTimestamp") or event.get("eventTime")) or 0.0
        if key not in latest or at >= latest[key][0]:
            latest[key] = (at, str(event.get("message") or ""))
    return {key: message for key, (_, message) in latest.items() if message}


def pending_pods(final: dict, result: SimulationResult | None = None) -> list[PendingPod]:
    """Pods still waiting for a node at the end, each with why (``result``: the run, whose
    in-memory groups count as PodGroups)."""
    stored = _podgroups(result, final) if result is not None else _items(final, "PodGroup")
    groups = {key_text(pg): pg for pg in stored}
    events: dict[str, str] | None = None
    pending: list[PendingPod] = []
    for pod in _items(final, "Pod"):
        status = pod.get("status") or {}
        if (status.get("phase") or "Pending") != "Pending" or (pod.get("spec") or {}).get(
            "nodeName"
        ):
            continue
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        group = _group_of(pod, result)
        pg = groups.get(f"{namespace}/{group}") if group else None
        reason = ""
        condition = _condition(pod, "PodScheduled", "False")
        if condition is not None:
            reason = str(condition.get("message") or condition.get("reason") or "")
        if not reason and pg is not None:
            unschedulable = _condition(pg, "Unschedulable", "True")
            if unschedulable is not None:
                reason = str(unschedulable.get("message") or unschedulable.get("reason") or "")
        if not reason:
            if events is None:
                events = _last_failed_scheduling(final)
            reason = events.get(key_text(pod), "")
        if not reason and pg is not None:
            phase = (pg.get("status") or {}).get("phase") or "Pending"
            if phase == "Pending":
                reason = f"PodGroup {group} is Pending: not yet admitted to its queue"
        if not reason:
            reason = "no scheduling decision recorded"
        pending.append(
            PendingPod(
                namespace=namespace,
                name=meta.get("name", ""),
                job=f"{namespace}/{group}" if group else "",
                queue=((pg or {}).get("spec") or {}).get("queue") or k.DEFAULT_QUEUE,
                reason=reason,
            )
        )
    return pending


def group_pending(pending: Sequence[PendingPod]) -> list[PendingReason]:
    """Pending pods grouped by identical reason, most common first."""
    grouped: dict[str, PendingReason] = {}
    for pod in pending:
        grouped.setdefault(pod.reason, PendingReason(pod.reason)).pods.append(
            f"{pod.namespace}/{pod.name}"
        )
    return sorted(grouped.values(), key=lambda g: (-g.count, g.reason))


def figures(result: SimulationResult, final: dict) -> Figures:
    jobs = job_figures(result, final)
    return Figures(
        jobs=jobs,
        queues=queue_figures(result, final, jobs),
        utilisation=utilisation(result),
        pending=pending_pods(final, result),
        end_time=result.end_time,
    )


# -- formatting shared by the report and the page -------------------------------------------------


def format_duration(seconds: float | None) -> str:
    """``1m30s``, ``2h5m``, ``45s``, ``1.5s``; ``-`` for None. Hours are not folded into days."""
    if seconds is None:
        return "-"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.3g}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{unit}" for v, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if v]
    return "".join(parts) or "0s"


def format_elapsed(seconds: float) -> str:
    """Short real (wall-clock) times: ``850µs``, ``15.7ms``, ``2.31s``, ``1m5s``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    return format_duration(seconds)


def format_percent(fraction: float) -> str:
    """``37%``; ``–`` for NaN (a deserved share that no plugin computes)."""
    if math.isnan(fraction):
        return "–"
    return f"{fraction * 100:.0f}%"


def format_pods(counts: dict[str, int]) -> str:
    """``2 run 1 pend``: pod counts by phase, in a fixed order."""
    short = {
        "Running": "run",
        "Pending": "pend",
        "Succeeded": "ok",
        "Failed": "fail",
        "Unknown": "unknown",
    }
    order = [p for p in POD_PHASES if counts.get(p)] + sorted(
        p for p in counts if p not in POD_PHASES and counts[p]
    )
    return " ".join(f"{counts[p]} {short.get(p, p)}" for p in order) or "0"


def wait_text(job: JobFigures, end_time: float) -> str:
    """The job's wait; ``≥`` the time waited so far when it never started."""
    waited = format_duration(job.waited(end_time))
    return waited if job.wait is not None else f"≥{waited}"


def run_text(job: JobFigures, end_time: float) -> str:
    """The job's run time; ``≥`` the time run so far when it had not finished; ``-`` unstarted."""
    ran = job.ran(end_time)
    if ran is None:
        return "-"
    return format_duration(ran) if job.run is not None else f"≥{format_duration(ran)}"
