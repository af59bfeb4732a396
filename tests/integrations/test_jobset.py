"""JobSet and LeaderWorkerSet conversions."""

from __future__ import annotations

from typing import Any

from stromboli.integrations.common import Context
from stromboli.integrations.jobset.convert import JobSetAdapter
from stromboli.integrations.jobset.lws import LeaderWorkerSetAdapter

from .kit import GROUP_NAME, TASK_SPEC, convert, obj, only_group, raises_field, roles, template

JOBSET = JobSetAdapter()
LWS = LeaderWorkerSetAdapter()


def replicated(
    name: str, replicas: int, parallelism: int | None, tmpl: dict[str, Any], **job: Any
) -> dict:
    spec: dict[str, Any] = {"template": tmpl, **job}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def jobset(*jobs: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": list(jobs)}, **meta)


def test_jobset_counts_every_pod_it_runs_at_once() -> None:
    js = jobset(
        replicated("driver", 1, None, template("1", "1Gi", priorityClassName="low")),
        replicated("workers", 2, 4, template("2", "4Gi", priorityClassName="high")),
        replicated("short", 1, 8, template("1", "1Gi"), completions=3),
        annotations={"scheduling.volcano.sh/queue-name": "q"},
    )
    result = convert(JOBSET, js, Context(priority_classes={"high": 100, "low": 1}))
    pg = only_group(result)
    assert pg["metadata"]["name"] == "js"
    assert pg["spec"] == {
        "minMember": 12,
        "queue": "q",
        "priorityClassName": "high",
        "minResources": {"cpu": "20", "memory": "36Gi"},
    }
    assert roles(result)["workers"] == {GROUP_NAME: "js", TASK_SPEC: "workers"}


def test_jobset_of_a_trainjob_has_no_podgroup() -> None:
    js = jobset(replicated("node", 1, 4, template()))
    js["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "js",
            "uid": "u",
            "controller": True,
        }
    ]
    result = convert(JOBSET, js)
    assert result.podgroups == () and result.mutations == ()


def test_suspended_jobset_and_bad_input() -> None:
    js = jobset(replicated("a", 1, 1, template()))
    js["spec"]["suspend"] = True
    assert convert(JOBSET, js).podgroups == ()
    raises_field(JOBSET, jobset(), "spec.replicatedJobs")
    raises_field(
        JOBSET,
        jobset(replicated("a", 1, 1, template()), replicated("a", 1, 1, template())),
        "spec.replicatedJobs[1].name",
    )
    raises_field(
        JOBSET,
        jobset(replicated("a", 1, -3, template())),
        "spec.replicatedJobs[0].template.spec.parallelism",
    )


# --- LeaderWorkerSet ---------------------------------------------------------------------------


def lws(size: int = 4, leader: bool = True, **spec: Any) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": size, "workerTemplate": template("2", "8Gi")}
    if leader:
        lwt["leaderTemplate"] = template("1", "2Gi")
    return obj(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "vllm",
        {"replicas": 2, "leaderWorkerTemplate": lwt, **spec},
        annotations={
            "scheduling.volcano.sh/queue-name": "serving",
            "volcano.sh/preemptable": "false",
            "other": "x",
        },
    )


def leader(index: int, revision: str = "abc123") -> dict[str, Any]:
    return obj(
        "v1",
        "Pod",
        f"vllm-{index}",
        {},
        labels={
            "leaderworkerset.sigs.k8s.io/name": "vllm",
            "leaderworkerset.sigs.k8s.io/group-index": str(index),
            "leaderworkerset.sigs.k8s.io/worker-index": "0",
            "leaderworkerset.sigs.k8s.io/template-revision-hash": revision,
        },
    )


def test_lws_one_gang_per_group_owned_by_its_leader() -> None:
    result = convert(LWS, lws(), Context(related=[leader(0), leader(1), leader(5)]))
    names = sorted(g["metadata"]["name"] for g in result.podgroups)
    assert names == ["vllm-0-abc123", "vllm-1-abc123"]  # group 5 is beyond replicas
    pg = result.podgroup("vllm-1-abc123")
    [owner] = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", "vllm-1", "uid-vllm-1")
    assert pg["spec"] == {
        "minMember": 4,
        "queue": "serving",
        "minResources": {"cpu": "7", "memory": "26Gi"},
    }
    assert pg["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}
    worker = {
        "metadata": {
            "labels": {
                "leaderworkerset.sigs.k8s.io/name": "vllm",
                "leaderworkerset.sigs.k8s.io/group-index": "1",
                "leaderworkerset.sigs.k8s.io/worker-index": "2",
            }
        }
    }
    assert result.mutation_for(worker).annotations == {
        GROUP_NAME: "vllm-1-abc123",
        TASK_SPEC: "worker",
    }
    assert result.mutation_for(leader(1)).annotations[TASK_SPEC] == "leader"


def test_lws_leader_ready_and_missing_leader_template() -> None:
    result = convert(
        LWS, lws(leader=False, startupPolicy="LeaderReady"), Context(related=[leader(0)])
    )
    pg = only_group(result)
    assert pg["spec"]["minMember"] == 1
    assert pg["spec"]["minResources"] == {"cpu": "8", "memory": "32Gi"}  # the worker template × 4


def test_lws_without_leaders_waits() -> None:
    result = convert(LWS, lws())
    assert result.podgroups == () and result.notes


def test_lws_group_name_for_pod_and_bad_leaders() -> None:
    pod = {
        "metadata": {
            "labels": {
                "leaderworkerset.sigs.k8s.io/group-index": "3",
                "leaderworkerset.sigs.k8s.io/template-revision-hash": "r",
            }
        }
    }
    assert LWS.group_name_for_pod(pod, lws()) == "vllm-3-r"
    assert LWS.group_name_for_pod({}, lws()) is None
    bad = leader(0)
    bad["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] = "zero"
    raises_field(
        LWS,
        lws(),
        "Pod vllm-0: metadata.labels[leaderworkerset.sigs.k8s.io/group-index]",
        Context(related=[bad]),
    )
    raises_field(LWS, lws(size=0), "spec.leaderWorkerTemplate.size")
