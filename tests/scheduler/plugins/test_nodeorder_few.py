"""Resource scores of a few nodes in plain Python give the very floats of the array path, for
any weights, requests and node use, hostile values included (the scheduler's choice of node
must not depend on which path scored it)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.plugins.nodeorder import (
    FEW_NODES,
    Capacity,
    resource_scores_array,
    resource_scores_few,
)

_PLAIN = st.floats(min_value=0.0, max_value=1e12, allow_nan=False)
_ANY = st.one_of(
    _PLAIN,
    st.sampled_from([0.0, -0.0, 1.0, 100.0, 1e300, -1e300, float("inf"), float("nan")]),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    both_nan = np.isnan(a) & np.isnan(b)
    same_sign = np.signbit(a) == np.signbit(b)
    return bool(np.all(both_nan | ((a == b) & same_sign)))


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    count=st.integers(min_value=1, max_value=FEW_NODES),
    weights=st.tuples(*(st.integers(min_value=0, max_value=10),) * 3),
    hostile=st.booleans(),
)
def test_few_nodes_score_as_the_arrays_do(
    data: st.DataObject, count: int, weights: tuple[int, int, int], hostile: bool
) -> None:
    values = _ANY if hostile else _PLAIN
    pairs = st.lists(st.tuples(values, values), min_size=count, max_size=count)
    allocatable = np.array(data.draw(pairs))
    used = np.array(data.draw(pairs))
    request = data.draw(st.tuples(values, values))
    cap = Capacity.of(allocatable)
    with np.errstate(all="ignore"):  # overflow to infinity is part of what must match
        expected = resource_scores_array(
            weights,
            np.array(request)[:, None],
            used.T.copy(),  # the array path overwrites it
            cap.amount,
            cap.safe,
            cap.shares,
        )
    got = np.array(
        resource_scores_few(
            weights,
            request,
            used.tolist(),
            cap.amount.tolist(),
            cap.safe.tolist(),
            cap.shares.tolist(),
        )
    )
    assert _same(got, expected), (got, expected)


def test_a_half_used_node_scores_as_kube_does() -> None:
    cap = Capacity.of(np.array([[4000.0, 8.0 * 2**30]]))
    scores = resource_scores_few(
        (1, 0, 1),
        (1000.0, 2.0 * 2**30),
        [[1000.0, 2.0 * 2**30]],
        *(m.tolist() for m in (cap.amount, cap.safe, cap.shares)),
    )
    # least requested: (4000-2000)/4000 -> 50, memory 4/8 -> 50; balanced: equal shares -> 100
    assert scores == [150.0]
