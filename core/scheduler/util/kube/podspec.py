"""What the placement filters and scores read from a pod, parsed once per pod shape.

A task's ``shape`` digests everything that decides where a pod may go (namespace, labels,
node selector, affinity, tolerations, spread constraints, host ports), so the parsed form is
cached per shape for the life of the process: a session with 10,000 pods of 50 shapes parses
50 specs, and the next session parses none.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from stromboli.core.cluster.selectors import (
    IN,
    NOT_IN,
    Requirement,
    Selector,
    SelectorError,
    selector_from_dict,
)
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.api.node import host_ports

log = logging.getLogger(__name__)

#: Operators a node selector requirement may use.
NODE_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
HONOR = "Honor"
IGNORE = "Ignore"
DO_NOT_SCHEDULE = "DoNotSchedule"
_CACHE_LIMIT = 65536


@dataclass(slots=True, frozen=True)
class NodeExpression:
    """One node selector requirement; ``number`` is the parsed operand of Gt/Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    number: int = 0


@dataclass(slots=True, eq=False)
class NodeTerm:
    """A ``NodeSelectorTerm``: expressions and ``metadata.name`` fields, all ANDed.

    ``valid`` is False for a term with an unknown operator or a bad operand; such a term, like
    an empty one, matches no node (kube-scheduler treats both so).
    """

    expressions: tuple[NodeExpression, ...] = ()
    #: (operator, node names) for ``matchFields`` on ``metadata.name``.
    fields: tuple[tuple[str, frozenset[str]], ...] = ()
    valid: bool = True

    @property
    def matches_nothing(self) -> bool:
        return not self.valid or (not self.expressions and not self.fields)


@dataclass(slots=True, eq=False)
class PodTerm:
    """A ``PodAffinityTerm``. ``namespaces`` None means every namespace.

    Compared by identity, so it can key per-session caches of the shapes it selects.
    """

    selector: Selector
    namespaces: frozenset[str] | None
    topology_key: str

    def selects(self, namespace: str, labels: dict[str, str]) -> bool:
        return (self.namespaces is None or namespace in self.namespaces) and self.selector.matches(
            labels
        )


@dataclass(slots=True, eq=False)
class SpreadConstraint:
    """A ``topologySpreadConstraint`` with ``matchLabelKeys`` folded into its selector."""

    max_skew: int
    topology_key: str
    hard: bool
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


@dataclass(slots=True, frozen=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """kube's rule: effect and key must match when set; Exists ignores the value."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("", "Equal") and self.value == value


@dataclass(slots=True, eq=False)
class PodSpecInfo:
    """The placement-relevant facts of one pod shape."""

    namespace: str
    labels: dict[str, str]
    node_selector: tuple[tuple[str, str], ...] = ()
    #: Required node affinity terms (ORed); None when the pod has none.
    required_terms: tuple[NodeTerm, ...] | None = None
    preferred_terms: tuple[tuple[int, NodeTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    ports: tuple[tuple[str, str, int], ...] = ()
    affinity_required: tuple[PodTerm, ...] = ()
    anti_required: tuple[PodTerm, ...] = ()
    affinity_preferred: tuple[tuple[int, PodTerm], ...] = ()
    anti_preferred: tuple[tuple[int, PodTerm], ...] = ()
    spread_hard: tuple[SpreadConstraint, ...] = ()
    spread_soft: tuple[SpreadConstraint, ...] = ()
    #: Problems found while parsing (reported by the pre-predicate).
    errors: list[str] = field(default_factory=list)

    @property
    def has_node_constraints(self) -> bool:
        return bool(self.node_selector) or self.required_terms is not None

    @property
    def has_pod_affinity(self) -> bool:
        return bool(self.affinity_required or self.anti_required)

    @property
    def scores_pod_affinity(self) -> bool:
        """Whether pods of this shape take part in inter-pod affinity scoring of others."""
        return bool(self.affinity_required or self.affinity_preferred or self.anti_preferred)

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        return any(t.tolerates(key, value, effect) for t in self.tolerations)


_SPECS: dict[str, PodSpecInfo] = {}


def spec_of(task: TaskInfo) -> PodSpecInfo:
    """The parsed spec of ``task``'s shape (parsed on first sight, then cached)."""
    info = _SPECS.get(task.shape)
    if info is None:
        if len(_SPECS) >= _CACHE_LIMIT:
            _SPECS.clear()
        info = _SPECS[task.shape] = parse_pod(task.pod)
    return info


def parse_pod(pod: dict) -> PodSpecInfo:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    namespace = meta.get("namespace") or "default"
    labels = dict(meta.get("labels") or {})
    info = PodSpecInfo(namespace=namespace, labels=labels)
    info.node_selector = tuple(
        (str(k), _label_text(v)) for k, v in sorted((spec.get("nodeSelector") or {}).items())
    )
    info.tolerations = tuple(_toleration(t) for t in spec.get("tolerations") or ())
    info.ports = tuple(host_ports(pod))
    affinity = spec.get("affinity") or {}
    _parse_node_affinity(info, affinity.get("nodeAffinity") or {})
    _parse_pod_affinity(info, affinity.get("podAffinity") or {}, anti=False)
    _parse_pod_affinity(info, affinity.get("podAntiAffinity") or {}, anti=True)
    _parse_spread(info, spec.get("topologySpreadConstraints") or ())
    for error in info.errors:
        log.warning("pod %s/%s: %s", namespace, meta.get("name", "?"), error)
    return info


def _label_text(value: Any) -> str:
    """A label value as text; YAML's unquoted ``true`` arrives as a bool."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _toleration(raw: dict) -> Toleration:
    return Toleration(
        key=raw.get("key") or "",
        operator=raw.get("operator") or "Equal",
        value=raw.get("value") or "",
        effect=raw.get("effect") or "",
    )


# -- node affinity ---------------------------------------------------------------------------


def node_term(raw: dict | None) -> NodeTerm:
    """Parse a ``NodeSelectorTerm``; a malformed one becomes a term that matches nothing."""
    raw = raw or {}
    expressions: list[NodeExpression] = []
    fields: list[tuple[str, frozenset[str]]] = []
    valid = True
    for expr in raw.get("matchExpressions") or ():
        key = expr.get("key") or ""
        operator = expr.get("operator") or ""
        values = tuple(str(v) for v in expr.get("values") or ())
        number = 0
        if operator not in NODE_OPERATORS or not key:
            valid = False
        elif operator in ("Gt", "Lt"):
            try:
                (text,) = values
                number = int(text)
            except ValueError:
                valid = False
        elif operator in ("In", "NotIn") and not values:
            valid = False
        expressions.append(NodeExpression(key, operator, values, number))
    for expr in raw.get("matchFields") or ():
        operator = expr.get("operator") or ""
        if expr.get("key") != "metadata.name" or operator not in (IN, NOT_IN):
            valid = False
            continue
        fields.append((operator, frozenset(str(v) for v in expr.get("values") or ())))
    return NodeTerm(tuple(expressions), tuple(fields), valid)


def _parse_node_affinity(info: PodSpecInfo, node_affinity: dict) -> None:
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        info.required_terms = tuple(node_term(t) for t in required.get("nodeSelectorTerms") or ())
    preferred = []
    for entry in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        weight = int(entry.get("weight") or 0)
        term = node_term(entry.get("preference"))
        if weight and not term.matches_nothing:
            preferred.append((weight, term))
    info.preferred_terms = tuple(preferred)


# -- inter-pod affinity ------------------------------------------------------------------------


def _label_keys_requirements(
    labels: dict[str, str], match_keys: Any, mismatch_keys: Any = ()
) -> list[Requirement]:
    """``matchLabelKeys``/``mismatchLabelKeys``: the pod's own values join the selector."""
    extra = [Requirement(k, IN, (labels[k],)) for k in match_keys or () if k in labels]
    extra += [Requirement(k, NOT_IN, (labels[k],)) for k in mismatch_keys or () if k in labels]
    return extra


def _selector(info: PodSpecInfo, raw: dict, where: str) -> Selector | None:
    label_selector = raw.get("labelSelector")
    try:
        selector = selector_from_dict(label_selector)
        if label_selector is None:
            return selector
        extra = _label_keys_requirements(
            info.labels, raw.get("matchLabelKeys"), raw.get("mismatchLabelKeys")
        )
        if extra:
            selector = Selector([*selector.requirements, *extra])
    except SelectorError as err:
        info.errors.append(f"{where}: {err}")
        return None
    return selector


def _pod_term(info: PodSpecInfo, raw: dict, where: str) -> PodTerm | None:
    topology_key = raw.get("topologyKey") or ""
    if not topology_key:
        info.errors.append(f"{where}: topologyKey must not be empty")
        return None
    selector = _selector(info, raw, where)
    if selector is None:
        return None
    names = frozenset(raw.get("namespaces") or ())
    namespace_selector = raw.get("namespaceSelector")
    if namespace_selector is None:
        namespaces: frozenset[str] | None = names or frozenset((info.namespace,))
    elif not namespace_selector.get("matchLabels") and not namespace_selector.get(
        "matchExpressions"
    ):
        namespaces = None  # the empty namespace selector selects every namespace
    else:
        # Namespace labels are not part of the snapshot: only the listed names count.
        namespaces = names
    return PodTerm(selector, namespaces, topology_key)


def _parse_pod_affinity(info: PodSpecInfo, raw: dict, anti: bool) -> None:
    kind = "podAntiAffinity" if anti else "podAffinity"
    required = []
    for i, entry in enumerate(raw.get("requiredDuringSchedulingIgnoredDuringExecution") or ()):
        term = _pod_term(info, entry, f"{kind}.required[{i}]")
        if term is not None:
            required.append(term)
    preferred = []
    for i, entry in enumerate(raw.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        weight = int(entry.get("weight") or 0)
        term = _pod_term(info, entry.get("podAffinityTerm") or {}, f"{kind}.preferred[{i}]")
        if term is not None and weight:
            preferred.append((weight, term))
    if anti:
        info.anti_required, info.anti_preferred = tuple(required), tuple(preferred)
    else:
        info.affinity_required, info.affinity_preferred = tuple(required), tuple(preferred)


# -- topology spread -------------------------------------------------------------------------


def _parse_spread(info: PodSpecInfo, raw_constraints: Any) -> None:
    hard: list[SpreadConstraint] = []
    soft: list[SpreadConstraint] = []
    for i, raw in enumerate(raw_constraints):
        where = f"topologySpreadConstraints[{i}]"
        topology_key = raw.get("topologyKey") or ""
        max_skew = int(raw.get("maxSkew") or 0)
        if not topology_key or max_skew < 1:
            info.errors.append(f"{where}: needs a topologyKey and maxSkew of at least 1")
            continue
        label_selector = raw.get("labelSelector")
        try:
            selector = selector_from_dict(label_selector)
            extra = _label_keys_requirements(info.labels, raw.get("matchLabelKeys"))
            if extra and label_selector is not None:
                selector = Selector([*selector.requirements, *extra])
        except SelectorError as err:
            info.errors.append(f"{where}: {err}")
            continue
        constraint = SpreadConstraint(
            max_skew=max_skew,
            topology_key=topology_key,
            hard=(raw.get("whenUnsatisfiable") or DO_NOT_SCHEDULE) == DO_NOT_SCHEDULE,
            selector=selector,
            min_domains=int(raw.get("minDomains") or 1),
            node_affinity_policy=raw.get("nodeAffinityPolicy") or HONOR,
            node_taints_policy=raw.get("nodeTaintsPolicy") or IGNORE,
        )
        (hard if constraint.hard else soft).append(constraint)
    info.spread_hard, info.spread_soft = tuple(hard), tuple(soft)
