"""Resource amounts: parsing, arithmetic, comparisons with Volcano's tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from stromboli.core.api.quantity import QuantityError
from stromboli.core.scheduler.api.resource import (
    EPSILON,
    Resource,
    ResourceIndex,
    format_amount,
    to_amount,
)


def r(**amounts: float) -> Resource:
    return Resource(amounts)


# -- quantities ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "amount"),
    [
        ("cpu", "1", 1000.0),
        ("cpu", "1.5", 1500.0),
        ("cpu", "500m", 500.0),
        ("cpu", 2, 2000.0),
        ("cpu", "100u", 0.1),
        ("memory", "1Gi", 1073741824.0),
        ("memory", "1G", 1e9),
        ("memory", "512Mi", 536870912.0),
        ("memory", "1e3", 1000.0),
        ("nvidia.com/gpu", "2", 2.0),
        ("pods", "110", 110.0),
        ("ephemeral-storage", "10Gi", 10737418240.0),
    ],
)
def test_to_amount_uses_canonical_units(name: str, text: str, amount: float) -> None:
    assert to_amount(name, text) == pytest.approx(amount)


def test_from_list_parses_every_resource() -> None:
    res = Resource.from_list({"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"})
    assert res.milli_cpu == 2000
    assert res.memory == 4 * 2**30
    assert res.get("nvidia.com/gpu") == 1


def test_from_list_of_nothing_is_empty() -> None:
    assert Resource.from_list(None).amounts == {}
    assert Resource.from_list({}).amounts == {}


def test_from_list_error_names_the_field() -> None:
    with pytest.raises(QuantityError, match=r"spec\.minResources\.cpu"):
        Resource.from_list({"cpu": "two"}, "spec.minResources")


def test_zero_amounts_are_dropped() -> None:
    assert Resource({"cpu": 0.0, "memory": 5.0}).amounts == {"memory": 5.0}
    assert Resource.from_list({"cpu": "0"}).amounts == {}


def test_to_list_formats_kubernetes_text() -> None:
    res = Resource.from_list({"cpu": "1.5", "memory": "2Gi", "nvidia.com/gpu": "3"})
    assert res.to_list() == {"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "3"}


def test_format_amount_whole_cores_and_bytes() -> None:
    assert format_amount("cpu", 2000) == "2"
    assert format_amount("memory", 1536 * 2**20) == "1536Mi"
    assert format_amount("hugepages-2Mi", 2**21) == "2Mi"


def test_round_trip_through_to_list() -> None:
    res = Resource.from_list({"cpu": "250m", "memory": "3Gi", "example.com/foo": "7"})
    assert Resource.from_list(res.to_list()) == res


# -- arithmetic ------------------------------------------------------------------------------


def test_add_is_in_place_and_chains() -> None:
    a = r(cpu=1000)
    out = a.add(r(cpu=500, memory=10))
    assert out is a
    assert a.amounts == {"cpu": 1500, "memory": 10}


def test_sub_clamps_at_zero() -> None:
    a = r(cpu=1000, memory=10)
    a.sub(r(cpu=3000, memory=4))
    assert a.get("cpu") == 0
    assert a.get("memory") == 6


def test_operators_do_not_mutate_operands() -> None:
    a, b = r(cpu=1000), r(cpu=400)
    total = a + b
    left = a - b
    assert total.get("cpu") == 1400
    assert left.get("cpu") == 600
    assert a.get("cpu") == 1000
    assert b.get("cpu") == 400


def test_clone_is_independent() -> None:
    a = r(cpu=1000)
    b = a.clone()
    b.add(r(cpu=1))
    assert a.get("cpu") == 1000


def test_multi_scales_every_amount() -> None:
    a = r(cpu=1000, memory=10).multi(1.2)
    assert a.get("cpu") == pytest.approx(1200)
    assert a.get("memory") == pytest.approx(12)


def test_missing_names_read_as_zero() -> None:
    assert r(cpu=1).get("memory") == 0.0
    assert r().milli_cpu == 0.0


def test_less_equal_simple() -> None:
    assert r(cpu=1000).less_equal(r(cpu=1000))
    assert r(cpu=1000).less_equal(r(cpu=2000, memory=1))
    assert not r(cpu=2000).less_equal(r(cpu=1000))


def test_less_equal_tolerates_epsilon() -> None:
    assert r(cpu=1000 + EPSILON / 2).less_equal(r(cpu=1000))
    assert not r(cpu=1000 + EPSILON * 2).less_equal(r(cpu=1000))


def test_less_equal_missing_dimension_is_zero_by_default() -> None:
    assert not r(cpu=1000, memory=1).less_equal(r(cpu=2000))


def test_less_equal_missing_dimension_unlimited_when_asked() -> None:
    assert r(cpu=1000, memory=1).less_equal(r(cpu=2000), missing_is_infinite=True)
    # A present dimension is still enforced.
    assert not r(cpu=3000, memory=1).less_equal(r(cpu=2000), missing_is_infinite=True)


def test_less_equal_ignores_amounts_below_tolerance() -> None:
    assert r(cpu=1000, memory=EPSILON / 2).less_equal(r(cpu=1000))


def test_empty_is_less_equal_anything() -> None:
    assert r().less_equal(r())
    assert r().less_equal(r(cpu=1))


def test_equality_within_tolerance_and_over_missing_names() -> None:
    assert r(cpu=1000) == r(cpu=1000 + EPSILON / 2)
    assert r(cpu=1000) != r(cpu=1001)
    assert r(cpu=1000) != r(cpu=1000, memory=1)
    assert r() == Resource({"cpu": 0.0})


def test_is_empty_ignores_pods_and_tiny_amounts() -> None:
    assert r().is_empty()
    assert r(pods=1).is_empty()
    assert r(cpu=EPSILON / 2).is_empty()
    assert not r(cpu=1).is_empty()
    assert not Resource({"nvidia.com/gpu": 1}).is_empty()


# -- resource index --------------------------------------------------------------------------


def test_index_fixes_cpu_memory_pods_columns() -> None:
    index = ResourceIndex(["nvidia.com/gpu"])
    assert index.names[:3] == ["cpu", "memory", "pods"]
    assert index.columns["nvidia.com/gpu"] == 3
    assert index.add("nvidia.com/gpu") == 3
    assert index.add("example.com/foo") == 4
    assert len(index) == 5


def test_index_vector_round_trip() -> None:
    index = ResourceIndex(["nvidia.com/gpu"])
    res = Resource({"cpu": 1500, "memory": 2048, "nvidia.com/gpu": 1})
    row = index.vector(res, pods=1)
    assert np.array_equal(row, np.array([1500, 2048, 1, 1]))
    back = index.resource(row)
    assert back.get("cpu") == 1500
    assert back.get("pods") == 1
    assert back.get("nvidia.com/gpu") == 1
