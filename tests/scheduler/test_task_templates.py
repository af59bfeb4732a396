"""Replicas of one pod template share one parsed task template: the shared record must equal
the one parsed from scratch for every pod, whatever differs between pods."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.api.quantity import QuantityError
from stromboli.core.scheduler.api.build import (
    TaskTemplate,
    TemplateMemo,
    task_info_from,
    template_of,
    template_projection,
)
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.api.resource import Resource

QUANTITIES = st.sampled_from(["100m", "1", "2", "0.5", "128Mi", "1Gi", "0", "250m"])
RESOURCE_NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "volcano.sh/vgpu-memory"])
RESOURCE_LISTS = st.dictionaries(RESOURCE_NAMES, QUANTITIES, max_size=3)
PORTS = st.lists(
    st.fixed_dictionaries(
        {"containerPort": st.integers(1, 9000)},
        optional={"hostPort": st.integers(0, 3), "protocol": st.sampled_from(["TCP", "UDP"])},
    ),
    max_size=2,
)
CONTAINERS = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["main", "side"])},
        optional={
            "image": st.sampled_from(["busybox", "nginx"]),
            "resources": st.fixed_dictionaries(
                {}, optional={"requests": RESOURCE_LISTS, "limits": RESOURCE_LISTS}
            ),
            "ports": PORTS,
            "env": st.lists(st.fixed_dictionaries({"name": st.just("I"), "value": st.text()})),
            "restartPolicy": st.just("Always"),
        },
    ),
    max_size=3,
)
SMALL_DICTS = st.dictionaries(
    st.sampled_from(["a", "b", k.TASK_SPEC_KEY]), st.sampled_from(["x", "y"])
)
ANNOTATIONS = st.dictionaries(
    st.sampled_from(
        [k.TASK_SPEC_KEY, k.PREEMPTABLE_KEY, k.TASK_PRIORITY_KEY, k.GROUP_NAME_ANNOTATION, "other"]
    ),
    st.sampled_from(["true", "false", "7", "worker", "ps", "junk"]),
)
SPECS = st.fixed_dictionaries(
    {"containers": CONTAINERS},
    optional={
        "initContainers": CONTAINERS,
        "overhead": RESOURCE_LISTS,
        "priority": st.integers(-5, 5),
        "schedulingGates": st.lists(st.fixed_dictionaries({"name": st.just("g")}), max_size=1),
        "nodeSelector": SMALL_DICTS,
        "tolerations": st.lists(st.fixed_dictionaries({"key": st.sampled_from(["t", "u"])})),
        "nodeName": st.sampled_from(["n1", "n2"]),
        "volumes": st.lists(st.fixed_dictionaries({"name": st.text(max_size=5)}), max_size=1),
        "serviceAccountName": st.sampled_from(["default", "runner"]),
    },
)
PODS = st.builds(
    lambda name, namespace, labels, annotations, spec: {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": annotations,
        }
        | ({} if namespace is None else {"namespace": namespace}),
        "spec": spec,
        "status": {"phase": "Running" if spec.get("nodeName") else "Pending"},
    },
    st.sampled_from(["job-w-0", "job-w-1", "job-ps-0", "x"]),
    st.sampled_from([None, "default", "team"]),
    SMALL_DICTS,
    ANNOTATIONS,
    SPECS,
)


def same_template(a: TaskTemplate, b: TaskTemplate) -> bool:
    """Exact equality (``Resource ==`` has a tolerance; a shared record must be identical)."""
    return all(
        getattr(a, f).amounts == getattr(b, f).amounts
        if isinstance(getattr(a, f), Resource)
        else getattr(a, f) == getattr(b, f)
        for f in TaskTemplate.__slots__
    )


def scratch_or_error(pod: dict) -> TaskTemplate | type[Exception]:
    try:
        return template_of(pod)
    except (QuantityError, ValueError, TypeError) as err:
        return type(err)


@settings(max_examples=300, deadline=None)
@given(st.lists(PODS, min_size=1, max_size=12))
def test_shared_templates_equal_templates_parsed_from_scratch(pods: list[dict]) -> None:
    memo = TemplateMemo()
    for pod in pods:
        expected = scratch_or_error(pod)
        if not isinstance(expected, TaskTemplate):
            with pytest.raises(expected):
                memo.template(pod)
            continue
        assert same_template(memo.template(pod), expected)
        task = task_info_from(pod, "ns/job", memo=memo)
        assert same_template(
            TaskTemplate(*(getattr(task, f) for f in TaskTemplate.__slots__)), expected
        )
        assert task.name == pod["metadata"]["name"]
        assert task.node_name == pod["spec"].get("nodeName", "")


@settings(max_examples=300, deadline=None)
@given(PODS)
def test_projection_keeps_everything_a_template_reads(pod: dict) -> None:
    projected = template_projection(pod)
    assert projected is not None
    expected = scratch_or_error(pod)
    if isinstance(expected, TaskTemplate):
        assert same_template(template_of(projected), expected)
    else:
        with pytest.raises(expected):
            template_of(projected)


def replica(index: int, node: str = "") -> dict:
    spec: dict = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "env": [{"name": "VK_TASK_INDEX", "value": str(index)}],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }
        ],
        "volumes": [{"name": f"kube-api-access-{index:05d}"}],
    }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": f"job-worker-{index}",
            "namespace": "default",
            "uid": f"u{index}",
            "annotations": {k.GROUP_NAME_ANNOTATION: "job", k.TASK_SPEC_KEY: "worker"},
        },
        "spec": spec,
    }


def test_replicas_differing_in_name_node_env_and_volumes_share_one_template() -> None:
    memo = TemplateMemo()
    tasks = [task_info_from(replica(i, f"n{i % 3}"), "default/job", memo=memo) for i in range(20)]
    assert (memo.misses, memo.hits) == (1, 19)
    assert all(t.init_resreq is tasks[0].init_resreq for t in tasks)
    assert [t.index for t in tasks] == list(range(20))
    assert {t.node_name for t in tasks} == {"n0", "n1", "n2"}


def test_a_replica_with_another_request_or_role_gets_its_own_template() -> None:
    memo = TemplateMemo()
    base = task_info_from(replica(0), "default/job", memo=memo)
    bigger = replica(1)
    bigger["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    other_role = replica(2)
    other_role["metadata"]["annotations"][k.TASK_SPEC_KEY] = "ps"
    in_other_namespace = replica(3)
    in_other_namespace["metadata"]["namespace"] = "team"
    tasks = [task_info_from(p, "j", memo=memo) for p in (bigger, other_role, in_other_namespace)]
    assert memo.misses == 4 and memo.hits == 0
    assert [t.init_resreq.milli_cpu for t in tasks] == [2000, 1000, 1000]
    assert [t.role for t in tasks] == ["worker", "ps", "worker"]
    assert tasks[2].shape != base.shape


def test_the_memo_stays_within_its_size() -> None:
    memo = TemplateMemo(size=8)
    for i in range(50):
        pod = replica(0)
        pod["spec"]["containers"][0]["image"] = f"image-{i}"
        memo.template(pod)
    assert len(memo._templates) == 8
    assert memo.misses == 50


def test_odd_pods_fail_as_they_fail_from_scratch_and_are_not_remembered() -> None:
    deep: dict = {}
    node = deep
    for _ in range(400):  # deeper than the JSON encoder goes
        node["nodeAffinity"] = {}
        node = node["nodeAffinity"]
    too_deep = replica(0)
    too_deep["spec"]["affinity"] = deep
    too_big = replica(1)
    too_big["spec"]["priority"] = 2**80  # past a 64-bit integer
    memo = TemplateMemo()
    for pod in (too_deep, too_big, too_deep):
        with pytest.raises(TypeError) as scratch:
            template_of(pod)
        with pytest.raises(type(scratch.value)):
            memo.template(pod)
    assert memo.misses == 3 and not memo._templates
    odd = replica(2)
    odd["spec"]["containers"] = "not a list"
    assert template_projection(odd) is None


def test_request_rows_are_shared_read_only_and_follow_new_columns() -> None:
    table = NodeTable()
    memo = TemplateMemo()
    first, second = (task_info_from(replica(i), "default/job", memo=memo) for i in range(2))
    row = table.task_vector(first)
    assert table.task_vector(second) is row
    assert list(row) == [1000.0, 2**30, 1.0]
    with pytest.raises(ValueError):
        row[0] = 0
    table.vector(Resource({"nvidia.com/gpu": 1}))  # a new column widens every row
    wider = table.task_vector(second)
    assert wider.shape == (4,) and np.array_equal(wider[:3], row)
    assert table.copy().task_vector(first) is table.task_vector(first)
