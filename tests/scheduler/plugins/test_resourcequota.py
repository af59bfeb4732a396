"""resourcequota: PodGroups are admitted only while their namespace's quotas have room."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.resourcequota import (
    format_list,
    format_quantity,
    requested_for,
)

from ..builders import Cluster, conf, make_session, node, pod, podgroup


def quota(
    name: str,
    hard: dict[str, str],
    used: dict[str, str] | None = None,
    *,
    namespace: str = "team",
    status_hard: bool = False,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {} if status_hard else {"hard": hard},
        "status": {"used": used or {}},
    }
    if status_hard:
        obj["status"]["hard"] = hard
    return obj


def quota_session(*objects: dict) -> Session:
    return make_session(list(objects), conf("enqueue", ["resourcequota"]))


def vote(ssn: Session, name: str, namespace: str = "team") -> int:
    return ssn._callbacks["job_enqueueable"]["resourcequota"](ssn.jobs[f"{namespace}/{name}"])


def group(name: str, minimum: dict[str, str] | None, namespace: str = "team") -> dict:
    return podgroup(name, 1, namespace=namespace, min_resources=minimum)


def test_quota_names_meet_podgroup_names() -> None:
    minimum = {"cpu": Fraction(2), "memory": Fraction(5)}
    assert requested_for("cpu", minimum) == 2
    assert requested_for("requests.cpu", minimum) == 2
    assert requested_for("limits.cpu", minimum) is None
    assert requested_for("requests.memory", {"requests.memory": Fraction(3)}) == 3
    assert requested_for("memory", {"requests.memory": Fraction(3)}) == 3
    assert requested_for("count/pods", minimum) is None


def test_formatting() -> None:
    assert format_quantity(Fraction(2)) == "2"
    assert format_quantity(Fraction(1, 2)) == "500m"
    assert format_list({"memory": Fraction(2**30), "cpu": Fraction(3)}) == (
        "map[cpu:3 memory:1073741824]"
    )


def test_fits_within_hard_minus_used() -> None:
    ssn = quota_session(
        quota("compute", {"requests.cpu": "4", "requests.memory": "8Gi"}, {"requests.cpu": "1"}),
        group("ok", {"cpu": "3", "memory": "1Gi"}),
        group("over", {"cpu": "3500m"}),
    )
    assert vote(ssn, "ok") == PERMIT
    assert vote(ssn, "over") == REJECT
    assert ssn.job_events == [
        (
            "team/over",
            "Normal",
            "Unschedulable",
            "resource quota insufficient, requested: map[requests.cpu:3500m], "
            "used: map[requests.cpu:1], limited: map[requests.cpu:4]",
        )
    ]


def test_every_quota_of_the_namespace_must_have_room() -> None:
    ssn = quota_session(
        quota("cpu", {"cpu": "10"}),
        quota("gpus", {"requests.nvidia.com/gpu": "2"}, {"requests.nvidia.com/gpu": "1"}),
        group("two-gpus", {"cpu": "1", "nvidia.com/gpu": "2"}),
        group("one-gpu", {"cpu": "1", "nvidia.com/gpu": "1"}),
    )
    assert vote(ssn, "two-gpus") == REJECT
    assert vote(ssn, "one-gpu") == PERMIT


def test_resources_a_quota_does_not_limit_are_free() -> None:
    ssn = quota_session(
        quota("pods-only", {"count/pods": "10", "memory": "1Gi"}),
        group("cpu-heavy", {"cpu": "1000"}),
    )
    assert vote(ssn, "cpu-heavy") == PERMIT


def test_groups_admitted_in_this_session_count() -> None:
    ssn = quota_session(
        quota("compute", {"cpu": "4"}, {"cpu": "1"}),
        group("first", {"cpu": "2"}),
        group("second", {"cpu": "2"}),
        group("elsewhere", {"cpu": "2"}, namespace="other"),
    )
    assert vote(ssn, "first") == PERMIT
    ssn.job_enqueued(ssn.jobs["team/first"])
    assert vote(ssn, "second") == REJECT
    assert vote(ssn, "elsewhere", "other") == PERMIT


def test_no_min_resources_or_no_quota_is_permitted() -> None:
    ssn = quota_session(
        quota("compute", {"cpu": "1"}),
        group("loose", None),
        group("free", {"cpu": "100"}, namespace="other"),
    )
    assert vote(ssn, "loose") == PERMIT
    assert vote(ssn, "free", "other") == PERMIT
    ssn.job_enqueued(ssn.jobs["other/free"])
    assert ssn.plugins["resourcequota"].pending == {}  # type: ignore[attr-defined]


def test_status_hard_is_used_when_spec_has_none() -> None:
    ssn = quota_session(
        quota("compute", {"cpu": "2"}, status_hard=True),
        group("over", {"cpu": "3"}),
    )
    assert vote(ssn, "over") == REJECT


@pytest.mark.parametrize("bad", ["lots", "1x"])
def test_unreadable_quantities_are_skipped(bad: str) -> None:
    ssn = quota_session(quota("compute", {"cpu": bad}), group("g", {"cpu": "3"}))
    assert vote(ssn, "g") == PERMIT


async def test_quota_holds_back_a_podgroup_through_the_scheduler(tmp_path: Path) -> None:
    config = conf("enqueue, allocate", ["priority", "gang"], ["resourcequota", "proportion"])
    c = await Cluster(tmp_path, config).start()
    made = await c.add(quota("compute", {"requests.cpu": "3"}, namespace="default"))
    made[0]["status"] = {"hard": {"requests.cpu": "3"}, "used": {"requests.cpu": "2"}}
    await c.store.update_status(made[0])
    await c.add(
        node("n1", cpu="8"),
        podgroup("small", 1, min_resources={"cpu": "1"}),
        pod("small-0", group="small", cpu="1"),
        podgroup("big", 1, min_resources={"cpu": "2"}),
        pod("big-0", group="big", cpu="2"),
    )
    await c.run()
    assert await c.node_of("small-0") == "n1"
    assert (await c.pg("big"))["status"]["phase"] == "Pending"
    events = await c.events(reason="Unschedulable", name="big")
    assert any(e["message"].startswith("resource quota insufficient") for e in events)
