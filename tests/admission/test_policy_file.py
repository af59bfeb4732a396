"""The queue policy file: what it may say, how a bad one is refused (naming the key), and the
bounds that keep a hostile file from costing more than a small one."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from stromboli.core.admission.policy import (
    ANY,
    MAX_POLICY_BYTES,
    MAX_POLICY_DEPTH,
    MAX_REPORTED_ERRORS,
    NamespaceRule,
    PolicyError,
    QueueLimits,
    load_policy,
    parse_policy,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "queue-policy.yaml"

FULL = """
apiVersion: stromboli.dev/v1alpha1
kind: QueuePolicy
namespaces:
  team-a: {queues: [team-a, shared], defaultQueue: team-a}
  "*": {queues: [shared], defaultQueue: shared}
queues:
  team-a:
    priorityClassNames: [low, normal]
    maxPodsPerJob: 16
    maxResourcesPerJob: {cpu: "64", nvidia.com/gpu: 8, memory: 1.5Ti, ephemeral-storage: 0.5}
    schedulerNames: [volcano]
    preemptableOnly: true
"""


def refusal(text: str) -> str:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text)
    return str(caught.value)


def test_a_full_policy_is_read() -> None:
    policy = parse_policy(FULL, "p.yaml")
    assert policy.source == "p.yaml"
    assert policy.namespaces["team-a"] == NamespaceRule(("team-a", "shared"), "team-a")
    assert policy.namespaces[ANY] == NamespaceRule(("shared",), "shared")
    limits = policy.queues["team-a"]
    assert limits.priority_class_names == {"low", "normal"}
    assert limits.max_pods_per_job == 16
    assert limits.max_resources_per_job == {
        "cpu": 64,
        "nvidia.com/gpu": 8,
        "memory": Fraction(3, 2) * 2**40,
        "ephemeral-storage": Fraction(1, 2),
    }
    assert limits.resource_texts["memory"] == "1.5Ti"
    assert limits.scheduler_names == {"volcano"}
    assert limits.preemptable_only is True


def test_every_key_is_optional() -> None:
    policy = parse_policy("{}")
    assert not policy.active
    policy = parse_policy("namespaces: {a: {}}\nqueues: {q: {}}")
    assert policy.namespaces["a"] == NamespaceRule(None, None)
    assert policy.queues["q"] == QueueLimits()
    assert policy.active


def test_lookups_fall_back_to_the_star_entry() -> None:
    policy = parse_policy(FULL)
    assert policy.namespace_rule("team-a") == NamespaceRule(("team-a", "shared"), "team-a")
    assert policy.namespace_rule("elsewhere") == NamespaceRule(("shared",), "shared")
    assert policy.limits("team-a") is policy.queues["team-a"]
    assert policy.limits("other") is None
    bare = parse_policy("namespaces: {a: {queues: [q]}}")
    assert bare.namespace_rule("b") is None


def test_the_example_is_a_valid_policy() -> None:
    policy = load_policy(EXAMPLE)
    assert policy.namespace_rule("research") == NamespaceRule(("research", "spot"), "research")
    assert policy.source == str(EXAMPLE)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "namespaces: {team-a: {queues: [a, 3]}}",
            "namespaces.team-a.queues[1]: must be of string type",
        ),
        (
            "namespaces: {team-a: {queues: [a, '']}}",
            "namespaces.team-a.queues[1]: empty values not allowed",
        ),
        ("namespaces: {team-a: {queue: [a]}}", "namespaces.team-a.queue: unknown field"),
        ("namespaces: {5: {}}", "namespaces[5]: must be of string type"),
        ("namespaces: [a]", "namespaces: must be of dict type"),
        (
            "namespaces: {a: {defaultQueue: [q]}}",
            "namespaces.a.defaultQueue: must be of string type",
        ),
        ("queues: {q: {maxPodsPerJob: true}}", "queues.q.maxPodsPerJob: must be a whole number"),
        ("queues: {q: {maxPodsPerJob: 1.5}}", "queues.q.maxPodsPerJob: must be a whole number"),
        ("queues: {q: {maxPodsPerJob: 0}}", "queues.q.maxPodsPerJob: min value is 1"),
        ("queues: {q: {maxPodsPerJob: 9999999999}}", "queues.q.maxPodsPerJob: max value is"),
        (
            "queues: {q: {preemptableOnly: 'yes'}}",
            "queues.q.preemptableOnly: must be of boolean type",
        ),
        ("queues: {'*': {schedulerNames: []}}", 'queues["*"].schedulerNames: min length is 1'),
        (
            "queues: {q: {priorityClassNames: low}}",
            "queues.q.priorityClassNames: must be of list type",
        ),
        (
            "queues: {q: {maxResourcesPerJob: {nvidia.com/gpu: -1}}}",
            'queues.q.maxResourcesPerJob["nvidia.com/gpu"]: must not be negative',
        ),
        (
            "queues: {q: {maxResourcesPerJob: {cpu: lots}}}",
            "queues.q.maxResourcesPerJob.cpu: 'lots' is not a valid quantity",
        ),
        (
            "queues: {q: {maxResourcesPerJob: {cpu: 1e40}}}",
            "queues.q.maxResourcesPerJob.cpu: '1e40' is out of range",
        ),
        (
            "queues: {q: {maxResourcesPerJob: {cpu: .inf}}}",
            "queues.q.maxResourcesPerJob.cpu: inf is not a valid quantity",
        ),
        (
            "queues: {q: {maxResourcesPerJob: {cpu: [1]}}}",
            "queues.q.maxResourcesPerJob.cpu: must be a quantity such as 8, 500m or 64Gi",
        ),
        ("kind: Queue", "kind: unallowed value Queue"),
        ("apiVersion: v1", "apiVersion: unallowed value v1"),
        ("namespace: {}", "namespace: unknown field"),
        (
            "namespaces: {a: {queues: [q], defaultQueue: other}}",
            "namespaces.a.defaultQueue: 'other' is not one of the namespace's queues (q)",
        ),
        (
            "namespaces: {a: {queues: [], defaultQueue: q}}",
            "namespaces.a.defaultQueue: 'q' is not one of the namespace's queues (none)",
        ),
    ],
)
def test_schema_errors_name_the_key(text: str, message: str) -> None:
    got = refusal(text)
    assert got.startswith("queue-policy.yaml: ")
    assert message in got


def test_all_errors_are_named_at_once_up_to_a_bound() -> None:
    got = refusal("namespaces: {a: {queues: [1]}, b: {bad: 1}}\nqueues: {q: {maxPodsPerJob: x}}")
    assert "namespaces.a.queues[0]" in got
    assert "namespaces.b.bad" in got
    assert "queues.q.maxPodsPerJob" in got
    many = "queues: {" + ", ".join(f"q{i}: {{x: 1}}" for i in range(50)) + "}"
    got = refusal(many)
    assert got.count("unknown field") == MAX_REPORTED_ERRORS
    assert f"and {50 - MAX_REPORTED_ERRORS} more problems" in got


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the queue policy is empty"),
        ("# only a comment\n", "the queue policy is empty"),
        ("[a, b]", "must be a mapping with `namespaces` and `queues`, got a list"),
        ("just text", "got a string"),
        ("a: 1\n---\nb: 2\n", "line 2: a queue policy is one YAML document"),
        ("a: [1\n", "not valid YAML: line 2, column 1"),
        ("a: !!python/object:os.system {}\n", "not valid YAML"),
    ],
)
def test_files_that_are_no_policy_are_refused(text: str, message: str) -> None:
    assert message in refusal(text)


def test_deep_nesting_is_refused_before_it_is_built() -> None:
    depth = 100_000
    got = refusal("a: " + "[" * depth + "]" * depth)
    assert f"nests deeper than {MAX_POLICY_DEPTH} levels" in got
    assert "line 1" in got


def test_aliases_that_expand_past_the_bound_are_refused() -> None:
    lines = ["l0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for level in range(1, 8):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"l{level}: &a{level} [{refs}]")
    assert "once its aliases are expanded" in refusal("\n".join(lines))


def test_a_recursive_alias_is_refused() -> None:
    assert "once its aliases are expanded" in refusal("a: &a [*a]")


def test_aliases_within_the_bound_are_fine() -> None:
    policy = parse_policy("queues:\n  a: &limits {maxPodsPerJob: 4}\n  b: *limits\n")
    assert policy.queues["a"] == policy.queues["b"]


def test_a_file_over_the_size_bound_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_POLICY_BYTES + 1))
    with pytest.raises(PolicyError, match="over 1048576 bytes"):
        load_policy(path)


def test_unreadable_and_non_utf8_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the queue policy"):
        load_policy(tmp_path / "missing.yaml")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"namespaces: {caf\xe9: {}}")
    with pytest.raises(PolicyError, match=r"not UTF-8 text \(byte 16\)"):
        load_policy(path)
