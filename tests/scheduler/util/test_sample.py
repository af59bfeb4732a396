"""The window of candidate nodes a search scores: the fast path for a cluster where every node
is a candidate gives the same nodes, and leaves the same next start, as the general path."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.util.placement import (
    feasible_nodes_to_find,
    sample,
    sample_all,
    sample_listed,
)
from tests.scheduler.builders import make_session


@settings(max_examples=300, deadline=None)
@given(
    total=st.integers(min_value=2, max_value=6000),
    share=st.floats(min_value=0.0, max_value=1.0),
    start=st.integers(min_value=0, max_value=10**9),
)
def test_all_candidates_fast_path_matches_listing(total: int, share: float, start: int) -> None:
    limit = max(1, min(total - 1, int(total * share)))
    fast, general = make_session([]), make_session([])
    fast.next_start_node = general.next_start_node = start
    listed = sample_listed(general, np.arange(total), total, limit)
    assert np.array_equal(sample_all(fast, total, limit), listed)
    assert fast.next_start_node == general.next_start_node


@settings(max_examples=200, deadline=None)
@given(
    mask=st.lists(st.booleans(), min_size=1, max_size=400),
    full=st.booleans(),
    start=st.integers(min_value=0, max_value=10**6),
    rounds=st.integers(min_value=1, max_value=5),
)
def test_successive_searches_match_listing(
    mask: list[bool], full: bool, start: int, rounds: int
) -> None:
    candidates = np.ones(len(mask), dtype=bool) if full else np.array(mask)
    total = candidates.shape[0]
    chosen, general = make_session([]), make_session([])
    chosen.next_start_node = general.next_start_node = start
    for _ in range(rounds):
        expected = sample_listed(
            general, np.flatnonzero(candidates), total, feasible_nodes_to_find(total)
        )
        assert np.array_equal(sample(chosen, candidates), expected)
        assert chosen.next_start_node == general.next_start_node


def test_big_roomy_cluster_window_wraps_round() -> None:
    ssn = make_session([])
    total = 5000
    limit = feasible_nodes_to_find(total)
    ssn.next_start_node = total - 3
    window = sample(ssn, np.ones(total, dtype=bool))
    assert window.tolist() == [4997, 4998, 4999, *range(limit - 3)]
    assert ssn.next_start_node == limit - 3
