"""The component and the example pipeline compiled by kfp's own compiler, checked in the IR
(PipelineSpec YAML) that Kubeflow Pipelines runs: interface, image, command, platform spec."""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import compiler, dsl

from stromboli.integrations.kubeflow.pipelines import (
    STROMBOLI_IMAGE,
    make_volcano_job,
    use_queue,
    volcano_job,
)

EXAMPLE = Path(__file__).parents[3] / "examples" / "pipelines" / "gang_training.py"

INPUTS = {
    "image": "STRING",
    "command": "LIST",
    "args": "LIST",
    "replicas": "NUMBER_INTEGER",
    "tasks": "LIST",
    "queue": "STRING",
    "resources": "STRUCT",
    "min_available": "NUMBER_INTEGER",
    "plugins": "STRUCT",
    "template": "STRING",
    "template_values": "STRUCT",
    "pod_annotations": "STRUCT",
    "name": "STRING",
    "namespace": "STRING",
    "scheduler_name": "STRING",
    "ttl_seconds_after_finished": "NUMBER_INTEGER",
    "timeout_seconds": "NUMBER_INTEGER",
    "poll_seconds": "NUMBER_DOUBLE",
    "kubeconfig": "STRING",
    "task_config": "TASK_CONFIG",
}


def compile_to(tmp_path: Path, what: Any, **options: Any) -> list[dict[str, Any]]:
    out = tmp_path / "out.yaml"
    compiler.Compiler().compile(what, str(out), **options)
    return list(yaml.safe_load_all(out.read_text()))


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("gang_training_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_component_interface(tmp_path: Path) -> None:
    (ir,) = compile_to(tmp_path, volcano_job)
    component = ir["components"]["comp-volcano-job"]
    inputs = component["inputDefinitions"]["parameters"]
    assert {name: spec["parameterType"] for name, spec in inputs.items()} == INPUTS
    assert all(spec.get("isOptional") for spec in inputs.values())
    assert inputs["replicas"]["defaultValue"] == 1
    assert inputs["scheduler_name"]["defaultValue"] == "volcano"
    assert inputs["queue"]["description"].startswith("Queue to run in")
    outputs = component["outputDefinitions"]
    assert outputs["artifacts"]["status"]["artifactType"]["schemaTitle"] == "system.Artifact"
    assert {n: s["parameterType"] for n, s in outputs["parameters"].items()} == {
        "job_name": "STRING",
        "phase": "STRING",
    }
    assert [p["field"] for p in component["taskConfigPassthroughs"]] == [
        "RESOURCES",
        "ENV",
        "KUBERNETES_TOLERATIONS",
        "KUBERNETES_NODE_SELECTOR",
        "KUBERNETES_AFFINITY",
        "KUBERNETES_VOLUMES",
    ]
    container = ir["deploymentSpec"]["executors"]["exec-volcano-job"]["container"]
    assert container["image"] == STROMBOLI_IMAGE
    # Nothing is pip-installed when the step starts: the image has stromboli and kfp.
    assert "pip install" not in " ".join(container["command"])
    assert "kfp.dsl.executor_main" in container["command"][2]
    assert (
        "from stromboli.integrations.kubeflow.pipelines.step import run_step"
        in (container["command"][3])
    )
    assert container["args"][-1] == "volcano_job"


def test_component_on_another_image(tmp_path: Path) -> None:
    component = make_volcano_job(
        base_image="python:3.11-slim", packages_to_install=["stromboli==0.1.0"]
    )
    (ir,) = compile_to(tmp_path, component)
    container = ir["deploymentSpec"]["executors"]["exec-volcano-job"]["container"]
    assert container["image"] == "python:3.11-slim"
    assert "'stromboli==0.1.0'" in " ".join(container["command"])


def test_example_pipeline(tmp_path: Path) -> None:
    ir, platform = compile_to(tmp_path, load_example().gang_training)
    assert ir["pipelineInfo"]["name"] == "stromboli-gang-training"
    tasks = ir["root"]["dag"]["tasks"]
    assert set(tasks) == {"prepare", "volcano-job", "report"}
    train = tasks["volcano-job"]
    assert train["componentRef"]["name"] == "comp-volcano-job"
    assert train["dependentTasks"] == ["prepare"]
    assert train["taskInfo"]["name"] == "train (Volcano gang)"
    arguments = train["inputs"]["parameters"]
    assert arguments["queue"] == {"componentInputParameter": "queue"}
    assert arguments["replicas"] == {"componentInputParameter": "workers"}
    assert arguments["plugins"]["runtimeValue"]["constant"] == {"env": [], "svc": []}
    report = tasks["report"]["inputs"]["artifacts"]["status"]["taskOutputArtifact"]
    assert report == {"outputArtifactKey": "status", "producerTask": "volcano-job"}
    executors = ir["deploymentSpec"]["executors"]
    assert {e["container"]["image"] for e in executors.values()} == {STROMBOLI_IMAGE}
    # kfp-kubernetes' part: the prepare step's pod in the queue, the train step's deadline.
    spec = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert spec["exec-prepare"]["podMetadata"] == {
        "annotations": {"scheduling.volcano.sh/queue-name": "default"},
        "labels": {"volcano.sh/queue-name": "default"},
    }
    assert spec["exec-volcano-job"]["activeDeadlineSeconds"] == "14400"


def test_committed_example_is_current(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.yaml"
    compiler.Compiler().compile(load_example().gang_training, str(fresh))
    committed = EXAMPLE.with_suffix(".yaml")
    assert committed.read_text() == fresh.read_text(), (
        f"{committed} is stale: run `python {EXAMPLE}` to compile it again"
    )


@dsl.component(base_image=STROMBOLI_IMAGE, install_kfp_package=False)
def step() -> str:
    return "x"


def test_use_queue_with_a_gang(tmp_path: Path) -> None:
    @dsl.pipeline(name="gang")
    def pipeline() -> None:
        for _ in range(2):
            use_queue(step(), "research", gang="nightly-eval")

    _, platform = compile_to(tmp_path, pipeline)
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(executors) == {"exec-step", "exec-step-2"}
    for executor in executors.values():
        assert executor["podMetadata"]["annotations"] == {
            "scheduling.volcano.sh/queue-name": "research",
            "scheduling.k8s.io/group-name": "nightly-eval",
        }


@pytest.mark.parametrize(
    ("queue", "gang", "message"),
    [
        ("Research", "", "queue: 'Research' is not a valid name"),
        ("q", "a_b", "gang: 'a_b' is not a valid name"),
        ("", "", "queue: '' is not a valid name"),
    ],
)
def test_use_queue_refuses_bad_names(queue: str, gang: str, message: str) -> None:
    def pipeline() -> None:
        use_queue(step(), queue, gang=gang)

    with pytest.raises(ValueError, match=message):
        dsl.pipeline(name="bad")(pipeline)  # kfp runs the function to build the graph


def test_use_queue_refuses_a_run_parameter() -> None:
    def pipeline(queue: str = "default") -> None:
        use_queue(step(), queue)

    with pytest.raises(ValueError, match="queue: a pipeline parameter or task output cannot"):
        dsl.pipeline(name="param")(pipeline)
