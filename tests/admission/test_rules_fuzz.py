"""Property tests over every admission rule: any object, however malformed (wrong types at any
level, huge numbers, odd text), gets a verdict (a list of reasons, empty to admit) or a
mutated object, never an exception. The webhook server answers with whatever the rule says;
an exception would be a 500 for one user's object."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.admission.cronjob import validate_cronjob
from stromboli.core.admission.hypernode import validate_hypernode
from stromboli.core.admission.job import validate_job_create, validate_job_update
from stromboli.core.admission.jobflow import validate_jobflow
from stromboli.core.admission.mutate import mutate_job, mutate_podgroup, mutate_queue
from stromboli.core.admission.pod import validate_pod_create
from stromboli.core.admission.podgroup import validate_podgroup_create
from stromboli.core.admission.queue import validate_queue, validate_queue_delete

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CONTAINER = {
    "name": "c",
    "image": "x",
    "ports": [{"containerPort": 80}],
    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}},
    "volumeMounts": [{"name": "v", "mountPath": "/v"}],
}
TEMPLATE = {
    "metadata": {"labels": {"app": "a"}, "annotations": {"a": "b"}},
    "spec": {
        "containers": [CONTAINER],
        "initContainers": [CONTAINER],
        "volumes": [{"name": "v", "emptyDir": {}}],
        "restartPolicy": "Never",
        "dnsPolicy": "ClusterFirst",
        "hostNetwork": False,
    },
}
JOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "default", "annotations": {}},
    "spec": {
        "queue": "q",
        "minAvailable": 2,
        "maxRetry": 3,
        "minSuccess": 1,
        "ttlSecondsAfterFinished": 10,
        "schedulerName": "volcano",
        "priorityClassName": "high",
        "plugins": {"svc": [], "mpi": ["--master=master"]},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}, {"exitCode": 3}],
        "volumes": [{"mountPath": "/data", "volumeClaimName": "pvc"}],
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        "tasks": [
            {
                "name": "master",
                "replicas": 1,
                "minAvailable": 1,
                "template": TEMPLATE,
                "policies": [{"events": ["PodFailed"], "action": "AbortJob"}],
                "dependsOn": {"name": ["worker"], "iteration": "any"},
                "partitionPolicy": {"totalPartitions": 1, "partitionSize": 1, "minPartitions": 1},
                "topologyPolicy": "best-effort",
            },
            {"name": "worker", "replicas": 2, "template": TEMPLATE},
        ],
    },
}
QUEUE = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {
        "name": "q",
        "annotations": {"volcano.sh/hierarchy": "root/q", "volcano.sh/hierarchy-weights": "1/2"},
    },
    "spec": {
        "weight": 1,
        "parent": "p",
        "priority": 1,
        "reclaimable": True,
        "capability": {"cpu": "8", "memory": "16Gi"},
        "deserved": {"cpu": "4"},
        "guarantee": {"resource": {"cpu": "2"}},
    },
    "status": {"state": "Open", "allocated": {"cpu": "1", "pods": "2"}},
}
PARENT = {
    "metadata": {"name": "p"},
    "spec": {"weight": 1, "parent": "root", "capability": {"cpu": "16"}, "deserved": {"cpu": "8"}},
    "status": {"state": "Open"},
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "annotations": {"volcano.sh/jdb-min-available": "1"},
    },
    "spec": {"schedulerName": "volcano", **TEMPLATE["spec"]},
}
PODGROUP = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "g", "namespace": "default"},
    "spec": {
        "queue": "q",
        "minMember": 1,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        "subGroupPolicy": [{"name": "s", "networkTopology": {"highestTierName": "rack"}}],
    },
}
CRONJOB = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "CronJob",
    "metadata": {"name": "c"},
    "spec": {"schedule": "*/5 * * * *", "timeZone": "UTC", "jobTemplate": {"spec": JOB["spec"]}},
}
JOBFLOW = {
    "apiVersion": "flow.volcano.sh/v1alpha1",
    "kind": "JobFlow",
    "metadata": {"name": "f"},
    "spec": {
        "flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}],
        "jobRetainPolicy": "retain",
    },
}
HYPERNODE = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "h"},
    "spec": {
        "tier": 1,
        "members": [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "node-[0-9]+"}}},
        ],
    },
}

# --- strategies ----------------------------------------------------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(
        ["", "-1", "１", "1e309", "0", "*", "root", "q", "p", "default", "Open", "Closed", "1%"]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into ``value`` (mapping keys and list indices), the root included."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@st.composite
def mutated(draw: st.DrawFn, seed: dict) -> dict:
    """``seed`` with one to three places replaced by arbitrary values (or removed)."""
    obj = copy.deepcopy(seed)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(obj)
        path = draw(st.sampled_from(paths))
        if not path:
            replacement = draw(values)
            if not isinstance(replacement, dict):
                continue  # the webhook only ever sees a JSON object at the top
            obj = replacement
            continue
        parent = obj
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(values)
    return obj


def verdict(result: Any) -> None:
    assert isinstance(result, list) and all(isinstance(r, str) for r in result), result


def queues_of(queue: Any) -> dict[str, Any]:
    return {
        "root": {"metadata": {"name": "root"}, "spec": {"weight": 1}, "status": {"state": "Open"}},
        "default": {"metadata": {"name": "default"}, "spec": {}, "status": {"state": "Open"}},
        "p": PARENT,
        "q": queue,
    }


def check(rule: Callable[..., Any], *args: Any) -> None:
    verdict(rule(*args))


# --- the properties ------------------------------------------------------------------------------


@FUZZ
@given(mutated(JOB), mutated(QUEUE))
def test_job_rules(job: dict, queue: dict) -> None:
    queues = queues_of(queue)
    check(validate_job_create, job, queues)
    check(validate_job_create, mutate_job(job), queues)
    check(validate_job_update, JOB, job)
    check(validate_job_update, job, JOB)
    verdict(validate_job_create(job, queues, schema=False))


@FUZZ
@given(mutated(QUEUE), mutated(PARENT))
def test_queue_rules(queue: dict, parent: dict) -> None:
    queues = queues_of(queue)
    queues["p"] = parent
    check(validate_queue, queue, queues)
    check(validate_queue, mutate_queue(queue), queues)
    check(validate_queue, queue, queues, QUEUE)
    check(validate_queue, QUEUE, queues, queue)
    check(validate_queue_delete, "q", queues)
    check(validate_queue_delete, "p", queues)


@FUZZ
@given(mutated(POD))
def test_pod_rule(pod: dict) -> None:
    check(validate_pod_create, pod, ("volcano",))


@FUZZ
@given(mutated(PODGROUP), mutated(QUEUE), st.dictionaries(st.text(max_size=8), values, max_size=2))
def test_podgroup_rules(podgroup: dict, queue: dict, annotations: dict) -> None:
    check(validate_podgroup_create, podgroup, queues_of(queue))
    mutated_group = mutate_podgroup(podgroup, annotations)
    assert isinstance(mutated_group, dict)
    check(validate_podgroup_create, mutated_group, queues_of(queue))


@FUZZ
@given(mutated(CRONJOB), mutated(JOBFLOW), mutated(HYPERNODE), mutated(HYPERNODE))
def test_cronjob_jobflow_hypernode_rules(
    cronjob: dict, jobflow: dict, hypernode: dict, other: dict
) -> None:
    check(validate_cronjob, cronjob)
    check(validate_jobflow, jobflow)
    check(validate_hypernode, hypernode, {"s1": other, "h": hypernode})
