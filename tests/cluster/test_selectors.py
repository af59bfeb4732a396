"""Label selector strings, LabelSelector dicts, node-selector operators and field selectors."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.core.cluster.selectors import (
    EVERYTHING,
    NOTHING,
    FieldSelector,
    Requirement,
    Selector,
    SelectorError,
    field_value,
    matches_label_selector,
    parse_field_selector,
    parse_selector,
    requirement_from_dict,
    selector_from_dict,
)

LABELS = {"app": "web", "tier": "front", "version": "3", "team/owner": "x"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("missing=x", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app in (web,db)", True),
        ("app in (db,cache)", False),
        ("missing in (a)", False),
        ("app notin (db,cache)", True),
        ("app notin (web)", False),
        ("missing notin (a)", True),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("  app = web ,  tier in ( front , back )  ", True),
        ("version>2", True),
        ("version>3", False),
        ("version<4", True),
        ("version<3", False),
        ("app>1", False),
        ("missing>1", False),
        ("team/owner=x", True),
        ("example.com/team=x", False),
        ("app=web,!missing,tier notin (back)", True),
    ],
)
def test_parse_and_match(text: str, expected: bool) -> None:
    assert parse_selector(text).matches(LABELS) is expected


@pytest.mark.parametrize(
    "text",
    [
        "app=",
        "app==",
        "app!=",
    ],
)
def test_empty_value_against_missing_and_present(text: str) -> None:
    selector = parse_selector(text)
    assert selector.matches({"app": ""}) is (not text.startswith("app!"))


@pytest.mark.parametrize(
    "text",
    [
        "app in ()",
        "app in (a",
        "app in a",
        "app notin",
        "=web",
        "app=web,",
        ",app=web",
        "app=web tier=front",
        "app==web==x",
        "!",
        "!app=web",
        "version>x",
        "version>",
        "-bad=x",
        "app=-bad",
        "a" * 64 + "=x",
        "Bad_Prefix/app=x",
        "app=web)",
    ],
)
def test_parse_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_parse_none_is_everything() -> None:
    assert parse_selector(None) is EVERYTHING
    assert EVERYTHING.empty
    assert EVERYTHING.matches(None)


def test_parse_is_cached() -> None:
    assert parse_selector("app=web,tier=front") is parse_selector("app=web,tier=front")


def test_no_labels_reads_as_empty() -> None:
    assert parse_selector("!app").matches(None)
    assert not parse_selector("app").matches(None)


def test_canonical_string_sorted() -> None:
    selector = parse_selector("tier in (b,a), app=web, !x, y, v>3")
    assert str(selector) == "app=web,tier in (a,b),v>3,!x,y"


def test_string_round_trip() -> None:
    text = "app=web,tier in (a,b),x!=1,v<5,!gone,present"
    assert parse_selector(str(parse_selector(text))) == parse_selector(text)


def test_selectors_equal_regardless_of_order() -> None:
    assert parse_selector("a=1,b=2") == parse_selector("b=2,a=1")
    assert hash(parse_selector("a=1,b=2")) == hash(parse_selector("b=2,a=1"))


def test_notin_single_value_prints_as_not_equal() -> None:
    assert str(parse_selector("app notin (x)")) == "app!=x"


# --- LabelSelector dicts ----------------------------------------------------------------------


def test_dict_none_selects_nothing() -> None:
    selector = selector_from_dict(None)
    assert selector is NOTHING
    assert selector.selects_nothing
    assert not selector.matches({})
    assert not selector.matches(LABELS)


def test_dict_empty_selects_everything() -> None:
    assert selector_from_dict({}).matches({})
    assert selector_from_dict({"matchLabels": {}, "matchExpressions": []}).empty


def test_match_labels() -> None:
    selector = selector_from_dict({"matchLabels": {"app": "web", "tier": "front"}})
    assert selector.matches(LABELS)
    assert not selector.matches({"app": "web"})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ({"key": "app", "operator": "In", "values": ["web", "db"]}, True),
        ({"key": "app", "operator": "In", "values": ["db"]}, False),
        ({"key": "app", "operator": "NotIn", "values": ["db"]}, True),
        ({"key": "missing", "operator": "NotIn", "values": ["db"]}, True),
        ({"key": "app", "operator": "Exists"}, True),
        ({"key": "missing", "operator": "Exists"}, False),
        ({"key": "missing", "operator": "DoesNotExist"}, True),
        ({"key": "app", "operator": "DoesNotExist", "values": []}, False),
    ],
)
def test_match_expressions(expression: dict[str, Any], expected: bool) -> None:
    assert selector_from_dict({"matchExpressions": [expression]}).matches(LABELS) is expected


def test_match_labels_and_expressions_are_anded() -> None:
    selector = selector_from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}],
        }
    )
    assert not selector.matches(LABELS)


@pytest.mark.parametrize(
    "label_selector",
    [
        {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]},
        {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]},
        {"matchExpressions": [{"operator": "Exists"}]},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": "web"}]},
        {"matchLabels": {"app": 1}},
        {"matchLabels": {"app": "no spaces"}},
    ],
)
def test_bad_label_selector_dicts(label_selector: dict[str, Any]) -> None:
    with pytest.raises(SelectorError):
        selector_from_dict(label_selector)


def test_dict_selector_prints_as_query_string() -> None:
    selector = selector_from_dict(
        {
            "matchLabels": {"b": "2"},
            "matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["y", "x"]}],
        }
    )
    assert str(selector) == "a notin (x,y),b=2"


def test_matches_label_selector_helper() -> None:
    assert matches_label_selector({"matchLabels": {"app": "web"}}, LABELS)
    assert not matches_label_selector(None, LABELS)


# --- node-selector requirements ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("Gt", ["4"], {"gpus": "8"}, True),
        ("Gt", ["8"], {"gpus": "8"}, False),
        ("Lt", ["4"], {"gpus": "2"}, True),
        ("Lt", ["-1"], {"gpus": "-2"}, True),
        ("Gt", ["4"], {"gpus": "many"}, False),
        ("Gt", ["4"], {}, False),
    ],
)
def test_node_selector_numeric(
    operator: str, values: list[str], labels: dict[str, str], expected: bool
) -> None:
    requirement = requirement_from_dict({"key": "gpus", "operator": operator, "values": values})
    assert requirement.matches(labels) is expected


@pytest.mark.parametrize("values", [[], ["1", "2"], ["x"]])
def test_numeric_operator_needs_one_integer(values: list[str]) -> None:
    with pytest.raises(SelectorError):
        Requirement("gpus", "Gt", values)


def test_requirement_unknown_operator() -> None:
    with pytest.raises(SelectorError, match="not one of"):
        Requirement("a", "Equals", ["b"])


def test_selector_from_requirements_matches_all() -> None:
    selector = Selector([Requirement("zone", "In", ["a", "b"]), Requirement("gpus", "Gt", ["1"])])
    assert selector.matches({"zone": "a", "gpus": "2"})
    assert not selector.matches({"zone": "c", "gpus": "2"})
    assert not selector.matches({"zone": "a", "gpus": "1"})


def test_matching_does_not_mutate_labels() -> None:
    labels = dict(LABELS)
    parse_selector("app=web,!x,tier in (front),version>1").matches(labels)
    assert labels == LABELS


# --- field selectors --------------------------------------------------------------------------

POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"nodeName": "n1", "hostNetwork": True},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", True),
        ("metadata.name=p", True),
        ("metadata.name==p", True),
        ("metadata.name!=p", False),
        ("spec.nodeName=n1,status.phase=Running", True),
        ("spec.nodeName=n1,status.phase!=Running", False),
        ("spec.schedulerName=", True),
        ("spec.nodeName=", False),
        ("spec.hostNetwork=true", True),
        ("status.phase.deeper=x", False),
        (" metadata.namespace = ns ", True),
    ],
)
def test_field_selectors(text: str, expected: bool) -> None:
    assert parse_field_selector(text).matches(POD) is expected


def test_field_selector_escapes() -> None:
    obj = {"metadata": {"name": "a,b=c"}}
    assert parse_field_selector(r"metadata.name=a\,b\=c").matches(obj)


def test_field_selector_string_round_trip() -> None:
    selector = FieldSelector([(("metadata", "name"), True, "a,b"), (("x",), False, "y")])
    assert str(selector) == r"metadata.name=a\,b,x!=y"
    assert parse_field_selector(str(selector)).terms == selector.terms


@pytest.mark.parametrize("text", ["metadata.name", "=x", "a..b=x", r"a=\q"])
def test_field_selector_errors(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(text)


def test_field_value_missing_is_empty() -> None:
    assert field_value(POD, ("spec", "missing")) == ""
    assert field_value(POD, ("status", "phase")) == "Running"
