"""Decisions made with a queue policy (:mod:`.policy`): the default queue at mutation, the
refusals at validation, and both at once for the simulator.

What the policy sees of an object is a :class:`Workload`, one per kind:

- a vcjob: ``spec.queue``; pods = the sum of its tasks' ``replicas``; resources = each task's
  pod request × its replicas; priority classes of the job and of each task template; the
  scheduler of each task (its template's ``schedulerName``, else the job's);
- a PodGroup: ``spec.queue``; pods = ``minMember``; resources = ``minResources``;
- a pod that one of our schedulers places and whose group is made from the pod itself (it
  names none, or enrolment's ``podgroup-<uid>``): the ``scheduling.volcano.sh/queue-name``
  annotation; pods = ``scheduling.volcano.sh/group-min-member`` (else 1), as the PodGroup
  controller sizes the group; resources = its request as Kubernetes counts it (containers
  and sidecars, or the largest init container, plus overhead) × that many. A pod in a
  framework's gang is judged through that PodGroup.

A queue left empty or ``default`` (what Volcano fills in) counts as not chosen: it gets the
namespace's ``defaultQueue``, unless the namespace's ``scheduling.volcano.sh/queue-name``
annotation already chooses one (Volcano's own rule, applied first). ``preemptableOnly`` asks
for ``volcano.sh/preemptable`` true on the object itself (annotation, else label), since a
PodGroup's default is false. Every refusal ends with the queues the namespace may use that
would take the object.

The functions never raise on a malformed object: they judge what they can read and leave the
shape to Volcano's rules, which run beside them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from stromboli.core.admission.enrol import FALLBACK_PREFIX
from stromboli.core.admission.mutate import mutate_podgroup
from stromboli.core.admission.policy import QueueLimits, QueuePolicy
from stromboli.core.api import constants as k
from stromboli.core.api.jobflags import parse_bool
from stromboli.core.api.quantity import format_bytes, parse_quantity

MAX_NAMED_QUEUES: Final = 10
"""Queues named in a refusal; the rest are counted."""
WEBHOOKS: Final = {
    "Job": "validatejob.volcano.sh",
    "PodGroup": "validatepodgroup.volcano.sh",
    "Pod": "validatepod.volcano.sh",
}
"""The webhook that refuses each kind (the simulator words its refusals the same way)."""
_BYTES_RESOURCES: Final = ("memory", "ephemeral-storage", "hugepages-")


class PolicyRefusal(ValueError):
    """An object the queue policy refuses; the message is the webhook's."""


@dataclass(slots=True)
class Workload:
    """An object as the policy judges it; resource totals are computed on demand, for the
    resources some limit names, and kept."""

    kind: str
    namespace: str
    queue: str
    queue_field: str
    pods: int
    pods_field: str
    priority_classes: list[tuple[str, str]]
    """(name, field) of every priority class the object names."""
    scheduler_names: list[tuple[str, str]]
    preemptable: bool
    preemptable_field: str
    resources_field: str
    request: Callable[[str], Fraction] = field(repr=False)
    """The object's total request of one resource; raises ValueError naming the field."""
    _totals: dict[str, Fraction | str] = field(default_factory=dict, repr=False)

    def total(self, resource: str) -> Fraction | str:
        """The total of ``resource``, or why it cannot be read."""
        if resource not in self._totals:
            try:
                self._totals[resource] = self.request(resource)
            except ValueError as err:
                self._totals[resource] = str(err)
        return self._totals[resource]


# --- reading objects -----------------------------------------------------------------------------


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _preemptable(meta: Mapping[str, Any]) -> bool:
    """Volcano's reading: the annotation, else the label, as a Go boolean."""
    value = _dict(meta.get("annotations")).get(k.PREEMPTABLE_KEY)
    if value is None:
        value = _dict(meta.get("labels")).get(k.PREEMPTABLE_KEY)
    try:
        return isinstance(value, str) and parse_bool(value)
    except ValueError:
        return False


def _amount(value: object, where: str) -> Fraction:
    if value is None:
        return Fraction(0)
    amount = parse_quantity(value, where)
    if amount < 0:
        raise ValueError(f"{where}: must not be negative")
    return amount


def _container_request(container: object, resource: str, where: str) -> Fraction:
    """A container's request of ``resource``; a limit stands in for a missing request, as
    the API server defaults it."""
    resources = _dict(_dict(container).get("resources"))
    requests = _dict(resources.get("requests"))
    if resource in requests:
        return _amount(requests[resource], f"{where}.resources.requests[{resource!r}]")
    limits = _dict(resources.get("limits"))
    return _amount(limits.get(resource), f"{where}.resources.limits[{resource!r}]")


def pod_request(spec: object, resource: str, where: str = "spec") -> Fraction:
    """A pod's request of ``resource`` as the scheduler counts it: its containers and
    sidecars (init containers that keep running), or the largest init container with the
    sidecars started before it, whichever is more; plus the pod's overhead."""
    spec = _dict(spec)
    running = Fraction(0)
    for index, container in enumerate(_list(spec.get("containers"))):
        running += _container_request(container, resource, f"{where}.containers[{index}]")
    sidecars = Fraction(0)
    init_peak = Fraction(0)
    for index, container in enumerate(_list(spec.get("initContainers"))):
        amount = _container_request(container, resource, f"{where}.initContainers[{index}]")
        if _dict(container).get("restartPolicy") == "Always":
            sidecars += amount
        else:
            init_peak = max(init_peak, sidecars + amount)
    overhead = _amount(_dict(spec.get("overhead")).get(resource), f"{where}.overhead")
    return max(running + sidecars, init_peak) + overhead


def _job_workload(job: Mapping[str, Any], default_scheduler: str) -> Workload:
    meta = _dict(job.get("metadata"))
    spec = _dict(job.get("spec"))
    tasks = [(i, _dict(t)) for i, t in enumerate(_list(spec.get("tasks")))]
    job_scheduler = _str(spec.get("schedulerName"))
    classes = []
    if _str(spec.get("priorityClassName")):
        classes.append((spec["priorityClassName"], "spec.priorityClassName"))
    schedulers: dict[str, str] = {}
    for index, task in tasks:
        template_spec = _dict(_dict(task.get("template")).get("spec"))
        where = f"spec.tasks[{index}].template.spec"
        if _str(template_spec.get("priorityClassName")):
            classes.append((template_spec["priorityClassName"], f"{where}.priorityClassName"))
        own = _str(template_spec.get("schedulerName"))
        if own:
            schedulers.setdefault(own, f"{where}.schedulerName")
        else:
            schedulers.setdefault(job_scheduler or default_scheduler, "spec.schedulerName")

    def request(resource: str) -> Fraction:
        total = Fraction(0)
        for index, task in tasks:
            replicas = _count(task.get("replicas"))
            if replicas:
                template_spec = _dict(task.get("template")).get("spec")
                where = f"spec.tasks[{index}].template.spec"
                total += replicas * pod_request(template_spec, resource, where)
        return total

    return Workload(
        kind="Job",
        namespace=_str(meta.get("namespace")),
        queue=_str(spec.get("queue")) or k.DEFAULT_QUEUE,
        queue_field="spec.queue",
        pods=sum(_count(task.get("replicas")) for _, task in tasks),
        pods_field="the sum of spec.tasks[*].replicas",
        priority_classes=classes,
        scheduler_names=list(schedulers.items()),
        preemptable=_preemptable(meta),
        preemptable_field=f'metadata.annotations["{k.PREEMPTABLE_KEY}"]',
        resources_field="each task's pod request × its replicas",
        request=request,
    )


def _podgroup_workload(podgroup: Mapping[str, Any]) -> Workload:
    meta = _dict(podgroup.get("metadata"))
    spec = _dict(podgroup.get("spec"))
    name = _str(spec.get("priorityClassName"))
    minimum = _dict(spec.get("minResources"))
    return Workload(
        kind="PodGroup",
        namespace=_str(meta.get("namespace")),
        queue=_str(spec.get("queue")) or k.DEFAULT_QUEUE,
        queue_field="spec.queue",
        pods=_count(spec.get("minMember")),
        pods_field="spec.minMember",
        priority_classes=[(name, "spec.priorityClassName")] if name else [],
        scheduler_names=[],
        preemptable=_preemptable(meta),
        preemptable_field=f'metadata.annotations["{k.PREEMPTABLE_KEY}"]',
        resources_field="spec.minResources",
        request=lambda r: _amount(minimum.get(r), f"spec.minResources[{r!r}]"),
    )


def _pod_scheduler(pod: Mapping[str, Any]) -> str:
    return _str(_dict(pod.get("spec")).get("schedulerName")) or "default-scheduler"


def judged_pod(pod: Mapping[str, Any], scheduler_names: Collection[str]) -> bool:
    """Whether the policy judges ``pod`` itself: one of our schedulers places it, it is not
    bound already, and its PodGroup is made from it (it names none, or the ``podgroup-``
    group enrolment names); a pod in another group is judged through that group."""
    meta = _dict(pod.get("metadata"))
    group = _dict(meta.get("annotations")).get(k.GROUP_NAME_ANNOTATION)
    return (
        _pod_scheduler(pod) in scheduler_names
        and (not group or (isinstance(group, str) and group.startswith(FALLBACK_PREFIX)))
        and not _dict(pod.get("spec")).get("nodeName")
    )


def _group_size(annotations: Mapping[str, Any]) -> int:
    """The pods of a group made from this pod: ``group-min-member`` when it is a count."""
    value = annotations.get(k.GROUP_MIN_MEMBER_ANNOTATION)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 10:
        return max(1, int(value))
    return 1


def _pod_workload(pod: Mapping[str, Any]) -> Workload:
    meta = _dict(pod.get("metadata"))
    spec = _dict(pod.get("spec"))
    name = _str(spec.get("priorityClassName"))
    annotations = _dict(meta.get("annotations"))
    queue = _str(annotations.get(k.QUEUE_NAME_ANNOTATION_KEY))
    size = _group_size(annotations)
    return Workload(
        kind="Pod",
        namespace=_str(meta.get("namespace")),
        queue=queue or k.DEFAULT_QUEUE,
        queue_field=f'metadata.annotations["{k.QUEUE_NAME_ANNOTATION_KEY}"]',
        pods=size,
        pods_field=(
            f'metadata.annotations["{k.GROUP_MIN_MEMBER_ANNOTATION}"]' if size > 1 else "one pod"
        ),
        priority_classes=[(name, "spec.priorityClassName")] if name else [],
        scheduler_names=[(_pod_scheduler(pod), "spec.schedulerName")],
        preemptable=_preemptable(meta),
        preemptable_field=f'metadata.annotations["{k.PREEMPTABLE_KEY}"]',
        resources_field="the pod's request" if size == 1 else "the pod's request × min-member",
        request=lambda r: size * pod_request(spec, r),
    )


def workload(
    obj: Mapping[str, Any],
    scheduler_names: Collection[str] = (k.DEFAULT_SCHEDULER_NAME,),
    namespace: str = "",
) -> Workload | None:
    """What the policy judges of ``obj``; None for objects it does not judge. ``namespace``
    (the request's) stands in when the object names none."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    work: Workload | None = None
    if kind == "Job" and api_version == k.BATCH_V1ALPHA1:
        default = next(iter(scheduler_names), k.DEFAULT_SCHEDULER_NAME)
        work = _job_workload(obj, default)
    elif kind == "PodGroup" and api_version == k.SCHEDULING_V1BETA1:
        work = _podgroup_workload(obj)
    elif kind == "Pod" and api_version == k.CORE_V1 and judged_pod(obj, scheduler_names):
        work = _pod_workload(obj)
    if work is not None and not work.namespace:
        work.namespace = namespace or "default"
    return work


# --- validation ----------------------------------------------------------------------------------


def _shown(amount: Fraction, resource: str) -> str:
    if amount.denominator == 1 and resource.startswith(_BYTES_RESOURCES):
        return format_bytes(int(amount))
    if amount.denominator == 1:
        return str(amount.numerator)
    millis = amount * 1000
    if millis.denominator == 1:
        return f"{millis.numerator}m"
    return f"{float(amount):g}"


def _names(names: Collection[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def limit_problems(limits: QueueLimits | None, queue: str, work: Workload) -> list[str]:
    """Why ``queue``'s limits refuse ``work`` (empty when they take it)."""
    if limits is None:
        return []
    problems: list[str] = []
    allowed = limits.priority_class_names
    if allowed is not None:
        for name, where in work.priority_classes:
            if name not in allowed:
                problems.append(
                    f'queue "{queue}" does not take priorityClassName "{name}" ({where}); '
                    f"it takes: {_names(allowed)}"
                )
    most = limits.max_pods_per_job
    if most is not None and work.pods > most:
        problems.append(
            f'queue "{queue}" takes at most {most} pods per job; this {work.kind} has '
            f"{work.pods} ({work.pods_field})"
        )
    for resource, limit in limits.max_resources_per_job.items():
        total = work.total(resource)
        if isinstance(total, str):
            problems.append(f'{total}; queue "{queue}" limits {resource} per job')
        elif total > limit:
            problems.append(
                f'queue "{queue}" takes at most {limits.resource_texts.get(resource)} '
                f"{resource} per job; this {work.kind} requests {_shown(total, resource)} "
                f"({work.resources_field})"
            )
    schedulers = limits.scheduler_names
    if schedulers is not None:
        for name, where in work.scheduler_names:
            if name not in schedulers:
                problems.append(
                    f'queue "{queue}" does not take schedulerName "{name}" ({where}); '
                    f"it takes: {_names(schedulers)}"
                )
    if limits.preemptable_only and not work.preemptable:
        problems.append(
            f'queue "{queue}" takes only preemptable jobs; set {work.preemptable_field} to "true"'
        )
    return problems


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED_QUEUES])
    if len(names) > MAX_NAMED_QUEUES:
        shown += f" and {len(names) - MAX_NAMED_QUEUES} more"
    return shown


def alternatives(
    policy: QueuePolicy, work: Workload, known_queues: Collection[str] | None = None
) -> str:
    """The sentence that ends a refusal: the queues the namespace may use that would take
    ``work``. ``known_queues`` (the cluster's) narrows them to queues that exist and, for a
    namespace that may use any queue, is where they are looked for."""
    rule = policy.namespace_rule(work.namespace)
    if rule is not None and rule.queues is not None:
        candidates = [q for q in rule.queues if known_queues is None or q in known_queues]
    elif known_queues is not None:
        candidates = sorted(known_queues)
    else:
        candidates = [q for q in policy.queues if q != "*"]
    fits = [
        q
        for q in candidates
        if q not in (work.queue, k.ROOT_QUEUE) and not limit_problems(policy.limits(q), q, work)
    ]
    open_ended = (rule is None or rule.queues is None) and known_queues is None
    anything_else = open_ended and not limit_problems(policy.limits("*"), "*", work)
    namespace = f'namespace "{work.namespace}"'
    if fits:
        tail = ", or any queue the policy does not name" if anything_else else ""
        return (
            f"queues that {namespace} may use and that take this {work.kind}: {_listed(fits)}{tail}"
        )
    if anything_else:
        return f"{namespace} may use any queue the policy does not name"
    if rule is not None and rule.queues is not None:
        return (
            f"no queue {namespace} may use takes this {work.kind} "
            f"(it may use: {_listed(list(rule.queues)) or 'none'})"
        )
    return f"no queue {namespace} may use takes this {work.kind}"


def violations(
    policy: QueuePolicy,
    obj: Mapping[str, Any],
    scheduler_names: Collection[str] = (k.DEFAULT_SCHEDULER_NAME,),
    known_queues: Collection[str] | None = None,
    namespace: str = "",
) -> list[str]:
    """Why ``policy`` refuses to create ``obj``: each broken rule, then the queues it may use
    instead. Empty when the policy takes it, or does not judge it."""
    if not policy.active:
        return []
    work = workload(obj, scheduler_names, namespace)
    if work is None:
        return []
    problems = []
    rule = policy.namespace_rule(work.namespace)
    if rule is not None and not rule.allows(work.queue):
        problems.append(
            f'namespace "{work.namespace}" may not use queue "{work.queue}" ({work.queue_field})'
        )
    problems.extend(limit_problems(policy.limits(work.queue), work.queue, work))
    if not problems:
        return []
    problems[0] = f"queue policy: {problems[0]}"
    return [*problems, alternatives(policy, work, known_queues)]


# --- mutation ------------------------------------------------------------------------------------


def unchosen(queue: object) -> bool:
    """A queue left to the defaults: missing, empty, or the ``default`` Volcano fills in."""
    return queue is None or queue == "" or queue == k.DEFAULT_QUEUE


def default_queue(
    policy: QueuePolicy, namespace: str, namespace_annotations: Mapping[str, str]
) -> str | None:
    """The queue an object that chose none gets in ``namespace``: the namespace's
    ``scheduling.volcano.sh/queue-name`` annotation first (Volcano's rule), else the policy's
    ``defaultQueue``; None to leave it as it is."""
    annotated = namespace_annotations.get(k.QUEUE_NAME_ANNOTATION_KEY)
    if annotated:
        return str(annotated)
    rule = policy.namespace_rule(namespace)
    return rule.default_queue if rule is not None else None


def with_default_queue(
    policy: QueuePolicy,
    obj: dict[str, Any],
    namespace_annotations: Mapping[str, str],
    scheduler_names: Collection[str] = (k.DEFAULT_SCHEDULER_NAME,),
    namespace: str = "",
) -> dict[str, Any]:
    """``obj`` with its queue filled in when it chose none (see :func:`default_queue`); a new
    object when anything changes, ``obj`` itself otherwise. ``namespace_annotations`` are
    those of the object's namespace."""
    if not policy.active:
        return obj
    work = workload(obj, scheduler_names, namespace)
    if work is None:
        return obj
    chosen = default_queue(policy, work.namespace, namespace_annotations)
    if work.kind == "Pod":
        annotations = _dict(_dict(obj.get("metadata")).get("annotations"))
        current = annotations.get(k.QUEUE_NAME_ANNOTATION_KEY)
        if not unchosen(current) or not chosen or chosen == current:
            return obj
        if not isinstance(obj.get("metadata", {}), dict):
            return obj  # not an object: the schema names the field
        out = copy.deepcopy(obj)
        meta = out.setdefault("metadata", {})
        if not isinstance(meta.get("annotations"), dict):
            meta["annotations"] = {}
        meta["annotations"][k.QUEUE_NAME_ANNOTATION_KEY] = chosen
        return out
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not unchosen(spec.get("queue")) or not chosen:
        return obj
    if chosen == spec.get("queue"):
        return obj
    out = copy.deepcopy(obj)
    out["spec"]["queue"] = chosen
    return out


# --- both, for the simulator ---------------------------------------------------------------------


def enforce(
    policy: QueuePolicy,
    obj: dict[str, Any],
    namespace_annotations: Mapping[str, Mapping[str, str]],
    scheduler_names: Collection[str] = (k.DEFAULT_SCHEDULER_NAME,),
    known_queues: Collection[str] | None = None,
) -> dict[str, Any]:
    """What the webhook does with the policy, in one call: ``obj`` with its default queue,
    or :class:`PolicyRefusal` with the webhook's message. ``namespace_annotations`` is by
    namespace. Objects the policy does not judge come back unchanged."""
    if not policy.active:
        return obj
    kind = obj.get("kind")
    if kind not in WEBHOOKS:
        return obj
    namespace = _str(_dict(obj.get("metadata")).get("namespace")) or "default"
    annotations = namespace_annotations.get(namespace) or {}
    if kind == "PodGroup" and obj.get("apiVersion") == k.SCHEDULING_V1BETA1:
        obj = mutate_podgroup(obj, annotations)  # Volcano's own default comes first
    mutated = with_default_queue(policy, obj, annotations, scheduler_names)
    problems = violations(policy, mutated, scheduler_names, known_queues)
    if problems:
        message = "; ".join(problems)
        raise PolicyRefusal(
            f'admission webhook "{WEBHOOKS[str(kind)]}" denied the request: {message}'
        )
    return mutated
