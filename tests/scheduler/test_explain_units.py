"""Amounts in the units a person reads: one helper for explain and the simulator's report."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.scheduler.api.readable import (
    amount_text,
    amounts_text,
    duration_text,
    names_text,
    resource_text,
)
from stromboli.core.scheduler.api.resource import Resource

GI = 1024**3


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [
        ("cpu", 30_000, "30 cpu"),
        ("cpu", 500, "0.5 cpu"),
        ("cpu", 1, "0.001 cpu"),
        ("cpu", 1500, "1.5 cpu"),
        ("cpu", 0, "0 cpu"),
        ("memory", 24 * GI, "24Gi memory"),
        ("memory", 1.5 * GI, "1.5Gi memory"),
        ("memory", 512 * 1024**2, "512Mi memory"),
        ("memory", 100, "100B memory"),
        ("memory", GI - 1, "1Gi memory"),  # 1023.99...Mi rounds into the next unit
        ("ephemeral-storage", 10 * 1024**4, "10Ti ephemeral-storage"),
        ("hugepages-2Mi", 4 * 1024**2, "4Mi hugepages-2Mi"),
        ("nvidia.com/gpu", 2, "2 nvidia.com/gpu"),
        ("pods", 110, "110 pods"),
        ("cpu", -2000, "-2 cpu"),
    ],
)
def test_amounts_read_in_cores_and_binary_sizes(name: str, amount: float, text: str) -> None:
    assert amount_text(name, amount) == text


def test_several_amounts_put_cpu_and_memory_first_and_leave_pods_out() -> None:
    amounts = {"nvidia.com/gpu": 2, "pods": 4, "memory": 8 * GI, "cpu": 4000}
    assert amounts_text(amounts) == "4 cpu, 8Gi memory, 2 nvidia.com/gpu"
    assert amounts_text(amounts, pods=True) == "4 cpu, 8Gi memory, 2 nvidia.com/gpu, 4 pods"
    assert amounts_text({}) == "nothing"
    assert amounts_text({"cpu": 0}) == "nothing"


def test_a_resource_without_bound_is_unlimited() -> None:
    assert resource_text(None) == "unlimited"
    assert resource_text(Resource({"cpu": 30_000, "memory": 24 * GI})) == "30 cpu, 24Gi memory"


def test_names_are_joined_as_a_sentence() -> None:
    assert names_text(["memory", "cpu"]) == "cpu and memory"
    assert names_text(["nvidia.com/gpu", "cpu", "memory"]) == "cpu, memory and nvidia.com/gpu"
    assert names_text(["cpu"]) == "cpu"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (30, "30s"), (90, "1m30s"), (3600, "1h"), (3900, "1h5m"), (93784, "1d2h")],
)
def test_durations_keep_the_two_largest_units(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


_CPU = re.compile(r"^-?\d+(\.\d{1,3})? cpu$")
_BYTES = re.compile(r"^-?\d+(\.\d)?(B|Ki|Mi|Gi|Ti|Pi|Ei) memory$")


@given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False))
def test_cpu_is_never_shown_in_millicores(millis: float) -> None:
    text = amount_text("cpu", millis)
    assert _CPU.match(text), text
    assert abs(float(text.split()[0]) * 1000 - millis) <= 0.5 + abs(millis) * 1e-12


@given(st.integers(min_value=0, max_value=2**62))
def test_memory_reads_within_five_percent_and_below_1024_of_its_unit(amount: int) -> None:
    text = amount_text("memory", amount)
    match = _BYTES.match(text)
    assert match, text
    number = float(text.split()[0].rstrip("BKMGTPEi"))
    assert number < 1024 or match.group(2) == "Ei"
    factor = {"B": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}.get(
        match.group(2), 2**60
    )
    assert abs(number * factor - amount) <= max(0.05 * amount, 0.5)


@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["cpu", "memory", "x"]))
def test_any_amount_gets_text(amount: float, name: str) -> None:
    assert name in amount_text(name, amount)
