"""sla: jobs past their allowed waiting time go first and are let in."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stromboli.core.api.durations import go_duration
from stromboli.core.scheduler.framework.session import ABSTAIN, PERMIT, Session
from stromboli.core.scheduler.plugins.sla import SlaPlugin

from ..builders import Cluster, conf, make_session, node, pod, podgroup, queue

NOW = datetime(1970, 1, 1, 1, 0, tzinfo=UTC)  # 01:00


def sla_session(*objects: dict, argument: str | None = None, now: datetime = NOW) -> Session:
    entry: dict = {"name": "sla"}
    if argument is not None:
        entry["arguments"] = {"sla-waiting-time": argument}
    return make_session(list(objects), conf("enqueue, allocate", [entry]), now=now)


def sla(ssn: Session) -> SlaPlugin:
    found = ssn.plugins["sla"]
    assert isinstance(found, SlaPlugin)
    return found


def group(name: str, created_min: int, wait: str | None = None, *, bare: bool = False) -> dict:
    notes = {}
    if wait is not None:
        notes["sla-waiting-time" if bare else "volcano.sh/sla-waiting-time"] = wait
    return podgroup(
        name, 1, created=f"1970-01-01T00:{created_min:02d}:00Z", annotations=notes or None
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("1h2m3s", 3723),
        ("1.5h", 5400),
        ("250ms", 0.25),
        ("1h2m3s4ms5us6ns", 3723.004005006),
        ("0", 0),
        ("-5m", -300),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration(text).total_seconds() == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "5 m", "1d", "m", "1h-2m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        go_duration(text)


def test_waiting_time_from_annotations_then_argument() -> None:
    ssn = sla_session(
        group("own", 0, "10m"),
        group("bare", 0, "20m", bare=True),
        group("broken", 0, "soon"),
        group("none", 0),
        argument="30m",
    )
    plugin = sla(ssn)
    waits = {n: plugin.waiting_time(ssn.jobs[f"default/{n}"]) for n in ("own", "bare", "none")}
    assert waits == {
        "own": timedelta(minutes=10),
        "bare": timedelta(minutes=20),
        "none": timedelta(minutes=30),
    }
    # An unreadable annotation falls back to the argument.
    assert plugin.waiting_time(ssn.jobs["default/broken"]) == timedelta(minutes=30)


def test_without_argument_jobs_without_annotation_have_no_sla() -> None:
    ssn = sla_session(group("none", 0))
    assert sla(ssn).waiting_time(ssn.jobs["default/none"]) is None


@pytest.mark.parametrize("argument", ["0s", "-1m", "whenever"])
def test_invalid_argument_is_ignored(argument: str) -> None:
    ssn = sla_session(group("none", 0), argument=argument)
    assert sla(ssn).default_wait is None


def test_jobs_ordered_by_deadline_and_sla_jobs_first() -> None:
    ssn = sla_session(
        group("late", 0, "50m"),  # deadline 00:50
        group("early", 10, "10m"),  # deadline 00:20
        group("plain", 0),
    )
    jobs = [ssn.jobs[f"default/{n}"] for n in ("plain", "late", "early")]
    ordered = sorted(jobs, key=functools.cmp_to_key(sla(ssn).job_order))
    assert [j.name for j in ordered] == ["early", "late", "plain"]


def test_permit_once_waited_longer_else_abstain() -> None:
    ssn = sla_session(
        group("overdue", 0, "30m"),  # waited 60m of 30m
        group("patient", 50, "30m"),  # waited 10m of 30m
        group("plain", 0),
    )
    vote = sla(ssn).permit_when_overdue
    assert vote(ssn.jobs["default/overdue"]) == PERMIT
    assert vote(ssn.jobs["default/patient"]) == ABSTAIN
    assert vote(ssn.jobs["default/plain"]) == ABSTAIN
    assert ssn._callbacks["job_pipelined"]["sla"] == vote


def test_sla_vote_overrides_a_later_tier_rejection() -> None:
    ssn = make_session(
        [
            node("n1", cpu="2"),
            queue("q", capability={"cpu": "1"}),
            podgroup(
                "big",
                1,
                queue="q",
                min_resources={"cpu": "2"},
                created="1970-01-01T00:00:00Z",
                annotations={"volcano.sh/sla-waiting-time": "5m"},
            ),
        ],
        conf("enqueue", ["sla"], ["proportion"]),
        now=NOW,
    )
    # proportion alone would reject (2 cpu > capability 1); sla's tier permits first.
    assert ssn.job_enqueueable(ssn.jobs["default/big"])


async def test_overdue_job_is_admitted_past_an_overcommitted_cluster(tmp_path: Path) -> None:
    config = conf(
        "enqueue, allocate",
        [{"name": "sla", "arguments": {"sla-waiting-time": "2m"}}],
        ["priority", "gang"],
        ["overcommit"],
    )
    c = await Cluster(tmp_path, config, start=0).start()
    await c.add(
        node("n1", cpu="2"),
        podgroup("huge", 1, min_resources={"cpu": "10"}),
        pod("huge-0", group="huge", cpu="1"),
    )
    await c.run()
    assert (await c.pg("huge"))["status"]["phase"] == "Pending"
    c.clock.advance(180)
    await c.run()
    assert (await c.pg("huge"))["status"]["phase"] in ("Inqueue", "Running")
    assert await c.node_of("huge-0") == "n1"
