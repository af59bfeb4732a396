"""The deep-JSON fallback decodes what orjson decodes, identically, and any depth besides."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.cluster.jsondecode import DeepJSONError, copy_json, loads, loads_deep

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_fallback_agrees_with_orjson(value: object) -> None:
    text = orjson.dumps(value).decode()
    assert loads_deep(text) == orjson.loads(text)
    spaced = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    assert loads_deep(spaced) == orjson.loads(spaced)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[],:"0123456789.-eE truefalsn\\', max_size=30))
def test_fallback_refuses_what_orjson_refuses(text: str) -> None:
    try:
        expected = orjson.loads(text)
    except orjson.JSONDecodeError:
        with pytest.raises((DeepJSONError, ValueError)):
            loads_deep(text)
    else:
        assert loads_deep(text) == expected


@pytest.mark.parametrize("depth", [1025, 10_000, 100_000])
def test_deep_documents_decode(depth: int) -> None:
    text = '{"a":' * depth + "[1]" + "}" * depth
    value = loads(text.encode())
    for _ in range(depth):
        value = value["a"]
    assert value == [1]


@pytest.mark.parametrize(
    "text", ['{"a":1,}', "[1,]", '{"a"}', '{"a":}', "[1 2]", "[", "]", "{1:2}"]
)
def test_malformed_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        loads_deep(text)


def test_shallow_errors_come_from_orjson() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        loads(b"{not json")


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_copy_json_is_an_equal_independent_copy(value: object) -> None:
    copied = copy_json(value)
    assert copied == value
    if isinstance(value, dict | list) and value:
        assert copied is not value


def test_copy_json_of_a_deep_document() -> None:
    value = loads_deep('{"a":' * 5000 + "[1]" + "}" * 5000)
    copied = copy_json(value)
    inner, original = copied, value
    for _ in range(5000):
        inner, original = inner["a"], original["a"]
        assert inner is not original
    assert inner == [1]
