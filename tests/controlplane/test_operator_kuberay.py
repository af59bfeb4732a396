"""The real KubeRay operator (v1.5.0, built from its Go module) on the test control plane.

Volcano mode (``--batch-scheduler=volcano``): the operator makes ``ray-<cluster>-pg`` itself
(``ray-operator/controllers/ray/batchscheduler/volcano/volcano_scheduler.go``) and creates every
pod at once; ``stromboli scheduler`` gangs them on kwok nodes all-or-nothing: a RayCluster of
a head and four workers on a pool where three fit waits whole, then binds whole when nodes are
added. The operator's PodGroup is compared with our own conversion of the same stored object
(the golden check of ``integrations/kuberay``), and the running ``stromboli controller`` must
adopt it, never make a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeHTTP
from stromboli.core.devcluster.controlplane import free_port
from stromboli.integrations.kuberay.convert import RayClusterAdapter, RayJobAdapter

from .jobs_live import Stack
from .operator_objects import PRIORITY, RAY, cluster_spec, ray_cluster
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
    podgroups,
    pods,
    wait_until,
)


@dataclass
class Ray:
    client: KubeHTTP
    namespace: str
    pool: Pool
    operator: OperatorProcess
    stack: Stack

    def logs(self) -> str:
        return f"--- kuberay ---\n{self.operator.tail()}\n{self.stack.logs()}"

    def alive(self) -> list[Any]:
        return [self.operator.check_alive, self.stack.check_alive]

    def until(self, what: str, probe: Any, timeout: float = 90.0) -> Any:
        return wait_until(what, probe, timeout=timeout, alive=self.alive(), logs=self.logs)


def kuberay_args() -> list[str]:
    return [
        "--batch-scheduler=volcano",
        "--enable-leader-election=false",
        f"--metrics-addr=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
    ]


@pytest.fixture(scope="module")
def ray(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ray]:
    log_dir = tmp_path_factory.mktemp("kuberay")
    build = operator_build("kuberay", log_dir)
    client = control_plane.client
    control_plane.apply_manifests(build_crds())
    install_crds(control_plane, build)
    control_plane.apply_manifests(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": PRIORITY},
            "value": 100,
        }
    )
    namespace = make_namespace(client, f"kuberay-{free_port()}")
    pool = Pool(control_plane, "ray", cpu="4")
    pool.add(3)
    stack = Stack(control_plane, log_dir).start()
    operator = OperatorProcess(build, control_plane, log_dir / "kuberay.log", kuberay_args())
    operator.start()
    try:
        yield Ray(client, namespace, pool, operator, stack)
    finally:
        operator.stop()
        stack.stop()
        client.delete(f"/api/v1/namespaces/{namespace}")
        pool.remove()


def test_a_raycluster_waits_whole_then_binds_whole(ray: Ray) -> None:
    client, ns = ray.client, ray.namespace
    client.post(RAY.format(ns=ns, plural="rayclusters"), ray_cluster("gang", ns, ray.pool, 4))

    def made() -> list[dict[str, Any]]:
        found = pods(client, ns, "ray.io/cluster=gang")
        return found if len(found) == 5 else []

    created = ray.until("KubeRay creating the head and 4 workers", made)
    for pod in created:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"][GROUP] == "ray-gang-pg"
    assert sorted(p["metadata"]["annotations"][TASK] for p in created) == [
        "headgroup",
        *["small"] * 4,
    ]

    def unschedulable() -> dict[str, Any] | None:
        (group,) = [g for g in podgroups(client, ns) if g["metadata"]["name"] == "ray-gang-pg"]
        conditions = (group.get("status") or {}).get("conditions") or []
        return group if any(c["type"] == "Unschedulable" for c in conditions) else None

    ray.until("the scheduler finding the gang does not fit 3 nodes", unschedulable)
    assert bound(pods(client, ns, "ray.io/cluster=gang")) == []  # not 3 of 5: none

    ray.pool.add(2)
    placed = ray.until(
        "all 5 pods bound once 5 nodes exist",
        lambda: (p := pods(client, ns, "ray.io/cluster=gang")) and len(bound(p)) == 5 and p,
    )
    assert {p["spec"]["nodeName"] for p in placed} == set(ray.pool.nodes)


def test_the_operators_podgroup_is_what_our_conversion_makes_and_is_adopted(ray: Ray) -> None:
    client, ns = ray.client, ray.namespace
    client.post(RAY.format(ns=ns, plural="rayclusters"), ray_cluster("golden", ns, ray.pool, 2))

    def theirs() -> dict[str, Any] | None:
        found = [g for g in podgroups(client, ns) if g["metadata"]["name"] == "ray-golden-pg"]
        return found[0] if found else None

    group = ray.until("KubeRay making ray-golden-pg", theirs)
    stored = client.get(f"{RAY.format(ns=ns, plural='rayclusters')}/golden")
    assert group["spec"]["minMember"] == 3
    assert amounts(group["spec"]["minResources"]) == amounts({"cpu": "9", "memory": "4Gi"})
    assert group["spec"]["queue"] == "default"
    assert group["spec"]["priorityClassName"] == PRIORITY
    assert_same_gang(group, RayClusterAdapter().convert(stored).podgroup("ray-golden-pg"))
    # Adopt, never duplicate: whatever the controller runs, this cluster has one gang.
    ray.until("the pods of golden", lambda: len(pods(client, ns, "ray.io/cluster=golden")) == 3)
    names = [g["metadata"]["name"] for g in podgroups(client, ns)]
    assert names.count("ray-golden-pg") == 1
    assert not [n for n in names if "golden" in n and n != "ray-golden-pg"]


def test_a_rayjobs_podgroup_counts_the_submitter_in_resources_not_members(ray: Ray) -> None:
    client, ns = ray.client, ray.namespace
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "train",
            "namespace": ns,
            "labels": {"volcano.sh/queue-name": "default"},
        },
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "K8sJobMode",
            "rayClusterSpec": cluster_spec(ray.pool, 1),
        },
    }
    client.post(RAY.format(ns=ns, plural="rayjobs"), job)

    def theirs() -> dict[str, Any] | None:
        found = [g for g in podgroups(client, ns) if g["metadata"]["name"] == "ray-train-pg"]
        return found[0] if found else None

    group = ray.until("KubeRay making ray-train-pg for the RayJob", theirs)
    stored = client.get(f"{RAY.format(ns=ns, plural='rayjobs')}/train")
    assert group["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    assert group["spec"]["minMember"] == 2  # head + 1 worker; the submitter is not a member
    # head 3 + worker 3 cpu, plus KubeRay's default submitter (500m cpu, 200Mi memory)
    assert amounts(group["spec"]["minResources"]) == amounts(
        {"cpu": "6500m", "memory": f"{3 * 1024 + 200}Mi"}
    )
    assert_same_gang(group, RayJobAdapter().convert(stored).podgroup("ray-train-pg"))
    # The RayJob's cluster joins the RayJob's gang and gets none of its own.
    rayjobs = RAY.format(ns=ns, plural="rayjobs")
    cluster = ray.until(
        "the RayJob naming its RayCluster",
        lambda: (client.get(f"{rayjobs}/train").get("status") or {}).get("rayClusterName"),
    )
    made = ray.until(
        f"the pods of {cluster}",
        lambda: (p := pods(client, ns, f"ray.io/cluster={cluster}")) and len(p) == 2 and p,
    )
    assert {p["metadata"]["annotations"].get(GROUP) for p in made} == {"ray-train-pg"}
    assert [
        g["metadata"]["name"] for g in podgroups(client, ns) if "train" in g["metadata"]["name"]
    ] == ["ray-train-pg"]


def test_kuberay_build_is_recorded(ray: Ray) -> None:
    record = ray.operator.build.record
    assert record["version"] == "v1.5.0"
    assert record["binary_bytes"] == Path(ray.operator.build.binary).stat().st_size
    assert {p.name for p in ray.operator.build.crds} >= {
        "ray.io_rayclusters.yaml",
        "ray.io_rayjobs.yaml",
        "ray.io_rayservices.yaml",
    }
