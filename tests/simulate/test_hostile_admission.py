"""Nonsense the API server or Volcano's webhooks refuse is refused by the simulator too, with
their message naming the object and the field; and the checks themselves, case by case."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.cluster.validation import (
    object_problems,
    resource_list_problems,
    status_problems,
)
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import SimulationInputError, load


def pod(requests: str = '{cpu: "1"}', containers: str | None = None) -> str:
    containers = containers or f"[{{name: c, image: x, resources: {{requests: {requests}}}}}]"
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec: {{containers: {containers}}}\n"


CRON = """apiVersion: batch.volcano.sh/v1alpha1
kind: CronJob
metadata: {{name: report}}
spec:
  schedule: "{schedule}"
  jobTemplate:
    spec:
      tasks:
        - name: main
          replicas: {replicas}
          template: {{spec: {{containers: [{{name: c, image: x}}]}}}}
"""


async def refused(tmp_path: Path, text: str) -> str:
    """The run's one rejection (an outcome, not a stop), checked never to have been stored."""
    path = tmp_path / "input.yaml"
    path.write_text(text)
    simulation = Simulation(load([path]), max_time=600)
    result = await simulation.run()
    assert len(result.rejections) == 1, result.rejections
    rejection = result.rejections[0]
    stored = await result.store.list(rejection.api_version, rejection.kind)
    assert rejection.name not in [o["metadata"]["name"] for o in stored.items]
    return str(rejection)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            pod('{cpu: "-1"}'),
            'Pod "p" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
            "must be greater than or equal to 0",
        ),
        (pod(containers="[]"), 'Pod "p" is invalid: spec.containers: Required value'),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
            'status: {allocatable: {cpu: "-4", pods: "110"}}\n',
            'Node "n" is invalid: status.allocatable[cpu]: Invalid value: "-4": must be greater '
            "than or equal to 0",
        ),
        (
            "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: rq}\n"
            'spec: {hard: {cpu: "-1"}}\n',
            'ResourceQuota "rq" is invalid: spec.hard[cpu]: Invalid value: "-1": must be greater '
            "than or equal to 0",
        ),
        (CRON.format(schedule="* * * * * *", replicas=1), "spec.schedule: Invalid value"),
        (CRON.format(schedule="0 0 31 2 *", replicas=1), "the schedule never fires"),
        (
            "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata: {name: f}\nspec:\n"
            "  flows: [{name: a, dependsOn: {targets: [b]}}, {name: b, dependsOn: {targets: [a]}}]",
            "form a cycle: a -> b -> a",
        ),
        (
            "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: a}\n"
            "spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: b}}}]}\n"
            "---\n"
            "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: b}\n"
            "spec: {tier: 1, members: [{type: HyperNode, selector: {exactMatch: {name: a}}}]}\n",
            "document 2: HyperNode 'b'",
        ),
    ],
    ids=[
        "negative-request",
        "no-containers",
        "negative-node",
        "quota",
        "six-fields",
        "never",
        "jobflow-cycle",
        "hypernode-cycle",
    ],
)
async def test_refused_before_the_run(tmp_path: Path, text: str, expected: str) -> None:
    message = await refused(tmp_path, text)
    assert expected in message and "input.yaml document" in message


async def test_full_width_digits_are_not_a_quantity(tmp_path: Path) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(pod('{cpu: "１"}'))
    with pytest.raises(SimulationInputError, match=r"requests\.cpu"):
        load([path])


async def test_cronjob_with_a_bad_template_is_refused_once_at_the_start(tmp_path: Path) -> None:
    text = CRON.format(schedule="* * * * *", replicas=2).replace(
        "tasks:", "minAvailable: 5\n      tasks:"
    )
    message = await refused(tmp_path, text)
    assert (
        "spec.jobTemplate: job 'minAvailable' should not be greater than total replicas" in message
    )


# --- the checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("-1", "must be greater than or equal to 0"),
        ("-0.5Gi", "must be greater than or equal to 0"),
        ("１", "quantities must match the regular expression"),
        ("lots", "quantities must match the regular expression"),
        ("1e309", "out of range"),
        (True, "must be a quantity"),
        ([1], "must be a quantity"),
        (None, "must be a quantity"),
    ],
)
def test_resource_amount_refusals(value: object, detail: str) -> None:
    problems = resource_list_problems("spec.hard", {"cpu": value})
    assert len(problems) == 1 and problems[0].startswith("spec.hard[cpu]: Invalid value: ")
    assert detail in problems[0]


@pytest.mark.parametrize("value", ["0", "1", "500m", "2Gi", 3, 1.5, "1e3"])
def test_resource_amounts_admitted(value: object) -> None:
    assert resource_list_problems("spec.hard", {"cpu": value}) == []


def test_pod_checks() -> None:
    def problems(spec: object) -> list[str]:
        return object_problems("v1", "Pod", {"spec": spec})

    assert problems({"containers": [{"name": "c"}]}) == []
    assert problems(None) == ["spec: Required value"]
    assert problems([]) == ['spec: Invalid value: "[]": must be an object']
    assert problems({}) == ["spec.containers: Required value"]
    assert problems({"containers": "c"})[-1].startswith("spec.containers: Invalid value")
    assert problems({"containers": [{}]}) == ["spec.containers[0].name: Required value"]
    assert problems(
        {
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}
            ]
        }
    ) == [
        'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal '
        "to cpu limit of 1"
    ]
    assert problems(
        {
            "containers": [{"name": "c"}],
            "initContainers": [{"name": "i", "resources": {"limits": {"memory": "-1"}}}],
        }
    ) == [
        'spec.initContainers[0].resources.limits[memory]: Invalid value: "-1": must be greater '
        "than or equal to 0"
    ]


def test_node_status_checks() -> None:
    assert status_problems("v1", "Node", {"status": {"capacity": {"cpu": "-1"}}}) == [
        'status.capacity[cpu]: Invalid value: "-1": must be greater than or equal to 0'
    ]
    assert status_problems("v1", "Node", {"status": []}) == []
    assert status_problems("v1", "Pod", {"status": {"capacity": {"cpu": "-1"}}}) == []
