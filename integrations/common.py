"""What every framework adapter shares: its result, its one error, and the arithmetic.

An adapter is a pure function from a framework object (a dict in Kubernetes wire shape) to a
``Conversion``: the PodGroups to create or update, and the mutations the webhook applies to the
framework's pods (scheduler name, ``scheduling.k8s.io/group-name``, ``volcano.sh/task-spec``).
Pure means the same object and context give the same result, so the reconciler recomputes the
PodGroup whenever replicas change and writes it only when it differs.

Everything the user wrote is hostile until read through the helpers here: a wrong type, a
negative count, an unparsable or huge quantity all raise ``ConversionError`` naming the field,
never ``KeyError``/``TypeError``. Totals are kept as exact fractions and bounded to what a
Kubernetes quantity can hold, so ``replicas × requests`` cannot overflow anything downstream.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from stromboli.core.api import constants as k
from stromboli.core.api.quantity import (
    MAX_VALUE,
    QuantityError,
    format_bytes,
    format_cpu,
    parse_quantity,
)

INT32_MAX = 2**31 - 1
#: Label on the PodGroups an adapter creates: what tells ours from one an operator made.
ADAPTER_LABEL = "stromboli.dev/adapter"
#: Longest object name Kubernetes stores (a DNS subdomain).
MAX_NAME_LENGTH = 253
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*", re.ASCII)
_LABEL_RE = re.compile(_DNS_LABEL, re.ASCII)

# --- The one error -----------------------------------------------------------------------------


class ConversionError(ValueError):
    """A framework object the adapter cannot turn into a PodGroup.

    ``field`` is the path inside the object (``spec.pytorchReplicaSpecs.Worker.replicas``),
    ``message`` what is wrong there and what would be right; ``obj`` names the object
    (``PyTorchJob ns/name``) so the Warning event can be read without context.
    """

    def __init__(self, field: str, message: str, obj: str = "") -> None:
        self.field = field
        self.message = message
        self.obj = obj
        prefix = f"{obj}: " if obj else ""
        super().__init__(f"{prefix}{field}: {message}")

    def about(self, obj: str) -> ConversionError:
        """The same error, naming the object (added once, where the object is known)."""
        return self if self.obj else ConversionError(self.field, self.message, obj)


def describe(obj: Any) -> str:
    """``Kind namespace/name`` of an object, for messages; never raises."""
    if not isinstance(obj, Mapping):
        return "object"
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    kind = obj.get("kind")
    name = meta.get("name")
    ns = meta.get("namespace")
    shown = f"{ns}/{name}" if isinstance(ns, str) and ns else str(name)
    return f"{kind if isinstance(kind, str) else 'object'} {shown}"


# --- Typed reads -------------------------------------------------------------------------------


def mapping(value: Any, field: str) -> Mapping[str, Any]:
    """A JSON object at ``field``; absent (None) reads as empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConversionError(field, f"must be an object, not {_type(value)}")
    return value


def sequence(value: Any, field: str) -> Sequence[Any]:
    """A JSON array at ``field``; absent (None) reads as empty."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ConversionError(field, f"must be a list, not {_type(value)}")
    return value


def string(value: Any, field: str, default: str | None = None) -> str | None:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConversionError(field, f"must be a string, not {_type(value)}")
    return value


def integer(
    value: Any, field: str, default: int, *, minimum: int = 0, maximum: int = INT32_MAX
) -> int:
    """An int32 count within bounds (JSON numbers such as ``2.0`` are accepted as Go does)."""
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConversionError(field, f"must be an integer, not {_type(value)}")
    if not minimum <= value <= maximum:
        raise ConversionError(field, f"{value} is out of range ({minimum}..{maximum})")
    return value


def boolean(value: Any, field: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConversionError(field, f"must be true or false, not {_type(value)}")
    return value


def string_map(value: Any, field: str) -> dict[str, str]:
    """Labels or annotations: string keys and values only."""
    result: dict[str, str] = {}
    for key, item in mapping(value, field).items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise ConversionError(f"{field}.{key}", "labels and annotations must be strings")
        result[key] = item
    return result


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


@dataclass(frozen=True, slots=True)
class Meta:
    """The metadata an adapter reads from the framework object, checked once."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str | None
    labels: dict[str, str]
    annotations: dict[str, str]


def read_meta(obj: Any, api_version: str = "", kind: str = "") -> Meta:
    """Check the envelope of a framework object; every adapter starts here. ``api_version``
    and ``kind`` fill in for an object listed without them (pods in a List)."""
    if not isinstance(obj, Mapping):
        raise ConversionError("", f"the object must be a mapping, not {_type(obj)}")
    meta = mapping(obj.get("metadata"), "metadata")
    name = string(meta.get("name"), "metadata.name")
    if not name:
        raise ConversionError("metadata.name", "is required")
    return Meta(
        api_version=string(obj.get("apiVersion"), "apiVersion", "") or api_version,
        kind=string(obj.get("kind"), "kind", "") or kind,
        name=name,
        namespace=string(meta.get("namespace"), "metadata.namespace", "") or "default",
        uid=string(meta.get("uid"), "metadata.uid"),
        labels=string_map(meta.get("labels"), "metadata.labels"),
        annotations=string_map(meta.get("annotations"), "metadata.annotations"),
    )


# --- Resource sums -----------------------------------------------------------------------------


class Resources:
    """A ResourceList being summed: exact, never negative, bounded like a quantity."""

    __slots__ = ("amounts",)

    def __init__(self, amounts: Mapping[str, Fraction] | None = None) -> None:
        self.amounts: dict[str, Fraction] = dict(amounts or {})

    @classmethod
    def parse(cls, resources: Any, field: str) -> Resources:
        """A Kubernetes ResourceList (``{"cpu": "2", "memory": "4Gi"}``) at ``field``."""
        parsed = cls()
        for name, text in mapping(resources, field).items():
            parsed.add_one(str(name), quantity(text, f"{field}.{name}"))
        return parsed

    def add_one(self, name: str, amount: Fraction, field: str = "") -> None:
        total = self.amounts.get(name, Fraction(0)) + amount
        if total > MAX_VALUE:
            raise ConversionError(field or name, "the total exceeds the largest quantity")
        self.amounts[name] = total

    def add(self, other: Resources, times: int = 1, field: str = "") -> None:
        for name, amount in other.amounts.items():
            self.add_one(name, amount * times, field)

    def max_with(self, other: Resources) -> Resources:
        names = self.amounts.keys() | other.amounts.keys()
        return Resources(
            {
                n: max(self.amounts.get(n, Fraction(0)), other.amounts.get(n, Fraction(0)))
                for n in names
            }
        )

    def __bool__(self) -> bool:
        return any(self.amounts.values())

    def to_list(self) -> dict[str, str]:
        """Canonical ResourceList text (``3500m``, ``4296Mi``), zero amounts left out."""
        return {
            name: format_quantity(name, amount)
            for name, amount in sorted(self.amounts.items())
            if amount
        }


def quantity(text: Any, field: str) -> Fraction:
    """A non-negative Kubernetes quantity; requests and limits are never negative."""
    try:
        value = parse_quantity(text, field)
    except QuantityError as exc:
        raise ConversionError(field, str(exc).removeprefix(f"{field}: ")) from None
    if value < 0:
        raise ConversionError(field, f"{text!r} must be greater than or equal to 0")
    return value


def format_quantity(name: str, amount: Fraction) -> str:
    """Kubernetes text of an exact amount: cpu in cores or millis, bytes with binary suffixes,
    and a fractional byte or count in millis (the unit the Spark operator's trap produces)."""
    if name == "cpu":
        millis = amount * 1000
        if millis.denominator == 1:
            return format_cpu(int(millis))
    elif amount.denominator == 1:
        return format_bytes(int(amount)) if name.startswith(_BYTE_RESOURCES) else str(amount)
    for scale, suffix in ((1000, "m"), (10**6, "u"), (10**9, "n")):
        scaled = amount * scale
        if scaled.denominator == 1:
            return f"{scaled}{suffix}"
    return f"{math.ceil(amount * 10**9)}n"


def container_resources(container: Mapping[str, Any], field: str, fallback: str) -> Resources:
    """One container's share of a pod, by the rule its framework uses for limits:

    - ``"container"``: requests; only when a container has no requests at all, its limits
      (training-operator v1, MPI operator);
    - ``"per-resource"``: requests, each missing one taken from limits (KubeRay, Kubernetes
      defaulting);
    - ``"none"``: requests only (Kubernetes ``PodRequests``, Trainer v2).
    """
    resources = mapping(container.get("resources"), f"{field}.resources")
    requests = Resources.parse(resources.get("requests"), f"{field}.resources.requests")
    limits = Resources.parse(resources.get("limits"), f"{field}.resources.limits")
    if fallback == "container":
        return requests if requests.amounts else limits
    if fallback == "per-resource":
        merged = Resources(limits.amounts)
        merged.amounts.update(requests.amounts)
        return merged
    return requests


def pod_resources(
    pod_spec: Any, field: str, *, fallback: str, init_containers: bool = False
) -> Resources:
    """Σ containers of a pod spec; with ``init_containers`` the Kubernetes scheduling request
    (the largest init container, sidecars added, and the pod overhead), else app containers only."""
    spec = mapping(pod_spec, field)
    total = Resources()
    for i, container in enumerate(sequence(spec.get("containers"), f"{field}.containers")):
        where = f"{field}.containers[{i}]"
        total.add(container_resources(mapping(container, where), where, fallback), field=field)
    if not init_containers:
        return total
    sidecars, peak = Resources(), Resources()
    for i, container in enumerate(sequence(spec.get("initContainers"), f"{field}.initContainers")):
        where = f"{field}.initContainers[{i}]"
        container = mapping(container, where)
        request = container_resources(container, where, fallback)
        if container.get("restartPolicy") == "Always":
            sidecars.add(request, field=field)
        else:
            running = Resources(sidecars.amounts)
            running.add(request, field=field)
            peak = peak.max_with(running)
    total.add(sidecars, field=field)
    total = total.max_with(peak)
    total.add(Resources.parse(spec.get("overhead"), f"{field}.overhead"), field=field)
    return total


def pod_template(value: Any, field: str) -> Mapping[str, Any]:
    """A PodTemplateSpec that must exist and have containers."""
    if value is None:
        raise ConversionError(field, "a pod template is required")
    template = mapping(value, field)
    spec = mapping(template.get("spec"), f"{field}.spec")
    if not sequence(spec.get("containers"), f"{field}.spec.containers"):
        raise ConversionError(f"{field}.spec.containers", "a pod needs at least one container")
    return template


def template_priority_class(template: Mapping[str, Any], field: str) -> str | None:
    spec = mapping(template.get("spec"), f"{field}.spec")
    return string(spec.get("priorityClassName"), f"{field}.spec.priorityClassName") or None


def add_count(total: int, count: int, field: str) -> int:
    """A pod count kept within int32, as ``minMember`` is."""
    total += count
    if total > INT32_MAX:
        raise ConversionError(field, f"the pod count exceeds {INT32_MAX}")
    return total


def times(a: int, b: int, field: str) -> int:
    return add_count(0, a * b, field)


# --- Names -------------------------------------------------------------------------------------


def bounded_name(prefix: str, base: str, suffix: str = "") -> str:
    """``prefix + base + suffix``; a base too long for a name is cut and made unique with a hash."""
    name = f"{prefix}{base}{suffix}"
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(base.encode()).hexdigest()[:10]
    room = MAX_NAME_LENGTH - len(prefix) - len(suffix) - len(digest) - 1
    return f"{prefix}{base[:room].rstrip('-.')}-{digest}{suffix}"


def exact_name(name: str, field: str = "metadata.name") -> str:
    """A name the framework derives as is; too long means the operator would fail as well."""
    if len(name) > MAX_NAME_LENGTH:
        raise ConversionError(
            field, f"the PodGroup name {name[:40]}... would exceed {MAX_NAME_LENGTH} characters"
        )
    return name


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# --- PodGroup building -------------------------------------------------------------------------


def owner_reference(meta: Meta, *, block_owner_deletion: bool = True) -> dict[str, Any]:
    """A controller reference to the framework object (what ``NewControllerRef`` writes)."""
    ref: dict[str, Any] = {"apiVersion": meta.api_version, "kind": meta.kind, "name": meta.name}
    if meta.uid:
        ref["uid"] = meta.uid
    ref["controller"] = True
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    mode: str
    highest_tier_allowed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"mode": self.mode}
        if self.highest_tier_allowed is not None:
            spec["highestTierAllowed"] = self.highest_tier_allowed
        return spec


def network_topology(
    keys: Mapping[str, str], mode_key: str, tier_key: str, where: str
) -> NetworkTopology | None:
    """Network topology from a mode and a tier key (annotations or labels at ``where``)."""
    mode = keys.get(mode_key)
    tier_text = keys.get(tier_key)
    if mode is None and tier_text is None:
        return None
    mode = mode or k.NetworkTopologyMode.HARD
    if mode not in tuple(k.NetworkTopologyMode):
        raise ConversionError(f"{where}[{mode_key}]", f"{mode!r} must be 'hard' or 'soft'")
    tier = None
    if tier_text is not None:
        if not tier_text.isascii() or not tier_text.isdigit() or len(tier_text) > 9:
            raise ConversionError(
                f"{where}[{tier_key}]", f"{tier_text[:20]!r} must be a non-negative integer"
            )
        tier = int(tier_text)
    return NetworkTopology(mode, tier)


def volcano_network_topology(meta: Meta) -> NetworkTopology | None:
    """Volcano's own pod keys, read from the framework object's annotations: what Volcano's
    PodGroup controller would apply had the pods carried them (frameworks without a rule)."""
    return network_topology(
        meta.annotations,
        k.NETWORK_TOPOLOGY_MODE_KEY,
        k.NETWORK_TOPOLOGY_HIGHEST_TIER_KEY,
        "metadata.annotations",
    )


def dns_name(value: str, field: str, *, label: bool = False) -> str:
    """A name the PodGroup will carry, checked before the API server refuses it."""
    pattern, limit = (_LABEL_RE, 63) if label else (_SUBDOMAIN_RE, MAX_NAME_LENGTH)
    if len(value) > limit or pattern.fullmatch(value) is None:
        what = "label" if label else "subdomain"
        raise ConversionError(
            field,
            f"{value[:60]!r} (taken from the workload) is not a valid DNS-1123 {what} "
            f"(at most {limit} lowercase letters, digits, '-' or '.')",
        )
    return value


def podgroup(
    *,
    name: str,
    namespace: str,
    owner: dict[str, Any],
    adapter: str,
    min_member: int,
    queue: str | None,
    priority_class: str | None = None,
    min_resources: Resources | Mapping[str, str] | None = None,
    topology: NetworkTopology | None = None,
    annotations: Mapping[str, str] | None = None,
    phase: str | None = None,
) -> dict[str, Any]:
    """A PodGroup in wire shape, fields left out when unset as the operators leave them."""
    metadata: dict[str, Any] = {
        "name": dns_name(name, "metadata.name"),
        "namespace": dns_name(namespace, "metadata.namespace", label=True),
        "labels": {ADAPTER_LABEL: adapter},
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    metadata["ownerReferences"] = [owner]
    queue = dns_name(queue, "spec.queue") if queue else k.DEFAULT_QUEUE
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if priority_class:
        spec["priorityClassName"] = dns_name(priority_class, "spec.priorityClassName")
    if isinstance(min_resources, Resources):
        min_resources = min_resources.to_list()
    if min_resources:
        spec["minResources"] = dict(min_resources)
    if topology is not None:
        spec["networkTopology"] = topology.to_dict()
    group: dict[str, Any] = {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }
    if phase:
        group["status"] = {"phase": phase}
    return group


# --- Pod mutations -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodMutation:
    """What the webhook writes on the pods of one role before they are stored.

    ``match_labels`` are labels the framework puts on that role's pods (how a pod finds its
    mutation); ``template`` is the path of the role's pod template in the framework object
    (how the live handler may write the same into the template instead).
    ``force_scheduler``: overwrite a scheduler the user chose (KubeRay, MPI v2 do) or fill
    only an empty one (training-operator v1 does, warning otherwise).
    """

    role: str
    group_name: str
    match_labels: Mapping[str, str]
    template: str
    annotations: Mapping[str, str]
    labels: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = k.DEFAULT_SCHEDULER_NAME
    force_scheduler: bool = False

    def matches(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") if isinstance(pod, Mapping) else None
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        labels = labels if isinstance(labels, Mapping) else {}
        return all(labels.get(key) == value for key, value in self.match_labels.items())


def mutation(
    role: str,
    group_name: str,
    match_labels: Mapping[str, str],
    template: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler_name: str = k.DEFAULT_SCHEDULER_NAME,
    force_scheduler: bool = False,
) -> PodMutation:
    """A mutation carrying the two keys every pod of a gang needs, plus any others."""
    return PodMutation(
        role=role,
        group_name=group_name,
        match_labels=dict(match_labels),
        template=template,
        annotations={
            **(annotations or {}),
            k.GROUP_NAME_ANNOTATION: group_name,
            k.TASK_SPEC_KEY: role,
        },
        labels=dict(labels or {}),
        scheduler_name=scheduler_name,
        force_scheduler=force_scheduler,
    )


def apply_mutation(pod: Mapping[str, Any], change: PodMutation) -> dict[str, Any]:
    """A copy of ``pod`` with the mutation applied; the input is not modified.

    An empty scheduler name (or Kubernetes' ``default-scheduler``, what the API server would
    default it to) is always filled; a different one is kept unless ``force_scheduler``.
    """
    result = dict(pod)
    meta = dict(mapping(pod.get("metadata"), "metadata"))
    meta["annotations"] = {
        **string_map(meta.get("annotations"), "metadata.annotations"),
        **change.annotations,
    }
    if change.labels:
        meta["labels"] = {**string_map(meta.get("labels"), "metadata.labels"), **change.labels}
    result["metadata"] = meta
    spec = dict(mapping(pod.get("spec"), "spec"))
    current = spec.get("schedulerName")
    if change.force_scheduler or current in (None, "", "default-scheduler"):
        spec["schedulerName"] = change.scheduler_name
    result["spec"] = spec
    return result


# --- The result and the adapter contract -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conversion:
    """One framework object's gangs.

    ``podgroups``: to create, or to update when the stored one is ours (labelled
    ``stromboli.dev/adapter``); ``adopted``: names of PodGroups the operator made in its Volcano
    mode, left alone; ``notes``: why a PodGroup was not produced (said in an Event).
    """

    podgroups: tuple[dict[str, Any], ...] = ()
    mutations: tuple[PodMutation, ...] = ()
    adopted: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def mutation_for(self, pod: Mapping[str, Any]) -> PodMutation | None:
        """The mutation of the role ``pod`` belongs to (the most specific match)."""
        matching = [m for m in self.mutations if m.matches(pod)]
        return max(matching, key=lambda m: len(m.match_labels), default=None)

    def podgroup(self, name: str) -> dict[str, Any] | None:
        return next((g for g in self.podgroups if g["metadata"]["name"] == name), None)


@dataclass(frozen=True, slots=True)
class Context:
    """What a conversion may read besides the framework object, all supplied by the caller.

    ``existing``: the PodGroups stored in the object's namespace, by name (for adoption and for
    fields an operator keeps once set); ``priority_classes``: PriorityClass values by name
    (replica ordering of the Kubeflow operators, unknown ones count 0); ``related``: other
    objects a framework needs (Trainer runtimes, LeaderWorkerSet leader pods);
    ``options``: adapter switches, each documented by its adapter.
    """

    existing: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    related: Sequence[Mapping[str, Any]] = ()
    options: Mapping[str, str] = field(default_factory=dict)

    def related_of(self, kinds: Iterable[str]) -> Iterator[Mapping[str, Any]]:
        wanted = set(kinds)
        for obj in self.related:
            if isinstance(obj, Mapping) and obj.get("kind") in wanted:
                yield obj


class Adapter(Protocol):
    """One framework kind's conversion, as the registry hands it out."""

    framework: str

    def convert(self, obj: Mapping[str, Any], context: Context = ...) -> Conversion: ...

    def group_name_for_pod(
        self, pod: Mapping[str, Any], owner: Mapping[str, Any]
    ) -> str | None: ...


class BaseAdapter:
    """Names the object in every ``ConversionError`` its ``_convert`` raises."""

    framework = ""

    def convert(self, obj: Mapping[str, Any], context: Context | None = None) -> Conversion:
        try:
            return self._convert(obj, context or Context())
        except ConversionError as exc:
            raise exc.about(describe(obj)) from None

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        raise NotImplementedError

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        raise NotImplementedError


def object_name(obj: Any) -> str | None:
    """``metadata.name`` of an object when it is a non-empty string; never raises."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else None


def labels_of(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def annotations_of(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else {}


# --- Adoption ----------------------------------------------------------------------------------


def is_ours(group: Mapping[str, Any]) -> bool:
    meta = group.get("metadata") if isinstance(group, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return isinstance(labels, Mapping) and ADAPTER_LABEL in labels


def controller_of(group: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = group.get("metadata") if isinstance(group, Mapping) else None
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def same_owner(ref: Mapping[str, Any] | None, owner: Mapping[str, Any]) -> bool:
    """Kind and name match, and the uids too when both are known (a re-created object with the
    same name is another owner)."""
    if ref is None or ref.get("kind") != owner.get("kind") or ref.get("name") != owner.get("name"):
        return False
    return not (ref.get("uid") and owner.get("uid") and ref.get("uid") != owner.get("uid"))


def made_by_operator(group: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """The adoption predicate: a PodGroup of the expected name controlled by the framework
    object and not labelled as ours was made by the operator in its Volcano mode."""
    return not is_ours(group) and same_owner(controller_of(group), owner)


def settle(
    groups: Iterable[dict[str, Any]],
    mutations: Iterable[PodMutation],
    context: Context,
    notes: Iterable[str] = (),
) -> Conversion:
    """Split computed PodGroups into those to write and those the operator already owns.

    A stored PodGroup of the same name owned by someone else is a conflict: writing ours would
    take the name from its owner, so the conversion fails naming it.
    """
    keep: list[dict[str, Any]] = []
    adopted: list[str] = []
    for group in groups:
        name = group["metadata"]["name"]
        owner = group["metadata"]["ownerReferences"][0]
        stored = context.existing.get(name)
        if stored is None or (is_ours(stored) and same_owner(controller_of(stored), owner)):
            keep.append(group)
        elif made_by_operator(stored, owner):
            adopted.append(name)
        else:
            ref = controller_of(stored)
            holder = f"{ref.get('kind')} {ref.get('name')}" if ref else "no controller"
            raise ConversionError(
                "metadata.name",
                f"PodGroup {name} already exists and belongs to {holder}; "
                "rename the workload or delete that PodGroup",
            )
    return Conversion(tuple(keep), tuple(mutations), tuple(adopted), tuple(notes))


def stored_spec(context: Context, name: str) -> Mapping[str, Any]:
    """Spec of the stored PodGroup ``name`` (for fields an operator sets only at creation)."""
    stored = context.existing.get(name)
    spec = stored.get("spec") if isinstance(stored, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def stored_phase(context: Context, name: str) -> str | None:
    stored = context.existing.get(name)
    status = stored.get("status") if isinstance(stored, Mapping) else None
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else None
