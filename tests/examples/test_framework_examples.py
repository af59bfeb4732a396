"""examples/frameworks/*.yaml through `stromboli simulate`: the emulated operators make the
pods their real counterparts make, in the PodGroups the adapters compute, at the moments the
operators would; each test checks what the example's header comment says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "frameworks"
GROUP = "scheduling.k8s.io/group-name"
TASK = "volcano.sh/task-spec"


def simulate(*paths: Path) -> dict[str, dict[str, dict[str, Any]]]:
    result = CliRunner().invoke(main, ["simulate", *map(str, paths), "--output", "json"])
    assert result.exit_code == 0, result.output
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for obj in orjson.loads(result.stdout)["items"]:
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    return by_kind


def seconds(stamp: str) -> int:
    hours, minutes, secs = stamp.removeprefix("1970-01-01T").removesuffix("Z").split(":")
    return int(hours) * 3600 + int(minutes) * 60 + int(secs)


def gang(state: dict, prefix: str) -> dict[str, dict[str, Any]]:
    return {n: p for n, p in state["Pod"].items() if n.startswith(prefix)}


def roles(pods: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {
        n: (p["metadata"]["annotations"][GROUP], p["metadata"]["annotations"][TASK])
        for n, p in pods.items()
    }


def test_pytorchjob_pods_exist_only_once_their_group_is_admitted() -> None:
    state = simulate(EXAMPLES / "pytorchjob.yaml")
    group = state["PodGroup"]["train"]
    assert group["spec"]["minMember"] == 4
    assert group["spec"]["minResources"] == {"cpu": "8", "memory": "8Gi"}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    train = gang(state, "train-")
    assert roles(train) == {
        "train-master-0": ("train", "master"),
        "train-worker-0": ("train", "worker"),
        "train-worker-1": ("train", "worker"),
        "train-worker-2": ("train", "worker"),
    }
    labels = train["train-worker-2"]["metadata"]["labels"]
    assert labels["training.kubeflow.org/replica-type"] == "worker"
    assert labels["training.kubeflow.org/replica-index"] == "2"
    assert train["train-master-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == (
        "master"
    )
    ends = [seconds(p["status"]["startTime"]) + 60 for p in train.values()]
    evaluation = gang(state, "eval-")
    assert set(evaluation) == {"eval-master-0", "eval-worker-0"}
    # Submitted at 10s, but no pod made until the group was admitted, after train ended.
    created = {seconds(p["metadata"]["creationTimestamp"]) for p in evaluation.values()}
    assert min(created) >= max(ends)
    assert len({p["status"]["startTime"] for p in evaluation.values()}) == 1  # whole
    assert all(p["status"]["phase"] == "Succeeded" for p in state["Pod"].values())


def test_rayjob_is_one_gang_and_its_submitter_follows_the_cluster() -> None:
    state = simulate(EXAMPLES / "rayjob.yaml")
    group = state["PodGroup"]["ray-pi-pg"]
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"]["cpu"] == "6500m"
    pods = state["Pod"]
    assert roles(pods) == {
        "pi-raycluster-head": ("ray-pi-pg", "headgroup"),
        "pi-raycluster-small-worker-0": ("ray-pi-pg", "small"),
        "pi-raycluster-small-worker-1": ("ray-pi-pg", "small"),
        "pi-submitter": ("ray-pi-pg", "submittergroup"),
    }
    assert pods["pi-raycluster-head"]["metadata"]["labels"]["ray.io/node-type"] == "head"
    cluster_start = max(
        seconds(p["status"]["startTime"]) for n, p in pods.items() if "raycluster" in n
    )
    assert seconds(pods["pi-submitter"]["metadata"]["creationTimestamp"]) >= cluster_start
    assert pods["pi-submitter"]["status"]["phase"] == "Succeeded"


def test_spark_driver_makes_its_executors_once_it_runs() -> None:
    state = simulate(EXAMPLES / "sparkapplication.yaml")
    group = state["PodGroup"]["spark-pi-pg"]
    assert group["spec"]["minMember"] == 1
    assert group["spec"]["minResources"] == {"cpu": "3", "memory": "1536Mi"}
    pods = state["Pod"]
    driver = pods["pi-driver"]
    assert driver["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1",
        "memory": "896Mi",
    }
    assert roles(pods) == {
        "pi-driver": ("spark-pi-pg", "driver"),
        "pi-exec-1": ("spark-pi-pg", "executor"),
        "pi-exec-2": ("spark-pi-pg", "executor"),
    }
    for name in ("pi-exec-1", "pi-exec-2"):
        [owner] = pods[name]["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("Pod", "pi-driver")
        created = seconds(pods[name]["metadata"]["creationTimestamp"])
        assert created >= seconds(driver["status"]["startTime"])
        assert pods[name]["metadata"]["labels"]["spark-role"] == "executor"


def test_mpijob_launcher_and_workers_start_together() -> None:
    state = simulate(EXAMPLES / "mpijob.yaml")
    assert state["PodGroup"]["allreduce"]["spec"]["minMember"] == 3
    pods = state["Pod"]
    assert roles(pods) == {
        "allreduce-launcher": ("allreduce", "launcher"),
        "allreduce-worker-0": ("allreduce", "worker"),
        "allreduce-worker-1": ("allreduce", "worker"),
    }
    assert len({p["status"]["startTime"] for p in pods.values()}) == 1
    assert pods["allreduce-launcher"]["status"]["phase"] == "Succeeded"


def test_jobset_is_one_gang_with_a_role_per_replicated_job() -> None:
    state = simulate(EXAMPLES / "jobset.yaml")
    group = state["PodGroup"]["js"]
    assert group["spec"]["minMember"] == 5
    assert group["spec"]["minResources"] == {"cpu": "5", "memory": "5Gi"}
    assert roles(state["Pod"]) == {
        "js-driver-0": ("js", "driver"),
        **{f"js-workers-{i}": ("js", "workers") for i in range(4)},
    }


def test_leaderworkerset_groups_follow_their_leaders() -> None:
    state = simulate(EXAMPLES / "leaderworkerset.yaml")
    pods = state["Pod"]
    assert set(pods) == {"vllm-0", "vllm-0-1", "vllm-0-2", "vllm-1", "vllm-1-1", "vllm-1-2"}
    for index in ("0", "1"):
        leader = pods[f"vllm-{index}"]
        group = leader["metadata"]["annotations"][GROUP]
        revision = leader["metadata"]["labels"][
            "leaderworkerset.sigs.k8s.io/template-revision-hash"
        ]
        assert group == f"vllm-{index}-{revision}"
        pg = state["PodGroup"][group]
        assert pg["spec"]["minMember"] == 3
        assert pg["spec"]["minResources"]["cpu"] == "3"
        [owner] = pg["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("Pod", f"vllm-{index}")
        assert roles({n: p for n, p in pods.items() if n.startswith(f"vllm-{index}")}) == {
            f"vllm-{index}": (group, "leader"),
            f"vllm-{index}-1": (group, "worker"),
            f"vllm-{index}-2": (group, "worker"),
        }
        labels = pods[f"vllm-{index}-2"]["metadata"]["labels"]
        assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == "2"
        assert labels["leaderworkerset.sigs.k8s.io/group-index"] == index


def test_trainjob_pods_come_from_its_jobset_and_join_its_group() -> None:
    state = simulate(EXAMPLES / "trainjob.yaml")
    group = state["PodGroup"]["tj"]
    assert group["spec"]["minMember"] == 4
    assert group["spec"]["minResources"] == {"cpu": "4", "memory": "8Gi"}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    pods = state["Pod"]
    assert roles(pods) == {f"tj-node-{i}": ("tj", "node") for i in range(4)}
    for pod in pods.values():
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    assert len({p["status"]["startTime"] for p in pods.values()}) == 1
    assert all(p["status"]["phase"] == "Succeeded" for p in pods.values())


BAD = """
apiVersion: v1
kind: Node
metadata: {name: n}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bad}
spec:
  pytorchReplicaSpecs:
    Chief: {replicas: 1, template: {spec: {containers: [{name: c, image: i}]}}}
---
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: wf}
spec:
  entrypoint: main
  templates: [{name: main, container: {image: busybox, resources: {requests: {cpu: "1"}}}}]
---
apiVersion: ray.io/v1
kind: RayService
metadata: {name: serve}
spec: {serveConfigV2: "applications: []"}
"""


def test_a_bad_framework_object_gets_its_warning_and_no_pods(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    result = CliRunner().invoke(main, ["simulate", str(path), "--output", "json"])
    assert result.exit_code == 0, result.output
    items = orjson.loads(result.stdout)["items"]
    events = [e for e in items if e["kind"] == "Event" and e["reason"] == "PodGroupError"]
    [event] = events
    assert event["involvedObject"]["name"] == "bad"
    assert "spec.pytorchReplicaSpecs.Chief" in event["message"]
    pods = {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}
    # The workflow next to it runs: one pod, in the workflow's one gang.
    [pod] = pods.values()
    assert pod["metadata"]["annotations"][GROUP] == "argo-wf-pg"
    assert pod["metadata"]["annotations"]["workflows.argoproj.io/node-name"] == "wf"
    assert pod["spec"].get("nodeName")
    assert [o["metadata"]["name"] for o in items if o["kind"] == "PodGroup"] == ["argo-wf-pg"]
    # A RayService without a cluster config makes no RayCluster, and the report says so.
    assert not [o for o in items if o["kind"] == "RayCluster"]
    report = CliRunner().invoke(main, ["simulate", str(path)])
    assert "RayService default/serve: no more pods: spec.rayClusterConfig" in report.output


def test_workflow_steps_run_in_order_and_each_fan_out_is_a_gang() -> None:
    state = simulate(EXAMPLES / "workflow.yaml")
    pods = {
        p["metadata"]["annotations"]["workflows.argoproj.io/node-name"]: p
        for p in state["Pod"].values()
    }
    assert set(pods) == {
        "etl[0].prep",
        "etl[1].train(0:a)",
        "etl[1].train(1:b)",
        "etl[1].train(2:c)",
        "etl[2].report",
    }
    train = [pods[f"etl[1].train({i})"] for i in ("0:a", "1:b", "2:c")]
    [group] = {p["metadata"]["annotations"][GROUP] for p in train}
    assert state["PodGroup"][group]["spec"]["minMember"] == 3
    assert len({p["status"]["startTime"] for p in train}) == 1  # together
    starts = [
        seconds(pods[n]["status"]["startTime"])
        for n in ("etl[0].prep", "etl[1].train(0:a)", "etl[2].report")
    ]
    assert starts == [0, 10, 30]  # one step after another (10s, then 20s)
    for pod in pods.values():
        assert pod["metadata"]["name"].startswith("etl-")
        assert pod["metadata"]["labels"]["workflows.argoproj.io/workflow"] == "etl"
        assert pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "default"


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_framework_example_runs_every_pod(example: str) -> None:
    state = simulate(EXAMPLES / example)
    assert state["PodGroup"], example
    assert all(p["spec"].get("nodeName") for p in state["Pod"].values()), example


HUGE = """
apiVersion: v1
kind: Node
metadata: {name: n}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: huge}
spec:
  headGroupSpec: {template: {spec: {containers: [{name: c, image: i}]}}}
  workerGroupSpecs:
    - groupName: w
      replicas: 2147483000
      maxReplicas: 2147483000
      template: {spec: {containers: [{name: c, image: i}]}}
"""


def test_a_huge_framework_object_makes_a_bounded_number_of_pods(tmp_path: Path) -> None:
    """Hostile input: two billion replicas make a note and at most --max-workload-pods pods."""
    path = tmp_path / "huge.yaml"
    path.write_text(HUGE)
    args = ["simulate", str(path), "--max-workload-pods", "7", "--output", "json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    items = orjson.loads(result.stdout)["items"]
    assert len([o for o in items if o["kind"] == "Pod"]) == 7
    assert "RayCluster default/huge: stopped at 7 pods (--max-workload-pods)" in result.stderr


def test_rayservice_makes_its_raycluster_which_is_its_own_gang() -> None:
    state = simulate(EXAMPLES / "rayservice.yaml")
    cluster = state["RayCluster"]["serve-raycluster"]
    owner = cluster["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayService", "serve", True)
    labels = cluster["metadata"]["labels"]
    assert labels["ray.io/originated-from-crd"] == "RayService"
    assert labels["ray.io/originated-from-cr-name"] == "serve"
    assert labels["volcano.sh/queue-name"] == "default"  # the service's labels are copied
    group = state["PodGroup"]["ray-serve-raycluster-pg"]
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"]["cpu"] == "6"
    assert group["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    pods = gang(state, "serve-raycluster-")
    assert set(pods) == {
        "serve-raycluster-head",
        "serve-raycluster-replica-worker-0",
        "serve-raycluster-replica-worker-1",
    }
    assert {p["metadata"]["annotations"][GROUP] for p in pods.values()} == {
        "ray-serve-raycluster-pg"
    }
    assert len({p["status"]["startTime"] for p in pods.values()}) == 1  # bound whole
    assert not [e for e in state.get("Event", {}).values() if e["reason"] == "PodGroupError"]
