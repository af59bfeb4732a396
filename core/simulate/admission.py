"""What the API server's admission does to an object the simulator is about to store.

One pass, :meth:`Admission.admit`, in the API server's order:

1. mutating: the built-in ``Priority`` plugin (a pod's ``priorityClassName`` resolved into
   ``spec.priority``), then Volcano's mutating webhooks (Queue, PodGroup and vcjob defaults,
   the same functions the webhook serves);
2. schema: the kind's model (:func:`~stromboli.core.api.registry.validate_object`, which also
   applies the CRD defaults) and the API server's own checks of core objects;
3. validating: Volcano's validating webhooks (Queues, PodGroups, vcjobs, pods, CronJobs,
   JobFlows, HyperNodes).

Every object takes this pass once, when it is submitted: the input's objects as they arrive,
and the pods and jobs the controllers create. A refused object raises :class:`AdmissionError`
with the webhook's or the API server's message; the engine records an input object's refusal
as an outcome (the others still run, as with ``kubectl apply -f``). The loader checks
shapes earlier (:func:`check_schema`) so that a malformed file fails before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.admission.cronjob import validate_cronjob
from stromboli.core.admission.hypernode import validate_hypernode
from stromboli.core.admission.job import admission_message, validate_job_create
from stromboli.core.admission.jobflow import validate_jobflow
from stromboli.core.admission.mutate import mutate_job, mutate_podgroup, mutate_queue
from stromboli.core.admission.pod import validate_pod_create
from stromboli.core.admission.podgroup import validate_podgroup_create
from stromboli.core.admission.policy import EMPTY_POLICY, QueuePolicy
from stromboli.core.admission.policyrules import enforce
from stromboli.core.admission.queue import validate_queue
from stromboli.core.api import constants as k
from stromboli.core.api.registry import InvalidObjectError, kind_info, validate_object
from stromboli.core.cluster.validation import object_problems, status_problems
from stromboli.core.simulate.inert import simulator_kind
from stromboli.core.simulate.workloads.validation import qualified_kind, workload_problems


class AdmissionError(ValueError):
    """An object Volcano's webhook would refuse."""


def _open_queue(name: str) -> dict:
    spec: dict[str, Any] = {"weight": 1, "reclaimable": name != k.ROOT_QUEUE}
    if name != k.ROOT_QUEUE:
        spec["parent"] = k.ROOT_QUEUE
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": "Open"},
    }


def webhook_defaults(obj: dict) -> dict:
    """Volcano's mutating webhooks that need nothing but the object: Queue and vcjob
    defaults. (The PodGroup's needs its namespace, see :meth:`Admission.mutate`.)"""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind == "Queue" and api_version == k.SCHEDULING_V1BETA1:
        return mutate_queue(obj)
    if kind == "Job" and api_version == k.BATCH_V1ALPHA1:
        return mutate_job(obj)  # task names, minAvailable, queue, maxRetry, plugins
    return obj


def check_schema(obj: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """The schema step of the admission pass, run early by the loader on a document as given.

    The mutating rules that need no cluster state run first, as in the pass (a Queue's weight
    0 becomes 1 before the schema's minimum of 1 applies); those that need the state
    (a namespace's queue, a PriorityClass) wait for the pass. Returns the checked copy; raises
    :class:`~stromboli.core.api.registry.InvalidObjectError` naming ``where``, the object and
    the field.
    """
    return validate_object(webhook_defaults(dict(obj)), where)


class Admission:
    """The admission chain and the little cluster state its rules read, fed by what it admits.

    The state is what was admitted, not what the store holds now: PriorityClasses, Namespace
    annotations, Queues (``root`` and ``default`` first: the scheduler creates them) and
    HyperNodes.
    """

    def __init__(self, scheduler_names: set[str] | None = None) -> None:
        self.priority_classes: dict[str, int] = {}
        self.global_default = 0
        self.namespace_annotations: dict[str, dict[str, str]] = {}
        self.scheduler_names = scheduler_names or {k.DEFAULT_SCHEDULER_NAME}
        #: Queues admitted so far (the scheduler creates ``root`` and ``default`` first).
        self.queues: dict[str, dict] = {
            name: _open_queue(name) for name in (k.ROOT_QUEUE, k.DEFAULT_QUEUE)
        }
        #: HyperNodes admitted so far, for the member-cycle check.
        self.hypernodes: dict[str, dict] = {}
        #: The queue policy (``--queue-policy``): the webhook's default queues and refusals.
        self.queue_policy: QueuePolicy = EMPTY_POLICY

    def admit(self, obj: dict) -> dict:
        """``obj`` mutated, schema-checked and validated, ready to store; a refusal raises an
        :class:`AdmissionError` (a :class:`ValueError`) with the webhook's or the API server's
        message, a PriorityClass that does not exist included."""
        obj = enforce(
            self.queue_policy, obj, self.namespace_annotations, self.scheduler_names, self.queues
        )
        checked = self.check_schema(self.mutate(obj))
        self.check_core(checked)
        self.validate(checked)
        self.record(checked)
        return checked

    # -- 1. mutating --------------------------------------------------------------------------

    def mutate(self, obj: dict) -> dict:
        """The mutating stage: built-in plugins, then Volcano's mutating webhooks."""
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind == "Pod" and api_version == k.CORE_V1:
            obj = self.pod_priority(obj)
        obj = webhook_defaults(obj)
        if kind == "PodGroup" and api_version == k.SCHEDULING_V1BETA1:
            meta = obj.get("metadata")
            namespace = meta.get("namespace", "default") if isinstance(meta, dict) else "default"
            obj = mutate_podgroup(obj, self.namespace_annotations.get(namespace, {}))
        return obj

    def pod_priority(self, pod: dict) -> dict:
        """The ``Priority`` admission plugin: ``spec.priority`` from the pod's PriorityClass
        (or the global default); a class that does not exist refuses the pod."""
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return pod  # not an object: the schema names the field
        if spec.get("priority") is not None:
            return pod
        class_name = spec.get("priorityClassName")
        if class_name:
            value = self.priority_classes.get(class_name)
            if value is None:
                raise AdmissionError(
                    f"spec.priorityClassName: no PriorityClass named {class_name!r}"
                )
        else:
            value = self.global_default
        return {**pod, "spec": {**spec, "priority": value}}

    # -- 2. schema ----------------------------------------------------------------------------

    @staticmethod
    def check_schema(obj: dict) -> dict:
        """The kind's model, with the CRD defaults applied; a refusal reads as the API
        server's (``PodGroup "g" is invalid: spec.queue: ...``)."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if (
            isinstance(api_version, str)
            and isinstance(kind, str)
            and kind_info(api_version, kind) is None
            and simulator_kind(api_version, kind) is not None
        ):
            return obj  # a Kubernetes kind outside Stromboli's table: the loader checked it
        try:
            return validate_object(obj)
        except InvalidObjectError as err:
            if not err.problems:
                raise
            details = ", ".join(
                f"{path}: {message}" if path else message for path, message in err.problems
            )
            raise AdmissionError(f'{err.kind} "{err.name}" is invalid: {details}') from None

    @staticmethod
    def check_core(obj: dict) -> None:
        """The API server's own refusal of a core object (``Pod "p" is invalid: ...``) or of
        a workload the simulator runs (``Job.batch "pi" is invalid: ...``)."""
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        workload = workload_problems(obj)
        if workload:
            name = (obj.get("metadata") or {}).get("name")
            raise AdmissionError(
                f'{qualified_kind(obj)} "{name}" is invalid: ' + ", ".join(workload)
            )
        if api_version != k.CORE_V1 or not isinstance(kind, str):
            return
        problems = object_problems(api_version, kind, obj) + status_problems(api_version, kind, obj)
        if problems:
            name = (obj.get("metadata") or {}).get("name")
            raise AdmissionError(f'{kind} "{name}" is invalid: ' + ", ".join(problems))

    # -- 3. validating ------------------------------------------------------------------------

    @staticmethod
    def _refuse(webhook: str, errors: list[str]) -> None:
        if errors:
            raise AdmissionError(
                f'admission webhook "{webhook}" denied the request: {admission_message(errors)}'
            )

    def validate(self, obj: dict) -> None:
        """The validating stage: Volcano's validating webhooks, against the admitted state."""
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind == "Queue" and api_version == k.SCHEDULING_V1BETA1:
            self._refuse("validatequeue.volcano.sh", validate_queue(obj, self.queues))
        elif kind == "PodGroup" and api_version == k.SCHEDULING_V1BETA1:
            self._refuse("validatepodgroup.volcano.sh", validate_podgroup_create(obj, self.queues))
        elif kind == "Job" and api_version == k.BATCH_V1ALPHA1:
            self._refuse("validatejob.volcano.sh", validate_job_create(obj, self.queues))
        elif kind == "Pod" and api_version == k.CORE_V1:
            self._refuse("validatepod.volcano.sh", validate_pod_create(obj, self.scheduler_names))
        elif kind == "CronJob" and api_version == k.BATCH_V1ALPHA1:
            self._refuse("validatecronjob.volcano.sh", validate_cronjob(obj))
            self._refuse("validatecronjob.volcano.sh", self._job_template_problems(obj))
        elif kind == "JobFlow" and api_version == k.FLOW_V1ALPHA1:
            self._refuse("validatejobflow.volcano.sh", validate_jobflow(obj))
        elif kind == "HyperNode" and api_version == k.TOPOLOGY_V1ALPHA1:
            self._refuse("validatehypernode.volcano.sh", validate_hypernode(obj, self.hypernodes))

    def _job_template_problems(self, cronjob: dict[str, Any]) -> list[str]:
        """The CronJob's jobTemplate checked now as the job webhook will check every job it
        makes, so that a bad template is refused once at the start rather than on every run."""
        spec = cronjob.get("spec") or {}
        template = spec.get("jobTemplate") or {}
        name = f"{(cronjob.get('metadata') or {}).get('name')}-0"
        job = {
            "apiVersion": k.BATCH_V1ALPHA1,
            "kind": "Job",
            "metadata": {"name": name, "namespace": "default"},
            "spec": template.get("spec") or {},
        }
        job = mutate_job(job)
        # The queue may arrive later than the CronJob; it is checked when each job is made.
        queue = str((job.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE)
        errors = validate_job_create(job, {**self.queues, queue: _open_queue(queue)})
        return [f"spec.jobTemplate: {e}" for e in errors]

    # -- what the rules read next -------------------------------------------------------------

    def record(self, obj: dict) -> None:
        """Remember what later objects' admission reads."""
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        meta = obj.get("metadata") or {}
        if kind == "PriorityClass":
            value = int(obj.get("value") or 0)
            self.priority_classes[meta["name"]] = value
            if obj.get("globalDefault"):
                self.global_default = value
        elif kind == "Namespace":
            self.namespace_annotations[meta["name"]] = dict(meta.get("annotations") or {})
        elif kind == "Queue" and api_version == k.SCHEDULING_V1BETA1:
            status = obj.get("status") or {}
            self.queues[meta["name"]] = {
                **obj,
                "status": {**status, "state": status.get("state") or "Open"},
            }
        elif kind == "HyperNode" and api_version == k.TOPOLOGY_V1ALPHA1:
            self.hypernodes[meta["name"]] = obj
