"""What a kfp step says about the vcjob it follows (pure functions of API objects)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.integrations.kubeflow.pipelines.progress import (
    EVENT_MESSAGE_LIMIT,
    PhaseLog,
    failure_message,
    final_status,
    pending_reason,
    podgroup_name,
    scheduler_events,
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


# --- the scheduler's events on the PodGroup -------------------------------------------------------

REFUSAL = "queue resource quota insufficient: insufficient cpu"
GANG = "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"


def event(
    kind: str,
    message: str,
    last: str = "2026-01-01T00:00:00Z",
    *,
    reason: str = "Unschedulable",
    component: str = "volcano",
    uid: str = "pg-1",
    version: str = "1",
) -> dict[str, Any]:
    return {
        "metadata": {"resourceVersion": version},
        "involvedObject": {"kind": "PodGroup", "name": "train-u-1", "uid": uid},
        "type": kind,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "lastTimestamp": last,
    }


def test_latest_event_of_each_type_from_the_scheduler() -> None:
    events = [
        event("Normal", "queue resource quota insufficient: insufficient memory"),
        event("Normal", REFUSAL, "2026-01-01T00:00:05Z"),
        event("Warning", "older gang message", "2026-01-01T00:00:01Z"),
        event("Warning", GANG, "2026-01-01T00:00:04Z"),
        event("Normal", "from someone else", "2026-01-01T00:01:00Z", component="kubelet"),
        event("Normal", "of an earlier group", "2026-01-01T00:01:00Z", uid="pg-0"),
        event("Normal", "pod group is ready", "2026-01-01T00:01:00Z", reason="Scheduled"),
    ]
    assert scheduler_events(events, {"volcano"}, "pg-1") == {"Normal": REFUSAL, "Warning": GANG}


def test_event_order_by_time_with_fractions_then_version() -> None:
    # Lexical order would put "...00Z" after "...00.5Z"; the time decides, then the version.
    events = [
        event("Normal", "later", "2026-01-01T00:00:00.500000Z"),
        event("Normal", "earlier", "2026-01-01T00:00:00Z"),
    ]
    assert scheduler_events(events, {"volcano"}) == {"Normal": "later"}
    same_time = [event("Normal", "second", version="12"), event("Normal", "first", version="9")]
    assert scheduler_events(same_time, {"volcano"}) == {"Normal": "second"}
    micro = {**event("Normal", "by eventTime", ""), "eventTime": "2026-01-02T00:00:00.000001Z"}
    assert scheduler_events([event("Normal", "old"), micro], {"volcano"}) == {
        "Normal": "by eventTime"
    }


def test_reporting_component_and_custom_scheduler_names() -> None:
    mine = {**event("Normal", REFUSAL, component=""), "reportingComponent": "my-scheduler"}
    assert scheduler_events([mine], {"volcano"}) == {}
    assert scheduler_events([mine], {"volcano", "my-scheduler"}) == {"Normal": REFUSAL}


def test_event_messages_are_made_safe_for_the_log() -> None:
    forged = event("Normal", "line one\n[stromboli] vcjob forged: Completed" + "x" * 5000)
    [said] = scheduler_events([forged], {"volcano"}).values()
    assert "\n" not in said and len(said) < EVENT_MESSAGE_LIMIT + 100


def test_enqueue_refusal_joins_the_pending_sentence() -> None:
    events = {"Normal": REFUSAL}
    assert pending_reason(podgroup(), [], events) == (
        "PodGroup Pending: the scheduler has not admitted the gang into queue q: " + REFUSAL
    )
    both = pending_reason(podgroup(), [], {**events, "Warning": GANG})
    assert both == (
        f"PodGroup Pending: the scheduler has not admitted the gang into queue q: {REFUSAL}; "
        + GANG
    )


def test_refusal_is_old_news_once_the_group_is_admitted() -> None:
    assert pending_reason(podgroup("Inqueue"), [], {"Normal": REFUSAL}) is None
    assert pending_reason(podgroup("Inqueue"), [], {"Normal": REFUSAL, "Warning": GANG}) == GANG


def test_warning_said_by_the_condition_is_not_repeated() -> None:
    said = "2/2 tasks in gang unschedulable: 0/3 nodes are unavailable"
    group = podgroup("Inqueue", message=said)
    assert pending_reason(group, [], {"Warning": said}) == said
    assert pending_reason(group, [], {"Warning": "other words"}) == f"{said}; other words"


_text = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=30),
    # the values that pass each filter, so that the later reads are reached
    st.sampled_from(["Unschedulable", "Normal", "Warning", "volcano", "2026-01-01T00:00:00Z"]),
)
_events = st.lists(
    st.one_of(
        _text,
        st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "reason",
                    "message",
                    "source",
                    "reportingComponent",
                    "lastTimestamp",
                    "eventTime",
                    "metadata",
                    "involvedObject",
                ]
            ),
            st.one_of(
                _text,
                st.dictionaries(
                    st.sampled_from(["component", "uid", "resourceVersion"]), _text, max_size=3
                ),
            ),
        ),
    ),
    max_size=8,
)


def test_misshapen_fields_of_a_matching_event() -> None:
    odd = {**event("Normal", REFUSAL), "metadata": "x", "lastTimestamp": "soon"}
    odd["involvedObject"] = ["not", "a", "mapping"]
    assert scheduler_events([odd, {**odd, "source": "volcano"}], {"volcano"}) == {"Normal": REFUSAL}


@settings(max_examples=300, deadline=None)
@given(_events)
def test_any_event_list_is_read_without_error(events: list[Any]) -> None:
    found = scheduler_events(events, {"volcano"})
    assert set(found) <= {"Warning", "Normal"}
    assert all(isinstance(message, str) and message for message in found.values())
    pending_reason(podgroup(), [], found)


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
