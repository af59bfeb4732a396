"""How many members of a gang fit now, and what the others lack."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.explain_gang import gang_fit
from stromboli.core.scheduler.explain_job import (
    ALLOCATE,
    INVALID,
    PLACED,
    explain_job,
    find_podgroup,
    find_vcjob,
)
from stromboli.core.scheduler.framework.session import Session
from tests.scheduler.builders import (
    conf,
    make_session,
    node,
    pod,
    podgroup,
    queue,
)

WITH_PREDICATES = conf(
    "enqueue, allocate, backfill",
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
)


@pytest.fixture(autouse=True)
def _builtins() -> None:
    register_builtins()


def gang(name: str, members: int, cpu: str, *, min_member: int | None = None) -> list[dict]:
    objs: list[dict] = [podgroup(name, min_member or members, phase="Inqueue")]
    objs += [pod(f"{name}-{i}", group=name, cpu=cpu) for i in range(members)]
    return objs


def explained(ssn: Session, name: str):  # type: ignore[no-untyped-def]
    job = find_podgroup(ssn, "default", name)
    assert job is not None
    return explain_job(ssn, job)


def test_a_gang_short_of_room_says_how_many_fit_and_what_the_rest_need() -> None:
    ssn = make_session(
        [node("n1", cpu="8"), node("n2", cpu="8"), node("n3", cpu="8"), *gang("train", 4, "6")]
    )
    result = explained(ssn, "train")
    assert result.stage == ALLOCATE
    assert result.gang is not None and result.gang.short
    assert result.sentence == (
        "gang short of room: 3/4 members fit; 1 needs 4 cpu more on any node "
        "(closest: n1 has 2 cpu free; each asks 6 cpu)"
    )
    assert len(result.gang.placed) == 3
    assert {node for _, node in result.gang.placed} == {"n1", "n2", "n3"}


def test_several_short_members_are_counted_together() -> None:
    ssn = make_session([node("n1", cpu="16"), *gang("big", 8, "4")])
    result = explained(ssn, "big")
    assert result.sentence.startswith("gang short of room: 4/8 members fit; 4 need 4 cpu more")


def test_a_gang_that_fits_is_placed_by_the_next_allocate() -> None:
    ssn = make_session([node("n1", cpu="8"), *gang("small", 2, "2")])
    result = explained(ssn, "small")
    assert result.stage == ALLOCATE
    assert result.sentence == "2/2 members fit: the next allocate places small-0, small-1"


def test_the_trial_placement_is_undone() -> None:
    ssn = make_session([node("n1", cpu="8"), *gang("small", 2, "2")])
    job = find_podgroup(ssn, "default", "small")
    assert job is not None
    gang_fit(ssn, job)
    assert job.ready_task_num() == 0
    assert all(not t.node_name for t in job.tasks.values())
    assert float(ssn.nodes.used[0, 0]) == 0.0
    again = gang_fit(ssn, job)
    assert len(again.placed) == 2


def test_members_ruled_out_by_filters_say_which() -> None:
    ssn = make_session(
        [node("n1", cpu="8", unschedulable=True), node("n2", cpu="2"), *gang("g", 2, "4")],
        WITH_PREDICATES,
    )
    result = explained(ssn, "g")
    assert "0/2 members fit" in result.sentence
    assert "2 need 2 cpu more on any node (closest: n2 has 2 cpu free; each asks 4 cpu)" in (
        result.sentence
    )
    assert "other nodes ruled out: 1 node(s) were unschedulable" in result.sentence


def test_running_members_count_toward_the_gang() -> None:
    objs = [
        node("n1", cpu="8"),
        podgroup("g", 3, phase="Running"),
        pod("g-0", group="g", cpu="4", node_name="n1", phase="Running"),
        pod("g-1", group="g", cpu="4", node_name="n1", phase="Running"),
        pod("g-2", group="g", cpu="4"),
    ]
    result = explained(make_session(objs), "g")
    assert result.gang is not None and result.gang.ready == 2
    assert result.sentence.startswith("gang short of room: 2/3 members fit; 1 needs 4 cpu more")


def test_too_few_pods_for_the_gang_is_the_gang_plugins_objection() -> None:
    objs = [node("n1", cpu="8"), podgroup("g", 3, phase="Inqueue"), pod("g-0", group="g")]
    result = explained(make_session(objs), "g")
    assert result.stage == INVALID
    assert result.sentence.startswith("NotEnoughTasks: ")
    assert "(1 pod exist, minMember 3)" in result.sentence


def test_gated_members_wait_for_their_gates() -> None:
    gated = pod("g-1", group="g", cpu="1")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    objs = [node("n1", cpu="8"), podgroup("g", 2, phase="Inqueue"), pod("g-0", group="g"), gated]
    result = explained(make_session(objs), "g")
    assert result.gang is not None
    assert any("scheduling gates" in lack for lack in result.gang.lacks)


def test_a_queue_over_its_deserved_share_refuses_members_with_numbers() -> None:
    objs = [
        node("n1", cpu="8"),
        queue("a"),
        queue("b"),
        podgroup("other", 1, queue="b", phase="Inqueue"),
        pod("other-0", group="other", cpu="4"),
        podgroup("hog", 1, queue="a", phase="Running"),
        pod("hog-0", group="hog", cpu="4", node_name="n1", phase="Running"),
        podgroup("more", 1, queue="a", phase="Inqueue"),
        pod("more-0", group="more", cpu="2"),
    ]
    result = explained(make_session(objs), "more")
    assert "refused by queue a's deserved share (proportion)" in result.sentence
    assert "it holds 4 cpu of 4 cpu and each asks 2 cpu" in result.sentence


def test_a_job_with_every_pod_placed_does_not_wait() -> None:
    objs = [
        node("n1", cpu="8"),
        podgroup("g", 1, phase="Running"),
        pod("g-0", group="g", cpu="1", node_name="n1", phase="Running"),
    ]
    result = explained(make_session(objs), "g")
    assert result.stage == PLACED and not result.waiting


def test_a_vcjob_is_found_through_its_podgroups_owner() -> None:
    pg = podgroup("train-1234", 1, phase="Inqueue")
    pg["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "train",
            "uid": "1234",
            "controller": True,
        }
    ]
    ssn = make_session([node("n1"), pg, pod("train-worker-0", group="train-1234")])
    job = find_vcjob(ssn, "default", "train")
    assert job is not None and job.name == "train-1234"
    assert find_vcjob(ssn, "default", "train-1234") is None
    assert find_vcjob(ssn, "other", "train") is None


def test_one_shape_that_fits_nowhere_is_judged_once_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import stromboli.core.scheduler.explain_gang as explain_gang

    calls: list[str] = []
    real = explain_gang.explain

    def counting(ssn: Session, task):  # type: ignore[no-untyped-def]
        calls.append(task.name)
        return real(ssn, task)

    monkeypatch.setattr(explain_gang, "explain", counting)
    ssn = make_session([node("n1", cpu="8"), *gang("wide", 50, "3")])
    result = explained(ssn, "wide")
    assert result.sentence.startswith("gang short of room: 2/50 members fit; 48 need 1 cpu more")
    assert calls == ["wide-2"]  # placed by allocate's search; one judged for the 48 alike


def test_a_huge_gang_stops_the_trial_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import stromboli.core.scheduler.explain_gang as explain_gang

    monkeypatch.setattr(explain_gang, "MAX_TRIAL_PLACEMENTS", 5)
    ssn = make_session([node("n1", cpu="64"), *gang("huge", 20, "1")])
    result = explained(ssn, "huge")
    assert result.gang is not None and result.gang.untried == 15
    assert result.sentence.startswith(
        "gang short of room: 5/20 members fit (15 more not tried: the trial stops at 5)"
    )


def test_a_podgroup_whose_queue_does_not_exist_is_found_and_explained() -> None:
    from stromboli.core.scheduler.explain_job import explain_unqueued, find_unqueued

    from .builders import make_cache

    cache = make_cache(
        [node("n1"), podgroup("lost", 1, queue="nowhere"), pod("lost-0", group="lost")]
    )
    assert "default/lost" not in cache.snapshot().jobs  # no session sees it
    job = find_unqueued(cache, "podgroup", "default", "lost")
    assert job is not None and job.queue == "nowhere"
    assert find_unqueued(cache, "podgroup", "default", "other") is None
    assert find_unqueued(cache, "job", "default", "lost") is None  # no vcjob owns it
    result = explain_unqueued(job)
    assert result.stage == "enqueue"
    assert result.sentence.startswith("queue nowhere does not exist")


@settings(max_examples=40, deadline=None)
@given(
    free=st.lists(st.integers(min_value=1, max_value=16), min_size=1, max_size=5),
    cpu=st.integers(min_value=1, max_value=8),
    members=st.integers(min_value=1, max_value=12),
)
def test_identical_members_fit_as_many_as_the_nodes_hold(
    free: list[int], cpu: int, members: int
) -> None:
    register_builtins()
    nodes = [node(f"n{i}", cpu=str(f)) for i, f in enumerate(free)]
    ssn = make_session([*nodes, *gang("g", members, str(cpu))])
    job = find_podgroup(ssn, "default", "g")
    assert job is not None
    fit = gang_fit(ssn, job)
    room = sum(f // cpu for f in free)
    assert fit.fit == min(room, members)
    if room >= members:
        assert not fit.lacks
    else:
        # Each node keeps less than one member's worth; the roomiest lacks the difference.
        [(lack, pods)] = fit.lacks.items()
        assert len(pods) == members - room
        short = cpu - max(f % cpu for f in free)
        assert lack.startswith(f"need {short} cpu more on any node"), lack
