"""Label and field selectors: parsed once, matched many times.

The store filters lists with these, and the scheduler's predicates (node selectors, affinity, PDBs,
topology spread) reuse the same matcher on every candidate node, so a compiled :class:`Selector`
is immutable, side-effect free and cheap to call: equality requirements are checked first as plain
dict lookups, and parsing the same selector text twice hits a cache.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

IN: Final = "In"
NOT_IN: Final = "NotIn"
EXISTS: Final = "Exists"
DOES_NOT_EXIST: Final = "DoesNotExist"
GT: Final = "Gt"
LT: Final = "Lt"

LABEL_SELECTOR_OPERATORS: Final = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST})
NODE_SELECTOR_OPERATORS: Final = LABEL_SELECTOR_OPERATORS | {GT, LT}

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_EMPTY: Mapping[str, str] = {}


class SelectorError(ValueError):
    """A selector that cannot be parsed or breaks the label syntax rules."""


def validate_label_key(key: str) -> None:
    """Raise unless ``key`` is ``[prefix/]name`` as Kubernetes label keys must be."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise SelectorError(
            f"label key {key!r}: the prefix before '/' must be a lowercase DNS subdomain "
            "of at most 253 characters"
        )
    if not name or len(name) > 63 or not _NAME.match(name):
        raise SelectorError(
            f"label key {key!r}: the name must be 1-63 alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )


def validate_label_value(value: str) -> None:
    """Raise unless ``value`` is empty or a 1-63 character label value."""
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise SelectorError(
            f"label value {value!r}: must be empty or 1-63 alphanumeric characters, '-', '_' "
            "or '.', starting and ending with an alphanumeric"
        )


class Requirement:
    """One condition on one label key, with Kubernetes' operator names.

    ``NotIn`` and ``DoesNotExist`` match objects that lack the key; ``Gt``/``Lt`` compare the
    label's value as an integer and fail when it is not one (node affinity semantics).
    """

    __slots__ = ("_number", "key", "operator", "values")

    def __init__(self, key: str, operator: str, values: Iterable[str] = ()) -> None:
        if operator not in NODE_SELECTOR_OPERATORS:
            raise SelectorError(
                f"operator {operator!r} for key {key!r} is not one of "
                f"{', '.join(sorted(NODE_SELECTOR_OPERATORS))}"
            )
        validate_label_key(key)
        vals = frozenset(values)
        self.key = key
        self.operator = operator
        self.values = vals
        self._number = 0
        if operator in (IN, NOT_IN):
            if not vals:
                raise SelectorError(f"key {key!r}: operator {operator} needs at least one value")
            for value in vals:
                validate_label_value(value)
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                raise SelectorError(f"key {key!r}: operator {operator} takes no values")
        else:
            if len(vals) != 1:
                raise SelectorError(f"key {key!r}: operator {operator} needs exactly one value")
            (text,) = vals
            try:
                self._number = int(text)
            except ValueError:
                raise SelectorError(
                    f"key {key!r}: operator {operator} needs an integer value, got {text!r}"
                ) from None

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement."""
        op = self.operator
        if op == IN:
            return labels.get(self.key) in self.values
        if op == NOT_IN:
            return labels.get(self.key) not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        value = labels.get(self.key)
        if value is None:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        return number > self._number if op == GT else number < self._number

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirement) and (self.key, self.operator, self.values) == (
            other.key,
            other.operator,
            other.values,
        )

    def __hash__(self) -> int:
        return hash((self.key, self.operator, self.values))

    def __repr__(self) -> str:
        return f"Requirement({self.key!r}, {self.operator!r}, {sorted(self.values)!r})"

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return f"!{self.key}"
        if op in (GT, LT):
            return f"{self.key}{'>' if op == GT else '<'}{self._number}"
        if len(self.values) == 1:
            (value,) = self.values
            return f"{self.key}{'=' if op == IN else '!='}{value}"
        word = "in" if op == IN else "notin"
        return f"{self.key} {word} ({','.join(sorted(self.values))})"


class Selector:
    """A conjunction of requirements; the empty selector matches everything.

    Single-valued ``In`` requirements (``a=b`` and ``matchLabels``), the common case, are kept
    apart as ``(key, value)`` pairs and tested with one dict lookup each.
    """

    __slots__ = ("_equals", "_nothing", "_others", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        reqs = tuple(sorted(set(requirements), key=lambda r: (r.key, r.operator, sorted(r.values))))
        self.requirements: tuple[Requirement, ...] = reqs
        self._nothing = nothing
        self._equals: tuple[tuple[str, str], ...] = tuple(
            (r.key, next(iter(r.values))) for r in reqs if r.operator == IN and len(r.values) == 1
        )
        self._others: tuple[Requirement, ...] = tuple(
            r for r in reqs if not (r.operator == IN and len(r.values) == 1)
        )

    @property
    def empty(self) -> bool:
        """True when the selector matches every label set."""
        return not self.requirements and not self._nothing

    @property
    def selects_nothing(self) -> bool:
        """True for the nil selector (``LabelSelector`` absent), which matches no object."""
        return self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` (``None`` meaning no labels) is selected."""
        if self._nothing:
            return False
        if labels is None:
            labels = _EMPTY
        for key, value in self._equals:
            if labels.get(key) != value:
                return False
        for requirement in self._others:  # noqa: SIM110 - a plain loop beats all() on hot paths
            if not requirement.matches(labels):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Selector)
            and self.requirements == other.requirements
            and self._nothing == other._nothing
        )

    def __hash__(self) -> int:
        return hash((self.requirements, self._nothing))

    def __repr__(self) -> str:
        return "Selector(nothing)" if self._nothing else f"Selector({str(self)!r})"

    def __str__(self) -> str:
        """The canonical string form, usable as a ``labelSelector`` query parameter."""
        return ",".join(str(r) for r in self.requirements)


EVERYTHING: Final = Selector()
NOTHING: Final = Selector(nothing=True)


# --- label selector strings -------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(==|!=|=|!|\(|\)|,|<|>)|([^\s!=(),<>]+))")


def _tokenize(text: str) -> list[tuple[str, str]]:
    """Split into ``("op", "==")`` and ``("word", "app")`` tokens."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    end = len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:  # pragma: no cover - the pattern accepts every non-space character
            raise SelectorError(f"label selector {text!r}: cannot read at position {pos}")
        if match.group(1) is not None:
            tokens.append(("op", match.group(1)))
        else:
            tokens.append(("word", match.group(2)))
        pos = match.end()
    return tokens


class _Parser:
    """Recursive-descent reader for ``a=b,c!=d,e in (f,g),!h,i,j>3``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def fail(self, expected: str) -> SelectorError:
        found = repr(self.tokens[self.pos][1]) if self.pos < len(self.tokens) else "the end"
        return SelectorError(f"label selector {self.text!r}: expected {expected}, found {found}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str] | None:
        token = self.peek()
        self.pos += 1
        return token

    def word(self, what: str) -> str:
        token = self.peek()
        if token is None or token[0] != "word":
            raise self.fail(what)
        self.pos += 1
        return token[1]

    def optional_value(self) -> str:
        token = self.peek()
        if token is not None and token[0] == "word":
            self.pos += 1
            return token[1]
        return ""

    def value_set(self) -> list[str]:
        if self.take() != ("op", "("):
            self.pos -= 1
            raise self.fail("'('")
        if self.peek() == ("op", ")"):
            raise self.fail("at least one value")
        values = [self.optional_value()]
        while True:
            token = self.take()
            if token == ("op", ")"):
                return values
            if token != ("op", ","):
                self.pos -= 1
                raise self.fail("',' or ')'")
            values.append(self.optional_value())

    def requirement(self) -> Requirement:
        token = self.peek()
        if token == ("op", "!"):
            self.pos += 1
            return Requirement(self.word("a label key after '!'"), DOES_NOT_EXIST)
        key = self.word("a label key")
        token = self.peek()
        if token is None or token == ("op", ","):
            return Requirement(key, EXISTS)
        self.pos += 1
        kind, text = token
        if kind == "op" and text in ("=", "=="):
            return Requirement(key, IN, [self.optional_value()])
        if kind == "op" and text == "!=":
            return Requirement(key, NOT_IN, [self.optional_value()])
        if kind == "op" and text in (">", "<"):
            return Requirement(key, GT if text == ">" else LT, [self.word("an integer")])
        if kind == "word" and text in ("in", "notin"):
            return Requirement(key, IN if text == "in" else NOT_IN, self.value_set())
        self.pos -= 1
        raise self.fail("'=', '==', '!=', 'in', 'notin', '>', '<' or ','")

    def selector(self) -> Selector:
        if not self.tokens:
            return EVERYTHING
        requirements = [self.requirement()]
        while self.pos < len(self.tokens):
            if self.take() != ("op", ","):
                self.pos -= 1
                raise self.fail("','")
            requirements.append(self.requirement())
        return Selector(requirements)


@lru_cache(maxsize=4096)
def parse_selector(text: str | None) -> Selector:
    """Parse a ``labelSelector`` string (``""`` or ``None`` selects everything).

    Syntax: comma-separated requirements ``key``, ``!key``, ``key=value``, ``key==value``,
    ``key!=value``, ``key in (v1,v2)``, ``key notin (v1,v2)``, ``key>N``, ``key<N``.
    """
    if not text:
        return EVERYTHING
    return _Parser(text).selector()


# --- metav1.LabelSelector / NodeSelectorRequirement dicts --------------------------------------


def requirement_from_dict(
    expression: Mapping[str, Any], operators: frozenset[str] = NODE_SELECTOR_OPERATORS
) -> Requirement:
    """A ``{key, operator, values}`` expression (LabelSelector or NodeSelector requirement)."""
    key = expression.get("key")
    operator = expression.get("operator")
    values = expression.get("values") or ()
    if not isinstance(key, str) or not isinstance(operator, str):
        raise SelectorError(f"expression {dict(expression)!r}: needs string 'key' and 'operator'")
    if operator not in operators:
        raise SelectorError(
            f"expression for key {key!r}: operator {operator!r} is not one of "
            f"{', '.join(sorted(operators))}"
        )
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise SelectorError(f"expression for key {key!r}: 'values' must be a list of strings")
    return Requirement(key, operator, values)


def selector_from_dict(label_selector: Mapping[str, Any] | None) -> Selector:
    """Compile a ``metav1.LabelSelector``.

    ``None`` (the field is absent) selects nothing and ``{}`` selects everything, as the API
    server reads them; ``matchLabels`` and ``matchExpressions`` are ANDed.
    """
    if label_selector is None:
        return NOTHING
    requirements: list[Requirement] = []
    match_labels: Mapping[str, Any] = label_selector.get("matchLabels") or {}
    for key, value in match_labels.items():
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key!r}]: value {value!r} must be a string")
        validate_label_value(value)
        requirements.append(Requirement(key, IN, (value,)))
    expressions: Sequence[Mapping[str, Any]] = label_selector.get("matchExpressions") or ()
    for expression in expressions:
        requirements.append(requirement_from_dict(expression, LABEL_SELECTOR_OPERATORS))
    if not requirements:
        return EVERYTHING
    return Selector(requirements)


def matches_label_selector(
    label_selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None
) -> bool:
    """One-off check; compile with :func:`selector_from_dict` when matching repeatedly."""
    return selector_from_dict(label_selector).matches(labels)


# --- field selectors --------------------------------------------------------------------------


class FieldSelector:
    """``metadata.name=x,status.phase!=Running``: equality tests on dotted field paths.

    A missing field reads as the empty string, so ``spec.nodeName=`` selects unbound pods, as
    on the API server.
    """

    __slots__ = ("terms",)

    def __init__(self, terms: Iterable[tuple[tuple[str, ...], bool, str]]) -> None:
        self.terms: tuple[tuple[tuple[str, ...], bool, str], ...] = tuple(terms)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for path, equal, value in self.terms:  # noqa: SIM110 - a plain loop beats all()
            if (field_value(obj, path) == value) != equal:
                return False
        return True

    def __str__(self) -> str:
        return ",".join(
            f"{'.'.join(path)}{'=' if equal else '!='}{_escape_field(value)}"
            for path, equal, value in self.terms
        )


def field_value(obj: Mapping[str, Any], path: Sequence[str]) -> str:
    """The field at ``path`` rendered as a field-selector string (``""`` when absent)."""
    current: Any = obj
    for part in path:
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def _escape_field(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            current.append(char)
            current.append(next(chars, ""))
        elif char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _unescape(text: str, whole: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            if nxt not in ("\\", ",", "="):
                raise SelectorError(f"field selector {whole!r}: invalid escape '\\{nxt}'")
            out.append(nxt)
        else:
            out.append(char)
    return "".join(out)


@lru_cache(maxsize=1024)
def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a ``fieldSelector`` (``=``, ``==``, ``!=``; values may escape ``\\ , =``)."""
    if not text or not text.strip():
        return FieldSelector(())
    terms: list[tuple[tuple[str, ...], bool, str]] = []
    for term in _split_unescaped(text, ","):
        at = term.find("=")
        if at < 0:
            raise SelectorError(
                f"field selector {text!r}: term {term!r} needs '=', '==' or '!=' "
                "(e.g. status.phase=Running)"
            )
        equal = not (at > 0 and term[at - 1] == "!")
        field = term[: at if equal else at - 1].strip()
        raw = term[at + 2 :] if term.startswith("=", at + 1) else term[at + 1 :]
        if not field or any(not part for part in field.split(".")):
            raise SelectorError(f"field selector {text!r}: term {term!r} has no field path")
        terms.append((tuple(field.split(".")), equal, _unescape(raw.strip(), text)))
    return FieldSelector(terms)
