"""Reading YAML that may be hostile, within fixed bounds.

PyYAML's composer recurses once per nesting level in C, so a document nested 100,000 deep
overflows the C stack and kills the process; and aliases share one node, so nine lines of
"billion laughs" expand to hundreds of millions of nodes as soon as anything walks the result
(validation, copying, dumping). Before composing, the event stream is scanned once (libyaml's
parser keeps its own stack, it does not recurse) to measure nesting depth and the number of
nodes the documents expand to with every alias counted at its full size. Input beyond the
bounds is refused with the line where it went over; nothing is built from it.
"""

from __future__ import annotations

from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - libyaml is part of PyYAML wheels
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest input file read (a 100,000-pod trace is about 20 MiB)."""
MAX_DEPTH = 100
"""Deepest nesting of mappings and sequences (Kubernetes objects need about 15)."""
MAX_ALIAS_NODES = 1_000_000
"""Most nodes the aliases of one file may bring in, each counted at its full size (the nodes
written out are bounded by the file size already)."""


class YamlBoundsError(ValueError):
    """YAML that is malformed or beyond the bounds; the message says where."""


def _line(event: yaml.Event) -> int:
    mark = event.start_mark
    return mark.line + 1 if mark is not None else 0


def scan(text: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_ALIAS_NODES) -> None:
    """Raise :class:`YamlBoundsError` unless ``text`` nests at most ``max_depth`` deep and
    its aliases expand to at most ``max_nodes`` nodes (both as if every alias were a copy)."""
    #: Per anchor: the nodes it holds (itself included) and its height (a scalar's is 0).
    anchors: dict[str, tuple[int, int]] = {}
    #: Per open collection: its anchor, the nodes it holds so far and its height so far.
    open_: list[tuple[str | None, list[int]]] = []
    aliased = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                size, height = 1, 0
                if isinstance(event, yaml.AliasEvent):
                    if any(anchor == event.anchor for anchor, _ in open_):
                        raise YamlBoundsError(
                            f"line {_line(event)}: alias *{event.anchor} refers to a node that "
                            "contains it (a recursive structure)"
                        )
                    size, height = anchors.get(event.anchor or "", (1, 0))
                    aliased += size
                    if aliased > max_nodes:
                        raise YamlBoundsError(
                            f"line {_line(event)}: aliases expand to more than {max_nodes:,} nodes"
                        )
                    if len(open_) + height > max_depth:
                        raise YamlBoundsError(
                            f"line {_line(event)}: alias *{event.anchor} nests more than "
                            f"{max_depth} levels deep"
                        )
                elif event.anchor:
                    anchors[event.anchor] = (1, 0)
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                if len(open_) >= max_depth:
                    raise YamlBoundsError(
                        f"line {_line(event)}: nested more than {max_depth} levels deep"
                    )
                open_.append((event.anchor, [1, 1]))
                continue
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                anchor, (size, height) = open_.pop()
                if anchor:
                    anchors[anchor] = (size, height)
            else:
                continue
            if open_:
                counts = open_[-1][1]
                counts[0] += size
                counts[1] = max(counts[1], height + 1)
    except yaml.YAMLError as err:
        raise YamlBoundsError(f"not valid YAML: {err}") from None


def load_documents(
    text: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_ALIAS_NODES
) -> list[Any]:
    """Every document of ``text`` (``None`` for empty ones), after :func:`scan`."""
    scan(text, max_depth, max_nodes)
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as err:
        raise YamlBoundsError(f"not valid YAML: {err}") from None
    except (ValueError, TypeError) as err:  # an integer of over 4,300 digits, a bad date
        raise YamlBoundsError(f"not valid YAML: {err}") from None
