"""The real Kubeflow training-operator (v1.8.1, built from its Go module) on the test control
plane, with our scheduler.

Volcano mode (``--gang-scheduler-name=volcano``): the operator makes a PodGroup named after the
job (``pkg/controller.v1/common/scheduling.go``) and creates no pod while that group is
``Pending`` (``DelayPodCreationDueToPodGroup``, ``pkg/controller.v1/common/job.go``); our
scheduler's enqueue action moves it to ``Inqueue``, the pods appear, and the gang binds
all-or-nothing. The operator's PodGroup is compared with our conversion of the same job.

How the operator is started (its webhook certificates) is in
:func:`.operators.start_training_operator`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeHTTP
from stromboli.core.devcluster.controlplane import free_port
from stromboli.integrations.kubeflow.training import TrainingOperatorAdapter

from .jobs_live import Stack
from .operator_objects import PYTORCHJOBS, group_of, pytorchjob
from .operators import (
    GROUP,
    TASK,
    OperatorProcess,
    Pool,
    amounts,
    assert_same_gang,
    bound,
    install_crds,
    make_namespace,
    operator_build,
    pods,
    start_training_operator,
    wait_until,
)


@dataclass
class Training:
    client: KubeHTTP
    namespace: str
    pool: Pool
    operator: OperatorProcess
    stack: Stack

    def logs(self) -> str:
        return f"--- training-operator ---\n{self.operator.tail()}\n{self.stack.logs()}"

    def until(self, what: str, probe: Any, timeout: float = 90.0) -> Any:
        alive = [self.operator.check_alive, self.stack.check_alive]
        return wait_until(what, probe, timeout=timeout, alive=alive, logs=self.logs)


@pytest.fixture(scope="module")
def training(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Training]:
    log_dir = tmp_path_factory.mktemp("training-operator")
    build = operator_build("training-operator", log_dir)
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    install_crds(control_plane, build)
    namespace = make_namespace(client, f"training-{free_port()}")
    pool = Pool(control_plane, "train", cpu="4")
    pool.add(3)
    stack = Stack(control_plane, log_dir).start()
    try:
        operator, stop_operator = start_training_operator(
            control_plane, build, log_dir, "--gang-scheduler-name=volcano"
        )
        try:
            yield Training(client, namespace, pool, operator, stack)
        finally:
            stop_operator()
    finally:
        stack.stop()
        client.delete(f"/api/v1/namespaces/{namespace}")
        pool.remove()


def test_no_pod_exists_until_the_group_is_inqueue(training: Training) -> None:
    client, ns = training.client, training.namespace
    # More than the whole cluster holds: the enqueue action never admits it.
    huge = pytorchjob("huge", ns, training.pool, 1, minResources={"cpu": "100000"})
    client.post(PYTORCHJOBS.format(ns=ns), huge)

    def judged() -> list[dict[str, Any]]:
        events = client.get(
            f"/api/v1/namespaces/{ns}/events",
            fieldSelector="involvedObject.kind=PodGroup,involvedObject.name=huge",
        )["items"]
        return [e for e in events if e["reason"] == "Unschedulable"]

    # The scheduler reports on the group each session (Volcano's RecordJobStatusEvent).
    training.until("the scheduler judging the group huge", judged)
    group = group_of(client, ns, "huge")
    assert group is not None and (group.get("status") or {}).get("phase") in (None, "Pending")
    assert pods(client, ns, "training.kubeflow.org/job-name=huge") == []


def test_a_pytorchjob_is_enqueued_then_bound_whole(training: Training) -> None:
    client, ns = training.client, training.namespace
    client.post(PYTORCHJOBS.format(ns=ns), pytorchjob("ddp", ns, training.pool, 3))
    selector = "training.kubeflow.org/job-name=ddp"

    made = training.until(
        "the operator creating 4 pods once ddp is Inqueue",
        lambda: (p := pods(client, ns, selector)) and len(p) == 4 and p,
    )
    group = group_of(client, ns, "ddp")
    assert group is not None and group["status"]["phase"] in ("Inqueue", "Running")
    for pod in made:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"][GROUP] == "ddp"
    assert sorted(p["metadata"]["annotations"][TASK] for p in made) == [
        "master",
        *["worker"] * 3,
    ]

    def unschedulable() -> bool:
        conditions = ((group_of(client, ns, "ddp") or {}).get("status") or {}).get("conditions")
        return any(c["type"] == "Unschedulable" for c in conditions or [])

    training.until("the scheduler finding 4 pods do not fit 3 nodes", unschedulable)
    assert bound(pods(client, ns, selector)) == []

    training.pool.add(1)
    placed = training.until(
        "all 4 pods bound once a 4th node exists",
        lambda: (p := pods(client, ns, selector)) and len(bound(p)) == 4 and p,
    )
    assert {p["spec"]["nodeName"] for p in placed} == set(training.pool.nodes)


def test_the_operators_podgroup_is_what_our_conversion_makes(training: Training) -> None:
    client, ns = training.client, training.namespace
    client.post(PYTORCHJOBS.format(ns=ns), pytorchjob("golden", ns, training.pool, 2))
    group = training.until(
        "the operator making the group golden", lambda: group_of(client, ns, "golden")
    )
    stored = client.get(f"{PYTORCHJOBS.format(ns=ns)}/golden")
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["queue"] == "default"
    assert amounts(group["spec"]["minResources"]) == amounts({"cpu": "9", "memory": "3Gi"})
    assert_same_gang(group, TrainingOperatorAdapter().convert(stored).podgroup("golden"))
