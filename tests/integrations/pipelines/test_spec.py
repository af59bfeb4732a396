"""The vcjob a ``volcano_job`` step builds from its arguments or its template, and the
arguments it refuses (each naming the parameter) before touching a cluster."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.integrations.kubeflow.pipelines.errors import ParameterError
from stromboli.integrations.kubeflow.pipelines.spec import (
    MAX_TEMPLATE_BYTES,
    MAX_TEMPLATE_DEPTH,
    JobRequest,
    build_job,
    render_template,
    whole_numbers,
)

NS = "team-a"


def build(**arguments: Any) -> dict[str, Any]:
    arguments.setdefault("image", "trainer:1")
    return build_job(JobRequest(namespace=NS, **arguments))


def refused(parameter: str, **arguments: Any) -> str:
    with pytest.raises(ParameterError) as caught:
        build(**arguments)
    assert caught.value.parameter == parameter, caught.value
    return caught.value.detail


def container(job: dict[str, Any], task: int = 0) -> dict[str, Any]:
    return job["spec"]["tasks"][task]["template"]["spec"]["containers"][0]


def vcjob_yaml(**spec: Any) -> str:
    tasks = [
        {
            "name": "worker",
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "c", "image": "img"}]}},
        }
    ]
    return yaml.safe_dump(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "tpl"},
            "spec": {"tasks": tasks, **spec},
        }
    )


# --- from arguments -------------------------------------------------------------------------------


def test_one_task_from_arguments() -> None:
    job = build(command=["python", "train.py"], args=["--epochs", "3"], replicas=4)
    assert job["apiVersion"] == "batch.volcano.sh/v1alpha1" and job["kind"] == "Job"
    assert job["metadata"] == {"namespace": NS, "generateName": "kfp-vcjob-"}
    spec = job["spec"]
    assert spec["queue"] == "default" and spec["schedulerName"] == "volcano"
    (task,) = spec["tasks"]
    assert task["name"] == "worker" and task["replicas"] == 4
    assert task["template"]["spec"]["restartPolicy"] == "Never"
    assert container(job) == {
        "name": "main",
        "image": "trainer:1",
        "command": ["python", "train.py"],
        "args": ["--epochs", "3"],
    }
    assert "minAvailable" not in spec  # the webhook or the controller: all replicas


def test_several_tasks_inherit_image_and_resources() -> None:
    job = build(
        resources={"cpu": "2", "nvidia.com/gpu": 1},
        tasks=[
            {"name": "master", "replicas": 1, "command": ["serve"]},
            {"name": "worker", "replicas": 3, "image": "other:2", "minAvailable": 2},
        ],
        min_available=3,
        plugins={"svc": [], "env": None},
        queue="research",
        name="dist",
    )
    spec = job["spec"]
    assert job["metadata"] == {"namespace": NS, "name": "dist"}
    assert spec["queue"] == "research" and spec["minAvailable"] == 3
    assert spec["plugins"] == {"svc": [], "env": []}
    master, worker = spec["tasks"]
    assert container(job, 0)["command"] == ["serve"] and container(job, 0)["image"] == "trainer:1"
    assert container(job, 1)["image"] == "other:2" and "command" not in container(job, 1)
    assert worker["minAvailable"] == 2 and "minAvailable" not in master
    # A flat resources mapping is both requests and limits (GPUs need limits).
    for index in (0, 1):
        assert container(job, index)["resources"] == {
            "requests": {"cpu": "2", "nvidia.com/gpu": "1"},
            "limits": {"cpu": "2", "nvidia.com/gpu": "1"},
        }


def test_requests_and_limits_kept_apart() -> None:
    job = build(resources={"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}})
    assert container(job)["resources"] == {
        "requests": {"cpu": "500m"},
        "limits": {"memory": "1Gi"},
    }


def test_pod_annotations_and_env() -> None:
    job = build(
        pod_annotations={"sidecar.istio.io/inject": False, "team": "a"},
        tasks=[{"name": "w", "env": {"EPOCHS": 3}}],
    )
    template = job["spec"]["tasks"][0]["template"]
    assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false", "team": "a"}
    assert container(job)["env"] == [{"name": "EPOCHS", "value": "3"}]


def test_task_config_fills_what_tasks_leave_unset() -> None:
    task_config = {
        "resources": {"requests": {"cpu": "4"}, "limits": {"nvidia.com/gpu": "1"}},
        "env": [{"name": "A", "value": "from-task-config"}, {"name": "B", "value": "b"}],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "node_selector": {"pool": "gpu"},
        "affinity": None,
        "volumes": [{"name": "data", "emptyDir": {}}],
        "volume_mounts": [{"name": "data", "mountPath": "/data"}],
    }
    job = build(
        tasks=[
            {"name": "own", "resources": {"cpu": "1"}, "env": {"A": "own"}},
            {"name": "bare"},
        ],
        task_config=task_config,
    )
    own, bare = (t["template"]["spec"] for t in job["spec"]["tasks"])
    assert own["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert own["containers"][0]["env"] == [
        {"name": "A", "value": "own"},
        {"name": "B", "value": "b"},
    ]
    assert bare["containers"][0]["resources"] == task_config["resources"]
    assert bare["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    for pod in (own, bare):
        assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
        assert pod["nodeSelector"] == {"pool": "gpu"}
        assert pod["volumes"] == [{"name": "data", "emptyDir": {}}]
        assert "affinity" not in pod


def test_ttl_and_scheduler() -> None:
    job = build(ttl_seconds_after_finished=600, scheduler_name="stromboli")
    assert job["spec"]["ttlSecondsAfterFinished"] == 600
    assert job["spec"]["schedulerName"] == "stromboli"


@pytest.mark.parametrize(
    ("arguments", "parameter", "detail"),
    [
        ({"image": ""}, "image", "required"),
        ({"tasks": [{"name": "w", "image": " "}]}, "tasks[0].image", "required"),
        ({"replicas": -1}, "tasks[0].replicas", "whole number"),
        ({"replicas": 2**31}, "tasks[0].replicas", "whole number"),
        ({"replicas": True}, "tasks[0].replicas", "whole number"),
        ({"tasks": [{"name": "a"}], "replicas": 3}, "replicas", "each task's replicas"),
        ({"tasks": ["worker"]}, "tasks[0]", "expected a mapping"),
        ({"tasks": [{"name": "Worker"}]}, "tasks[0].name", "DNS label"),
        ({"tasks": [{"name": "w", "gpus": 1}]}, "tasks[0].gpus", "unknown key"),
        ({"tasks": [{"name": "a"}, {"name": "a"}]}, "tasks", "duplicated task name a"),
        ({"tasks": "worker"}, "tasks", "expected a list"),
        ({"command": "python train.py"}, "command", "expected a list"),
        ({"command": ["python", 3]}, "command[1]", "expected a string"),
        ({"resources": {"cpu": "lots"}}, "resources.cpu", "not a valid quantity"),
        ({"resources": {"cpu": "1e400"}}, "resources.cpu", "out of range"),
        ({"resources": {"memory": "-1Gi"}}, "resources.memory", "negative"),
        ({"resources": {"cpu": [1]}}, "resources.cpu", "expected a quantity"),
        ({"resources": {"requests": "1"}}, "resources.requests", "mapping"),
        ({"queue": "Team_A"}, "queue", "not a valid name"),
        ({"name": "x" * 300}, "name", "Kubernetes name"),
        ({"min_available": -2}, "min_available", "whole number"),
        ({"plugins": ["svc"]}, "plugins", "mapping"),
        ({"plugins": {"env": "x"}}, "plugins.env", "expected a list"),
        ({"pod_annotations": {"a": {"b": 1}}}, "pod_annotations.a", "string value"),
        ({"template_values": {"a": 1}}, "template_values", "without a template"),
        ({"task_config": {"gpus": 1}}, "task_config.gpus", "not a TaskConfig field"),
        ({"tasks": [{"name": "w", "env": [{"value": 1}]}]}, "tasks[0].env[0]", "name"),
        (
            {"tasks": [{"name": "w", "policies": [{"action": "Explode", "event": "PodFailed"}]}]},
            "tasks",
            "invalid policy action",
        ),
    ],
)
def test_refused_arguments_name_the_parameter(
    arguments: dict[str, Any], parameter: str, detail: str
) -> None:
    assert detail in refused(parameter, **arguments)


def test_namespace_must_be_a_name() -> None:
    with pytest.raises(ParameterError) as caught:
        build_job(JobRequest(namespace="", image="x"))
    assert caught.value.parameter == "namespace"


# --- from a template ------------------------------------------------------------------------------


def test_template_kept_with_queue_and_scheduler_filled() -> None:
    job = build(image="", template=vcjob_yaml())
    assert job["metadata"] == {"name": "tpl", "namespace": NS}
    assert job["spec"]["queue"] == "default" and job["spec"]["schedulerName"] == "volcano"
    assert job["spec"]["tasks"][0]["replicas"] == 2


def test_template_values_win_only_where_given() -> None:
    job = build(image="", template=vcjob_yaml(queue="q1", schedulerName="own"), name="renamed")
    assert job["spec"]["queue"] == "q1" and job["spec"]["schedulerName"] == "own"
    assert job["metadata"]["name"] == "renamed"
    job = build(image="", template=vcjob_yaml(queue="q1"), queue="q2")
    assert job["spec"]["queue"] == "q2"


def test_placeholders_keep_types_and_fill_text() -> None:
    text = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: "run-${run}"}
spec:
  minAvailable: ${workers}
  tasks:
  - name: worker
    replicas: ${workers}
    template:
      spec:
        containers:
        - name: main
          image: "trainer:${tag}"
          command: [sh, -c, "echo $${HOME} $PATH ${flag}"]
          resources: ${resources}
"""
    job = render_template(
        text,
        {
            "run": 7,
            "workers": 3.0,  # kfp hands dict values over as protobuf numbers (floats)
            "tag": "v2",
            "flag": True,
            "resources": {"limits": {"nvidia.com/gpu": 1.0}},
        },
    )
    assert job["metadata"]["name"] == "run-7"
    assert job["spec"]["minAvailable"] == 3 and isinstance(job["spec"]["minAvailable"], int)
    c = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert c["image"] == "trainer:v2"
    assert c["command"] == ["sh", "-c", "echo ${HOME} $PATH true"]
    assert c["resources"] == {"limits": {"nvidia.com/gpu": 1}}


@pytest.mark.parametrize(
    ("text", "values", "parameter", "detail"),
    [
        ("apiVersion: v1\nkind: Pod\n", {}, "template", "is a Pod (v1), not a Volcano Job"),
        ("kind: Job\n", {}, "template", "<no apiVersion>"),
        ("[1, 2]", {}, "template", "expected a vcjob mapping"),
        ("a: [", {}, "template", "not valid YAML"),
        ("a: 1\n---\nb: 2\n", {}, "template", "one YAML document, found 2"),
        ("", {}, "template", "one YAML document, found 0"),
        (vcjob_yaml(minAvailable="${n}"), {}, "template_values", "no value for ${n}"),
        (vcjob_yaml(), {"extra": 1}, "template_values.extra", "no ${extra} placeholder"),
        (
            vcjob_yaml(queue="q-${n}"),
            {"n": [1]},
            "template_values.n",
            "cannot go inside the text",
        ),
        ("{1: 2}", {}, "template", "is not a string"),
    ],
)
def test_bad_templates(text: str, values: dict[str, Any], parameter: str, detail: str) -> None:
    with pytest.raises(ParameterError) as caught:
        render_template(text, values)
    assert caught.value.parameter == parameter
    assert detail in caught.value.detail


def test_template_checked_like_the_controller_reads_it() -> None:
    text = vcjob_yaml().replace("replicas: 2", "replicas: many")
    detail = refused("template", image="", template=text)
    assert detail.startswith("spec.tasks[0].replicas:"), detail


def test_template_excludes_job_arguments() -> None:
    detail = refused("image", template=vcjob_yaml())
    assert "cannot be combined with template" in detail
    assert refused("replicas", image="", template=vcjob_yaml(), replicas=3)


def test_oversized_and_alias_bomb_templates() -> None:
    with pytest.raises(ParameterError, match="longer than"):
        render_template("a: " + "x" * MAX_TEMPLATE_BYTES, {})
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 8):
        bomb.append(f"{chr(97 + level)}: &{chr(97 + level)} " + str([f"*{chr(96 + level)}"] * 10))
    with pytest.raises(ParameterError, match="more than"):
        render_template("\n".join(bomb).replace("'", ""), {})
    deep = "a: " + "[" * (MAX_TEMPLATE_DEPTH + 2) + "]" * (MAX_TEMPLATE_DEPTH + 2)
    with pytest.raises(ParameterError, match="nested deeper"):
        render_template(deep, {})


# --- properties -----------------------------------------------------------------------------------

text_values = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | text_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text_values, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_a_whole_placeholder_takes_the_value_as_is(value: Any) -> None:
    job = render_template(vcjob_yaml(queue="${v}"), {"v": value})
    assert job["spec"]["queue"] == whole_numbers(value)
    # Nothing else in the document moved.
    assert job["spec"]["tasks"] == yaml.safe_load(vcjob_yaml())["spec"]["tasks"]


@settings(max_examples=150, deadline=None)
@given(value=text_values)
def test_a_value_never_adds_structure(value: Any) -> None:
    """YAML-looking values (``]``, ``: ``, newlines, ``${x}``) stay text inside the string."""
    job = render_template(vcjob_yaml(queue="q-${v}-end"), {"v": value})
    assert job["spec"]["queue"] == f"q-{value}-end"
    assert set(job["spec"]) == {"queue", "tasks"}


@settings(max_examples=200, deadline=None)
@given(
    arguments=st.fixed_dictionaries(
        {},
        optional={
            "image": st.one_of(st.text(max_size=5), st.integers()),
            "command": json_values,
            "replicas": st.one_of(st.integers(-3, 2**33), st.floats(allow_nan=True), st.text()),
            "tasks": json_values,
            "resources": json_values,
            "min_available": st.integers(-3, 2**33),
            "plugins": json_values,
            "queue": st.text(max_size=8),
            "pod_annotations": json_values,
            "task_config": json_values,
        },
    )
)
def test_any_arguments_build_a_job_or_name_a_parameter(arguments: dict[str, Any]) -> None:
    try:
        job = build_job(JobRequest(namespace=NS, **arguments))
    except ParameterError as error:
        assert str(error).startswith(error.parameter)
        return
    assert job["spec"]["tasks"] and job["metadata"]["namespace"] == NS
