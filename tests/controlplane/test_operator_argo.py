"""Argo Workflows' real workflow-controller (v4.0.5, built from its Go module) with our
enrolment, on the test control plane.

Argo has no Volcano mode, so enrolment is the only way in: in a namespace labelled
``stromboli.dev/enroll: "true"`` the webhook puts each step pod the controller creates into the
PodGroup our Argo adapter names, and ``stromboli controller`` makes it from the Workflow. With
``stromboli.dev/gang-scope: step-group`` a fan-out of three steps is one gang: on a pool where
two fit it waits whole, then binds whole when a node is added.

v4.0.5 has reported security flaws, and the controller listens on ``:6060`` and ``:9090``
(every interface, no flag to change it): it runs in a network namespace of its own that
reaches only the API server's port (:mod:`.netjail`), so nothing it serves is reachable from
outside that namespace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeHTTP
from stromboli.core.devcluster.controlplane import free_port
from stromboli.integrations.argo.convert import WorkflowAdapter
from stromboli.integrations.common import ADAPTER_LABEL

from .jobs_live import Stack
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
    wait_until,
)

NETJAIL = Path(__file__).with_name("netjail.py")
CONFIGMAP = "workflow-controller-configmap"
WORKFLOWS = "/apis/argoproj.io/v1alpha1/namespaces/{ns}/workflows"


@dataclass
class Argo:
    client: KubeHTTP
    namespace: str
    pool: Pool
    controller: OperatorProcess
    relay: subprocess.Popen[bytes]
    webhook: subprocess.Popen[bytes]
    stack: Stack
    log_dir: Path

    def logs(self) -> str:
        webhook = (self.log_dir / "webhook-manager.log").read_text(errors="replace")[-2000:]
        return (
            f"--- workflow-controller ---\n{self.controller.tail()}\n"
            f"--- webhook ---\n{webhook}\n{self.stack.logs()}"
        )

    def check_alive(self) -> None:
        self.controller.check_alive()
        self.stack.check_alive()
        assert self.relay.poll() is None, "the API server relay exited"
        assert self.webhook.poll() is None, f"webhook-manager exited:\n{self.logs()}"

    def until(self, what: str, probe: Any, timeout: float = 90.0) -> Any:
        return wait_until(what, probe, timeout=timeout, alive=[self.check_alive], logs=self.logs)


@pytest.fixture(scope="module")
def argo(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Argo]:
    log_dir = tmp_path_factory.mktemp("argo")
    build = operator_build("argo", log_dir)
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    install_crds(control_plane, build)
    namespace = make_namespace(client, f"argo-wf-{free_port()}", {"stromboli.dev/enroll": "true"})
    # The controller's configuration, in its namespace (the kubeconfig's: default).
    control_plane.apply_manifests(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": "default"},
            "data": {},
        }
    )
    pool = Pool(control_plane, "argo", cpu="4")
    pool.add(2)
    assert control_plane.server_url is not None
    port = str(urlsplit(control_plane.server_url).port)
    socket_path = str(log_dir / "apiserver.sock")
    relay = subprocess.Popen([sys.executable, str(NETJAIL), "host", socket_path, port])
    webhook = start_enrol_webhook(control_plane, log_dir, namespace)
    stack = Stack(control_plane, log_dir).start()  # after install_crds: it discovers kinds
    jail = ["unshare", "--net", sys.executable, str(NETJAIL), "jail", socket_path, port, "--"]
    controller = OperatorProcess(
        build,
        control_plane,
        log_dir / "workflow-controller.log",
        [f"--kubeconfig={control_plane.kubeconfig_path}", "--executor-image=argoexec:v4.0.5"],
        {"LEADER_ELECTION_DISABLE": "true"},
        prefix=jail,
    ).start()
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(socket_path):
            assert time.monotonic() < deadline, "the API server relay never listened"
            time.sleep(0.1)
        yield Argo(client, namespace, pool, controller, relay, webhook, stack, log_dir)
    finally:
        controller.stop()
        stack.stop()
        webhook.terminate()
        webhook.wait(30)
        relay.terminate()
        relay.wait(10)
        client.delete(ENROL_WEBHOOK)
        client.delete(f"/api/v1/namespaces/{namespace}")
        client.delete(f"/api/v1/namespaces/default/configmaps/{CONFIGMAP}")
        pool.remove()


def sweep(namespace: str, pool: Pool) -> dict[str, Any]:
    spec = pool.pod_spec()
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {
            "name": "sweep",
            "namespace": namespace,
            "annotations": {"stromboli.dev/gang-scope": "step-group"},
        },
        "spec": {
            "entrypoint": "main",
            "templates": [
                {
                    "name": "main",
                    "steps": [
                        [{"name": "train", "template": "work", "withItems": ["a", "b", "c"]}]
                    ],
                },
                {
                    "name": "work",
                    "nodeSelector": spec["nodeSelector"],
                    "tolerations": spec["tolerations"],
                    "container": {
                        "image": "busybox",
                        "command": ["sleep", "3600"],
                        "resources": {"requests": {"cpu": "3", "memory": "1Gi"}},
                    },
                },
            ],
        },
    }


def test_a_workflows_fan_out_is_one_gang_that_binds_whole(argo: Argo) -> None:
    client, ns = argo.client, argo.namespace
    client.post(WORKFLOWS.format(ns=ns), sweep(ns, argo.pool))
    selector = "workflows.argoproj.io/workflow=sweep"
    made = argo.until(
        "the workflow-controller's 3 step pods, enrolled",
        lambda: (p := pods(client, ns, selector)) and len(p) == 3 and p,
    )
    stored = client.get(f"{WORKFLOWS.format(ns=ns)}/sweep")
    names = {WorkflowAdapter().group_name_for_pod(p, stored) for p in made}
    assert len(names) == 1, names
    (name,) = names
    assert name is not None and name.startswith("argo-sweep-")
    for pod in made:
        assert pod["spec"]["schedulerName"] == "volcano", argo.logs()
        assert pod["metadata"]["annotations"][GROUP] == name
    # The role: at CREATE where the webhook's owner cache already holds the Workflow, else
    # patched by the controller right after (integrations/live.py).
    argo.until(
        "volcano.sh/task-spec=work on every step pod",
        lambda: all(
            p["metadata"]["annotations"].get(TASK) == "work" for p in pods(client, ns, selector)
        ),
    )

    def group() -> dict[str, Any] | None:
        found = [g for g in podgroups(client, ns) if g["metadata"]["name"] == name]
        return found[0] if found else None

    made_group = argo.until(f"our PodGroup {name}", group)
    assert made_group["metadata"]["labels"][ADAPTER_LABEL] == "argo-workflows"
    assert made_group["metadata"]["ownerReferences"][0]["kind"] == "Workflow"
    assert made_group["spec"]["minMember"] == 3
    assert amounts(made_group["spec"]["minResources"]) == amounts({"cpu": "9", "memory": "3Gi"})

    def unschedulable() -> bool:
        conditions = ((group() or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Unschedulable" for c in conditions)

    argo.until("the scheduler finding 3 pods do not fit 2 nodes", unschedulable)
    assert bound(pods(client, ns, selector)) == []
    argo.pool.add(1)
    argo.until(
        "all 3 step pods bound once a 3rd node exists",
        lambda: len(bound(pods(client, ns, selector))) == 3,
    )
