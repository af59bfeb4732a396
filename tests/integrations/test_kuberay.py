"""KubeRay conversions: RayCluster, RayJob, RayService (golden cases)."""

from __future__ import annotations

from typing import Any

from stromboli.integrations.common import Context, apply_mutation
from stromboli.integrations.kuberay.convert import (
    RayClusterAdapter,
    RayJobAdapter,
    RayServiceAdapter,
)

from .kit import (
    GROUP_NAME,
    TASK_SPEC,
    convert,
    obj,
    only_group,
    operator_made,
    raises_field,
    roles,
    stored,
    template,
)

CLUSTER = RayClusterAdapter()
JOB = RayJobAdapter()
SERVICE = RayServiceAdapter()


def cluster_spec(*groups: dict[str, Any], autoscaling: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "headGroupSpec": {"template": template("1", "2Gi")},
        "workerGroupSpecs": list(groups),
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return spec


def group(name: str = "small", replicas: int | None = 2, **fields: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"groupName": name, "template": template("1", "1Gi"), **fields}
    if replicas is not None:
        result["replicas"] = replicas
    return result


def raycluster(
    *groups: dict[str, Any], labels: dict[str, str] | None = None, **kw: Any
) -> dict[str, Any]:
    return obj("ray.io/v1", "RayCluster", "rc", cluster_spec(*groups, **kw), labels=labels)


def test_golden_rayjob() -> None:
    """integrations.md §9.1: head 1cpu/2Gi, small ×2 of 1cpu/1Gi, default K8sJobMode submitter."""
    job = obj(
        "ray.io/v1",
        "RayJob",
        "rj",
        {"rayClusterSpec": cluster_spec(group())},
        labels={"volcano.sh/queue-name": "q1"},
    )
    result = convert(JOB, job)
    pg = only_group(result)
    assert pg["metadata"]["name"] == "ray-rj-pg"
    [owner] = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayJob", "rj", True)
    assert pg["spec"] == {
        "minMember": 3,
        "queue": "q1",
        "minResources": {"cpu": "3500m", "memory": "4296Mi"},
    }
    assert pg["status"] == {"phase": "Pending"}
    assert {r: a[TASK_SPEC] for r, a in roles(result).items()} == {
        "headgroup": "headgroup",
        "small": "small",
        "submittergroup": "submittergroup",
    }
    head = {
        "metadata": {"labels": {"ray.io/node-type": "head", "ray.io/group": "headgroup"}},
        "spec": {"schedulerName": "default-scheduler"},
    }
    mutated = apply_mutation(head, result.mutation_for(head))
    assert mutated["metadata"]["annotations"] == {GROUP_NAME: "ray-rj-pg", TASK_SPEC: "headgroup"}
    assert mutated["metadata"]["labels"]["volcano.sh/queue-name"] == "q1"
    assert mutated["spec"]["schedulerName"] == "volcano"


def test_raycluster_counts_clamped_replicas_but_raw_resources() -> None:
    rc = raycluster(
        group("a", 5, minReplicas=1, maxReplicas=3), group("b", 0, minReplicas=2, numOfHosts=2)
    )
    spec = only_group(convert(CLUSTER, rc))["spec"]
    # workers: a → clamp(5, 1, 3) = 3; b → clamp(0, 2, max) = 2 × 2 hosts = 4; + head.
    assert spec["minMember"] == 8
    # resources: head + a 5 raw replicas + b 0 raw replicas (KubeRay's asymmetry).
    assert spec["minResources"] == {"cpu": "6", "memory": "7Gi"}


def test_raycluster_min_above_max_takes_max() -> None:
    rc = raycluster(group("a", 1, minReplicas=4, maxReplicas=2))
    assert only_group(convert(CLUSTER, rc))["spec"]["minMember"] == 3


def test_raycluster_autoscaling_counts_min_replicas() -> None:
    rc = raycluster(group("a", 5, minReplicas=1, numOfHosts=2), group("b", 3), autoscaling=True)
    spec = only_group(convert(CLUSTER, rc))["spec"]
    assert spec["minMember"] == 3  # head + 1 × 2 hosts; b has minReplicas 0
    assert spec["minResources"] == {"cpu": "3", "memory": "4Gi"}


def test_suspended_worker_group_counts_nothing() -> None:
    rc = raycluster(group("a", 4, suspend=True), group("b", 1))
    spec = only_group(convert(CLUSTER, rc))["spec"]
    assert spec["minMember"] == 2 and spec["minResources"] == {"cpu": "2", "memory": "3Gi"}


def test_requests_fall_back_to_limits_per_resource() -> None:
    g = group("a", 1)
    g["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1"},
        "limits": {"cpu": "4", "memory": "3Gi", "nvidia.com/gpu": "1"},
    }
    spec = only_group(convert(CLUSTER, raycluster(g)))["spec"]
    assert spec["minResources"] == {"cpu": "2", "memory": "5Gi", "nvidia.com/gpu": "1"}


def test_queue_priority_and_topology_come_from_labels() -> None:
    rc = raycluster(
        group(),
        labels={
            "volcano.sh/queue-name": "q",
            "ray.io/priority-class-name": "high",
            "volcano.sh/network-topology-mode": "hard",
            "volcano.sh/network-topology-highest-tier-allowed": "3",
        },
    )
    rc["metadata"]["annotations"] = {"scheduling.volcano.sh/queue-name": "ignored", "note": "x"}
    pg = only_group(convert(CLUSTER, rc))
    assert pg["spec"]["queue"] == "q" and pg["spec"]["priorityClassName"] == "high"
    assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 3}
    assert pg["metadata"]["annotations"] == {
        "scheduling.volcano.sh/queue-name": "ignored",
        "note": "x",
    }


def test_stored_podgroup_keeps_queue_and_follows_size() -> None:
    first = only_group(
        convert(CLUSTER, raycluster(group(replicas=2), labels={"volcano.sh/queue-name": "q"}))
    )
    context = Context(existing={"ray-rc-pg": stored(first, queue="moved")})
    rc = raycluster(group(replicas=4), labels={"volcano.sh/queue-name": "other"})
    pg = only_group(convert(CLUSTER, rc, context))
    assert pg["spec"]["queue"] == "moved" and pg["spec"]["minMember"] == 5
    assert "status" not in pg


def test_cluster_of_a_rayjob_gets_no_podgroup_of_its_own() -> None:
    rc = raycluster(
        group(),
        labels={"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "rj"},
    )
    result = convert(CLUSTER, rc)
    assert result.podgroups == ()
    assert roles(result)["small"][GROUP_NAME] == "ray-rj-pg"
    assert CLUSTER.group_name_for_pod({}, rc) == "ray-rj-pg"


def test_rayjob_submitter_template_and_modes() -> None:
    job = obj(
        "ray.io/v1",
        "RayJob",
        "rj",
        {
            "rayClusterSpec": cluster_spec(group()),
            "submitterPodTemplate": template("2", "1Gi"),
        },
    )
    assert only_group(convert(JOB, job))["spec"]["minResources"] == {"cpu": "5", "memory": "5Gi"}
    job["spec"]["submissionMode"] = "HTTPMode"
    result = convert(JOB, job)
    assert only_group(result)["spec"]["minResources"] == {"cpu": "3", "memory": "4Gi"}
    assert "submittergroup" not in roles(result)
    job["spec"]["submissionMode"] = "SidecarMode"
    assert only_group(convert(JOB, job))["spec"]["minResources"] == {
        "cpu": "3500m",
        "memory": "4296Mi",
    }
    job["spec"]["submissionMode"] = "Magic"
    raises_field(JOB, job, "spec.submissionMode")


def test_rayjob_on_an_existing_cluster_has_no_gang() -> None:
    job = obj("ray.io/v1", "RayJob", "rj", {"clusterSelector": {"ray.io/cluster": "shared"}})
    result = convert(JOB, job)
    assert result.podgroups == () and result.notes


def test_finished_rayjob_shrinks_to_its_live_cluster() -> None:
    job = obj(
        "ray.io/v1",
        "RayJob",
        "rj",
        {"rayClusterSpec": cluster_spec(group())},
        status={"jobDeploymentStatus": "Complete", "rayClusterName": "rj-abc"},
    )
    pg = only_group(convert(JOB, job))
    assert pg["spec"]["minMember"] == 0 and "minResources" not in pg["spec"]
    live = obj("ray.io/v1", "RayCluster", "rj-abc", cluster_spec(group(replicas=1)))
    pg = only_group(convert(JOB, job, Context(related=[live])))
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["minResources"] == {
        "cpu": "2",
        "memory": "3Gi",
    }


def test_operator_made_podgroup_is_adopted() -> None:
    made = operator_made(only_group(convert(CLUSTER, raycluster(group()))))
    result = convert(CLUSTER, raycluster(group()), Context(existing={"ray-rc-pg": made}))
    assert result.podgroups == () and result.adopted == ("ray-rc-pg",)


def test_rayservice_clusters_are_their_own_gangs() -> None:
    svc = obj(
        "ray.io/v1",
        "RayService",
        "svc",
        {"rayClusterConfig": cluster_spec(group())},
        status={
            "activeServiceStatus": {"rayClusterName": "svc-raycluster-a"},
            "pendingServiceStatus": {"rayClusterName": "svc-raycluster-b"},
        },
    )
    a = obj("ray.io/v1", "RayCluster", "svc-raycluster-a", cluster_spec(group(replicas=1)))
    b = obj("ray.io/v1", "RayCluster", "svc-raycluster-b", cluster_spec(group(replicas=3)))
    unrelated = obj("ray.io/v1", "RayCluster", "other", cluster_spec(group()))
    result = convert(SERVICE, svc, Context(related=[a, b, unrelated]))
    names = {g["metadata"]["name"]: g["spec"]["minMember"] for g in result.podgroups}
    assert names == {"ray-svc-raycluster-a-pg": 2, "ray-svc-raycluster-b-pg": 4}
    pod = {"metadata": {"labels": {"ray.io/cluster": "svc-raycluster-b"}}}
    assert SERVICE.group_name_for_pod(pod, svc) == "ray-svc-raycluster-b-pg"


def test_bad_ray_objects_name_the_field() -> None:
    raises_field(CLUSTER, raycluster(group(name="")), "spec.workerGroupSpecs[0].groupName")
    raises_field(CLUSTER, raycluster(group(), group()), "spec.workerGroupSpecs[1].groupName")
    raises_field(CLUSTER, raycluster(group(numOfHosts=0)), "spec.workerGroupSpecs[0].numOfHosts")
    rc = raycluster(group())
    del rc["spec"]["headGroupSpec"]["template"]
    raises_field(CLUSTER, rc, "spec.headGroupSpec.template")
    rc = raycluster(group(), labels={"volcano.sh/network-topology-highest-tier-allowed": "-1"})
    raises_field(CLUSTER, rc, "metadata.labels[volcano.sh/network-topology-highest-tier-allowed]")
    raises_field(JOB, obj("ray.io/v1", "RayJob", "rj", {}), "spec.rayClusterSpec")
