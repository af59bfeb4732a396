"""The queue policy file: which queues each namespace may use, its default queue, and what
each queue takes (beyond Volcano, which lets any namespace submit to any open queue).

    namespaces:
      team-a: {queues: [team-a, shared], defaultQueue: team-a}
      "*": {queues: [shared], defaultQueue: shared}     # every namespace not named above
    queues:
      shared:
        priorityClassNames: [low, normal]
        maxPodsPerJob: 16
        maxResourcesPerJob: {cpu: "64", nvidia.com/gpu: "8"}
        schedulerNames: [volcano]
        preemptableOnly: true

The file is read by the webhook (reloaded when it changes) and by the simulator, so it is
treated as hostile input: its size and nesting are bounded before YAML builds anything, the
nodes its aliases expand to are counted, and it is checked against a cerberus schema whose
errors name the key (``queue-policy.yaml: namespaces.team-a.queues[1]: must be of string
type``). A bad file raises :class:`PolicyError` and builds nothing, so a caller holding a good
policy keeps it. The decisions made with a policy are in :mod:`.policyrules`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol

import cerberus
import yaml

from stromboli.core.api.quantity import parse_quantity

#: libyaml's loader where PyYAML has it (its wheels do), else the pure-Python one.
_Loader: type[yaml.CSafeLoader | yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

API_VERSION: Final = "stromboli.dev/v1alpha1"
KIND: Final = "QueuePolicy"
ANY: Final = "*"
"""The entry of ``namespaces`` (or ``queues``) that applies to every name not listed."""

MAX_POLICY_BYTES: Final = 1024 * 1024
"""Largest policy file read; a policy for thousands of namespaces is far smaller."""
MAX_POLICY_DEPTH: Final = 16
"""Deepest nesting of mappings and sequences; the schema itself needs 4."""
MAX_POLICY_NODES: Final = 200_000
"""Most values the document may hold, every alias counted at its full size."""
MAX_REPORTED_ERRORS: Final = 20
"""Schema errors named in one message; the rest are counted."""


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class NamespaceRule:
    """What one namespace (or ``"*"``) may use: ``queues`` None means any queue."""

    queues: tuple[str, ...] | None = None
    default_queue: str | None = None

    def allows(self, queue: str) -> bool:
        return self.queues is None or queue in self.queues


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """What one queue (or ``"*"``) takes; None (or an empty mapping) means no limit."""

    priority_class_names: frozenset[str] | None = None
    max_pods_per_job: int | None = None
    max_resources_per_job: Mapping[str, Fraction] = field(default_factory=dict)
    """Resource name → the most one job may request, in the quantity's own unit."""
    resource_texts: Mapping[str, str] = field(default_factory=dict)
    """The limits as the file writes them, for messages."""
    scheduler_names: frozenset[str] | None = None
    preemptable_only: bool = False


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """A loaded policy. The empty policy (no file) allows everything and defaults nothing."""

    namespaces: Mapping[str, NamespaceRule] = field(default_factory=dict)
    queues: Mapping[str, QueueLimits] = field(default_factory=dict)
    source: str = ""

    @property
    def active(self) -> bool:
        return bool(self.namespaces or self.queues)

    def current(self) -> QueuePolicy:
        """A policy is its own :class:`PolicySource` (one that never changes)."""
        return self

    def namespace_rule(self, namespace: str) -> NamespaceRule | None:
        """The rule for ``namespace``: its own entry, else ``"*"``, else none (any queue)."""
        rule = self.namespaces.get(namespace)
        return rule if rule is not None else self.namespaces.get(ANY)

    def limits(self, queue: str) -> QueueLimits | None:
        """The limits of ``queue``: its own entry, else ``"*"``, else none."""
        limits = self.queues.get(queue)
        return limits if limits is not None else self.queues.get(ANY)


EMPTY_POLICY: Final = QueuePolicy()


class PolicySource(Protocol):
    """Where the rules get the policy in force now (a fixed policy, or a reloaded file)."""

    def current(self) -> QueuePolicy: ...


# --- the schema ----------------------------------------------------------------------------------

_NAME: Final = {"type": "string", "empty": False, "maxlength": 253}
_NAMES: Final = {"type": "list", "schema": _NAME}
_NAMESPACE: Final = {
    "type": "dict",
    "schema": {"queues": _NAMES, "defaultQueue": _NAME},
}
_LIMITS: Final = {
    "type": "dict",
    "schema": {
        "priorityClassNames": _NAMES,
        "maxPodsPerJob": {"type": "count", "min": 1, "max": 2**31 - 1},
        "maxResourcesPerJob": {
            "type": "dict",
            "keysrules": _NAME,
            "valuesrules": {"type": ["string", "count", "float"], "check_with": "quantity"},
        },
        "schedulerNames": {**_NAMES, "minlength": 1},
        "preemptableOnly": {"type": "boolean"},
    },
}
SCHEMA: Final = {
    "apiVersion": {"type": "string", "allowed": [API_VERSION]},
    "kind": {"type": "string", "allowed": [KIND]},
    "namespaces": {"type": "dict", "keysrules": _NAME, "valuesrules": _NAMESPACE},
    "queues": {"type": "dict", "keysrules": _NAME, "valuesrules": _LIMITS},
}


class _Validator(cerberus.Validator):
    """cerberus with a ``count`` type (an int that is not a bool: YAML's ``true`` is no
    number of pods) and the quantity check."""

    types_mapping: ClassVar = {
        **cerberus.Validator.types_mapping,
        "count": cerberus.TypeDefinition("count", (int,), (bool,)),
    }

    def _check_with_quantity(self, field: str, value: object) -> None:
        try:
            amount = parse_quantity(value)
        except ValueError as err:
            self._error(field, str(err).removeprefix("quantity: "))
            return
        if amount < 0:
            self._error(field, "must not be negative")


# --- reading -------------------------------------------------------------------------------------


def load_policy(path: str | Path) -> QueuePolicy:
    """Read and check the policy file at ``path`` (see the module docstring)."""
    source = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_POLICY_BYTES + 1)
    except OSError as err:
        raise PolicyError(
            f"{source}: cannot read the queue policy: {err.strerror or err}"
        ) from None
    return parse_policy(raw, source)


def parse_policy(raw: bytes | str, source: str = "queue-policy.yaml") -> QueuePolicy:
    """The policy a file's bytes describe, or :class:`PolicyError` naming what is wrong."""
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError(f"{source}: the queue policy is over {MAX_POLICY_BYTES} bytes")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise PolicyError(f"{source}: not UTF-8 text (byte {err.start})") from None
    document = _bounded_yaml(raw, source)
    if document is None:
        raise PolicyError(
            f"{source}: the queue policy is empty; write `namespaces:` and `queues:` "
            "(or `{}` for a policy that allows everything)"
        )
    if not isinstance(document, dict):
        raise PolicyError(
            f"{source}: the queue policy must be a mapping with `namespaces` and `queues`, "
            f"got {_type_name(document)}"
        )
    return policy_from_document(document, source)


def policy_from_document(document: Mapping[str, Any], source: str) -> QueuePolicy:
    """Check an already-parsed document with the schema and build the policy."""
    validator = _Validator(SCHEMA)
    if not validator.validate(dict(document)):
        problems = list(_flatten(validator.errors, document, ""))
        raise PolicyError(_joined(source, problems))
    problems = []
    namespaces: dict[str, NamespaceRule] = {}
    for name, entry in (document.get("namespaces") or {}).items():
        queues = entry.get("queues")
        default = entry.get("defaultQueue")
        if queues is not None and default is not None and default not in queues:
            problems.append(
                f"namespaces{_key(name)}.defaultQueue: {default!r} is not one of the "
                f"namespace's queues ({', '.join(queues) or 'none'})"
            )
        namespaces[name] = NamespaceRule(
            tuple(dict.fromkeys(queues)) if queues is not None else None, default
        )
    if problems:
        raise PolicyError(_joined(source, problems))
    queues = {name: _limits(entry) for name, entry in (document.get("queues") or {}).items()}
    return QueuePolicy(namespaces, queues, source)


def _limits(entry: Mapping[str, Any]) -> QueueLimits:
    resources = entry.get("maxResourcesPerJob") or {}
    classes = entry.get("priorityClassNames")
    schedulers = entry.get("schedulerNames")
    return QueueLimits(
        priority_class_names=frozenset(classes) if classes is not None else None,
        max_pods_per_job=entry.get("maxPodsPerJob"),
        max_resources_per_job={r: parse_quantity(v) for r, v in resources.items()},
        resource_texts={r: str(v) for r, v in resources.items()},
        scheduler_names=frozenset(schedulers) if schedulers is not None else None,
        preemptable_only=bool(entry.get("preemptableOnly", False)),
    )


def _bounded_yaml(text: str, source: str) -> Any:
    """One YAML document, refused before it is built when it nests too deep (the composer
    recurses per level in C) and after, before anything walks it, when its aliases expand
    past :data:`MAX_POLICY_NODES` (shared nodes cost nothing to build, everything to walk)."""
    depth = 0
    documents = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                if depth > MAX_POLICY_DEPTH:
                    raise PolicyError(
                        f"{source}: line {_line(event)}: nests deeper than "
                        f"{MAX_POLICY_DEPTH} levels"
                    )
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
            elif isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise PolicyError(
                        f"{source}: line {_line(event)}: a queue policy is one YAML document"
                    )
        document = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        raise PolicyError(f"{source}: not valid YAML: {_one_line(err)}") from None
    _count_nodes(document, source)
    return document


def _count_nodes(document: Any, source: str) -> None:
    budget = MAX_POLICY_NODES
    stack = [document]
    while stack:
        node = stack.pop()
        budget -= 1
        if budget < 0:
            raise PolicyError(
                f"{source}: holds more than {MAX_POLICY_NODES} values once its aliases are expanded"
            )
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _line(event: yaml.Event) -> int:
    mark = event.start_mark
    return mark.line + 1 if mark is not None else 0


def _one_line(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
    return " ".join(str(err).split())


def _type_name(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


# --- error paths ---------------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+\Z")


def _key(name: object) -> str:
    """One step of a key path: ``.team-a``, ``["*"]``, ``["nvidia.com/gpu"]``, ``[5]``."""
    if isinstance(name, str):
        return f".{name}" if _PLAIN_KEY.match(name) else f"[{_quoted(name)}]"
    return f"[{name!r}]"


def _quoted(text: str) -> str:
    shown = text if len(text) <= 64 else f"{text[:61]}..."
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _flatten(tree: Mapping[Any, list[Any]], node: Any, path: str) -> Iterator[str]:
    """cerberus's nested error tree as ``path: message`` lines, in document order. The
    document is walked alongside to tell a list index (``[1]``) from a mapping key."""
    for name, entries in tree.items():
        if isinstance(node, list) and isinstance(name, int):
            here = f"{path}[{name}]"
            child = node[name] if 0 <= name < len(node) else None
        else:
            here = f"{path}{_key(name)}" if path else _key(name).removeprefix(".")
            child = node.get(name) if isinstance(node, dict) else None
        for entry in entries:
            if isinstance(entry, dict):
                yield from _flatten(entry, child, here)
            else:
                yield f"{here}: {_MESSAGES.get(entry, entry)}"


_MESSAGES: Final = {
    "must be of count type": "must be a whole number",
    "must be of ['string', 'count', 'float'] type": "must be a quantity such as 8, 500m or 64Gi",
}
"""cerberus's wording where it names our own types."""


def _joined(source: str, problems: list[str]) -> str:
    shown = [f"{source}: {p}" for p in problems[:MAX_REPORTED_ERRORS]]
    if len(problems) > MAX_REPORTED_ERRORS:
        shown.append(f"{source}: and {len(problems) - MAX_REPORTED_ERRORS} more problems")
    return "; ".join(shown)
