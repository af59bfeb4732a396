"""The real operators started plainly (no Volcano flag), their pods enrolled by us.

KubeRay v1.5.0 without ``--batch-scheduler`` and the training-operator v1.8.1 without
``--gang-scheduler-name`` create their pods for the default scheduler. In a namespace
labelled ``stromboli.dev/enroll: "true"``, ``stromboli webhook-manager`` (``/pods/mutate``, as
deploy/webhook.yaml's ServiceAccount) gives each pod our scheduler, its queue, the group its
owner's adapter names and ``volcano.sh/task-spec`` at CREATE; ``stromboli controller`` makes
that PodGroup from the framework object (``integrations/live.py``); the scheduler gangs it.
The outcome is the one of the operators' Volcano modes: a gang that does not fit waits whole
and binds whole once it fits, in a PodGroup of the same name, minMember and minResources.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeHTTP
from stromboli.core.devcluster.controlplane import free_port
from stromboli.integrations.common import ADAPTER_LABEL

from .jobs_live import Stack
from .operator_objects import PYTORCHJOBS, RAY, group_of, pytorchjob, ray_cluster
from .operators import (
    ENROL_WEBHOOK,
    GROUP,
    TASK,
    OperatorProcess,
    Pool,
    amounts,
    bound,
    install_crds,
    make_namespace,
    operator_build,
    podgroups,
    pods,
    start_enrol_webhook,
    start_training_operator,
    wait_until,
)


@dataclass
class Enrolled:
    client: KubeHTTP
    namespace: str
    ray_pool: Pool
    train_pool: Pool
    processes: list[OperatorProcess]
    webhook: subprocess.Popen[bytes]
    webhook_log: Path
    stack: Stack

    def logs(self) -> str:
        parts = [f"--- {p.build.operator.name} ---\n{p.tail()}" for p in self.processes]
        webhook = self.webhook_log.read_text(errors="replace")[-2000:]
        return "\n".join([*parts, f"--- webhook ---\n{webhook}", self.stack.logs()])

    def check_alive(self) -> None:
        for process in self.processes:
            process.check_alive()
        self.stack.check_alive()
        assert self.webhook.poll() is None, f"webhook-manager exited:\n{self.logs()}"

    def until(self, what: str, probe: Any, timeout: float = 90.0) -> Any:
        return wait_until(what, probe, timeout=timeout, alive=[self.check_alive], logs=self.logs)


@pytest.fixture(scope="module")
def enrolled(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Enrolled]:
    log_dir = tmp_path_factory.mktemp("operators-enrolled")
    kuberay = operator_build("kuberay", log_dir)
    training = operator_build("training-operator", log_dir)
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    install_crds(control_plane, kuberay)
    install_crds(control_plane, training)
    namespace = make_namespace(
        client, f"enrolled-ops-{free_port()}", {"stromboli.dev/enroll": "true"}
    )
    ray_pool, train_pool = (
        Pool(control_plane, "eray", cpu="4"),
        Pool(control_plane, "etrain", cpu="4"),
    )
    ray_pool.add(3)
    train_pool.add(3)
    webhook = start_enrol_webhook(control_plane, log_dir, namespace)
    # The controller reads which framework CRDs are served when it starts: after install_crds.
    stack = Stack(control_plane, log_dir).start()
    ray_args = [
        "--enable-leader-election=false",
        f"--metrics-addr=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
    ]
    ray = OperatorProcess(kuberay, control_plane, log_dir / "kuberay.log", ray_args).start()
    try:
        trainer, stop_trainer = start_training_operator(control_plane, training, log_dir)
        try:
            yield Enrolled(
                client,
                namespace,
                ray_pool,
                train_pool,
                [ray, trainer],
                webhook,
                log_dir / "webhook-manager.log",
                stack,
            )
        finally:
            stop_trainer()
    finally:
        ray.stop()
        stack.stop()
        webhook.terminate()
        webhook.wait(30)
        client.delete(ENROL_WEBHOOK)
        client.delete(f"/api/v1/namespaces/{namespace}")
        ray_pool.remove()
        train_pool.remove()


def test_a_plain_kuberays_raycluster_is_enrolled_and_ganged(enrolled: Enrolled) -> None:
    client, ns = enrolled.client, enrolled.namespace
    client.post(
        RAY.format(ns=ns, plural="rayclusters"), ray_cluster("plain", ns, enrolled.ray_pool, 4)
    )
    selector = "ray.io/cluster=plain"
    made = enrolled.until(
        "KubeRay's 5 pods, enrolled",
        lambda: (p := pods(client, ns, selector)) and len(p) == 5 and p,
    )
    for pod in made:
        assert pod["spec"]["schedulerName"] == "volcano", enrolled.logs()
        assert pod["metadata"]["annotations"][GROUP] == "ray-plain-pg"
    assert sorted(p["metadata"]["annotations"].get(TASK, "") for p in made) == [
        "headgroup",
        *["small"] * 4,
    ]
    group = enrolled.until("our ray-plain-pg", lambda: group_of(client, ns, "ray-plain-pg"))
    assert group["metadata"]["labels"][ADAPTER_LABEL] == "kuberay"
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayCluster", "plain", True)
    assert group["spec"]["minMember"] == 5
    assert amounts(group["spec"]["minResources"]) == amounts({"cpu": "15", "memory": "6Gi"})

    def unschedulable() -> bool:
        status = (group_of(client, ns, "ray-plain-pg") or {}).get("status") or {}
        return any(c["type"] == "Unschedulable" for c in status.get("conditions") or [])

    enrolled.until("the scheduler finding 5 pods do not fit 3 nodes", unschedulable)
    assert bound(pods(client, ns, selector)) == []
    enrolled.ray_pool.add(2)
    enrolled.until(
        "all 5 pods bound once 5 nodes exist",
        lambda: len(bound(pods(client, ns, selector))) == 5,
    )
    names = [
        g["metadata"]["name"] for g in podgroups(client, ns) if "plain" in g["metadata"]["name"]
    ]
    assert names == ["ray-plain-pg"]


def test_a_plain_training_operators_pytorchjob_is_enrolled_and_ganged(enrolled: Enrolled) -> None:
    client, ns = enrolled.client, enrolled.namespace
    client.post(PYTORCHJOBS.format(ns=ns), pytorchjob("plain-ddp", ns, enrolled.train_pool, 3))
    selector = "training.kubeflow.org/job-name=plain-ddp"
    # Without its Volcano mode the operator waits for no group: its pods come at once.
    made = enrolled.until(
        "the operator's 4 pods, enrolled",
        lambda: (p := pods(client, ns, selector)) and len(p) == 4 and p,
    )
    for pod in made:
        assert pod["spec"]["schedulerName"] == "volcano", enrolled.logs()
        assert pod["metadata"]["annotations"][GROUP] == "plain-ddp"
    assert sorted(p["metadata"]["annotations"].get(TASK, "") for p in made) == [
        "master",
        *["worker"] * 3,
    ]
    group = enrolled.until("our PodGroup plain-ddp", lambda: group_of(client, ns, "plain-ddp"))
    assert group["metadata"]["labels"][ADAPTER_LABEL] == "kubeflow-training-operator"
    assert group["spec"]["minMember"] == 4
    assert group["spec"]["queue"] == "default"
    assert amounts(group["spec"]["minResources"]) == amounts({"cpu": "12", "memory": "4Gi"})

    def unschedulable() -> bool:
        status = (group_of(client, ns, "plain-ddp") or {}).get("status") or {}
        return any(c["type"] == "Unschedulable" for c in status.get("conditions") or [])

    enrolled.until("the scheduler finding 4 pods do not fit 3 nodes", unschedulable)
    assert bound(pods(client, ns, selector)) == []
    enrolled.train_pool.add(1)
    enrolled.until(
        "all 4 pods bound once a 4th node exists",
        lambda: len(bound(pods(client, ns, selector))) == 4,
    )
