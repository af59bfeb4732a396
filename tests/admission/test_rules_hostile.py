"""Hostile objects the admission rules must refuse with a message, never loop or crash on."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.core.admission.cronjob import validate_cronjob
from stromboli.core.admission.hypernode import validate_hypernode
from stromboli.core.admission.jobflow import validate_jobflow
from stromboli.core.admission.mutate import mutate_queue
from stromboli.core.admission.queue import validate_queue


def queue(name: str, parent: str | None = None, **spec: Any) -> dict:
    body: dict = {"weight": 1, **spec}
    if parent is not None:
        body["parent"] = parent
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": body,
        "status": {"state": "Open"},
    }


def cluster(*queues: dict) -> dict[str, dict]:
    out = {"root": queue("root"), "default": queue("default", "root")}
    out.update({q["metadata"]["name"]: q for q in queues})
    return out


# --- queue parent cycles -------------------------------------------------------------------------


def test_update_that_closes_a_two_queue_cycle_is_refused() -> None:
    a, b = queue("a", "root"), queue("b", "a")
    errors = validate_queue(mutate_queue(queue("a", "b")), cluster(a, b), old=a)
    assert errors == ['spec.parent: Invalid value: "b": queue parents form a cycle: a -> b -> a']


def test_update_that_closes_a_long_cycle_is_refused() -> None:
    chain = [queue("q0", "root")] + [queue(f"q{i}", f"q{i - 1}") for i in range(1, 4)]
    errors = validate_queue(
        mutate_queue(queue("q0", "q3")), cluster(*chain), old=chain[0], max_queue_depth=50
    )
    assert errors == [
        'spec.parent: Invalid value: "q3": queue parents form a cycle: q0 -> q3 -> q2 -> q1 -> q0'
    ]


def test_stored_cycle_elsewhere_ends_the_walk() -> None:
    # x and y already point at each other (written before this rule existed); a new queue
    # under x must get an answer, whatever the depth limit.
    x, y = queue("x", "y"), queue("y", "x")
    errors = validate_queue(mutate_queue(queue("n", "x")), cluster(x, y), max_queue_depth=10**9)
    assert errors == ['spec.parent: Invalid value: "x": queue parents form a cycle: x -> y -> x']


def test_moving_a_queue_to_a_sibling_is_not_a_cycle() -> None:
    a, b = queue("a", "root"), queue("b", "root")
    assert validate_queue(mutate_queue(queue("a", "b")), cluster(a, b), old=a) == []


# --- JobFlow dependency cycles -------------------------------------------------------------------


def jobflow(*flows: tuple[str, list[str]]) -> dict:
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": "f"},
        "spec": {
            "flows": [
                {"name": name, **({"dependsOn": {"targets": t}} if t else {})} for name, t in flows
            ]
        },
    }


def test_jobflow_cycle_is_refused_naming_the_flows() -> None:
    errors = validate_jobflow(jobflow(("a", ["c"]), ("b", ["a"]), ("c", ["b"])))
    assert errors == [
        "jobflow Flow is not DAG: spec.flows[].dependsOn.targets form a cycle: a -> c -> b -> a"
    ]


def test_jobflow_self_dependency_is_a_cycle() -> None:
    assert "a -> a" in validate_jobflow(jobflow(("a", ["a"])))[0]


def test_jobflow_unknown_target() -> None:
    assert validate_jobflow(jobflow(("a", ["nope"]))) == [
        "jobflow Flow is not DAG: vertex is not defined: nope"
    ]


def test_jobflow_dag_is_admitted() -> None:
    assert validate_jobflow(jobflow(("a", []), ("b", ["a"]), ("c", ["a", "b"]))) == []


def test_long_jobflow_chain_does_not_recurse() -> None:
    flows = [("f0", [])] + [(f"f{i}", [f"f{i - 1}"]) for i in range(1, 20_000)]
    assert validate_jobflow(jobflow(*flows)) == []
    flows[0] = ("f0", ["f19999"])
    assert "form a cycle: f0 -> f19999" in validate_jobflow(jobflow(*flows))[0]


def test_jobflow_duplicate_flow_name() -> None:
    assert validate_jobflow(jobflow(("a", []), ("a", []))) == [
        'spec.flows[1].name: Duplicate value: "a"'
    ]


# --- HyperNode member cycles ---------------------------------------------------------------------


def hypernode(name: str, *members: str, regex: str | None = None) -> dict:
    items: list[dict] = [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": m}}} for m in members
    ]
    if regex is not None:
        items.append({"type": "Node", "selector": {"regexMatch": {"pattern": regex}}})
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": 1, "members": items},
    }


def test_hypernode_closing_a_cycle_is_refused() -> None:
    stored = {"a": hypernode("a", "b"), "b": hypernode("b", "c")}
    assert validate_hypernode(hypernode("c", "a"), stored) == [
        "spec.members: Invalid value: HyperNode members form a cycle: c -> a -> b -> c"
    ]


def test_hypernode_member_of_itself() -> None:
    assert "x -> x" in validate_hypernode(hypernode("x", "x"), {})[0]


def test_hypernode_walk_ends_on_a_stored_cycle_elsewhere() -> None:
    stored = {"p": hypernode("p", "q"), "q": hypernode("q", "p")}
    assert validate_hypernode(hypernode("new", "p"), stored) == []


def test_hypernode_tree_is_admitted_and_bad_pattern_refused() -> None:
    stored = {"leaf": hypernode("leaf", regex="node-.*")}
    assert validate_hypernode(hypernode("spine", "leaf"), stored) == []
    errors = validate_hypernode(hypernode("h", regex="(unclosed"), stored)
    assert errors[0].startswith(
        "spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid"
    )
    assert validate_hypernode({"spec": {"members": []}}) == ["member must have at least one member"]


# --- CronJob schedules ---------------------------------------------------------------------------


def cronjob(schedule: object, **spec: object) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "report"},
        "spec": {"schedule": schedule, "jobTemplate": {}, **spec},
    }


@pytest.mark.parametrize(
    ("schedule", "detail"),
    [
        ("* * * * * *", 'spec.schedule: Invalid value: "* * * * * *": expected exactly 5 fields'),
        ("61 * * * *", "unparseable schedule"),
        ("１ * * * *", "unparseable schedule"),
        ("*/0 * * * *", "unparseable schedule"),
        ("0 0 31 2 *", "never fires"),
        ("TZ=UTC 0 * * * *", "cannot use TZ or CRON_TZ"),
        ("@every 5m", "unrecognized descriptor"),
        ("", "spec.schedule: Required value"),
        (None, "spec.schedule: Required value"),
        (17, "must be a string"),
        ("1," * 5000 + "2 * * * *", "longer than 1024 characters"),
    ],
)
def test_bad_schedule_is_refused_naming_spec_schedule(schedule: object, detail: str) -> None:
    errors = validate_cronjob(cronjob(schedule))
    assert len(errors) == 1 and detail in errors[0] and "spec.schedule" in errors[0]


@pytest.mark.parametrize("schedule", ["* * * * *", "1-4 0 1 1 *", "@hourly", "0 0 29 2 *"])
def test_good_schedule_is_admitted(schedule: str) -> None:
    assert validate_cronjob(cronjob(schedule)) == []


def test_cronjob_time_zone_and_name() -> None:
    assert "unknown time zone" in validate_cronjob(cronjob("* * * * *", timeZone="Mars/Base"))[0]
    assert "unknown time zone" in validate_cronjob(cronjob("* * * * *", timeZone="../etc"))[0]
    assert validate_cronjob(cronjob("* * * * *", timeZone="Europe/Rome")) == []
    long = cronjob("* * * * *")
    long["metadata"]["name"] = "x" * 53
    assert "no more than 52 characters" in validate_cronjob(long)[0]
