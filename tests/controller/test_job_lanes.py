"""The vcjob controller's work queue: a synced job is not starved by a backlog of new ones,
one job is never handed to two workers, and no request is lost or handed out twice."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.controller.job.lanes import RequestLanes
from stromboli.core.controller.job.policies import Request


def request(name: str, event: str = "") -> Request:
    return Request("default", name, event=event)


def test_a_synced_job_waits_behind_no_backlog_of_new_ones() -> None:
    lanes = RequestLanes()
    lanes.add(request("early"))
    key, _ = lanes.take() or (None, None)
    assert key is not None
    lanes.done(key)  # "early" is synced now
    for n in range(1000):
        lanes.add(request(f"new-{n}"))
    lanes.add(request("early", "PodGroupAdmitted"))
    taken = [lanes.take() for _ in range(2)]
    assert ("default", "early") in [item[0] for item in taken if item]
    # The backlog keeps its order.
    assert [item[0][1] for item in taken if item and item[0][1] != "early"] == ["new-0"]


def test_requests_during_processing_wait_for_the_worker_and_come_once() -> None:
    lanes = RequestLanes()
    lanes.add(request("a"))
    key, first = lanes.take() or (None, [])
    assert first == [request("a")]
    lanes.add(request("a", "OutOfSync"))
    lanes.add(request("a", "OutOfSync"))
    assert lanes.take() is None  # "a" is being processed: not handed out again
    assert key is not None
    lanes.done(key)
    again = lanes.take()
    assert again == (("default", "a"), [request("a", "OutOfSync")])


def test_a_deleted_job_name_starts_again_among_new_jobs() -> None:
    lanes = RequestLanes()
    lanes.add(request("a"))
    key, _ = lanes.take() or (None, None)
    assert key is not None
    lanes.done(key)
    lanes.forget(key)
    lanes.add(request("b"))
    lanes.add(request("a"))
    lanes.add(request("c"))
    order = []
    while (item := lanes.take()) is not None:
        order.append(item[0][1])
        lanes.done(item[0])
    # b, then a and c strictly in arrival order (all three new, one lane).
    assert order == ["b", "a", "c"]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 5), st.integers(0, 2)),
        st.tuples(st.just("take"), st.just(0), st.just(0)),
        st.tuples(st.just("done"), st.integers(0, 3), st.just(0)),
    ),
    max_size=80,
)


@given(ops)
def test_every_request_is_handed_out_once_and_never_to_two_workers(steps: list) -> None:
    lanes = RequestLanes()
    processing: list[tuple[str, str]] = []
    added: list[Request] = []
    handed: list[Request] = []
    for op, a, b in steps:
        if op == "add":
            req = request(f"job-{a}", f"e{b}")
            added.append(req)
            lanes.add(req)
        elif op == "take":
            item = lanes.take()
            if item is not None:
                key, requests = item
                assert key not in processing
                assert all(r.job_key == key for r in requests) and requests
                processing.append(key)
                handed.extend(requests)
        elif processing:
            lanes.done(processing.pop(a % len(processing)))
    for key in processing:
        lanes.done(key)
    while (item := lanes.take()) is not None:
        handed.extend(item[1])
        lanes.done(item[0])
    # Equal requests waiting together are handed out once; nothing is lost.
    assert set(handed) == set(added)
    assert len(handed) <= len(added)
    assert not lanes
