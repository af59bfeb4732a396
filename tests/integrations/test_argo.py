"""Argo Workflows conversion: one gang per workflow, or per fan-out step group."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.integrations.argo.convert import WorkflowAdapter, parse_node_name
from stromboli.integrations.common import apply_mutation

from .kit import GROUP_NAME, TASK_SPEC, convert, obj, only_group, raises_field

ARGO = WorkflowAdapter()
QUEUE_KEY = "scheduling.volcano.sh/queue-name"


def container(cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    return {"image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}


def workflow(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entrypoint": "main",
        "templates": [
            {
                "name": "main",
                "steps": [
                    [{"name": "prep", "template": "small"}],
                    [
                        {"name": "train", "template": "big", "withItems": ["a", "b", "c"]},
                        {"name": "eval", "template": "small"},
                        {
                            "name": "maybe",
                            "template": "small",
                            "when": "{{workflow.parameters.x}} == 1",
                        },
                        {
                            "name": "dynamic",
                            "template": "small",
                            "withParam": "{{steps.prep.outputs.result}}",
                        },
                        {"name": "nested", "template": "fan"},
                    ],
                ],
            },
            {
                "name": "fan",
                "dag": {
                    "tasks": [
                        {"name": "shard", "template": "small", "withSequence": {"count": "4"}},
                        {"name": "merge", "template": "small", "dependencies": ["shard"]},
                    ]
                },
            },
            {"name": "big", "container": container("4", "8Gi")},
            {"name": "small", "script": {**container("500m", "256Mi"), "source": "echo"}},
        ],
        **spec,
    }
    return obj("argoproj.io/v1alpha1", "Workflow", "wf", body, annotations=annotations)


def step_pod(node: str) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {"workflows.argoproj.io/workflow": "wf"},
            "annotations": {"workflows.argoproj.io/node-name": node},
        },
        "spec": {"schedulerName": "default-scheduler"},
    }


STEP_GROUP = {"stromboli.dev/gang-scope": "step-group"}


def test_one_gang_per_workflow_by_default() -> None:
    wf = workflow(annotations={QUEUE_KEY: "wf-queue"}, podPriorityClassName="batch")
    result = convert(ARGO, wf)
    pg = only_group(result)
    assert pg["metadata"]["name"] == "argo-wf-pg"
    [owner] = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Workflow", "wf", True)
    assert pg["spec"] == {"minMember": 1, "queue": "wf-queue", "priorityClassName": "batch"}
    change = ARGO.podgroup_for_pod(step_pod("wf[1].train(0:a)"), wf).mutations[0]
    pod = apply_mutation(step_pod("wf[1].train(0:a)"), change)
    assert pod["metadata"]["annotations"][GROUP_NAME] == "argo-wf-pg"
    assert pod["metadata"]["annotations"][TASK_SPEC] == "big"
    assert pod["metadata"]["annotations"][QUEUE_KEY] == "wf-queue"  # what Volcano never copies
    assert pod["spec"]["schedulerName"] == "volcano"


def test_queue_precedence_annotation_label_pod_metadata() -> None:
    wf = workflow(podMetadata={"annotations": {QUEUE_KEY: "from-pods"}})
    assert only_group(convert(ARGO, wf))["spec"]["queue"] == "from-pods"
    wf["metadata"]["labels"] = {QUEUE_KEY: "from-label"}
    assert only_group(convert(ARGO, wf))["spec"]["queue"] == "from-label"
    wf["metadata"]["annotations"] = {QUEUE_KEY: "from-annotation"}
    assert only_group(convert(ARGO, wf))["spec"]["queue"] == "from-annotation"


def test_parallel_step_group_is_one_gang_of_the_certain_pods() -> None:
    wf = workflow(annotations=STEP_GROUP)
    result = ARGO.podgroup_for_pod(step_pod("wf[1].train(1:b)"), wf)
    pg = only_group(result)
    # train ×3 (4 cpu/8Gi) + eval; not maybe (when), dynamic (withParam) or nested (a DAG).
    assert pg["spec"]["minMember"] == 4
    assert pg["spec"]["minResources"] == {"cpu": "12500m", "memory": "24832Mi"}
    assert result.mutations[0].annotations[TASK_SPEC] == "big"
    same = ARGO.podgroup_for_pod(step_pod("wf[1].eval"), wf)
    assert same.mutations[0].group_name == pg["metadata"]["name"]
    assert same.mutations[0].annotations[TASK_SPEC] == "small"
    first = ARGO.podgroup_for_pod(step_pod("wf[0].prep"), wf)
    assert first.mutations[0].group_name != pg["metadata"]["name"]
    assert only_group(first)["spec"]["minMember"] == 1


def test_dag_fan_out_task_is_one_gang() -> None:
    wf = workflow(annotations=STEP_GROUP)
    result = ARGO.podgroup_for_pod(step_pod("wf[1].nested.shard(2:2)"), wf)
    pg = only_group(result)
    assert pg["spec"]["minMember"] == 4
    assert pg["spec"]["minResources"] == {"cpu": "2", "memory": "1Gi"}
    merge = ARGO.podgroup_for_pod(step_pod("wf[1].nested.merge"), wf)
    assert only_group(merge)["spec"]["minMember"] == 1
    assert merge.mutations[0].group_name != pg["metadata"]["name"]


def test_parallelism_caps_the_gang() -> None:
    wf = workflow(annotations=STEP_GROUP, parallelism=2)
    pg = only_group(ARGO.podgroup_for_pod(step_pod("wf[1].eval"), wf))
    assert pg["spec"]["minMember"] == 2


def test_retries_stay_in_their_group() -> None:
    wf = workflow(annotations=STEP_GROUP)
    a = ARGO.podgroup_for_pod(step_pod("wf[1].train(0:a)"), wf).mutations[0]
    b = ARGO.podgroup_for_pod(step_pod("wf[1].train(0:a)(1)"), wf).mutations[0]
    assert a.group_name == b.group_name and b.annotations[TASK_SPEC] == "big"


def test_convert_makes_the_groups_of_the_pod_nodes_in_status() -> None:
    wf = workflow(annotations=STEP_GROUP)
    wf["status"] = {
        "nodes": {
            "n1": {"name": "wf[1].train(0:a)", "type": "Pod"},
            "n2": {"name": "wf[1].train(1:b)", "type": "Pod"},
            "n3": {"name": "wf[1]", "type": "StepGroup"},
            "n4": {"name": "wf[0].prep", "type": "Pod"},
        }
    }
    result = convert(ARGO, wf)
    assert sorted(g["spec"]["minMember"] for g in result.podgroups) == [1, 4]


def test_unknown_paths_form_a_group_of_one() -> None:
    wf = workflow(annotations=STEP_GROUP)
    for node in ("wf[7].ghost", "other[0].x", "wf[1].train(0:a", "wf.onExit"):
        pg = only_group(ARGO.podgroup_for_pod(step_pod(node), wf))
        assert pg["spec"]["minMember"] == 1


def test_template_from_a_workflow_template_is_read_from_status() -> None:
    wf = workflow(annotations=STEP_GROUP)
    spec = wf["spec"]
    wf["spec"] = {"workflowTemplateRef": {"name": "tmpl"}}
    wf["status"] = {"storedWorkflowTemplateSpec": spec}
    pg = only_group(ARGO.podgroup_for_pod(step_pod("wf[1].eval"), wf))
    assert pg["spec"]["minMember"] == 4


def test_bad_scope_is_refused() -> None:
    wf = workflow(annotations={"stromboli.dev/gang-scope": "everything"})
    raises_field(ARGO, wf, "metadata.annotations[stromboli.dev/gang-scope]")


@pytest.mark.parametrize(
    ("node", "tokens"),
    [
        ("wf", []),
        ("wf[0].a", [("group", "0"), ("step", "a")]),
        ("wf[1].b(2:x.y[3])", [("group", "1"), ("step", "b"), ("item", "2")]),
        ("wf.t(0:(nested))(3)", [("step", "t"), ("item", "0"), ("retry", "3")]),
    ],
)
def test_parse_node_name(node: str, tokens: list[tuple[str, str]]) -> None:
    parsed = parse_node_name("wf", node)
    assert parsed is not None and [(t.kind, t.value) for t in parsed] == tokens


@pytest.mark.parametrize("node", ["other", "wf[x]", "wf.", "wf(1", "wf[0]!", "wf" + "[0]" * 2000])
def test_parse_node_name_refuses(node: str) -> None:
    assert parse_node_name("wf", node) is None
