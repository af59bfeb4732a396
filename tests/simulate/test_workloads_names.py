"""The pure parts of the workload emulation: template hashes, ordinals, index ranges, surge."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.simulate.workloads.batchjob import index_ranges
from stromboli.core.simulate.workloads.common import replicas, template_hash
from stromboli.core.simulate.workloads.deployment import max_surge
from stromboli.core.simulate.workloads.statefulset import ordinal

ALPHABET = set("bcdfghjklmnpqrstvwxz2456789")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_a_template_hash_is_short_stable_and_in_the_name_alphabet(template: object) -> None:
    digest = template_hash(template)
    assert digest == template_hash(template)
    assert set(digest) <= ALPHABET and 1 <= len(digest) <= 10


@given(st.dictionaries(st.text(max_size=5), st.integers(), min_size=2, max_size=6))
def test_key_order_does_not_change_the_hash(template: dict[str, int]) -> None:
    reordered = dict(reversed(list(template.items())))
    assert template_hash(template) == template_hash(reordered)


def test_a_collision_count_changes_the_hash() -> None:
    assert template_hash({"a": 1}) != template_hash({"a": 1}, collision_count=1)


@given(st.sets(st.integers(0, 200), max_size=60))
def test_index_ranges_cover_exactly_the_indexes(indexes: set[int]) -> None:
    text = index_ranges(indexes)
    covered: set[int] = set()
    for part in text.split(",") if text else ():
        low, _, high = part.partition("-")
        covered |= set(range(int(low), int(high or low) + 1))
    assert covered == indexes
    # Ranges are maximal: one part per run of consecutive indexes.
    parts = len(text.split(",")) if text else 0
    assert parts == len([i for i in indexes if i - 1 not in indexes])


@pytest.mark.parametrize(
    ("indexes", "text"),
    [(set(), ""), ({0}, "0"), ({0, 1, 2}, "0-2"), ({0, 1, 2, 4}, "0-2,4"), ({3, 5, 6}, "3,5-6")],
)
def test_index_ranges(indexes: set[int], text: str) -> None:
    assert index_ranges(indexes) == text


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ("db-0", 0),
        ("db-12", 12),
        ("db-x", None),
        ("other-1", None),
        ("db-", None),
        ("my-db-3", None),
    ],
)
def test_ordinal(pod: str, expected: int | None) -> None:
    assert ordinal("db", pod) == expected


def test_ordinal_of_a_dashed_name() -> None:
    assert ordinal("my-db", "my-db-3") == 3


@pytest.mark.parametrize(
    ("spec", "want", "surge"),
    [
        ({}, 3, 1),
        ({}, 4, 1),
        ({}, 5, 2),
        ({"strategy": {"type": "Recreate"}}, 5, 0),
        ({"strategy": {"rollingUpdate": {"maxSurge": 2}}}, 5, 2),
        ({"strategy": {"rollingUpdate": {"maxSurge": "50%"}}}, 3, 2),
        ({"strategy": {"rollingUpdate": {"maxSurge": "lots%"}}}, 3, 0),
    ],
)
def test_max_surge(spec: dict, want: int, surge: int) -> None:
    assert max_surge(spec, want) == surge


@pytest.mark.parametrize(
    ("spec", "count"),
    [
        ({}, 1),
        ({"replicas": 0}, 0),
        ({"replicas": 5}, 5),
        ({"replicas": -3}, 0),
        ({"replicas": True}, 1),
        ({"replicas": "4"}, 1),
    ],
)
def test_replicas(spec: dict, count: int) -> None:
    assert replicas(spec) == count
