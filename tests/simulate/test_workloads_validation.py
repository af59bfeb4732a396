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


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: pi}\nspec:\n  template:\n"
            "    metadata: {annotations: {sim.stromboli.dev/runtime: soon}}\n"
            "    spec: {restartPolicy: Never, containers: [{name: c, image: x}]}\n",
            "Job 'pi': spec.template.metadata.annotations[sim.stromboli.dev/runtime]: 'soon' is "
            "not a duration",
        ),
        (
            "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: vj}\nspec:\n"
            "  tasks:\n  - name: t\n    replicas: 1\n    template:\n"
            '      metadata: {annotations: {sim.stromboli.dev/exit-code: "one"}}\n'
            "      spec: {containers: [{name: c, image: x}]}\n",
            "Job 'vj': spec.tasks[0].template.metadata.annotations[sim.stromboli.dev/exit-code]: "
            "'one' is not an integer",
        ),
        (
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n"
            '  schedule: "* * * * *"\n  jobTemplate:\n    spec:\n      template:\n'
            '        metadata: {annotations: {sim.stromboli.dev/runtime: "-5s"}}\n'
            "        spec: {restartPolicy: Never, containers: [{name: c, image: x}]}\n",
            "CronJob 'c': spec.jobTemplate.spec.template.metadata.annotations"
            "[sim.stromboli.dev/runtime]: '-5s' is not a duration",
        ),
    ],
    ids=["batch-job", "vcjob", "cronjob"],
)
def test_a_template_with_a_bad_sim_annotation_is_refused_naming_the_field(
    tmp_path: Path, document: str, field: str
) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(document)
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert result.exit_code == 1
    assert f"{path} document 1: {field}" in result.output
