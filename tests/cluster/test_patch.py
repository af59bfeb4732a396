"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) as pure functions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stromboli.core.cluster.patch import PatchError, json_patch, merge_patch

DOC: dict[str, Any] = {
    "metadata": {"name": "x", "labels": {"a": "1", "b": "2"}},
    "spec": {"list": [1, 2, 3], "nested": {"k": "v"}},
}


# --- merge patch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_rfc7386_examples(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


def test_merge_patch_leaves_inputs_untouched() -> None:
    target = copy.deepcopy(DOC)
    patch = {"metadata": {"labels": {"a": None, "c": "3"}}}
    before = copy.deepcopy(patch)
    result = merge_patch(target, patch)
    assert target == DOC
    assert patch == before
    assert result["metadata"]["labels"] == {"b": "2", "c": "3"}


# --- JSON patch -------------------------------------------------------------------------------


def test_add_member() -> None:
    result = json_patch(DOC, [{"op": "add", "path": "/metadata/labels/c", "value": "3"}])
    assert result["metadata"]["labels"]["c"] == "3"


def test_add_replaces_existing_member() -> None:
    result = json_patch(DOC, [{"op": "add", "path": "/metadata/labels/a", "value": "9"}])
    assert result["metadata"]["labels"]["a"] == "9"


def test_add_array_insert_and_append() -> None:
    result = json_patch(
        DOC,
        [
            {"op": "add", "path": "/spec/list/1", "value": 9},
            {"op": "add", "path": "/spec/list/-", "value": 10},
        ],
    )
    assert result["spec"]["list"] == [1, 9, 2, 3, 10]


def test_add_index_past_end_fails() -> None:
    with pytest.raises(PatchError, match="out of range"):
        json_patch(DOC, [{"op": "add", "path": "/spec/list/5", "value": 0}])


def test_add_needs_existing_parent() -> None:
    with pytest.raises(PatchError, match="does not exist"):
        json_patch(DOC, [{"op": "add", "path": "/spec/missing/x", "value": 0}])


def test_remove_member_and_element() -> None:
    result = json_patch(
        DOC,
        [
            {"op": "remove", "path": "/metadata/labels/a"},
            {"op": "remove", "path": "/spec/list/0"},
        ],
    )
    assert result["metadata"]["labels"] == {"b": "2"}
    assert result["spec"]["list"] == [2, 3]


def test_remove_missing_fails() -> None:
    with pytest.raises(PatchError):
        json_patch(DOC, [{"op": "remove", "path": "/metadata/labels/zzz"}])


def test_replace_requires_existing() -> None:
    assert json_patch(DOC, [{"op": "replace", "path": "/spec/list/0", "value": 7}])["spec"][
        "list"
    ] == [7, 2, 3]
    with pytest.raises(PatchError):
        json_patch(DOC, [{"op": "replace", "path": "/spec/zzz", "value": 7}])


def test_replace_whole_document() -> None:
    assert json_patch(DOC, [{"op": "replace", "path": "", "value": {"a": 1}}]) == {"a": 1}


def test_move() -> None:
    result = json_patch(DOC, [{"op": "move", "from": "/spec/nested/k", "path": "/spec/moved"}])
    assert result["spec"]["moved"] == "v"
    assert "k" not in result["spec"]["nested"]


def test_move_into_own_child_fails() -> None:
    with pytest.raises(PatchError, match="into itself"):
        json_patch(DOC, [{"op": "move", "from": "/spec", "path": "/spec/inner"}])


def test_copy_is_deep() -> None:
    result = json_patch(
        DOC,
        [
            {"op": "copy", "from": "/spec/nested", "path": "/spec/twin"},
            {"op": "add", "path": "/spec/twin/extra", "value": 1},
        ],
    )
    assert result["spec"]["twin"] == {"k": "v", "extra": 1}
    assert result["spec"]["nested"] == {"k": "v"}


def test_test_op_passes_and_fails() -> None:
    json_patch(DOC, [{"op": "test", "path": "/metadata/name", "value": "x"}])
    with pytest.raises(PatchError, match="test failed"):
        json_patch(DOC, [{"op": "test", "path": "/metadata/name", "value": "y"}])


def test_test_op_distinguishes_bool_from_int() -> None:
    with pytest.raises(PatchError):
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])
    json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}])


def test_pointer_escapes() -> None:
    doc = {"metadata": {"labels": {"example.com/team": "a", "t~x": "b"}}}
    result = json_patch(
        doc,
        [
            {"op": "replace", "path": "/metadata/labels/example.com~1team", "value": "z"},
            {"op": "remove", "path": "/metadata/labels/t~0x"},
        ],
    )
    assert result["metadata"]["labels"] == {"example.com/team": "z"}


def test_failure_leaves_target_unchanged() -> None:
    target = copy.deepcopy(DOC)
    with pytest.raises(PatchError):
        json_patch(
            target,
            [
                {"op": "remove", "path": "/metadata/labels/a"},
                {"op": "test", "path": "/metadata/name", "value": "nope"},
            ],
        )
    assert target == DOC


def test_added_values_do_not_alias_patch() -> None:
    value: dict[str, Any] = {"inner": {}}
    ops = [
        {"op": "add", "path": "/spec/obj", "value": value},
        {"op": "add", "path": "/spec/obj/inner/x", "value": 1},
    ]
    json_patch(DOC, ops)
    assert value == {"inner": {}}


@pytest.mark.parametrize(
    "ops",
    [
        {"op": "add", "path": "/a", "value": 1},
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "path": "a", "value": 1}],
        [{"op": "add", "value": 1}],
        [{"op": "add", "path": "/a"}],
        [{"op": "move", "path": "/a"}],
        ["not an object"],
        [{"op": "add", "path": "/spec/list/01", "value": 1}],
        [{"op": "add", "path": "/metadata/name/x", "value": 1}],
        [{"op": "remove", "path": ""}],
    ],
)
def test_malformed_operations(ops: Any) -> None:
    with pytest.raises(PatchError):
        json_patch(DOC, ops)
