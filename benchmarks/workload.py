"""Synthetic cluster and gang workloads for the benchmarks, written as simulator YAML."""

from __future__ import annotations

from pathlib import Path

import yaml

#: Task shapes (cpu, memory) that jobs are drawn from, round robin.
SHAPES = [("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi"), ("4", "8Gi"), ("8", "32Gi")]


def node(i: int, cpu: str = "32", memory: str = "256Gi", pods: str = "110") -> dict:
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def gang_job(j: int, size: int) -> list[dict]:
    cpu, memory = SHAPES[j % len(SHAPES)]
    name = f"job-{j:05d}"
    docs: list[dict] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": size, "queue": "default"},
        }
    ]
    for i in range(size):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-worker-{i}",
                    "namespace": "default",
                    "labels": {"app": name},
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            }
        )
    return docs


def write_workload(path: Path, nodes: int, jobs: int, size: int) -> Path:
    documents: list[dict] = [node(i) for i in range(nodes)]
    for j in range(jobs):
        documents.extend(gang_job(j, size))
    with path.open("w") as out:
        yaml.dump_all(documents, out, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    return path
