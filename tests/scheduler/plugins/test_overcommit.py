"""overcommit: admission against total × factor − used, counting groups already admitted."""

from __future__ import annotations

from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.overcommit import OVERUSED_MESSAGE

from ..builders import conf, make_session, node, pod, podgroup


def session(*objects: dict, factor: float | None = None) -> Session:
    entry: dict = {"name": "overcommit"}
    if factor is not None:
        entry["arguments"] = {"overcommit-factor": factor}
    return make_session([node("n1", cpu="10", memory="10Gi"), *objects], conf("enqueue", [entry]))


def vote(ssn: Session, name: str) -> int:
    return ssn._callbacks["job_enqueueable"]["overcommit"](ssn.jobs[f"default/{name}"])


def test_group_without_min_resources_is_permitted() -> None:
    ssn = session(podgroup("pg", 1))
    assert vote(ssn, "pg") == PERMIT


def test_room_is_total_times_factor() -> None:
    ssn = session(
        podgroup("fits", 1, min_resources={"cpu": "12"}),
        podgroup("over", 1, min_resources={"cpu": "12100m"}),
    )
    assert vote(ssn, "fits") == PERMIT
    assert vote(ssn, "over") == REJECT


def test_reject_records_a_podgroup_event() -> None:
    ssn = session(podgroup("over", 1, min_resources={"cpu": "13"}))
    vote(ssn, "over")
    # Volcano's event is Normal and names the resources.
    assert ssn.job_events == [
        ("default/over", "Normal", "Unschedulable", "resource in cluster is overused: overused cpu")
    ]
    assert OVERUSED_MESSAGE == "resource in cluster is overused"


def test_custom_factor() -> None:
    ssn = session(podgroup("pg", 1, min_resources={"cpu": "15"}), factor=1.5)
    assert vote(ssn, "pg") == PERMIT


def test_inqueue_groups_hold_their_min_resources() -> None:
    ssn = session(
        podgroup("admitted", 1, phase="Inqueue", min_resources={"cpu": "8"}),
        podgroup("next", 1, min_resources={"cpu": "5"}),
    )
    # 8 + 5 > 12.
    assert vote(ssn, "next") == REJECT


def test_running_groups_hold_what_they_have_not_used_yet() -> None:
    ssn = session(
        podgroup("running", 2, phase="Running", min_resources={"cpu": "8"}),
        pod("running-0", group="running", uid="r0", cpu="4", node_name="n1", phase="Running"),
        podgroup("next", 1, min_resources={"cpu": "4"}),
        podgroup("too-much", 1, min_resources={"cpu": "4100m"}),
    )
    # Room 12 − used 4 = 8; the running group still needs 4 more: 8 − 4 = 4 left.
    assert vote(ssn, "next") == PERMIT
    assert vote(ssn, "too-much") == REJECT


def test_enqueued_groups_take_room_within_the_session() -> None:
    ssn = session(
        podgroup("a", 1, min_resources={"cpu": "7"}),
        podgroup("b", 1, min_resources={"cpu": "7"}),
    )
    assert vote(ssn, "a") == PERMIT
    ssn.job_enqueued(ssn.jobs["default/a"])
    assert vote(ssn, "b") == REJECT


def test_only_requested_resources_are_checked() -> None:
    ssn = session(
        pod("hog", uid="h", memory="10Gi", node_name="n1", phase="Running"),
        podgroup("pg", 1, min_resources={"cpu": "1"}),
    )
    assert vote(ssn, "pg") == PERMIT


def test_pods_count_is_not_a_limit() -> None:
    ssn = session(podgroup("pg", 1, min_resources={"cpu": "1", "pods": "1000"}))
    assert vote(ssn, "pg") == PERMIT
