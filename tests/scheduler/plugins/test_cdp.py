"""cdp: a pod within its cooldown is not a victim."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.clock import EPOCH, format_time
from stromboli.core.scheduler.framework.session import PERMIT
from stromboli.core.scheduler.plugins.cdp import cooldown_of, cooling_down

from ..builders import (
    Cluster,
    conf,
    make_session,
    node,
    pod,
    podgroup,
    priority_class,
    session_task,
)

KEY = "volcano.sh/cooldown-time"


def at(seconds: float) -> str:
    return format_time(EPOCH + timedelta(seconds=seconds))


def running_pod(
    ready_at: float | None = 0,
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    phase: str = "Running",
    **status: Any,
) -> dict:
    obj = pod("p", annotations=annotations, labels=labels, phase=phase)
    if ready_at is not None:
        obj["status"]["conditions"] = [
            {"type": "Ready", "status": "True", "lastTransitionTime": at(ready_at)}
        ]
    obj["status"].update(status)
    return obj


NOW = EPOCH + timedelta(seconds=100)


def test_protected_within_the_cooldown() -> None:
    assert cooling_down(running_pod(0, annotations={KEY: "600s"}), NOW)
    assert not cooling_down(running_pod(0, annotations={KEY: "90s"}), NOW)
    assert not cooling_down(running_pod(0, annotations={KEY: "100s"}), NOW)


def test_label_is_read_before_annotation() -> None:
    obj = running_pod(0, labels={KEY: "10m"}, annotations={KEY: "1s"})
    assert cooldown_of(obj) == 600
    assert cooling_down(obj, NOW)


def test_without_cooldown_or_unreadable_value_no_protection() -> None:
    assert not cooling_down(running_pod(0), NOW)
    assert cooldown_of(running_pod(0, annotations={KEY: "soon"})) is None
    assert not cooling_down(running_pod(0, annotations={KEY: "soon"}), NOW)


def test_only_running_pods_are_protected() -> None:
    assert not cooling_down(running_pod(0, annotations={KEY: "1h"}, phase="Pending"), NOW)


def test_scheduled_then_start_time_stand_in_for_ready() -> None:
    scheduled = running_pod(None, annotations={KEY: "1h"})
    scheduled["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "lastTransitionTime": at(0)},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": at(50)},
    ]
    assert cooling_down(scheduled, NOW)
    assert not cooling_down(scheduled, NOW + timedelta(hours=1))
    started = running_pod(None, annotations={KEY: "60s"}, startTime=at(90))
    assert cooling_down(started, NOW)
    assert not cooling_down(running_pod(None, annotations={KEY: "1h"}), NOW)


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_victim_filter(point: str) -> None:
    cooling = running_pod(50, annotations={KEY: "1h"})
    cooling["metadata"].update(
        name="a", uid="a", annotations={**cooling["metadata"]["annotations"]}
    )
    objects = [
        node("n1"),
        podgroup("pg", 1, phase="Running"),
        {**cooling, "spec": {**cooling["spec"], "nodeName": "n1"}},
        pod("b", uid="b", cpu="1", node_name="n1", phase="Running"),
        pod("c", group="pg", uid="c", cpu="1"),
    ]
    for obj in objects[2:4]:
        obj["metadata"].setdefault("annotations", {})["scheduling.k8s.io/group-name"] = "pg"
    ssn = make_session(objects, conf("preempt", ["cdp"]), now=NOW)
    fn = ssn._callbacks[point]["cdp"]
    chosen, vote = fn(session_task(ssn, "c"), [session_task(ssn, "a"), session_task(ssn, "b")])
    assert vote == PERMIT
    assert [t.name for t in chosen] == ["b"]


async def test_cooldown_protects_from_preemption_until_it_ends(tmp_path: Path) -> None:
    # Gang's victim vote off, as in Volcano's CI, so that a single-pod job can be preempted.
    config = conf(
        "enqueue, allocate, preempt",
        ["priority", {"name": "gang", "enablePreemptable": False}, "conformance", "cdp"],
        ["overcommit", "proportion"],
    )
    c = await Cluster(tmp_path, config).start()
    await c.add(
        priority_class("high", 1000),
        node("n1", cpu="1"),
        podgroup("low", 1),
        pod("low-0", group="low", cpu="1", annotations={KEY: "60s"}),
    )
    await c.run()
    victim = await c.pod("low-0")
    victim["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": format_time(c.clock.now())}
        ],
    }
    await c.store.update_status(victim)
    await c.add(podgroup("high", 1, priority_class="high"), pod("high-0", group="high", cpu="1"))
    assert (await c.run(10)).evicted == 0
    assert await c.exists("Pod", "low-0")
    c.clock.advance(60)
    assert (await c.run()).evicted == 1
    await c.run()
    assert await c.node_of("high-0") == "n1"
