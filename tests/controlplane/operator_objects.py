"""The framework objects the live operator tests submit, as a user writes them: every pod
template pinned to a test :class:`~.operators.Pool` by its nodeSelector and toleration."""

from __future__ import annotations

from typing import Any

from stromboli.core.devcluster.client import KubeHTTP

from .operators import Pool, podgroups

PRIORITY = "ray-batch"
RAY = "/apis/ray.io/v1/namespaces/{ns}/{plural}"
PYTORCHJOBS = "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"


def template(pool: Pool, container: str, cpu: str, memory: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory}
    return {
        "spec": {
            **pool.pod_spec(),
            "containers": [
                {
                    "name": container,
                    "image": "rayproject/ray:2.46.0",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        }
    }


def cluster_spec(pool: Pool, workers: int) -> dict[str, Any]:
    return {
        "rayVersion": "2.46.0",
        "headGroupSpec": {"rayStartParams": {}, "template": template(pool, "ray-head", "3", "2Gi")},
        "workerGroupSpecs": [
            {
                "groupName": "small",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": template(pool, "ray-worker", "3", "1Gi"),
            }
        ],
    }


def ray_cluster(name: str, namespace: str, pool: Pool, workers: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"volcano.sh/queue-name": "default", "ray.io/priority-class-name": PRIORITY},
        },
        "spec": cluster_spec(pool, workers),
    }


def replica(pool: Pool, replicas: int, cpu: str) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": "1Gi"}
    return {
        "replicas": replicas,
        "restartPolicy": "OnFailure",
        "template": {
            "spec": {
                **pool.pod_spec(),
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "pytorch/pytorch:2.5.1",
                        "resources": {"requests": resources, "limits": resources},
                    }
                ],
            }
        },
    }


def pytorchjob(name: str, ns: str, pool: Pool, workers: int, **policy: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runPolicy": {"schedulingPolicy": {"queue": "default", **policy}},
            "pytorchReplicaSpecs": {
                "Master": replica(pool, 1, "3"),
                "Worker": replica(pool, workers, "3"),
            },
        },
    }


def group_of(client: KubeHTTP, ns: str, name: str) -> dict[str, Any] | None:
    found = [g for g in podgroups(client, ns) if g["metadata"]["name"] == name]
    return found[0] if found else None
