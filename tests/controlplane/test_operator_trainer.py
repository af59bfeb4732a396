"""Kubeflow Trainer v2.0.0's real controller manager (built from its Go module) with our
enrolment, on the test control plane.

v2.0.0 has no Volcano plugin (``podGroupPolicy`` knows only ``coscheduling``), so enrolment is
the only way in. The real Trainer turns a TrainJob and its ClusterTrainingRuntime into a
JobSet; JobSet's own controller is not run here, so the test creates the Jobs exactly as its
``constructJob`` / ``labelAndAnnotateObject`` do (``sigs.k8s.io/jobset`` v0.8.2,
``pkg/controllers/jobset_controller.go``: name ``<jobset>-<replicatedJob>-<index>``, the
replicatedJob's template, its labels and annotations on the Job and its pod template, owned by
the JobSet), and kube-controller-manager's Job controller makes the pods. The webhook enrols
them into the TrainJob's gang (pod → Job → JobSet → TrainJob), ``stromboli controller`` makes
that PodGroup, and the gang waits whole, then binds whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeAPIError, KubeHTTP
from stromboli.core.devcluster.controlplane import free_port
from stromboli.integrations.common import ADAPTER_LABEL

from .jobs_live import Stack
from .operator_objects import group_of
from .operators import (
    ENROL_WEBHOOK,
    GROUP,
    TRAINER_CERTS,
    OperatorProcess,
    Pool,
    amounts,
    bound,
    install_crds,
    make_namespace,
    operator_build,
    pods,
    start_enrol_webhook,
    start_rotated_operator,
    wait_until,
)

TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
RUNTIME = f"runtime-{free_port()}"


def listed_when_served(client: KubeHTTP, path: str) -> list[dict[str, Any]]:
    """The items at ``path``, none while a CRD just installed answers 429 (its storage
    starting): the caller's wait covers that, as it covers the operator's own delay."""
    try:
        return list(client.get(path)["items"])
    except KubeAPIError as err:
        if err.status != 429:
            raise
        return []


@dataclass
class Trainer:
    client: KubeHTTP
    namespace: str
    pool: Pool
    operator: OperatorProcess
    stack: Stack
    webhook_log: Path

    def logs(self) -> str:
        webhook = self.webhook_log.read_text(errors="replace")[-2000:]
        return (
            f"--- trainer ---\n{self.operator.tail()}\n"
            f"--- webhook ---\n{webhook}\n{self.stack.logs()}"
        )

    def until(self, what: str, probe: Any, timeout: float = 90.0) -> Any:
        alive = [self.operator.check_alive, self.stack.check_alive]
        return wait_until(what, probe, timeout=timeout, alive=alive, logs=self.logs)


def runtime(pool: Pool) -> dict[str, Any]:
    resources = {"cpu": "3", "memory": "1Gi"}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME},
        "spec": {
            "mlPolicy": {"numNodes": 3, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {
                                    "template": {
                                        "spec": {
                                            **pool.pod_spec(),
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "pytorch/pytorch:2.7.1",
                                                    "resources": {
                                                        "requests": resources,
                                                        "limits": resources,
                                                    },
                                                }
                                            ],
                                        }
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


@pytest.fixture(scope="module")
def trainer(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Trainer]:
    log_dir = tmp_path_factory.mktemp("trainer")
    build = operator_build("trainer", log_dir)
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    install_crds(control_plane, build)  # Trainer's and JobSet's
    pool = Pool(control_plane, "trainer", cpu="4")
    pool.add(2)
    control_plane.apply_manifests(runtime(pool))
    namespace = make_namespace(client, f"trainer-{free_port()}", {"stromboli.dev/enroll": "true"})
    webhook = start_enrol_webhook(control_plane, log_dir, namespace)
    stack = Stack(control_plane, log_dir).start()  # after install_crds: it discovers kinds
    args = [
        "--metrics-bind-address=0",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
        f"--webhook-server-port={free_port()}",
    ]
    try:
        operator, stop_operator = start_rotated_operator(
            control_plane, build, log_dir, TRAINER_CERTS, args
        )
        try:
            yield Trainer(client, namespace, pool, operator, stack, log_dir / "webhook-manager.log")
        finally:
            stop_operator()
    finally:
        stack.stop()
        webhook.terminate()
        webhook.wait(30)
        client.delete(ENROL_WEBHOOK)
        client.delete(f"/api/v1/namespaces/{namespace}")
        client.delete(f"{TRAINER}/clustertrainingruntimes/{RUNTIME}")
        pool.remove()


def jobset_jobs(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    """The Jobs JobSet v0.8.2's controller makes for ``jobset`` (constructJob and
    labelAndAnnotateObject in pkg/controllers/jobset_controller.go; no coordinator, no
    exclusive placement, not suspended, restart 0), with the pod restart policy its webhook
    defaults."""
    name, ns = jobset["metadata"]["name"], jobset["metadata"]["namespace"]
    rjobs = jobset["spec"]["replicatedJobs"]
    total = sum(int(r.get("replicas", 1)) for r in rjobs)
    jobs, global_index = [], 0
    for rjob in rjobs:
        replicas = int(rjob.get("replicas", 1))
        for index in range(replicas):
            job_name = f"{name}-{rjob['name']}-{index}"
            keys = {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
                "jobset.sigs.k8s.io/restart-attempt": "0",
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                "jobset.sigs.k8s.io/global-replicas": str(total),
                "jobset.sigs.k8s.io/job-index": str(index),
                "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
                "jobset.sigs.k8s.io/job-global-index": str(global_index),
            }
            global_index += 1
            template = rjob["template"]
            spec = {**template["spec"], "suspend": False}
            pod = spec["template"]
            pod_meta = pod.get("metadata") or {}
            # JobSet's defaulting webhook (pkg/webhooks/jobset_webhook.go), not run here either.
            pod_spec = {"restartPolicy": "OnFailure", **pod["spec"]}
            spec["template"] = {
                **pod,
                "spec": pod_spec,
                "metadata": {
                    **pod_meta,
                    "labels": {**(pod_meta.get("labels") or {}), **keys},
                    "annotations": {**(pod_meta.get("annotations") or {}), **keys},
                },
            }
            meta = template.get("metadata") or {}
            jobs.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": job_name,
                        "namespace": ns,
                        "labels": {**(meta.get("labels") or {}), **keys},
                        "annotations": {**(meta.get("annotations") or {}), **keys},
                        "ownerReferences": [
                            {
                                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                                "kind": "JobSet",
                                "name": name,
                                "uid": jobset["metadata"]["uid"],
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": spec,
                }
            )
    return jobs


def test_a_trainjob_through_real_trainer_is_one_gang_that_binds_whole(trainer: Trainer) -> None:
    client, ns = trainer.client, trainer.namespace
    client.post(
        f"{TRAINER}/namespaces/{ns}/trainjobs",
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": ns},
            "spec": {"runtimeRef": {"name": RUNTIME}},
        },
    )
    jobset = trainer.until(
        "Trainer making the TrainJob's JobSet",
        lambda: next(iter(listed_when_served(client, JOBSETS.format(ns=ns))), None),
    )
    assert jobset["metadata"]["name"] == "tj"
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    (node,) = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node"]
    assert node["template"]["spec"]["parallelism"] == 3  # mlPolicy.numNodes
    for job in jobset_jobs(jobset):
        client.post(f"/apis/batch/v1/namespaces/{ns}/jobs", job)

    selector = "jobset.sigs.k8s.io/jobset-name=tj"
    made = trainer.until(
        "the Job controller's 3 pods, enrolled",
        lambda: (p := pods(client, ns, selector)) and len(p) == 3 and p,
    )
    for pod in made:
        assert pod["spec"]["schedulerName"] == "volcano", trainer.logs()
        assert pod["metadata"]["annotations"][GROUP] == "tj"
    group = trainer.until("our PodGroup tj", lambda: group_of(client, ns, "tj"))
    assert group["metadata"]["labels"][ADAPTER_LABEL] == "kubeflow-trainer"
    assert group["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert group["spec"]["minMember"] == 3
    assert amounts(group["spec"]["minResources"]) == amounts({"cpu": "9", "memory": "3Gi"})

    def unschedulable() -> bool:
        conditions = ((group_of(client, ns, "tj") or {}).get("status") or {}).get("conditions")
        return any(c["type"] == "Unschedulable" for c in conditions or [])

    trainer.until("the scheduler finding 3 pods do not fit 2 nodes", unschedulable)
    assert bound(pods(client, ns, selector)) == []
    trainer.pool.add(1)
    trainer.until(
        "all 3 pods bound once a 3rd node exists",
        lambda: len(bound(pods(client, ns, selector))) == 3,
    )
