"""vcjob lifecycle on a real API server: `stromboli scheduler` and `stromboli controller` as
subprocesses, kwok as the kubelet, the test finishing pods with phases and exit codes.

This module covers the phase table driven by pods (reference §5.2/§5.3): completion,
minSuccess, lifecycle policies by event, by exit code, by ``*``, task-level over job-level,
the targeted restarts (RestartTask, RestartPod), retries up to ``maxRetry``, and delayed
actions (``timeout``). Commands, TTL, scaling, queues and robustness are in
``test_job_lifecycle_commands.py``.
"""

from __future__ import annotations

import time

from stromboli.core.api import constants as k

from .jobs_live import (  # noqa: F401  (fixtures)
    COMMAND,
    Live,
    live_fixture,
    pod_phase,
    stack_fixture,
    task,
    vcjob,
)


def policy(action: str, event: str | None = None, **fields: object) -> dict:
    out: dict = {"action": action, **fields}
    if event is not None:
        out["event"] = event
    return out


def uids(pods: dict[str, dict]) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in pods.items()}


async def test_all_tasks_succeed(live: Live) -> None:
    await live.create(vcjob("ok", task("master", 1), task("worker", 2)))
    pods = await live.wait_running_pods("ok", 3)
    assert sorted(pods) == ["ok-master-0", "ok-worker-0", "ok-worker-1"]
    running = (await live.wait_status("ok", lambda s: s.get("running") == 3))["status"]
    assert running["state"]["phase"] == "Running" and running["minAvailable"] == 3
    assert running["taskStatusCount"] == {
        "master": {"phase": {"Running": 1}},
        "worker": {"phase": {"Running": 2}},
    }
    (pg,) = await live.podgroups()
    assert pg["metadata"]["name"].startswith("ok-")
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minTaskMember"] == {"master": 1, "worker": 2}

    for name in sorted(pods):
        await live.finish(name, "Succeeded")
    job = await live.wait_phases("ok", "Pending", "Running", "Completed")
    status = job["status"]
    assert status["succeeded"] == 3
    assert "running" not in status and "pending" not in status and "failed" not in status
    assert status["taskStatusCount"]["worker"] == {"phase": {"Succeeded": 2}}
    assert status.get("retryCount", 0) == 0
    assert [c["status"] for c in status["conditions"]] == ["Pending", "Running", "Completed"]
    # Finished pods are kept (their logs), the PodGroup goes with the final kill.
    after = await live.pods("ok")
    assert {n: pod_phase(p) for n, p in after.items()} == dict.fromkeys(pods, "Succeeded")
    assert uids(after) == uids(pods)
    await live.wait(live.podgroups, lambda pgs: pgs == [], "PodGroup of ok deleted")
    # While its pods are being created the gang is short of members: the scheduler says so
    # and the controller passes it on; nothing else is a warning.
    warnings = {reason for kind, reason, _ in await live.events("ok") if kind == "Warning"}
    assert warnings <= {"PodGroupPending"}, warnings


async def test_min_success_completes_early(live: Live) -> None:
    await live.create(vcjob("few", task("worker", 3), minSuccess=2))
    pods = await live.wait_running_pods("few", 3)
    await live.finish("few-worker-0", "Succeeded")
    await live.finish("few-worker-1", "Succeeded")
    job = await live.wait_phases("few", "Pending", "Running", "Completed")
    assert job["status"]["succeeded"] == 2
    # The pod still running is killed; the succeeded ones are kept.
    left = await live.wait(
        lambda: live.live_pods("few"), lambda ps: len(ps) == 2, "running pod of few killed"
    )
    assert sorted(left) == ["few-worker-0", "few-worker-1"]
    assert uids(left) == {n: u for n, u in uids(pods).items() if n in left}


async def test_too_few_succeeded_fails_the_job(live: Live) -> None:
    # No policy: a failed pod only syncs; once every pod has finished, fewer than minAvailable
    # succeeded means Failed.
    await live.create(vcjob("few-ok", task("worker", 3)))
    await live.wait_running_pods("few-ok", 3)
    await live.finish("few-ok-worker-0", "Failed", exit_code=1)
    await live.finish("few-ok-worker-1", "Succeeded")
    status = (
        await live.wait_status("few-ok", lambda s: s.get("failed") == 1 and s.get("succeeded"))
    )["status"]
    assert status["state"]["phase"] == "Running" and status["running"] == 1
    await live.finish("few-ok-worker-2", "Succeeded")
    job = await live.wait_phases("few-ok", "Pending", "Running", "Failed")
    assert job["status"]["succeeded"] == 2 and job["status"]["failed"] == 1
    assert job["status"].get("retryCount", 0) == 0
    assert job["status"]["taskStatusCount"] == {"worker": {"phase": {"Failed": 1, "Succeeded": 2}}}


async def test_pod_failed_aborts_then_resume_command_restarts(live: Live) -> None:
    # minAvailable 1: the failed pod, retained through the kill, is no gang member when the
    # job is resumed, so a gang of 2 could never be placed again (as in Volcano).
    worker = task("worker", 2, minAvailable=1)
    spec = vcjob("ab", worker, minAvailable=1, policies=[policy("AbortJob", "PodFailed")])
    await live.create(spec)
    pods = await live.wait_running_pods("ab", 2)
    await live.finish("ab-worker-1", "Failed", exit_code=1)
    job = await live.wait_phases("ab", "Pending", "Running", "Aborting", "Aborted")
    # The failed pod is kept, the running one killed; the PodGroup is gone.
    left = await live.live_pods("ab")
    assert {n: pod_phase(p) for n, p in left.items()} == {"ab-worker-1": "Failed"}
    assert job["status"]["failed"] == 1 and job["status"]["version"] >= 1
    assert await live.podgroups() == []
    assert "Start to execute action AbortJob " in [m for _, _, m in await live.events("ab")]

    await live.command("ab", "ResumeJob")
    job = await live.wait_phases(
        "ab", "Pending", "Running", "Aborting", "Aborted", "Restarting", "Pending", "Running"
    )
    assert job["status"]["retryCount"] == 1
    resumed = await live.wait(
        lambda: live.live_pods("ab"),
        lambda ps: (
            sorted(ps) == ["ab-worker-0", "ab-worker-1"]
            and pod_phase(ps["ab-worker-0"]) == "Running"
        ),
        "ab-worker-0 running again",
    )
    # Resuming kills with soft retention: the failed pod stays (as in Volcano), the killed one
    # comes back as a new pod of the new job version.
    assert resumed["ab-worker-0"]["metadata"]["uid"] != pods["ab-worker-0"]["metadata"]["uid"]
    assert resumed["ab-worker-1"]["metadata"]["uid"] == pods["ab-worker-1"]["metadata"]["uid"]
    assert pod_phase(resumed["ab-worker-1"]) == "Failed"
    version = resumed["ab-worker-0"]["metadata"]["annotations"][k.JOB_VERSION_KEY]
    assert int(version) == job["status"]["version"] > 1
    reasons = await live.reasons("ab")
    assert "CommandIssued" in reasons and "ExecuteAction" in reasons
    await live.wait(
        lambda: live.store.list(*COMMAND, live.ns), lambda c: not c.items, "Command consumed"
    )


async def test_restart_job_until_max_retry_fails(live: Live) -> None:
    doomed = task("worker", 2, fail_after="1s", exit_code=2)
    spec = vcjob("rj", doomed, maxRetry=2, policies=[policy("RestartJob", "PodFailed")])
    await live.create(spec)
    await live.wait(
        lambda: live.log.phases_of("rj"), lambda ps: ps[-1:] == ["Failed"], "rj Failed", 40
    )
    job = await live.job("rj")
    phases = live.log.of("rj")
    assert phases[-1] == "Failed" and phases.count("Restarting") == 2, phases
    # (Running may be skipped when a pod fails before the controller saw it run.)
    assert phases[0] == "Pending" and set(phases[:-1]) <= {"Pending", "Running", "Restarting"}
    status = job["status"]
    assert status["retryCount"] == 2
    assert status["version"] >= 2
    # On the last retry the failed pods are retained, for their logs and exit codes.
    left = await live.pods("rj")
    assert left and all(pod_phase(p) == "Failed" for p in left.values()), left
    versions = {p["metadata"]["annotations"][k.JOB_VERSION_KEY] for p in left.values()}
    retries = {p["metadata"]["annotations"][k.JOB_RETRY_COUNT_KEY] for p in left.values()}
    assert retries == {"1"} and versions == {"1"}, (versions, retries)
    assert await live.times("rj", "Start to execute action RestartJob ") >= 2


async def test_exit_code_policy_and_first_match(live: Live) -> None:
    policies = [policy("RestartJob", exitCode=3), policy("AbortJob", "PodFailed")]
    await live.create(vcjob("ec3", task("worker", 2), policies=policies))
    await live.create(vcjob("ec1", task("worker", 2), policies=policies))
    await live.wait_running_pods("ec3", 2)
    await live.wait_running_pods("ec1", 2)
    await live.finish("ec3-worker-0", "Failed", exit_code=3)
    await live.finish("ec1-worker-0", "Failed", exit_code=1)
    await live.wait_phases("ec3", "Pending", "Running", "Restarting", "Pending", "Running")
    await live.wait_phases("ec1", "Pending", "Running", "Aborting", "Aborted")
    assert (await live.status("ec3"))["retryCount"] == 1


async def test_events_list_and_task_failed(live: Live) -> None:
    either = {"events": ["PodEvicted", "PodFailed"], "action": "TerminateJob"}
    await live.create(vcjob("evs", task("worker", 2), policies=[either]))
    crashy = task("worker", 2, maxRetry=2, policies=[policy("CompleteJob", "TaskFailed")])
    await live.create(vcjob("tf", crashy))
    await live.wait_running_pods("evs", 2)
    await live.wait_running_pods("tf", 2)
    await live.finish("evs-worker-1", "Failed", exit_code=1)
    # Container restarts of a task's running pods add up to its maxRetry: TaskFailed.
    await live.restart_containers("tf-worker-0", 1)
    await live.restart_containers("tf-worker-1", 1)
    await live.wait_phases("evs", "Pending", "Running", "Terminating", "Terminated")
    await live.wait_phases("tf", "Pending", "Running", "Completing", "Completed")


async def test_any_event_policy_on_eviction(live: Live) -> None:
    await live.create(vcjob("any", task("worker", 2), policies=[policy("TerminateJob", "*")]))
    await live.wait_running_pods("any", 2)
    # A pod deleted from under the job (an eviction) is PodEvicted, which `*` matches.
    await live.store.delete("v1", "Pod", "any-worker-0", live.ns)
    job = await live.wait_phase("any", "Terminated")
    phases = live.log.of("any")
    # A sync queued by the pod's deletionTimestamp may replace the pod (job back to Pending)
    # before the eviction's action runs, as in Volcano; the action wins in the end.
    assert phases[:2] == ["Pending", "Running"], phases
    assert phases[-2:] == ["Terminating", "Terminated"], phases
    assert set(phases[2:-2]) <= {"Pending", "Running"}, phases
    assert await live.live_pods("any") == {}
    assert job["status"].get("running", 0) == 0


async def test_task_policy_overrides_job_policy(live: Live) -> None:
    worker = task("worker", 1, policies=[policy("RestartJob", "PodFailed")])
    spec = vcjob("tp", task("ps", 1), worker, policies=[policy("AbortJob", "PodFailed")])
    await live.create(spec)
    await live.wait_running_pods("tp", 2)
    await live.finish("tp-worker-0", "Failed", exit_code=1)
    await live.wait_phases("tp", "Pending", "Running", "Restarting", "Pending", "Running")
    # A task without its own policy falls back to the job's.
    await live.wait_running_pods("tp", 2)
    await live.finish("tp-ps-0", "Failed", exit_code=1)
    await live.wait_phases(
        "tp", "Pending", "Running", "Restarting", "Pending", "Running", "Aborting", "Aborted"
    )


async def test_restart_task_restarts_only_that_task(live: Live) -> None:
    worker = task("worker", 2, policies=[policy("RestartTask", "PodFailed")])
    await live.create(vcjob("rt", task("ps", 1), worker))
    before = await live.wait_running_pods("rt", 3)
    await live.finish("rt-worker-1", "Failed", exit_code=1)
    await live.wait(
        lambda: live.live_pods("rt"),
        lambda ps: (
            len(ps) == 3
            and all(pod_phase(p) == "Running" for p in ps.values())
            and ps["rt-worker-0"]["metadata"]["uid"] != before["rt-worker-0"]["metadata"]["uid"]
        ),
        "task worker restarted",
    )
    await live.wait_phases("rt", "Pending", "Running", "Restarting", "Pending", "Running")
    after = await live.live_pods("rt")
    assert after["rt-ps-0"]["metadata"]["uid"] == before["rt-ps-0"]["metadata"]["uid"]
    assert after["rt-worker-1"]["metadata"]["uid"] != before["rt-worker-1"]["metadata"]["uid"]
    status = await live.status("rt")
    assert status["retryCount"] == 1
    # A targeted restart keeps the PodGroup and the job version.
    (pg,) = await live.podgroups()
    assert after["rt-worker-0"]["metadata"]["annotations"][k.JOB_VERSION_KEY] == str(
        status.get("version", 0)
    )
    assert pg["metadata"]["name"].startswith("rt-")


async def test_restart_pod_recreates_only_that_pod(live: Live) -> None:
    await live.create(vcjob("rp", task("worker", 3, policies=[policy("RestartPod", "PodFailed")])))
    before = await live.wait_running_pods("rp", 3)
    await live.finish("rp-worker-2", "Failed", exit_code=137)
    await live.wait(
        lambda: live.live_pods("rp"),
        lambda ps: (
            len(ps) == 3
            and pod_phase(ps["rp-worker-2"]) == "Running"
            and ps["rp-worker-2"]["metadata"]["uid"] != before["rp-worker-2"]["metadata"]["uid"]
        ),
        "pod rp-worker-2 recreated and running",
    )
    await live.wait_phases("rp", "Pending", "Running", "Restarting", "Pending", "Running")
    job = await live.wait_status("rp", lambda s: s.get("running") == 3)
    after = await live.live_pods("rp")
    for name in ("rp-worker-0", "rp-worker-1"):
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"]
    assert job["status"]["retryCount"] == 1


async def test_policy_timeout_delays_the_action(live: Live) -> None:
    slow = policy("TerminateJob", "PodFailed", timeout="2s")
    await live.create(vcjob("to", task("worker", 2), policies=[slow]))
    await live.wait_running_pods("to", 2)
    await live.finish("to-worker-0", "Failed", exit_code=1)
    failed_at = time.monotonic()
    await live.wait(
        lambda: live.events("to"),
        lambda es: ("Normal", "ExecuteAction", "Execute action TerminateJob after 2s") in es,
        "delayed-action Event",
    )
    await live.wait_phases("to", "Pending", "Running", "Terminating", "Terminated", timeout=15)
    assert time.monotonic() - failed_at >= 1.8
