"""examples/deployment.yaml, statefulset.yaml and batch-job.yaml through `stromboli simulate`:
plain Kubernetes workloads for schedulerName volcano schedule as on a real cluster."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(name: str) -> tuple[dict, str]:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLES / name), "--output", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout), result.stderr


def of_kind(state: dict, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == kind}


def test_the_deployment_runs_and_the_replicaset_gang_waits_whole() -> None:
    state, stderr = run("deployment.yaml")
    assert stderr == ""
    replicasets = of_kind(state, "ReplicaSet")
    [web_rs] = [rs for name, rs in replicasets.items() if name.startswith("web-")]
    pods = of_kind(state, "Pod")
    web = [p for p in pods.values() if p["metadata"]["labels"]["app"] == "web"]
    assert len(web) == 4
    assert {p["spec"]["nodeName"] for p in web} == {"node-a", "node-b"}
    assert all(p["status"]["phase"] == "Running" for p in web)
    groups = of_kind(state, "PodGroup")
    web_group = groups[f"podgroup-{web_rs['metadata']['uid']}"]
    assert web_group["spec"]["queue"] == "serving"
    assert of_kind(state, "Deployment")["web"]["status"]["availableReplicas"] == 4
    workers = [p for p in pods.values() if p["metadata"]["labels"]["app"] == "batch-workers"]
    assert len(workers) == 3
    assert not any(p["spec"].get("nodeName") for p in workers)  # 2 would fit; the gang waits
    gang = groups[f"podgroup-{replicasets['batch-workers']['metadata']['uid']}"]
    assert gang["spec"]["minMember"] == 3


def test_the_statefulset_starts_in_order_and_the_service_is_inert() -> None:
    state, stderr = run("statefulset.yaml")
    assert stderr == (
        "warning: Service (v1): 1 object stored; nothing in the simulator acts on this kind\n"
    )
    pods = of_kind(state, "Pod")
    assert sorted(pods) == ["kv-0", "kv-1", "kv-2"]
    starts = [pods[f"kv-{i}"]["status"]["startTime"] for i in range(3)]
    assert starts == sorted(starts) and len(set(starts)) == 3
    assert all(pods[n]["spec"]["subdomain"] == "kv" for n in pods)
    assert sorted(of_kind(state, "PersistentVolumeClaim")) == [
        "data-kv-0",
        "data-kv-1",
        "data-kv-2",
    ]
    assert "kv" in of_kind(state, "Service")


def test_the_batch_jobs_complete_and_fail_as_the_header_says() -> None:
    state, _ = run("batch-job.yaml")
    jobs = {n: j for n, j in of_kind(state, "Job").items() if j["apiVersion"] == "batch/v1"}
    render = jobs["render"]
    assert render["status"]["succeeded"] == 6
    assert render["status"]["completionTime"] == "1970-01-01T00:06:00Z"
    flaky = jobs["flaky"]
    assert flaky["status"]["failed"] == 3
    [failed] = [c for c in flaky["status"]["conditions"] if c["type"] == "Failed"]
    assert failed["reason"] == "BackoffLimitExceeded"
    flaky_starts = sorted(
        p["status"]["startTime"]
        for p in of_kind(state, "Pod").values()
        if p["metadata"]["labels"]["job-name"] == "flaky"
    )
    assert flaky_starts == ["1970-01-01T00:00:00Z", "1970-01-01T00:00:40Z", "1970-01-01T00:01:30Z"]
