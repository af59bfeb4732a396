"""What a queue holds against deserved and capability, and who waits in it."""

from __future__ import annotations

import pytest

from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.explain_queue import explain_queue
from tests.scheduler.builders import conf, make_session, node, pod, podgroup, queue, timestamp


@pytest.fixture(autouse=True)
def _builtins() -> None:
    register_builtins()


def cluster() -> list[dict]:
    objs: list[dict] = [
        node("n1", cpu="16", memory="64Gi"),
        node("n2", cpu="16", memory="64Gi"),
        queue("research", capability={"cpu": "24", "memory": "48Gi"}),
        podgroup("first", 2, queue="research", phase="Running", created=timestamp(0)),
        pod("first-0", group="first", cpu="12", memory="8Gi", node_name="n1", phase="Running"),
        pod("first-1", group="first", cpu="12", memory="8Gi", node_name="n2", phase="Running"),
        podgroup("second", 1, queue="research", min_resources={"cpu": "4"}, created=timestamp(1)),
        podgroup("third", 1, queue="research", phase="Inqueue", created=timestamp(2)),
        pod("third-0", group="third", cpu="8"),
        podgroup("elsewhere", 1, created=timestamp(3)),
    ]
    return objs


def test_a_queue_at_capability_says_so_and_names_who_waits() -> None:
    ssn = make_session(cluster())
    result = explain_queue(ssn, ssn.queues["research"])
    assert result.plugin == "proportion"
    assert result.at_capability == ["cpu"]
    sentence = result.sentence()
    assert sentence.startswith("queue research (Open, weight 1) holds 24 cpu, 16Gi memory")
    assert "capability 24 cpu, 48Gi memory: at capability on cpu" in sentence
    assert result.pending == ["default/second"]
    assert result.inqueue_waiting == ["default/third"]
    assert result.running == ["default/first"]
    waiting = result.waiting_sentence()
    assert waiting == (
        "waiting: 1 Pending at enqueue (default/second); "
        "1 admitted with pods unplaced (default/third)"
    )


def test_the_json_shape_keeps_kubernetes_quantities() -> None:
    ssn = make_session(cluster())
    document = explain_queue(ssn, ssn.queues["research"]).as_dict()
    assert document["allocated"] == {"cpu": "24", "memory": "16Gi"}
    assert document["capability"] == {"cpu": "24", "memory": "48Gi"}
    assert document["atCapability"] == ["cpu"]
    assert document["pending"] == ["default/second"]


def test_without_a_queue_plugin_the_jobs_are_summed() -> None:
    ssn = make_session(cluster(), conf("enqueue, allocate", ["gang"]))
    result = explain_queue(ssn, ssn.queues["research"])
    assert result.plugin == ""
    assert result.allocated.get("cpu") == 24_000
    assert result.at_capability == ["cpu"]


def test_an_empty_queue_has_no_one_waiting() -> None:
    ssn = make_session([node("n1"), queue("idle")])
    result = explain_queue(ssn, ssn.queues["idle"])
    assert result.waiting_sentence() == "no job waits"
    assert "holds nothing" in result.sentence()
    assert "capability unlimited" in result.sentence()
    assert not result.at_capability
