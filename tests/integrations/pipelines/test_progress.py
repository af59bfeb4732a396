"""What a kfp step says about the vcjob it follows (pure functions of API objects)."""

from __future__ import annotations

from typing import Any

from stromboli.integrations.kubeflow.pipelines.progress import (
    PhaseLog,
    failure_message,
    final_status,
    pending_reason,
    podgroup_name,
)


def job(*phases: str, **status: Any) -> dict[str, Any]:
    current = phases[-1] if phases else ""
    body: dict[str, Any] = {
        "conditions": [{"status": p, "lastTransitionTime": "t"} for p in phases],
        **status,
    }
    if current:
        body["state"] = {"phase": current, **status.pop("state", {})}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns", "uid": "u-1"},
        "spec": {"queue": "q", "minAvailable": 2, "tasks": []},
        "status": body,
    }


def pod(name: str, *, scheduled: str | None = None, **status: Any) -> dict[str, Any]:
    conditions = []
    if scheduled is not None:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": scheduled,
            }
        )
    return {"metadata": {"name": name}, "status": {"conditions": conditions, **status}}


def podgroup(phase: str = "Pending", message: str | None = None) -> dict[str, Any]:
    conditions = []
    if message is not None:
        conditions.append({"type": "Unschedulable", "status": "True", "message": message})
    return {"spec": {"queue": "q"}, "status": {"phase": phase, "conditions": conditions}}


# --- phases ---------------------------------------------------------------------------------------


def test_each_phase_once_in_order_even_between_reads() -> None:
    log = PhaseLog()
    assert log.lines(job()) == []
    assert log.lines(job("Pending")) == ["vcjob ns/train: Pending"]
    assert log.lines(job("Pending")) == []
    # Running, Restarting and Pending again happened between two reads: all three are told.
    seen = log.lines(job("Pending", "Running", "Restarting", "Pending", retryCount=1, pending=2))
    assert seen == [
        "vcjob ns/train: Running",
        "vcjob ns/train: Restarting",
        "vcjob ns/train: Pending (pending 2, retry 1)",
    ]
    done = log.lines(
        job(
            "Pending",
            "Running",
            "Restarting",
            "Pending",
            "Running",
            "Completed",
            retryCount=1,
            succeeded=2,
        )
    )
    assert done == ["vcjob ns/train: Running", "vcjob ns/train: Completed (succeeded 2)"]


def test_status_without_conditions_falls_back_to_the_phase() -> None:
    log = PhaseLog()
    bare = job("Running", running=1)
    bare["status"].pop("conditions")
    assert log.lines(bare) == ["vcjob ns/train: Running (running 1)"]
    assert log.lines(bare) == []


def test_rewritten_history_starts_over() -> None:
    log = PhaseLog()
    log.lines(job("Pending", "Running"))
    assert log.lines(job("Pending")) == ["vcjob ns/train: Pending"]


# --- why it waits ---------------------------------------------------------------------------------


def test_no_podgroup_yet() -> None:
    assert pending_reason(None, []) == "waiting for the controller to create the job's PodGroup"


def test_podgroup_condition_then_distinct_pod_messages() -> None:
    reason = pending_reason(
        podgroup(message="2/2 tasks in gang unschedulable: 0/3 nodes are unavailable"),
        [
            pod("train-w-0", scheduled="0/3 nodes are unavailable"),  # already said
            pod("train-w-1", scheduled="0/3 nodes are unavailable: 3 Insufficient cpu."),
            pod("train-w-2", scheduled="another"),
        ],
    )
    assert reason == (
        "2/2 tasks in gang unschedulable: 0/3 nodes are unavailable; "
        "pod train-w-1: 0/3 nodes are unavailable: 3 Insufficient cpu."
    )


def test_pod_messages_alone() -> None:
    assert pending_reason(podgroup("Running"), [pod("p", scheduled="no room")]) == "pod p: no room"


def test_pending_group_without_a_word() -> None:
    assert pending_reason(podgroup(), []) == (
        "PodGroup Pending: the scheduler has not admitted the gang into queue q"
    )
    assert pending_reason(podgroup("Inqueue"), [pod("p")]) is None


# --- failure and the artifact ---------------------------------------------------------------------


def test_failure_names_reason_and_exit_codes() -> None:
    failed = job(
        "Pending",
        "Running",
        "Failed",
        failed=5,
        succeeded=1,
        state={"reason": "PodFailed", "message": "task worker failed"},
    )
    pods = [
        pod(
            f"train-w-{i}",
            phase="Failed",
            containerStatuses=[{"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}],
        )
        for i in range(4)
    ]
    pods.append(pod("train-w-9", phase="Failed", reason="Evicted"))
    pods.append(pod("train-m-0", phase="Succeeded"))
    message = failure_message(failed, pods)
    assert message == (
        "Failed: PodFailed: task worker failed; "
        "pod train-w-0 exited with code 137 (OOMKilled); "
        "pod train-w-1 exited with code 137 (OOMKilled); "
        "pod train-w-2 exited with code 137 (OOMKilled); "
        "2 more pods failed; succeeded 1, failed 5"
    )


def test_failure_of_a_pod_without_container_status() -> None:
    message = failure_message(job("Terminated"), [pod("p", phase="Failed", reason="Evicted")])
    assert message == "Terminated; pod p failed (Evicted)"


def test_final_status_document() -> None:
    document = final_status(job("Running", "Completed", succeeded=2))
    assert document["metadata"] == {"name": "train", "namespace": "ns", "uid": "u-1"}
    assert document["spec"] == {"queue": "q", "minAvailable": 2}
    assert document["status"]["state"]["phase"] == "Completed"
    assert document["status"]["succeeded"] == 2


def test_podgroup_name_is_volcanos() -> None:
    assert podgroup_name(job()) == "train-u-1"
