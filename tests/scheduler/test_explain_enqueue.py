"""Which gate holds a Pending PodGroup at enqueue, with the numbers that decide it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from stromboli.core.clock import EPOCH
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.explain_enqueue import (
    OVERCOMMIT,
    QUEUE_CAPABILITY,
    QUEUE_CLOSED,
    RESOURCEQUOTA,
    SLA,
    EnqueueVerdict,
    enqueue_verdict,
    enqueue_verdicts,
)
from stromboli.core.scheduler.explain_job import ENQUEUE, explain_job, find_podgroup
from stromboli.core.scheduler.framework.session import Session
from tests.scheduler.builders import (
    conf,
    make_session,
    node,
    pod,
    podgroup,
    queue,
    timestamp,
)


@pytest.fixture(autouse=True)
def _builtins() -> None:
    register_builtins()


def running_job(name: str, queue_name: str, cpu: str, nodes: list[str]) -> list[dict]:
    """A Running PodGroup with one pod of ``cpu`` on each of ``nodes`` (its minResources all
    of it, so none of it is elastic)."""
    total = str(int(cpu) * len(nodes))
    objs: list[dict] = [
        podgroup(
            name,
            len(nodes),
            queue=queue_name,
            phase="Running",
            created=timestamp(0),
            min_resources={"cpu": total},
        )
    ]
    for i, where in enumerate(nodes):
        objs.append(pod(f"{name}-{i}", group=name, cpu=cpu, node_name=where, phase="Running"))
    return objs


def verdict_of(ssn: Session, name: str) -> EnqueueVerdict:
    job = find_podgroup(ssn, "default", name)
    assert job is not None
    return enqueue_verdict(ssn, job)


def test_queue_capability_names_what_the_queue_holds_and_how_far_over_it_would_go() -> None:
    ssn = make_session(
        [
            node("n1", cpu="16", memory="64Gi"),
            node("n2", cpu="16", memory="64Gi"),
            queue("research", capability={"cpu": "30", "memory": "48Gi"}),
            *running_job("first", "research", "12", ["n1", "n2"]),
            podgroup("second", 2, queue="research", min_resources={"cpu": "8", "memory": "16Gi"}),
        ]
    )
    verdict = verdict_of(ssn, "second")
    assert not verdict.admitted
    [held] = verdict.holding()
    assert held.gate == QUEUE_CAPABILITY and held.plugin == "proportion"
    assert "queue research holds 24 cpu" in held.sentence
    assert "would hold 32 cpu, 16Gi memory" in held.sentence
    assert "over its capability of 30 cpu by 2 cpu" in held.sentence
    assert "30000" not in held.sentence and "m " not in held.sentence
    overcommit = next(g for g in verdict.gates if g.gate == OVERCOMMIT)
    assert overcommit.verdict == "admits"


def test_the_explanation_sentence_leads_with_the_gate() -> None:
    ssn = make_session(
        [
            node("n1", cpu="8"),
            queue("q", capability={"cpu": "4"}),
            podgroup("big", 1, queue="q", min_resources={"cpu": "6"}),
        ]
    )
    job = find_podgroup(ssn, "default", "big")
    assert job is not None
    result = explain_job(ssn, job)
    assert result.stage == ENQUEUE
    assert result.sentence.startswith("held at enqueue by queue capability: queue q holds")
    assert "over its capability of 4 cpu by 2 cpu" in result.sentence


def test_jobs_ahead_in_the_queue_are_admitted_first_as_the_next_cycle_would() -> None:
    def cluster() -> list[dict]:
        return [
            node("n1", cpu="16"),
            queue("q", capability={"cpu": "10"}),
            podgroup("early", 1, queue="q", min_resources={"cpu": "6"}, created=timestamp(1)),
            podgroup("late", 1, queue="q", min_resources={"cpu": "6"}, created=timestamp(2)),
        ]

    assert verdict_of(make_session(cluster()), "early").admitted
    late = verdict_of(make_session(cluster()), "late")
    assert not late.admitted
    [held] = late.holding()
    assert "has admitted 6 cpu more not yet running" in held.sentence
    assert "by 2 cpu" in held.sentence


def test_a_closed_queue_is_said_once() -> None:
    ssn = make_session(
        [
            node("n1"),
            queue("shut", state="Closed"),
            podgroup("pg", 1, queue="shut", min_resources={"cpu": "1"}),
        ]
    )
    verdict = verdict_of(ssn, "pg")
    assert not verdict.admitted
    [held] = verdict.holding()
    assert held.gate == QUEUE_CLOSED
    assert "queue shut is Closed" in held.sentence


def test_overcommit_gives_the_inflated_room_and_the_shortfall() -> None:
    ssn = make_session(
        [node("n1", cpu="8", memory="16Gi"), podgroup("pg", 1, min_resources={"cpu": "12"})]
    )
    verdict = verdict_of(ssn, "pg")
    assert not verdict.admitted
    gates = {g.gate: g for g in verdict.holding()}
    assert OVERCOMMIT in gates
    sentence = gates[OVERCOMMIT].sentence
    assert "8 cpu" in sentence and "overcommit-factor 1.2" in sentence
    assert "leaves 9.6 cpu" in sentence and "short by 2.4 cpu" in sentence
    assert "resource in cluster is overused" in sentence


def test_resourcequota_names_the_quota_and_its_numbers() -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "team-quota", "namespace": "default"},
        "spec": {"hard": {"requests.cpu": "10", "requests.memory": "32Gi"}},
        "status": {"used": {"requests.cpu": "8", "requests.memory": "4Gi"}},
    }
    ssn = make_session(
        [
            node("n1", cpu="64", memory="256Gi"),
            quota,
            podgroup("pg", 1, min_resources={"cpu": "4", "memory": "8Gi"}),
        ],
        conf("enqueue, allocate", ["gang"], ["resourcequota", "proportion"]),
    )
    verdict = verdict_of(ssn, "pg")
    assert not verdict.admitted
    [held] = verdict.holding()
    assert held.gate == RESOURCEQUOTA
    assert "ResourceQuota default/team-quota allows 10 cpu (requests.cpu)" in held.sentence
    assert "8 cpu (requests.cpu) is used" in held.sentence
    assert "short by 2 cpu (requests.cpu)" in held.sentence
    assert "memory" not in held.sentence  # memory has room: only the short resource is named


def test_sla_says_how_long_is_left_and_what_happens_then() -> None:
    config = conf(
        "enqueue, allocate",
        [{"name": "sla", "arguments": {"sla-waiting-time": "1h"}}, "gang"],
        ["proportion"],
    )
    objs = [
        node("n1", cpu="8"),
        queue("q", capability={"cpu": "4"}),
        podgroup("pg", 1, queue="q", min_resources={"cpu": "6"}, created=timestamp(0)),
    ]
    early = verdict_of(make_session(objs, config, now=EPOCH + timedelta(minutes=10)), "pg")
    assert not early.admitted
    sla = next(g for g in early.gates if g.gate == SLA)
    assert sla.verdict == "abstains"
    assert "waited 10m of its sla-waiting-time 1h" in sla.sentence
    assert "in 50m it votes to admit, and then it is admitted" in sla.sentence
    late = verdict_of(make_session(objs, config, now=EPOCH + timedelta(hours=2)), "pg")
    assert late.admitted
    sla = next(g for g in late.gates if g.gate == SLA)
    assert sla.verdict == "admits" and "waited past" in sla.sentence


def test_without_min_resources_or_an_enqueue_action_nothing_holds_it() -> None:
    ssn = make_session([node("n1"), podgroup("pg", 1)])
    verdict = verdict_of(ssn, "pg")
    assert verdict.admitted and not verdict.holding()
    assert "no minResources" in verdict.sentence()
    ssn = make_session(
        [node("n1", cpu="1"), podgroup("pg", 1, min_resources={"cpu": "6"})],
        conf("allocate", ["gang"], ["overcommit", "proportion"]),
    )
    verdict = verdict_of(ssn, "pg")
    assert verdict.admitted and "no enqueue action" in verdict.sentence()


def test_replaying_enqueue_writes_nothing_back_to_the_podgroups_it_admits() -> None:
    early = podgroup("early", 1, min_resources={"cpu": "1"}, created=timestamp(1))
    ssn = make_session(
        [
            node("n1", cpu="8"),
            early,
            podgroup("late", 1, min_resources={"cpu": "1"}, created=timestamp(2)),
        ]
    )
    verdict_of(ssn, "late")
    assert "status" not in early  # the session's copy changed, never the object


def test_capacity_plugin_gate_reads_the_same_way() -> None:
    ssn = make_session(
        [
            node("n1", cpu="16", memory="64Gi"),
            queue("q", capability={"cpu": "10", "memory": "64Gi"}),
            *running_job("first", "q", "8", ["n1"]),
            podgroup("second", 1, queue="q", min_resources={"cpu": "4"}),
        ],
        conf("enqueue, allocate", ["priority", "gang"], ["capacity"]),
    )
    verdict = verdict_of(ssn, "second")
    assert not verdict.admitted
    [held] = verdict.holding()
    assert held.gate == QUEUE_CAPABILITY and held.plugin == "capacity"
    assert "queue q holds 8 cpu" in held.sentence
    assert "over its capability of 10 cpu by 2 cpu" in held.sentence


def test_one_replay_gives_every_pending_job_its_verdict_in_queue_order() -> None:
    ssn = make_session(
        [
            node("n1", cpu="64"),
            queue("q", capability={"cpu": "10"}),
            *(
                podgroup(f"j{i}", 1, queue="q", min_resources={"cpu": "4"}, created=timestamp(i))
                for i in range(4)
            ),
        ]
    )
    verdicts = enqueue_verdicts(ssn)
    by_name = {ssn.jobs[uid].name: v for uid, v in verdicts.items()}
    assert [by_name[f"j{i}"].admitted for i in range(4)] == [True, True, False, False]
    assert "has admitted 8 cpu more not yet running" in by_name["j2"].holding()[0].sentence


def test_a_job_the_replay_admitted_is_still_explained_at_enqueue() -> None:
    ssn = make_session(
        [
            node("n1", cpu="64"),
            podgroup("a", 1, min_resources={"cpu": "1"}, created=timestamp(1)),
            podgroup("b", 1, min_resources={"cpu": "1"}, created=timestamp(2)),
        ]
    )
    verdicts = enqueue_verdicts(ssn)
    job = find_podgroup(ssn, "default", "a")
    assert job is not None and job.phase == "Inqueue"  # admitted within the session's copy
    result = explain_job(ssn, job, verdicts[job.uid])
    assert result.stage == ENQUEUE
    assert result.sentence == (
        "PodGroup is Pending, but every gate admits it: the next enqueue moves it to Inqueue"
    )
