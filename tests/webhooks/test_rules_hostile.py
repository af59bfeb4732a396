"""Hostile objects the admission rules must refuse with a message, never loop or crash on."""

from __future__ import annotations

from typing import Any

from stromboli.webhooks.rules.mutate import mutate_queue
from stromboli.webhooks.rules.queue import validate_queue


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
