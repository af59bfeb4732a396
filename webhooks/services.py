"""Volcano's admission services, under its paths and webhook names (``/jobs/validate``,
``validatejob.volcano.sh``, ...): one per path, each a rule from :mod:`stromboli.core.admission`
bound to the resource and operations it admits.

A service turns an :class:`~stromboli.webhooks.review.AdmissionRequest` into a
:class:`~stromboli.webhooks.review.Verdict`: mutating services answer with the JSON patch from
the object the API server sent to the one the rule returns, validating services with the rule's
reasons joined as Volcano joins them. Rules that need the cluster (queues for jobs, PodGroups
and queues, the namespace for PodGroups) read a :class:`ClusterSnapshot`: what the webhook's
watch of queues and namespaces held when the request arrived. Reading the API server per
admission collapsed under load (every request one list, behind the client's rate limit), and
a snapshot that is never changed once taken lets a rule run on a worker thread, off the loop.
Rules are plain functions, so the whole answer is computed without awaiting anything.

With ``--queue-policy`` the vcjob, PodGroup and pod rules also apply the queue policy
(:mod:`stromboli.core.admission.policyrules`): mutation fills in the namespace's default
queue, validation adds the policy's refusals to Volcano's. The policy in force is read once
per review from :attr:`AdmissionOptions.queue_policy`, which a reloaded file swaps whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from stromboli.core.admission.enrol import EnrolOptions, Lineage, enrol_pod
from stromboli.core.admission.job import admission_message, validate_job_create, validate_job_update
from stromboli.core.admission.jobsize import MAX_JOB_REPLICAS
from stromboli.core.admission.mutate import mutate_job, mutate_podgroup, mutate_queue
from stromboli.core.admission.pod import validate_pod_create
from stromboli.core.admission.podgroup import validate_podgroup_create
from stromboli.core.admission.policy import EMPTY_POLICY, PolicySource, QueuePolicy
from stromboli.core.admission.policyrules import violations, with_default_queue
from stromboli.core.admission.queue import (
    DEFAULT_MAX_QUEUE_DEPTH,
    validate_queue,
    validate_queue_delete,
)
from stromboli.core.admission.resourcegroups import ResourceGroup
from stromboli.core.api import constants as k
from stromboli.core.cluster.store import Obj
from stromboli.core.logsafe import log_safe
from stromboli.webhooks.jsonpatch import json_diff
from stromboli.webhooks.review import AdmissionRequest, Verdict

log = logging.getLogger(__name__)

CREATE: Final = "CREATE"
UPDATE: Final = "UPDATE"
DELETE: Final = "DELETE"

DEFAULT_ENABLED_ADMISSION: Final = (
    "/jobs/mutate,/jobs/validate,/podgroups/mutate,/pods/validate,/pods/mutate,"
    "/queues/mutate,/queues/validate"
)


@dataclass(frozen=True, slots=True)
class AdmissionOptions:
    """The webhook-manager flags the rules read."""

    scheduler_names: tuple[str, ...] = (k.DEFAULT_SCHEDULER_NAME,)
    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH
    enable_queue_allocated_pods_check: bool = False
    enable_root_queue_protection: bool = True
    queue_policy: PolicySource = field(default_factory=lambda: EMPTY_POLICY)
    """The queue policy in force (``--queue-policy``); the empty one allows everything."""
    resource_groups: tuple[ResourceGroup, ...] = ()
    """``--admission-conf``: Volcano's resource groups, applied by ``/pods/mutate``."""
    exempt_namespaces: frozenset[str] = frozenset({"kube-system"})
    """Namespaces whose pods ``/pods/mutate`` never changes (the server adds its own)."""
    max_job_replicas: int = MAX_JOB_REPLICAS
    """``--max-job-replicas``: pods one vcjob may ask for over all its tasks."""

    def policy(self) -> QueuePolicy:
        return self.queue_policy.current()


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The cluster state the rules compare an object with: queues by name, and the
    annotations of each namespace. Taken once per request and never changed afterwards."""

    queues: Mapping[str, Obj] = field(default_factory=dict)
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    lineage: Callable[[Mapping[str, Any], str], Lineage] | None = None
    """A pod's owners and gang (:meth:`~stromboli.webhooks.owners.OwnerCache.lineage`):
    live rather than snapshotted, its records are immutable and replaced whole."""

    def queue(self, name: str) -> Obj | None:
        return self.queues.get(name)

    def namespace_annotations(self, namespace: str) -> dict[str, str]:
        return dict(self.namespaces.get(namespace) or {})


Rule = Callable[[AdmissionRequest, ClusterSnapshot, AdmissionOptions], Verdict]


@dataclass(frozen=True, slots=True)
class AdmissionService:
    """One webhook: where it is served, what it admits, and the rule that answers."""

    path: str
    webhook_name: str
    mutating: bool
    group: str
    version: str
    resource: str
    kind: str
    operations: tuple[str, ...]
    rule: Rule = field(repr=False)
    reads_cluster: bool = False
    """Whether the rule reads queues or namespaces (answered 503 until they are listed)."""
    policy_reads_cluster: bool = False
    """Whether it reads them when a queue policy is in force (namespace default queues)."""

    def needs_cluster(self, options: AdmissionOptions) -> bool:
        """Whether a review must wait for the first listing of queues and namespaces."""
        return self.reads_cluster or (self.policy_reads_cluster and options.policy().active)

    @property
    def configuration_name(self) -> str:
        """Name of its Mutating/ValidatingWebhookConfiguration, as Volcano names it."""
        return "volcano-admission-service" + self.path.replace("/", "-")

    def mismatch(self, request: AdmissionRequest) -> str:
        """Why ``request`` is not for this service ("" when it is)."""
        if request.kind != self.kind or request.group != self.group:
            group = f"{request.group}/" if request.group else ""
            return (
                f"{self.path} admits {self.group or 'core'} {self.kind} objects, "
                f"got {group}{request.version} {request.kind or '(no kind)'}"
            )
        return ""


def _refusal(errors: list[str]) -> Verdict:
    return Verdict.deny(admission_message(errors)) if errors else Verdict.allow()


def _mutation(request: AdmissionRequest, mutated: Mapping[str, Any]) -> Verdict:
    return Verdict.allow(json_diff(request.object, dict(mutated)))


def _policy_namespace(request: AdmissionRequest, obj: Mapping[str, Any]) -> str:
    return request.namespace or str((obj.get("metadata") or {}).get("namespace") or "")


def _policy_refusals(
    request: AdmissionRequest,
    obj: Mapping[str, Any],
    cluster: ClusterSnapshot,
    options: AdmissionOptions,
) -> list[str]:
    """The queue policy's reasons to refuse creating ``obj``; the cluster's queues narrow
    the ones it names instead (unless none are listed yet)."""
    return violations(
        options.policy(),
        obj,
        options.scheduler_names,
        known_queues=cluster.queues or None,
        namespace=_policy_namespace(request, obj),
    )


def _policy_default(
    request: AdmissionRequest,
    obj: dict[str, Any],
    cluster: ClusterSnapshot,
    options: AdmissionOptions,
) -> dict[str, Any]:
    """``obj`` with the namespace's default queue when it chose none (queue policy)."""
    namespace = _policy_namespace(request, obj)
    return with_default_queue(
        options.policy(),
        obj,
        cluster.namespace_annotations(namespace),
        options.scheduler_names,
        namespace=namespace,
    )


def _needs_object(request: AdmissionRequest) -> dict[str, Any]:
    if request.object is None:
        raise MissingObjectError(f"a {request.operation} of {request.kind} must carry the object")
    return request.object


class MissingObjectError(ValueError):
    """An AdmissionReview without the object its operation needs."""


# --- rules ---------------------------------------------------------------------------------------


def _mutate_job(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    job = _policy_default(request, _needs_object(request), cluster, options)
    return _mutation(request, mutate_job(job, options.scheduler_names[0]))


def _validate_job(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    job = _needs_object(request)
    if request.operation == UPDATE and request.old_object is not None:
        return _refusal(
            validate_job_update(request.old_object, job, max_replicas=options.max_job_replicas)
        )
    errors = validate_job_create(job, cluster.queues, max_replicas=options.max_job_replicas)
    return _refusal(errors + _policy_refusals(request, job, cluster, options))


def _mutate_podgroup(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    podgroup = _needs_object(request)
    namespace = request.namespace or (podgroup.get("metadata") or {}).get("namespace") or ""
    annotations = cluster.namespace_annotations(namespace)
    podgroup = mutate_podgroup(podgroup, annotations)
    return _mutation(request, _policy_default(request, podgroup, cluster, options))


def _validate_podgroup(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    podgroup = _needs_object(request)
    name = str((podgroup.get("spec") or {}).get("queue") or "")
    queue = cluster.queue(name) if name else None
    errors = validate_podgroup_create(podgroup, {name: queue} if queue else {})
    return _refusal(errors + _policy_refusals(request, podgroup, cluster, options))


def _mutate_pod(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    """Volcano's resource groups (``--admission-conf``), then enrolment of the pods of
    enrolled namespaces (:mod:`stromboli.core.admission.enrol`)."""
    pod = _needs_object(request)
    namespace = request.namespace or str((pod.get("metadata") or {}).get("namespace") or "")
    lineage = cluster.lineage
    result = enrol_pod(
        pod,
        namespace,
        cluster.namespace_labels.get(namespace) or {},
        cluster.namespace_annotations(namespace),
        EnrolOptions(options.scheduler_names, options.exempt_namespaces, options.resource_groups),
        (lambda: lineage(pod, namespace)) if lineage is not None else Lineage,
    )
    for warning in result.warnings:
        log.warning("pod %s/%s: %s", log_safe(namespace), log_safe(request.name), log_safe(warning))
    return _mutation(request, _policy_default(request, result.pod, cluster, options))


def _validate_pod(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    pod = _needs_object(request)
    errors = validate_pod_create(pod, options.scheduler_names)
    return _refusal(errors + _policy_refusals(request, pod, cluster, options))


def _mutate_queue(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    return _mutation(request, mutate_queue(_needs_object(request)))


def _validate_queue(
    request: AdmissionRequest, cluster: ClusterSnapshot, options: AdmissionOptions
) -> Verdict:
    queues = cluster.queues
    if request.operation == DELETE:
        name = request.name or ((request.old_object or {}).get("metadata") or {}).get("name", "")
        return _refusal(
            validate_queue_delete(
                name,
                queues,
                enable_allocated_pods_check=options.enable_queue_allocated_pods_check,
            )
        )
    old = request.old_object if request.operation == UPDATE else None
    return _refusal(
        validate_queue(
            _needs_object(request),
            queues,
            old,
            max_queue_depth=options.max_queue_depth,
            enable_root_queue_protection=options.enable_root_queue_protection,
        )
    )


def _service(
    path: str,
    name: str,
    group_version: str,
    kind: str,
    operations: tuple[str, ...],
    rule: Rule,
    reads_cluster: bool = False,
    policy_reads_cluster: bool = False,
) -> AdmissionService:
    group, _, version = group_version.rpartition("/")
    return AdmissionService(
        path=path,
        webhook_name=name,
        mutating=path.endswith("/mutate"),
        group=group,
        version=version,
        resource=path.split("/")[1],
        kind=kind,
        operations=operations,
        rule=rule,
        reads_cluster=reads_cluster,
        policy_reads_cluster=policy_reads_cluster,
    )


_SCHED = k.SCHEDULING_V1BETA1
SERVICES: Final[dict[str, AdmissionService]] = {
    s.path: s
    for s in (
        _service(
            "/jobs/mutate",
            "mutatejob.volcano.sh",
            k.BATCH_V1ALPHA1,
            "Job",
            (CREATE,),
            _mutate_job,
            policy_reads_cluster=True,
        ),
        _service(
            "/jobs/validate",
            "validatejob.volcano.sh",
            k.BATCH_V1ALPHA1,
            "Job",
            (CREATE, UPDATE),
            _validate_job,
            reads_cluster=True,
        ),
        _service(
            "/podgroups/mutate",
            "mutatepodgroup.volcano.sh",
            _SCHED,
            "PodGroup",
            (CREATE,),
            _mutate_podgroup,
            reads_cluster=True,
        ),
        _service(
            "/podgroups/validate",
            "validatepodgroup.volcano.sh",
            _SCHED,
            "PodGroup",
            (CREATE,),
            _validate_podgroup,
            reads_cluster=True,
        ),
        _service(
            "/pods/mutate",
            "mutatepod.volcano.sh",
            k.CORE_V1,
            "Pod",
            (CREATE,),
            _mutate_pod,
            policy_reads_cluster=True,
        ),
        _service(
            "/pods/validate", "validatepod.volcano.sh", k.CORE_V1, "Pod", (CREATE,), _validate_pod
        ),
        _service(
            "/queues/mutate", "mutatequeue.volcano.sh", _SCHED, "Queue", (CREATE,), _mutate_queue
        ),
        _service(
            "/queues/validate",
            "validatequeue.volcano.sh",
            _SCHED,
            "Queue",
            (CREATE, UPDATE, DELETE),
            _validate_queue,
            reads_cluster=True,
        ),
    )
}
"""Every service this server can run, by path."""


def enabled_services(enabled_admission: str) -> list[AdmissionService]:
    """The services ``--enabled-admission`` names (comma-separated paths), in its order."""
    chosen: list[AdmissionService] = []
    for raw in enabled_admission.split(","):
        path = raw.strip()
        if not path:
            continue
        service = SERVICES.get(path)
        if service is None:
            raise ValueError(
                f"--enabled-admission: {path!r} is not an admission this server serves; "
                f"known: {', '.join(SERVICES)}"
            )
        if service not in chosen:
            chosen.append(service)
    return chosen
