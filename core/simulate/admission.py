"""What the API server's admission does to the simulator's input before it is stored.

Volcano's admission rules (the same functions the webhook serves: mutation, then validation
of Queues, PodGroups, vcjobs and pods) plus the one built-in admission step the scheduler
depends on: resolving a pod's ``priorityClassName`` into ``spec.priority``. A refused object
stops the run with the webhook's message, as ``kubectl create`` would fail.
"""

from __future__ import annotations

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
from stromboli.core.cluster.validation import object_problems, status_problems


class AdmissionError(ValueError):
    """An object Volcano's webhook would refuse."""


def _open_queue(name: str) -> dict:
    spec = {"weight": 1, "reclaimable": name != k.ROOT_QUEUE}
    if name != k.ROOT_QUEUE:
        spec["parent"] = k.ROOT_QUEUE
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": "Open"},
    }


class Admission:
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

    @staticmethod
    def _refuse(webhook: str, errors: list[str]) -> None:
        if errors:
            raise AdmissionError(
                f'admission webhook "{webhook}" denied the request: {admission_message(errors)}'
            )

    @staticmethod
    def _invalid(kind: str, name: str, problems: list[str]) -> None:
        """The API server's own refusal (``Pod "p" is invalid: spec.containers: ...``)."""
        if problems:
            raise AdmissionError(f'{kind} "{name}" is invalid: ' + ", ".join(problems))

    def admit(self, obj: dict) -> dict:
        obj = enforce(
            self.queue_policy, obj, self.namespace_annotations, self.scheduler_names, self.queues
        )
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        meta = obj.get("metadata") or {}
        if api_version == k.CORE_V1 and isinstance(kind, str):
            problems = object_problems(api_version, kind, obj)
            self._invalid(
                kind, str(meta.get("name")), problems + status_problems(api_version, kind, obj)
            )
        if kind == "PriorityClass":
            value = int(obj.get("value") or 0)
            self.priority_classes[meta["name"]] = value
            if obj.get("globalDefault"):
                self.global_default = value
        elif kind == "Namespace":
            self.namespace_annotations[meta["name"]] = dict(meta.get("annotations") or {})
        elif kind == "Queue" and api_version == k.SCHEDULING_V1BETA1:
            queue = mutate_queue(obj)
            self._refuse("validatequeue.volcano.sh", validate_queue(queue, self.queues))
            state = (queue.get("status") or {}).get("state") or "Open"
            self.queues[meta["name"]] = {
                **queue,
                "status": {**(queue.get("status") or {}), "state": state},
            }
            return queue
        elif kind == "PodGroup" and api_version == k.SCHEDULING_V1BETA1:
            namespace = meta.get("namespace", "default")
            podgroup = mutate_podgroup(obj, self.namespace_annotations.get(namespace, {}))
            self._refuse(
                "validatepodgroup.volcano.sh", validate_podgroup_create(podgroup, self.queues)
            )
            return podgroup
        elif kind == "Job" and api_version == k.BATCH_V1ALPHA1:
            self._refuse("validatejob.volcano.sh", validate_job_create(obj, self.queues))
        elif kind == "Pod":
            self._refuse("validatepod.volcano.sh", validate_pod_create(obj, self.scheduler_names))
            return self.pod_priority(obj)
        elif kind == "CronJob" and api_version == k.BATCH_V1ALPHA1:
            self._refuse("validatecronjob.volcano.sh", validate_cronjob(obj))
            self._refuse("validatecronjob.volcano.sh", self._job_template_problems(obj))
        elif kind == "JobFlow" and api_version == k.FLOW_V1ALPHA1:
            self._refuse("validatejobflow.volcano.sh", validate_jobflow(obj))
        elif kind == "HyperNode" and api_version == k.TOPOLOGY_V1ALPHA1:
            self._refuse("validatehypernode.volcano.sh", validate_hypernode(obj, self.hypernodes))
            self.hypernodes[meta["name"]] = obj
        return obj

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

    def pod_priority(self, pod: dict) -> dict:
        spec = pod.get("spec") or {}
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
