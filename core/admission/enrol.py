"""Auto-enrolment at pod CREATE (``/pods/mutate``): which pods join a gang, and how.

Operators started plainly (a Deployment, a PyTorchJob without the training operator's Volcano
mode, an Argo Workflow) create pods that name no scheduler and no PodGroup. In a namespace
labelled ``stromboli.dev/enroll: "true"``, or for a pod one of Volcano's ``--admission-conf``
resource groups gives our scheduler, the pod is enrolled before it is stored:

- ``spec.schedulerName`` becomes ours when it is empty or Kubernetes' ``default-scheduler``
  (another scheduler the user chose is kept, and the pod is then left alone);
- ``scheduling.volcano.sh/queue-name``: the pod's own, else the framework's PodGroup queue,
  else the nearest owner's annotation, else the namespace's, else ``default``;
- ``scheduling.k8s.io/group-name``: the framework's gang when an adapter claims an owner up
  the chain (a PyTorchJob's pods join the job's PodGroup), else ``podgroup-<controller uid>``
  (the name Volcano's PodGroup controller gives a workload's pods); a pod without a controller
  is left to that controller, which names the group after the pod's uid, unknown at CREATE;
- ``volcano.sh/task-spec``: the role the adapter gives the pod;
- ``scheduling.volcano.sh/group-min-member``: for a ``podgroup-<uid>`` group, copied from the
  nearest owner that sets it (a Deployment's annotations reach its ReplicaSet), so the
  controller, which reads only the pod, sizes the group as the workload asks.

Only keys the pod lacks are written, so a pod an operator enrolled itself (its Volcano mode)
keeps its group. Never enrolled: pods of exempt namespaces (``kube-system``, the webhook's own;
not even resource groups apply there), mirror pods, pods already bound to a node, and
DaemonSet pods (one per node: a gang of them means nothing, and node agents must not wait for
our scheduler). The adapters are above this layer, so the caller resolves the owner chain and
hands it in (:class:`Lineage`), lazily: only a pod that is enrolled pays for the lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from stromboli.core.admission.resourcegroups import (
    ResourceGroup,
    apply_resource_group,
    matching_group,
)
from stromboli.core.api import constants as k

ENROLL_LABEL: Final = "stromboli.dev/enroll"
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
KUBE_DEFAULT_SCHEDULER: Final = "default-scheduler"
FALLBACK_PREFIX: Final = "podgroup-"
INT32_MAX: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Owner:
    """An object up a pod's owner chain, as much of it as enrolment reads."""

    api_version: str
    kind: str
    name: str
    uid: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Gang:
    """The PodGroup a framework adapter puts the pod in, and the pod's role there."""

    group_name: str
    task_spec: str = ""
    queue: str = ""


@dataclass(frozen=True, slots=True)
class Lineage:
    """The pod's controller owners, nearest first, and the gang an adapter gave (if any)."""

    owners: tuple[Owner, ...] = ()
    gang: Gang | None = None


@dataclass(frozen=True, slots=True)
class EnrolOptions:
    """What the webhook-manager's flags say about enrolment."""

    scheduler_names: tuple[str, ...] = (k.DEFAULT_SCHEDULER_NAME,)
    exempt_namespaces: frozenset[str] = frozenset({"kube-system"})
    resource_groups: tuple[ResourceGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class Enrolment:
    """The pod to store, and what was noticed on the way (for the log)."""

    pod: dict[str, Any]
    enrolled: bool = False
    resource_group: str = ""
    warnings: tuple[str, ...] = ()


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {a: v for a, v in value.items() if isinstance(a, str) and isinstance(v, str)}


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = pod.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _skip_reason(pod: Mapping[str, Any], annotations: Mapping[str, str]) -> str:
    """Why an enrollable pod is still not enrolled ("" when nothing stops it)."""
    if MIRROR_ANNOTATION in annotations:
        return "a mirror pod"
    spec = pod.get("spec")
    if isinstance(spec, Mapping) and spec.get("nodeName"):
        return "already bound to a node"
    owner = _controller(pod)
    if owner is not None and owner.get("kind") == "DaemonSet":
        return "a DaemonSet pod"
    return ""


def _min_member(owners: Sequence[Owner]) -> tuple[str, str]:
    """The nearest owner's ``group-min-member`` when it is a usable count, and a warning
    naming the owner and the key when it is not."""
    for owner in owners:
        value = owner.annotations.get(k.GROUP_MIN_MEMBER_ANNOTATION)
        if value is None:
            continue
        text = value.strip()
        if text.isascii() and text.isdigit() and 0 < int(text) <= INT32_MAX and len(text) <= 10:
            return str(int(text)), ""
        return "", (
            f"{owner.kind} {owner.name}: metadata.annotations"
            f"[{k.GROUP_MIN_MEMBER_ANNOTATION}] {value!r:.40} is not a count from 1 to "
            f"{INT32_MAX}; the group keeps one member"
        )
    return "", ""


def enrol_pod(
    pod: Mapping[str, Any],
    namespace: str,
    namespace_labels: Mapping[str, str],
    namespace_annotations: Mapping[str, str],
    options: EnrolOptions,
    lineage: Callable[[], Lineage],
) -> Enrolment:
    """The pod ``/pods/mutate`` stores (see the module docstring); ``pod`` is not changed."""
    if namespace in options.exempt_namespaces or not isinstance(pod, Mapping):
        return Enrolment(dict(pod) if isinstance(pod, Mapping) else {})
    meta = pod.get("metadata")
    annotations = _strings(meta.get("annotations") if isinstance(meta, Mapping) else None)
    group = matching_group(options.resource_groups, namespace, annotations)
    out = apply_resource_group(pod, group) if group is not None else dict(pod)
    spec = out.get("spec")
    scheduler = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    scheduler = scheduler or KUBE_DEFAULT_SCHEDULER
    ours = options.scheduler_names
    if group is not None and group.scheduler_name:
        wanted = scheduler in ours  # the group chose the scheduler: only ours is enrolled
    elif namespace_labels.get(ENROLL_LABEL) == "true":
        wanted = scheduler in ours or scheduler == KUBE_DEFAULT_SCHEDULER
    else:
        wanted = group is not None and scheduler in ours
    group_name = group.name if group is not None else ""
    if not wanted or not isinstance(spec, Mapping) or _skip_reason(pod, annotations):
        return Enrolment(out, resource_group=group_name)
    found = lineage()
    spec = dict(spec)
    if scheduler == KUBE_DEFAULT_SCHEDULER:
        spec["schedulerName"] = ours[0]
    out["spec"] = spec
    added: dict[str, str] = {}
    warnings: list[str] = []
    gang = found.gang
    if k.QUEUE_NAME_ANNOTATION_KEY not in annotations:
        from_owner = next(
            (
                o.annotations[k.QUEUE_NAME_ANNOTATION_KEY]
                for o in found.owners
                if o.annotations.get(k.QUEUE_NAME_ANNOTATION_KEY)
            ),
            "",
        )
        added[k.QUEUE_NAME_ANNOTATION_KEY] = (
            (gang.queue if gang else "")
            or from_owner
            or namespace_annotations.get(k.QUEUE_NAME_ANNOTATION_KEY, "")
            or k.DEFAULT_QUEUE
        )
    if k.GROUP_NAME_ANNOTATION not in annotations:
        if gang is not None:
            added[k.GROUP_NAME_ANNOTATION] = gang.group_name
            if gang.task_spec and k.TASK_SPEC_KEY not in annotations:
                added[k.TASK_SPEC_KEY] = gang.task_spec
        else:
            controller = _controller(pod)
            uid = controller.get("uid") if controller is not None else None
            if isinstance(uid, str) and uid:
                added[k.GROUP_NAME_ANNOTATION] = FALLBACK_PREFIX + uid
                count, warning = _min_member(found.owners)
                if count and k.GROUP_MIN_MEMBER_ANNOTATION not in annotations:
                    added[k.GROUP_MIN_MEMBER_ANNOTATION] = count
                if warning:
                    warnings.append(warning)
    if added:
        out_meta = dict(meta) if isinstance(meta, Mapping) else {}
        present = out_meta.get("annotations")
        out_meta["annotations"] = {**(present if isinstance(present, Mapping) else {}), **added}
        out["metadata"] = out_meta
    return Enrolment(out, enrolled=True, resource_group=group_name, warnings=tuple(warnings))
