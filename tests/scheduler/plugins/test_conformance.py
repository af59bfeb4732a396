"""conformance: critical system pods are never victims."""

from __future__ import annotations

import pytest

from stromboli.core.scheduler.framework.session import PERMIT
from stromboli.core.scheduler.plugins.conformance import evictable

from ..builders import conf, make_session, node, pod, podgroup, session_task, task


@pytest.mark.parametrize("class_name", ["system-cluster-critical", "system-node-critical"])
def test_critical_priority_classes_are_not_evictable(class_name: str) -> None:
    assert not evictable(task("p", priority_class=class_name))


def test_kube_system_pods_are_not_evictable() -> None:
    assert not evictable(task("p", namespace="kube-system"))


def test_ordinary_pods_are_evictable() -> None:
    assert evictable(task("p", priority_class="high"))
    assert evictable(task("p"))


@pytest.mark.parametrize("point", ["preemptable", "reclaimable"])
def test_victim_filter_on_both_points(point: str) -> None:
    ssn = make_session(
        [
            node("n1"),
            podgroup("pg", 1, phase="Running"),
            pod("a", group="pg", uid="a", cpu="1", node_name="n1", phase="Running"),
            pod(
                "b",
                group="pg",
                uid="b",
                cpu="1",
                node_name="n1",
                phase="Running",
                priority_class="system-node-critical",
            ),
            pod("c", group="pg", uid="c", cpu="1"),
        ],
        conf("allocate", ["conformance"]),
    )
    fn = ssn._callbacks[point]["conformance"]
    chosen, vote = fn(session_task(ssn, "c"), [session_task(ssn, "a"), session_task(ssn, "b")])
    assert vote == PERMIT
    assert [t.name for t in chosen] == ["a"]
