"""Queue admission rules (reference §6 Queue CREATE/UPDATE/DELETE; §9 admission "Queue")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from stromboli.core.admission.mutate import mutate_queue
from stromboli.core.admission.queue import (
    amounts,
    children_of,
    format_amounts,
    validate_queue,
    validate_queue_delete,
)


def queue(
    name: str = "q",
    *,
    state: str | None = None,
    annotations: dict | None = None,
    allocated: dict | None = None,
    **spec: Any,
) -> dict:
    q: dict = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"weight": 1, **spec},
    }
    status: dict = {}
    if state:
        status["state"] = state
    if allocated:
        status["allocated"] = allocated
    if status:
        q["status"] = status
    return q


BUILT_IN = {"root": queue("root", state="Open"), "default": queue("default", state="Open")}


def cluster(*queues: dict) -> dict[str, dict]:
    return {**BUILT_IN, **{q["metadata"]["name"]: q for q in queues}}


def create(q: dict, queues: dict | None = None, **options: Any) -> list[str]:
    return validate_queue(mutate_queue(q), BUILT_IN if queues is None else queues, **options)


def has(errors: list[str], text: str) -> bool:
    return any(text in e for e in errors)


# --- states and weights --------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["Open", "Closed", None])
def test_valid_states(state: str | None) -> None:
    assert create(queue(state=state)) == []


def test_invalid_state() -> None:
    assert create(queue(state="Closing")) == [
        'requestBody.spec.state: Invalid value: "Closing": queue state must be in [Open Closed]'
    ]


def test_negative_weight() -> None:
    assert create(queue(weight=-1)) == [
        "spec.weight: Invalid value: -1: spec.weight in body should be greater than or equal to 1"
    ]


def test_weight_above_maximum() -> None:
    assert has(create(queue(weight=70000)), "less than or equal to 65535")


def test_no_weight_uses_default() -> None:
    q = queue()
    del q["spec"]["weight"]
    assert create(q) == []


def test_negative_priority() -> None:
    assert has(create(queue(priority=-1)), "spec.priority in body should be greater than or equal")


# --- guarantee <= deserved <= capability ---------------------------------------------------------


def test_only_deserved_allowed() -> None:
    assert create(queue(deserved={"cpu": "2", "memory": "2Gi"})) == []


def test_only_guarantee_rejected() -> None:
    errors = create(queue(guarantee={"resource": {"cpu": "1"}}))
    assert errors == [
        'requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= '
        "guarantee[cpu]=1"
    ]


def test_capability_less_than_deserved() -> None:
    errors = create(queue(capability={"cpu": "1"}, deserved={"cpu": "2"}))
    assert has(errors, "deserved[cpu]=2 must be <= capability[cpu]=1")


def test_capability_less_than_guarantee() -> None:
    errors = create(queue(capability={"cpu": "1"}, guarantee={"resource": {"cpu": "2"}}))
    assert has(errors, "must be >= guarantee")


def test_deserved_less_than_guarantee() -> None:
    errors = create(queue(deserved={"cpu": "1"}, guarantee={"resource": {"cpu": "2"}}))
    assert has(errors, "deserved[cpu]=1 must be >= guarantee[cpu]=2")


def test_deserved_dimension_absent_from_capability() -> None:
    assert create(queue(capability={"cpu": "4"}, deserved={"cpu": "2", "memory": "1Gi"})) == []


def test_guarantee_dimension_absent_from_capability() -> None:
    q = queue(
        capability={"cpu": "4"},
        deserved={"cpu": "2", "memory": "2Gi"},
        guarantee={"resource": {"memory": "1Gi"}},
    )
    assert create(q) == []


def test_guarantee_dimension_absent_from_deserved() -> None:
    q = queue(deserved={"cpu": "2"}, guarantee={"resource": {"cpu": "1", "memory": "1Gi"}})
    assert has(create(q), "deserved[memory] must be >= guarantee[memory]=1Gi")


def test_quantities_compare_by_value() -> None:
    assert create(queue(capability={"cpu": "2000m"}, deserved={"cpu": "2"})) == []


def test_negative_quantity() -> None:
    assert has(create(queue(capability={"cpu": "-1"})), "must be greater than or equal to 0")


def test_fractional_extended_resource() -> None:
    assert has(create(queue(capability={"nvidia.com/gpu": "0.5"})), "must be an integer")


# --- hierarchy annotations -----------------------------------------------------------------------

H = "volcano.sh/hierarchy"
W = "volcano.sh/hierarchy-weights"


def test_hierarchy_without_weights() -> None:
    assert create(queue(annotations={H: "root/a"})) != []


def test_hierarchy_length_mismatch() -> None:
    errors = create(queue(annotations={H: "root/a/b", W: "1/2"}))
    assert has(errors, "volcano.sh/hierarchy must have the same length with")


def test_hierarchy_negative_weight() -> None:
    errors = create(queue(annotations={H: "root/a", W: "1/-2"}))
    assert has(errors, "-2 in the 1/-2 must be larger than 0")


def test_hierarchy_non_numeric_weight() -> None:
    errors = create(queue(annotations={H: "root/a", W: "1/x"}))
    assert has(errors, 'x in the 1/x is invalid number: strconv.ParseFloat: parsing "x"')


def test_hierarchy_valid() -> None:
    assert create(queue(annotations={H: "root/a", W: "1/2.5"})) == []


def test_hierarchy_not_above_another_queue() -> None:
    other = queue("deep", annotations={H: "root/a/b", W: "1/1/1"})
    errors = create(queue("q", annotations={H: "root/a", W: "1/1"}), cluster(other))
    assert has(errors, "root/a is not allowed to be in the sub path of root/a/b of queue deep")


def test_hierarchy_prefix_must_be_whole_node() -> None:
    other = queue("other", annotations={H: "root/scidev", W: "1/1"})
    assert create(queue("q", annotations={H: "root/sci", W: "1/1"}), cluster(other)) == []


# --- parents -------------------------------------------------------------------------------------


def test_hierarchical_create_with_valid_parent() -> None:
    parent = queue("test-parent-queue", parent="root", state="Open")
    assert create(queue("child", parent="test-parent-queue"), cluster(parent)) == []


def test_parent_itself() -> None:
    assert create(queue("q", parent="q"), cluster(queue("q"))) == [
        "queue q cannot use itself as parent"
    ]


def test_parent_missing() -> None:
    assert create(queue("q", parent="nope")) == [
        'failed to get parent queue nope of queue q: queue.scheduling.volcano.sh "nope" not found'
    ]


def test_parent_depth_limit() -> None:
    chain = [queue(f"l{i}", parent=f"l{i - 1}" if i else "root") for i in range(6)]
    errors = create(queue("q", parent="l5"), cluster(*chain))
    assert errors == ["queue q exceeds the maximum allowed depth of 5"]
    assert create(queue("q", parent="l2"), cluster(*chain)) == []
    assert create(queue("q", parent="l5"), cluster(*chain), max_queue_depth=10) == []


def test_leaf_parent_with_allocated_pods() -> None:
    parent = queue("p", allocated={"pods": "3"})
    assert create(queue("q", parent="p"), cluster(parent)) == [
        "queue p cannot be the parent queue of queue q because it has allocated Pods: 3"
    ]


def test_non_leaf_parent_with_allocated_pods_is_fine() -> None:
    parent = queue("p", allocated={"pods": "3"})
    assert create(queue("q", parent="p"), cluster(parent, queue("sibling", parent="p"))) == []


# --- resource hierarchy --------------------------------------------------------------------------


def test_child_capability_above_ancestor() -> None:
    parent = queue("p", capability={"cpu": "4"})
    errors = create(queue("q", parent="p", capability={"cpu": "8"}), cluster(parent))
    assert errors == ["queue q capability[cpu]=8 exceeds its ancestor's capability=4"]


def test_child_capability_checked_against_nearest_capped_ancestor() -> None:
    top = queue("top", capability={"memory": "1Gi"})
    middle = queue("middle", parent="top")
    errors = create(queue("q", parent="middle", capability={"memory": "2Gi"}), cluster(top, middle))
    assert errors == ["queue q capability[memory]=2Gi exceeds its ancestor's capability=1Gi"]


def test_siblings_guarantee_within_parent() -> None:
    parent = queue("p", deserved={"cpu": "4"}, guarantee={"resource": {"cpu": "2"}})
    sibling = queue("s", parent="p", deserved={"cpu": "1"}, guarantee={"resource": {"cpu": "1"}})
    child = queue("q", parent="p", deserved={"cpu": "2"}, guarantee={"resource": {"cpu": "2"}})
    (error,) = create(child, cluster(parent, sibling))
    assert error == (
        "parent queue p validation failed: sum of children's guarantee (cpu 3000.00, memory 0.00) "
        "exceeds parent's guarantee limit (cpu 2000.00, memory 0.00)"
    )


def test_siblings_deserved_within_parent() -> None:
    parent = queue("p", deserved={"cpu": "2"})
    sibling = queue("s", parent="p", deserved={"cpu": "1"})
    errors = create(queue("q", parent="p", deserved={"cpu": "2"}), cluster(parent, sibling))
    assert has(errors, "sum of children's deserved (cpu 3000.00, memory 0.00) exceeds")


def test_siblings_within_parent_pass() -> None:
    parent = queue("p", deserved={"cpu": "4"})
    sibling = queue("s", parent="p", deserved={"cpu": "1"})
    assert create(queue("q", parent="p", deserved={"cpu": "3"}), cluster(parent, sibling)) == []


def test_parent_capability_below_descendants() -> None:
    child = queue("c", parent="q", capability={"cpu": "8"})
    old = queue("q", state="Open")
    new = copy.deepcopy(old)
    new["spec"]["capability"] = {"cpu": "4"}
    errors = validate_queue(new, cluster(old, child), old)
    assert errors == ["queue q capability[cpu]=4 is smaller than its descendants' max capability=8"]


def test_update_without_resource_change_skips_hierarchy() -> None:
    parent = queue("p", capability={"cpu": "4"})
    old = queue("q", parent="p", capability={"cpu": "8"}, state="Open")
    new = copy.deepcopy(old)
    new["spec"]["weight"] = 3
    assert validate_queue(new, cluster(parent, old), old) == []


# --- updates -------------------------------------------------------------------------------------


def test_update_open_to_closed() -> None:
    old = queue("q", state="Open")
    new = copy.deepcopy(old)
    new["status"]["state"] = "Closed"
    assert validate_queue(new, cluster(old), old) == []


def test_update_negative_weight() -> None:
    old = queue("q", state="Open")
    new = copy.deepcopy(old)
    new["spec"]["weight"] = -1
    assert has(validate_queue(new, cluster(old), old), "spec.weight")


def test_root_resources_are_protected() -> None:
    old = BUILT_IN["root"]
    new = copy.deepcopy(old)
    new["spec"]["capability"] = {"cpu": "10"}
    expected = [
        "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
    ]
    assert validate_queue(new, BUILT_IN, old) == expected
    assert validate_queue(new, BUILT_IN, old, enable_root_queue_protection=False) == []


def test_root_weight_may_change() -> None:
    old = BUILT_IN["root"]
    new = copy.deepcopy(old)
    new["spec"]["weight"] = 2
    assert validate_queue(new, BUILT_IN, old) == []


def test_parent_change_is_checked() -> None:
    old = queue("q", state="Open")
    new = copy.deepcopy(old)
    new["spec"]["parent"] = "missing"
    assert has(validate_queue(new, cluster(old), old), 'queue.scheduling.volcano.sh "missing"')


# --- delete --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", "root"])
def test_builtin_queues_cannot_be_deleted(name: str) -> None:
    assert validate_queue_delete(name, BUILT_IN) == [f"`{name}` queue can not be deleted"]


def test_regular_queue_can_be_deleted() -> None:
    assert validate_queue_delete("q", cluster(queue("q", state="Open"))) == []


def test_queue_with_children_cannot_be_deleted() -> None:
    queues = cluster(queue("p"), queue("a", parent="p"), queue("b", parent="p"))
    assert validate_queue_delete("p", queues) == [
        "queue p can not be deleted because it has 2 child queues: a, b"
    ]


def test_allocated_pods_block_delete_only_with_flag() -> None:
    queues = cluster(queue("q", allocated={"pods": "2", "cpu": "1"}))
    assert validate_queue_delete("q", queues) == []
    assert validate_queue_delete("q", queues, enable_allocated_pods_check=True) == [
        "queue q cannot be deleted because it has allocated Pods: 2"
    ]


# --- helpers -------------------------------------------------------------------------------------


def test_amounts_and_format() -> None:
    values = amounts({"cpu": "1500m", "memory": "1Ki", "nvidia.com/gpu": "2", "count/pods": "1"})
    assert values == {"cpu": 1500.0, "memory": 1024.0, "nvidia.com/gpu": 2000.0}
    assert format_amounts(values) == "cpu 1500.00, memory 1024.00, nvidia.com/gpu 2000.00"


def test_children_of() -> None:
    queues = cluster(queue("p"), queue("a", parent="p"))
    assert children_of("p", queues) == ["a"]
    assert children_of("a", queues) == []
