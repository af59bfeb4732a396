"""JSON from the API server, however deeply nested.

orjson refuses documents nested deeper than 1,024 levels, but kube-apiserver stores custom
resources nested up to 10,000 levels in their free-form parts (a vcjob's pod template is
``x-kubernetes-preserve-unknown-fields``). One such object would make every list of its kind
fail to decode, and a process that lists it at start would fail at every start. ``loads``
therefore falls back, for those documents only, to a small parser that keeps its own stack
instead of recursing; the object is then read like any other, and whatever cannot handle it
later sets it aside alone (see ``core/quarantine.py``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_TOKEN = re.compile(
    r"""[ \t\n\r]*(?:
        (?P<punct>[{}\[\],:])
      | (?P<string>"(?:[^"\\\x00-\x1f]|\\.)*")
      | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
      | (?P<word>true|false|null)
    )""",
    re.VERBOSE,
)
_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None}
_SPACE = re.compile(r"[ \t\n\r]*")


class DeepJSONError(ValueError):
    """Text that is not JSON (found by the fallback parser)."""


def loads(raw: bytes | str) -> Any:
    """Decode JSON: orjson when it can, the stack-keeping parser when it is too deep."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        if "depth" not in str(err) and "recursion" not in str(err).lower():
            raise
    text = raw.decode() if isinstance(raw, bytes) else raw
    return loads_deep(text)


def loads_deep(text: str) -> Any:
    """Decode JSON of any nesting depth without recursion."""
    stack: list[tuple[list | dict, str | None]] = []  # container, pending key of a dict
    position = 0
    result: Any = None
    done = False
    expect_value = True
    after_comma = False
    while True:
        match = _TOKEN.match(text, position)
        if match is None:
            if _SPACE.fullmatch(text, position) is not None and done:
                return result
            raise DeepJSONError(f"invalid JSON at character {position}")
        position = match.end()
        if done:
            raise DeepJSONError(f"extra data at character {match.start()}")
        kind = match.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        token = match.group(kind)
        closing_after_comma = after_comma and token in "}]"
        after_comma = token == ","
        if closing_after_comma:
            raise DeepJSONError(f"trailing ',' before character {match.start()}")
        if kind == "punct":
            if token in "{[":
                if not expect_value:
                    raise DeepJSONError(f"unexpected {token!r} at character {match.start()}")
                container: list | dict = {} if token == "{" else []
                _attach(stack, container)
                stack.append((container, None))
                expect_value = token == "["
                continue
            if token in "}]":
                if not stack:
                    raise DeepJSONError(f"unexpected {token!r} at character {match.start()}")
                container, key = stack.pop()
                if (token == "}") != isinstance(container, dict) or key is not None:
                    raise DeepJSONError(f"unbalanced {token!r} at character {match.start()}")
                expect_value = False
                if not stack:
                    result, done = container, True
                continue
            if token == ",":
                if not stack or expect_value:
                    raise DeepJSONError(f"unexpected ',' at character {match.start()}")
                expect_value = isinstance(stack[-1][0], list)
                continue
            # ':' follows a key in a dict
            if not stack or not isinstance(stack[-1][0], dict) or stack[-1][1] is None:
                raise DeepJSONError(f"unexpected ':' at character {match.start()}")
            expect_value = True
            continue
        value = _scalar(kind, token)
        if stack and isinstance(stack[-1][0], dict) and stack[-1][1] is None and not expect_value:
            if not isinstance(value, str) or kind != "string":
                raise DeepJSONError(f"object keys must be strings (character {match.start()})")
            stack[-1] = (stack[-1][0], value)
            continue
        if not expect_value and stack:
            raise DeepJSONError(f"unexpected value at character {match.start()}")
        if not stack:
            result, done = value, True
            continue
        _attach(stack, value)
        expect_value = False


def _scalar(kind: str, token: str) -> Any:
    if kind == "string":
        return json.loads(token)
    if kind == "number":
        if "." in token or "e" in token or "E" in token:
            return float(token)
        number = int(token)
        # As orjson: integers beyond 64 bits become floats.
        return number if -(2**63) <= number < 2**64 else float(number)
    return _WORDS[token]


def _attach(stack: list[tuple[list | dict, str | None]], value: Any) -> None:
    if not stack:
        return
    container, key = stack[-1]
    if isinstance(container, list):
        container.append(value)
    else:
        if key is None:
            raise DeepJSONError("an object value has no key")
        container[key] = value
        stack[-1] = (container, None)


def copy_json(value: Any) -> Any:
    """A deep copy of decoded JSON: orjson's round trip (several times faster than
    ``copy.deepcopy``), or a copy that keeps its own stack for documents too deep for it."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, orjson.JSONDecodeError):
        pass
    root: list[Any] = [None]
    work: list[tuple[Any, list | dict, Any]] = [(value, root, 0)]
    while work:
        source, target, slot = work.pop()
        if isinstance(source, dict):
            copied: Any = {}
            work.extend((v, copied, k) for k, v in source.items())
        elif isinstance(source, list):
            copied = [None] * len(source)
            work.extend((v, copied, i) for i, v in enumerate(source))
        else:
            copied = source
        target[slot] = copied
    return root[0]
