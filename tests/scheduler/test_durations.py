"""Go durations read from users' annotations and arguments: a ValueError or a timedelta for
any text, never an OverflowError, and a job with a hostile waiting time does not stop the
cycle."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.api.durations import MAX_SECONDS, go_duration
from stromboli.core.scheduler.util.durations import positive_duration

from .builders import conf, make_session, node, pod, podgroup

HOSTILE = ["9" * 400 + "h", "99999999999h", "2562048h", "1e400h", "١h", "１h", "9" * 5000 + "s"]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_durations_are_value_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a duration|out of range") as caught:
        go_duration(text)
    assert len(str(caught.value)) < 300  # the message quotes the text cut short


def test_the_longest_go_duration_is_accepted() -> None:
    assert go_duration("2562047h").total_seconds() <= MAX_SECONDS
    assert go_duration("-2562047h") < timedelta(0)


@given(st.text(max_size=60))
def test_any_text_is_a_duration_or_a_value_error(text: str) -> None:
    try:
        duration = go_duration(text)
    except ValueError:
        return
    assert abs(duration.total_seconds()) <= MAX_SECONDS + 1


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**30),
            st.sampled_from(["ns", "us", "ms", "s", "m", "h"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_huge_amounts_of_any_unit_never_overflow(parts: list[tuple[int, str]]) -> None:
    text = "".join(f"{amount}{unit}" for amount, unit in parts)
    assert positive_duration(text, "test") is None or go_duration(text) > timedelta(0)


def test_a_hostile_waiting_time_is_ignored_and_the_session_goes_on() -> None:
    objects = [
        node("n1", cpu="4"),
        podgroup("a", 1, annotations={"volcano.sh/sla-waiting-time": "99999999999h"}),
        podgroup("b", 1),
        pod("a-0", group="a", cpu="1"),
        pod("b-0", group="b", cpu="1"),
    ]
    ssn = make_session(objects, conf("enqueue, allocate", ["sla", "reservation"]))
    first, second = ssn.jobs["default/a"], ssn.jobs["default/b"]
    assert ssn.job_compare(first, second) in (-1, 0, 1)
    assert ssn.job_enqueueable(first)
