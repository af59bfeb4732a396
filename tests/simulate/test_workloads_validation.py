"""The API server's refusals of workload kinds, applied by the simulator's admission pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.simulate.workloads.validation import qualified_kind, workload_problems


def deployment(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}},
    }
    body.update(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": body,
    }


def job(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}
    body.update(spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"}, "spec": body}


def test_a_good_deployment_and_job_pass() -> None:
    assert workload_problems(deployment()) == []
    assert workload_problems(job(completions=3, parallelism=2)) == []


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        (
            deployment(selector={"matchLabels": {"app": "api"}}),
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
            "`selector` does not match template `labels`",
        ),
        (deployment(selector=None), "spec.selector: Required value"),
        (
            deployment(replicas=-1),
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        ),
        (deployment(replicas="3"), "spec.replicas: Invalid value: '3': must be an integer"),
        (
            deployment(
                selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["api"]}]}
            ),
            "`selector` does not match template `labels`",
        ),
        (
            job(template={"spec": {"containers": []}}),
            'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"',
        ),
        (
            job(template={"spec": {"restartPolicy": "Always"}}),
            "spec.template.spec.restartPolicy: Required value",
        ),
        (
            job(backoffLimit=-2),
            "spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0",
        ),
        (job(completionMode="Indexed"), "spec.completions: Required value"),
    ],
)
def test_refusals_in_the_api_servers_words(obj: dict[str, Any], problem: str) -> None:
    problems = workload_problems(obj)
    assert any(problem in p for p in problems), problems


def test_a_cronjob_checks_its_schedule_and_job_template() -> None:
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {
            "schedule": "* * * * * *",
            "jobTemplate": {
                "spec": job()["spec"] | {"template": {"spec": {"restartPolicy": "Always"}}}
            },
        },
    }
    problems = workload_problems(cronjob)
    assert problems[0].startswith("spec.schedule: Invalid value")
    assert problems[1].startswith("spec.jobTemplate.spec.template.spec.restartPolicy")


def test_other_kinds_are_not_judged() -> None:
    assert workload_problems({"apiVersion": "v1", "kind": "ConfigMap", "spec": 3}) == []
    assert workload_problems({"apiVersion": "apps/v1", "kind": "Deployment"}) == [
        "spec: Required value"
    ]


def test_qualified_kind() -> None:
    assert qualified_kind(job()) == "Job.batch"
    assert qualified_kind(deployment()) == "Deployment.apps"
    assert qualified_kind({"apiVersion": "v1", "kind": "Pod"}) == "Pod"


def test_a_refused_workload_is_a_rejection_and_the_rest_runs(tmp_path: Path) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(
        """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: restarts}
spec:
  template:
    spec:
      schedulerName: volcano
      containers: [{name: c, image: x}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      schedulerName: volcano
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
    )
    result = CliRunner().invoke(main, ["simulate", str(path), "--fail-on-rejection"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"rejected: {path} document 2: Job 'restarts': Job.batch \"restarts\" is invalid: "
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", '
        '"Never"\n'
    )
    assert "default/web-" in result.stdout  # the Deployment ran
