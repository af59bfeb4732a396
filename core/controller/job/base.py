"""What every part of the vcjob controller shares: the kinds it watches, its caches and
timers (declared on :class:`JobState`), and small readers of Job, Pod and PodGroup objects.

The controller is one :class:`~stromboli.core.controller.reconciler.Reconciler` assembled from
one class per concern, each built on the one below it, so that a module may use what the
modules below it provide and nothing above:

    base (this module) → timers → intake → pods → resources → sync → controller

:class:`~stromboli.core.controller.job.controller.JobController` sets the state up; the
layers in between only read and change it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from stromboli.core.api import constants as k
from stromboli.core.api.constants import JobPhase
from stromboli.core.api.keys import Key
from stromboli.core.clock import parse_time
from stromboli.core.controller.job.lanes import RequestLanes
from stromboli.core.controller.job.plugins import JobPlugin
from stromboli.core.controller.job.policies import Request
from stromboli.core.controller.job.queue import QueueStates, newer
from stromboli.core.controller.job.spec import JobSpecError, JobView
from stromboli.core.controller.metrics import ControllerMetrics
from stromboli.core.controller.reconciler import Reconciler

if TYPE_CHECKING:
    from stromboli.core.controller.job.timers import Delayed, Timer

JOB: Final = (k.BATCH_V1ALPHA1, "Job")
POD: Final = (k.CORE_V1, "Pod")
PODGROUP: Final = (k.SCHEDULING_V1BETA1, "PodGroup")
COMMAND: Final = (k.BUS_V1ALPHA1, "Command")
QUEUE: Final = (k.SCHEDULING_V1BETA1, "Queue")
PRIORITY_CLASS: Final = (k.K8S_SCHEDULING_V1, "PriorityClass")
PVC: Final = (k.CORE_V1, "PersistentVolumeClaim")
WATCHED: Final = (JOB, POD, PODGROUP, COMMAND, QUEUE, PRIORITY_CLASS)

COMPONENT: Final = "vc-controller-manager"
DEFAULT_MAX_REQUEUE: Final = 15
#: Back-off of a failed request: 5 ms doubling up to 1000 s (client-go's default limiter).
BACKOFF_BASE: Final = 0.005
BACKOFF_MAX: Final = 1000.0
INVALID_SPEC_REASON: Final = "InvalidSpec"
#: Seconds after which an unchanged PodGroup condition is reported on its job again, so the
#: ``PodGroupPending`` event outlives the API server's event TTL (the spam filter's refill).
PENDING_REPORT_AGAIN: Final = 300.0
FINISHED: Final = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED})

JobKey = Key
PodMutator = Callable[[dict[str, Any]], dict[str, Any]]


class SyncFailure(Exception):
    """A step of a sync that failed and is worth retrying (with back-off) later."""


@dataclass(slots=True)
class Parsed:
    """A job's spec as read at one generation, with its plugins (or why it cannot be)."""

    generation: int
    view: JobView | None
    error: JobSpecError | None
    plugins: list[JobPlugin] = field(default_factory=list)
    plugin_error: str = ""


class JobState(Reconciler[Request]):
    """The controller's state, marked dirty by :class:`Request` (a reason to look at a job)."""

    plugin_table: Mapping[str, type[JobPlugin]]
    mutate_pod: PodMutator | None
    max_requeue: int
    #: A job that finishes is killed in the same pass (one status write); False: as Volcano,
    #: the finished phase is written and the kill follows on the next look (tests compare).
    finish_in_one_write: bool
    metrics: ControllerMetrics | None
    queues: QueueStates
    # Caches fed by the watches.
    jobs: dict[JobKey, dict[str, Any]]
    #: Pods of each job by name (the job's by its ``volcano.sh/job-name`` annotation).
    pods: dict[JobKey, dict[str, dict[str, Any]]]
    podgroups: dict[JobKey, dict[str, Any]]
    priority_classes: dict[str, int]
    _queue_of_pg: dict[JobKey, str]
    _pgs_per_queue: dict[str, int]
    #: Commands seen and not yet consumed.
    _commands: list[dict[str, Any]]
    #: Uids of pods this controller deleted; their last updates are not news.
    _deleted: set[str]
    # Sync: parsed specs by job uid, and the generation whose plugin objects were refreshed.
    _parsed: dict[str, Parsed]
    _updated_generation: dict[str, int]
    # Timers: delayed actions by job and pod, the heap of all timers, retries, TTLs.
    _delayed: dict[JobKey, dict[str, Delayed]]
    _timers: list[Timer]
    _serial: int
    _attempts: dict[Request, int]
    _ttl_timers: dict[str, Timer]
    #: Requests waiting, by job, in the lanes of new and synced jobs.
    _lanes: RequestLanes
    #: The PodGroup condition last reported on each job as ``PodGroupPending``, and when
    #: (monotonic seconds): a sync between two scheduler cycles does not repeat it.
    _pending_reported: dict[JobKey, tuple[tuple[str, ...], float]]
    #: Jobs whose finish took its next look ahead (:meth:`JobSync._finish`); that look's
    #: request is queued still, and the syncs that coalesce with it do not run again.
    _looked_ahead: set[JobKey]
    #: The status being written on each job: the watch's echo of our own write is not news.
    _status_writing: dict[JobKey, dict[str, Any]]

    async def _event(self, job: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        await self.recorder.record(job_ref(job), kind, str(reason), message)

    def _since_created(self, job: Mapping[str, Any], when: str) -> float:
        created = job["metadata"].get("creationTimestamp")
        if not created or not when:
            return 0.0
        return (parse_time(when) - parse_time(created)).total_seconds()


# --- readers of objects ----------------------------------------------------------------------


def rv_newer(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    return old is None or newer(new, old)


def owner_job(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller ownerReference of ``obj`` when it is a vcjob."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (
            ref.get("controller")
            and ref.get("kind") == "Job"
            and ref.get("apiVersion") == k.BATCH_V1ALPHA1
        ):
            return ref
    return None


def job_ref(job: Mapping[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    return {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", "default"),
        "uid": meta.get("uid", ""),
    }


def job_phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def pg_phase(pg: Mapping[str, Any]) -> str:
    return str((pg.get("status") or {}).get("phase") or "")


def task_of(pod: Mapping[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(k.TASK_SPEC_KEY)
