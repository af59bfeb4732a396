"""The job controller on a memory store, the test playing scheduler and kubelet."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, ClassVar

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, Event
from stromboli.core.controller.job.controller import JobController
from stromboli.core.controller.job.plugins import JobPlugin

from .jobkit import JOB, POD, Harness, command, phase, task, vcjob


async def started(job: dict[str, Any] | None = None, **args: Any) -> Harness:
    harness = await Harness(**args).start()
    if job is not None:
        await harness.create(job)
    return harness


async def test_new_job_is_pending_with_a_podgroup_and_no_pods() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    job = await h.job()
    assert phase(job) == "Pending"
    assert job["status"]["minAvailable"] == 2
    assert job["status"]["conditions"][0]["status"] == "Pending"
    pg = await h.podgroup()
    assert pg is not None
    assert pg["spec"]["minMember"] == 2
    assert await h.pods() == {}


async def test_pods_are_created_once_the_podgroup_is_admitted() -> None:
    h = await started(vcjob("j", task("master", 1), task("worker", 2)))
    await h.admit()
    pods = await h.pods()
    assert sorted(pods) == ["j-master-0", "j-worker-0", "j-worker-1"]
    uid = (await h.job())["metadata"]["uid"]
    for pod in pods.values():
        assert pod["metadata"]["annotations"][k.GROUP_NAME_ANNOTATION] == f"j-{uid}"
        assert pod["metadata"]["annotations"][k.JOB_VERSION_KEY] == "0"
    status = (await h.job())["status"]
    assert status["pending"] == 3
    assert status["taskStatusCount"] == {
        "master": {"phase": {"Pending": 1}},
        "worker": {"phase": {"Pending": 2}},
    }


async def test_job_runs_and_completes() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    job = await h.job()
    assert (phase(job), job["status"]["running"]) == ("Running", 2)
    await h.run_pods(pod_phase="Succeeded")
    job = await h.job()
    assert phase(job) == "Completed"
    assert job["status"]["succeeded"] == 2
    assert [c["status"] for c in job["status"]["conditions"]] == ["Pending", "Running", "Completed"]
    # A finished job keeps its succeeded pods but lets its PodGroup go.
    assert len(await h.pods()) == 2
    assert await h.podgroup() is None
    assert job["status"]["version"] == 1


async def test_replaying_everything_creates_nothing_twice() -> None:
    h = await started(vcjob("j", task("worker", 3)))
    await h.admit()
    await h.run_pods()
    before = await h.store.list("v1", "Pod")
    # A second controller (a restart, or every event delivered again) changes nothing.
    again = JobController(h.store, h.clock)
    await again.start()
    assert await again.step() == 0
    after = await h.store.list("v1", "Pod")
    assert [p["metadata"]["uid"] for p in after.items] == [
        p["metadata"]["uid"] for p in before.items
    ]
    assert len(await h.podgroups()) == 1


async def test_malformed_job_gets_an_event_and_a_status_message() -> None:
    broken = vcjob("j", task("worker", 1), mutate=False)
    del broken["spec"]["tasks"][0]["template"]
    h = await started(broken)
    job = await h.job()
    assert phase(job) == "Pending"
    assert job["status"]["state"]["reason"] == "InvalidSpec"
    assert "spec.tasks[0].template" in job["status"]["state"]["message"]
    events = await h.events("InvalidSpec")
    assert events and "spec.tasks[0].template" in events[0]["message"]
    assert await h.podgroups() == {}


async def test_unknown_policy_action_is_reported_not_run_as_a_sync() -> None:
    broken = vcjob("j", task("worker", 1), policies=[{"event": "PodFailed", "action": "Boom"}])
    h = await started(broken)
    job = await h.job()
    assert job["status"]["state"]["reason"] == "InvalidSpec"
    assert "spec.policies[0].action" in job["status"]["state"]["message"]
    assert "'Boom'" in job["status"]["state"]["message"]
    assert await h.podgroups() == {}


async def test_fixing_a_malformed_job_clears_the_message() -> None:
    broken = vcjob("j", task("worker", 1))
    broken["spec"]["tasks"][0]["replicas"] = "one"
    h = await started(broken)
    job = await h.job()
    assert "spec.tasks[0].replicas" in job["status"]["state"]["message"]
    job["spec"]["tasks"][0]["replicas"] = 1
    await h.store.update(job)
    await h.step()
    job = await h.job()
    assert "message" not in job["status"]["state"]
    assert await h.podgroup() is not None


# --- Commands ----------------------------------------------------------------------------


async def test_abort_then_resume_by_command() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    await h.create(command("j", Action.ABORT_JOB))
    job = await h.job()
    assert phase(job) == "Aborted"
    assert [c["status"] for c in job["status"]["conditions"]][-2:] == ["Aborting", "Aborted"]
    assert await h.pods() == {}
    assert await h.podgroup() is None
    assert (await h.store.list(k.BUS_V1ALPHA1, "Command")).items == []  # consumed
    issued = await h.events("CommandIssued")
    assert "AbortJob" in issued[0]["message"]

    await h.create(command("j", Action.RESUME_JOB))
    job = await h.job()
    assert phase(job) == "Pending"
    assert job["status"]["retryCount"] == 1
    await h.admit()
    pods = await h.pods()
    assert len(pods) == 2
    version = str(job["status"]["version"])
    assert all(p["metadata"]["annotations"][k.JOB_VERSION_KEY] == version for p in pods.values())


async def test_a_command_runs_once() -> None:
    h = await started(vcjob("j", task("worker", 1)))
    await h.admit()
    cmd = await h.store.create(command("j", Action.RESTART_JOB))
    other = JobController(h.store, h.clock)  # a second replica sees the same Command
    await other.start()
    await other.step()
    await h.step()
    assert (await h.job())["status"]["retryCount"] == 1
    assert cmd["metadata"]["name"] not in {
        c["metadata"]["name"] for c in (await h.store.list(k.BUS_V1ALPHA1, "Command")).items
    }


async def test_terminate_and_complete_by_command() -> None:
    for action, final in ((Action.TERMINATE_JOB, "Terminated"), (Action.COMPLETE_JOB, "Completed")):
        h = await started(vcjob("j", task("worker", 2)))
        await h.admit()
        await h.run_pods()
        await h.set_pod("j-worker-0", "Succeeded")
        await h.create(command("j", action))
        assert phase(await h.job()) == final
        assert sorted(await h.pods()) == ["j-worker-0"]  # finished pods are kept


# --- policies ----------------------------------------------------------------------------


def restart_on_failure(**spec: Any) -> dict[str, Any]:
    return vcjob(
        "j",
        task("worker", 2),
        policies=[{"event": Event.POD_FAILED, "action": Action.RESTART_JOB}],
        **spec,
    )


async def test_restart_job_until_max_retry_then_failed() -> None:
    h = await started(restart_on_failure(maxRetry=2))
    await h.admit()
    for attempt in (1, 2):
        await h.run_pods()
        await h.set_pod("j-worker-0", "Failed", exit_code=1)
        job = await h.job()
        assert job["status"]["retryCount"] == attempt
        if attempt == 1:
            # Restarting until the new PodGroup is admitted and the pods are back.
            assert phase(job) == "Restarting"
            assert await h.pods() == {}
            assert await h.podgroup() is not None
            await h.admit()
            assert phase(await h.job()) == "Pending"
    job = await h.job()
    assert phase(job) == "Failed"
    assert "Restarting" in [c["status"] for c in job["status"]["conditions"]]
    # On the last retry the failed pod is kept for its logs; the running one is killed.
    assert sorted(await h.pods()) == ["j-worker-0"]
    actions = [e["message"] for e in await h.events("ExecuteAction")]
    assert any("RestartJob" in m for m in actions)


async def test_two_failures_at_once_restart_once() -> None:
    h = await started(restart_on_failure())
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Failed", exit_code=1, step=False)
    await h.set_pod("j-worker-1", "Failed", exit_code=1, step=False)
    await h.step()
    job = await h.job()
    assert job["status"]["retryCount"] == 1
    assert job["status"]["version"] == 1


async def test_exit_code_policy() -> None:
    job = vcjob("j", task("worker", 1), policies=[{"exitCode": 3, "action": Action.RESTART_JOB}])
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Failed", exit_code=3)
    assert (await h.job())["status"]["retryCount"] == 1
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Failed", exit_code=1)
    job = await h.job()
    assert (phase(job), job["status"]["retryCount"]) == ("Failed", 1)


async def test_evicted_pod_without_policy_is_recreated() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    old_uid = (await h.pods())["j-worker-1"]["metadata"]["uid"]
    await h.store.delete(*POD, "j-worker-1", "default")
    await h.step()
    pods = await h.pods()
    assert pods["j-worker-1"]["metadata"]["uid"] != old_uid
    assert phase(await h.job()) == "Pending"  # one pod waits again: back to Pending


async def test_terminate_job_on_pod_evicted() -> None:
    job = vcjob(
        "j", task("worker", 2), policies=[{"event": Event.POD_EVICTED, "action": "TerminateJob"}]
    )
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.store.delete(*POD, "j-worker-0", "default")
    await h.step()
    assert phase(await h.job()) == "Terminated"
    assert await h.pods() == {}


async def test_abort_job_on_pod_failed() -> None:
    job = vcjob("j", task("worker", 2), policies=[{"event": "PodFailed", "action": "AbortJob"}])
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Failed", exit_code=1)
    assert phase(await h.job()) == "Aborted"
    assert sorted(await h.pods()) == ["j-worker-0"]


async def test_task_policy_restarts_only_its_task() -> None:
    job = vcjob(
        "j",
        task("ps", 1),
        task("worker", 2, policies=[{"event": "PodFailed", "action": "RestartTask"}]),
        policies=[{"event": "PodFailed", "action": "AbortJob"}],
    )
    h = await started(job)
    await h.admit()
    await h.run_pods()
    ps_uid = (await h.pods())["j-ps-0"]["metadata"]["uid"]
    await h.set_pod("j-worker-0", "Failed", exit_code=1)
    job = await h.job()
    assert job["status"]["retryCount"] == 1
    assert job["status"].get("version", 0) == 0  # a targeted kill keeps the job's version
    assert await h.podgroup() is not None  # and its PodGroup
    pods = await h.pods()
    assert pods["j-ps-0"]["metadata"]["uid"] == ps_uid
    assert {"j-worker-0", "j-worker-1"} <= set(pods)  # recreated
    assert phase(job) == "Pending"


async def test_restart_pod_restarts_only_that_pod() -> None:
    job = vcjob("j", task("worker", 3), policies=[{"event": "PodFailed", "action": "RestartPod"}])
    h = await started(job)
    await h.admit()
    await h.run_pods()
    uids = {n: p["metadata"]["uid"] for n, p in (await h.pods()).items()}
    await h.set_pod("j-worker-1", "Failed", exit_code=1)
    pods = await h.pods()
    assert pods["j-worker-0"]["metadata"]["uid"] == uids["j-worker-0"]
    assert pods["j-worker-2"]["metadata"]["uid"] == uids["j-worker-2"]
    assert pods["j-worker-1"]["metadata"]["uid"] != uids["j-worker-1"]
    assert pods["j-worker-1"]["status"]["phase"] == "Pending"


async def test_complete_job_on_task_completed() -> None:
    job = vcjob(
        "j",
        task("master", 1),
        task("worker", 2, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
    )
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Succeeded")
    assert phase(await h.job()) == "Running"
    await h.set_pod("j-worker-1", "Succeeded")
    job = await h.job()
    assert phase(job) == "Completed"
    assert "Completing" in [c["status"] for c in job["status"]["conditions"]]
    assert sorted(await h.pods()) == ["j-worker-0", "j-worker-1"]  # the master was killed


async def test_task_failed_by_container_restarts() -> None:
    job = vcjob(
        "j", task("worker", 1), policies=[{"event": "TaskFailed", "action": "TerminateJob"}]
    )
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Running", restarts=1)
    assert phase(await h.job()) == "Running"
    await h.set_pod("j-worker-0", "Running", restarts=3)
    assert phase(await h.job()) == "Terminated"


async def test_unknown_podgroup_triggers_unknown_policies() -> None:
    job = vcjob("j", task("worker", 2), policies=[{"event": "Unknown", "action": "RestartJob"}])
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.admit(pg_phase="Unknown")
    assert (await h.job())["status"]["retryCount"] == 1


async def test_any_event_policy() -> None:
    job = vcjob("j", task("worker", 2), policies=[{"event": "*", "action": "RestartJob"}])
    h = await started(job)
    await h.admit()
    await h.run_pods()  # PodRunning is internal: no restart
    assert (await h.job())["status"].get("retryCount", 0) == 0
    await h.store.delete(*POD, "j-worker-0", "default")  # PodEvicted
    await h.step()
    assert (await h.job())["status"]["retryCount"] == 1


# --- delayed actions ---------------------------------------------------------------------


async def test_pending_timeout_restarts_a_job_stuck_pending() -> None:
    job = vcjob(
        "j",
        task("worker", 1),
        policies=[{"event": "PodPending", "action": "RestartJob", "timeout": "60s"}],
    )
    h = await started(job)
    await h.admit()
    assert h.controller.next_wakeup() == 60.0
    delayed = await h.events("ExecuteAction")
    assert delayed[0]["message"] == "Execute action RestartJob after 1m0s"
    await h.advance(59)
    assert (await h.job())["status"].get("retryCount", 0) == 0
    await h.advance(1)
    assert (await h.job())["status"]["retryCount"] == 1


async def test_running_cancels_the_pending_timeout() -> None:
    job = vcjob(
        "j",
        task("worker", 1),
        policies=[{"event": "PodPending", "action": "RestartJob", "timeout": "60s"}],
    )
    h = await started(job)
    await h.admit()
    await h.run_pods()
    assert h.controller.next_wakeup() is None
    await h.advance(120)
    assert (await h.job())["status"].get("retryCount", 0) == 0


async def test_pod_failed_then_evicted_with_timeout() -> None:
    # The e2e case: PodFailed → RestartPod at once; PodEvicted → TerminateJob after 5 minutes.
    job = vcjob(
        "j",
        task("worker", 2),
        policies=[
            {"event": "PodFailed", "action": "RestartPod"},
            {"event": "PodEvicted", "action": "TerminateJob", "timeout": "5m"},
        ],
    )
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.store.delete(*POD, "j-worker-0", "default")
    await h.step()
    assert phase(await h.job()) != "Terminating"
    await h.advance(300)
    assert phase(await h.job()) == "Terminated"


async def test_evicted_delay_is_cancelled_when_the_pod_runs_again() -> None:
    job = vcjob(
        "j",
        task("worker", 2),
        policies=[{"event": "PodEvicted", "action": "TerminateJob", "timeout": "5m"}],
    )
    h = await started(job)
    await h.admit()
    await h.run_pods()
    await h.store.delete(*POD, "j-worker-0", "default")
    await h.step()
    await h.set_pod("j-worker-1", "Running", restarts=1)  # a later sync recreates the pod
    await h.set_pod("j-worker-0", "Running")  # which runs: the delayed action is moot
    await h.advance(300)
    assert phase(await h.job()) == "Running"


# --- scaling, dependencies, minSuccess ---------------------------------------------------


async def test_scale_up_and_down() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    job = await h.job()
    job["spec"]["tasks"][0]["replicas"] = 4
    await h.store.update(job)
    await h.step()
    assert sorted(await h.pods()) == [f"j-worker-{i}" for i in range(4)]
    job = await h.job()
    job["spec"]["tasks"][0]["replicas"] = 1
    job["spec"]["tasks"][0]["minAvailable"] = 1
    job["spec"]["minAvailable"] = 1
    await h.store.update(job)
    await h.step()
    assert sorted(await h.pods()) == ["j-worker-0"]
    pg = await h.podgroup()
    assert pg is not None
    assert (pg["spec"]["minMember"], pg["spec"]["minTaskMember"]) == (1, {"worker": 1})
    assert (await h.job())["status"]["minAvailable"] == 1


async def test_scale_to_zero_keeps_the_phase_and_scales_back() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    job = await h.job()
    job["spec"]["tasks"][0].update(replicas=0, minAvailable=0)
    job["spec"]["minAvailable"] = 0
    await h.store.update(job)
    await h.step()
    assert await h.pods() == {}
    assert phase(await h.job()) == "Running"
    job = await h.job()
    job["spec"]["tasks"][0].update(replicas=2, minAvailable=2)
    job["spec"]["minAvailable"] = 2
    await h.store.update(job)
    await h.step()
    assert len(await h.pods()) == 2


async def test_depends_on_waits_for_the_dependency_to_run() -> None:
    h = await started(vcjob("j", task("master", 1), task("worker", 2, depends_on=["master"])))
    await h.admit()
    assert sorted(await h.pods()) == ["j-master-0"]
    await h.set_pod("j-master-0", "Running")
    assert sorted(await h.pods()) == ["j-master-0", "j-worker-0", "j-worker-1"]


async def test_depends_on_any() -> None:
    worker = task("worker", 1)
    worker["dependsOn"] = {"name": ["a", "b"], "iteration": "any"}
    h = await started(vcjob("j", task("a", 1), task("b", 1), worker))
    await h.admit()
    assert "j-worker-0" not in await h.pods()
    await h.set_pod("j-b-0", "Succeeded")
    assert "j-worker-0" in await h.pods()


async def test_min_success_completes_the_job_early() -> None:
    h = await started(vcjob("j", task("worker", 4, min_available=1), minSuccess=2))
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Succeeded")
    assert phase(await h.job()) == "Running"
    await h.set_pod("j-worker-1", "Succeeded")
    assert phase(await h.job()) == "Completed"


async def test_min_success_missed_fails_the_job() -> None:
    h = await started(vcjob("j", task("worker", 2, min_available=1), minSuccess=2))
    await h.admit()
    await h.run_pods()
    await h.set_pod("j-worker-0", "Succeeded")
    await h.set_pod("j-worker-1", "Failed", exit_code=1)
    assert phase(await h.job()) == "Failed"


# --- TTL, volumes, plugins ---------------------------------------------------------------


async def test_finished_job_is_deleted_after_its_ttl() -> None:
    h = await started(vcjob("j", task("worker", 1), ttlSecondsAfterFinished=30))
    await h.admit()
    await h.run_pods(pod_phase="Succeeded")
    assert phase(await h.job()) == "Completed"
    assert h.controller.next_wakeup() == 30.0
    await h.advance(29)
    assert await h.job()
    await h.advance(1)
    assert (await h.store.list(*JOB)).items == []
    assert await h.pods() == {}  # garbage-collected with their job


async def test_volume_claims_are_created_and_mounted() -> None:
    job = vcjob(
        "j",
        task("worker", 1),
        volumes=[
            {
                "mountPath": "/data",
                "volumeClaim": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        ],
    )
    h = await started(job)
    job = await h.job()
    claim = job["spec"]["volumes"][0]["volumeClaimName"]
    assert claim.startswith("j-pvc-")
    pvc = await h.store.get("v1", "PersistentVolumeClaim", claim, "default")
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert job["status"]["controlledResources"] == {f"volume-pvc-{claim}": claim}
    await h.admit()
    pod = (await h.pods())["j-worker-0"]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": claim}


async def test_missing_claim_is_retried_then_the_job_terminated() -> None:
    job = vcjob("j", task("worker", 1), volumes=[{"mountPath": "/d", "volumeClaimName": "gone"}])
    h = await started(job, max_requeue=2)
    events = await h.events("PVCError")
    assert "pvc gone is not found" in events[0]["message"]
    for _ in range(3):
        await h.advance(1)
    assert phase(await h.job()) == "Terminated"
    failures = [e["message"] for e in await h.events("ExecuteAction")]
    assert "Job failed on action SyncJob for retry limit reached" in failures


class RecordingPlugin(JobPlugin):
    """A stand-in job plugin: marks pods, owns a ConfigMap."""

    name: ClassVar[str] = "recording"

    def on_pod_create(self, pod: dict, task_name: str, index: int) -> None:
        pod["metadata"]["annotations"]["recorded"] = f"{task_name}/{index}"

    def on_job_add(self) -> list[dict]:
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{self.job_name}-rec", "namespace": self.namespace},
                "data": {"args": " ".join(self.arguments)},
            }
        ]

    def on_job_delete(self) -> list[tuple[str, str, str]]:
        return [("v1", "ConfigMap", f"{self.job_name}-rec")]


async def test_plugins_shape_pods_and_own_objects() -> None:
    job = vcjob("j", task("worker", 1), plugins={"recording": ["--x"]})
    h = await started(job, plugins={"recording": RecordingPlugin})
    cm = await h.store.get("v1", "ConfigMap", "j-rec", "default")
    assert cm["data"] == {"args": "--x"}
    assert (await h.job())["status"]["controlledResources"] == {"plugin-recording": "recording"}
    await h.admit()
    pod = (await h.pods())["j-worker-0"]
    assert pod["metadata"]["annotations"]["recorded"] == "worker/0"
    await h.create(command("j", Action.ABORT_JOB))
    assert (await h.store.list("v1", "ConfigMap")).items == []
    assert "controlledResources" not in (await h.job())["status"]


async def test_unknown_plugin_is_a_plugin_error() -> None:
    h = await started(vcjob("j", task("worker", 1), plugins={"nope": []}), plugins={})
    events = await h.events("PluginError")
    assert "unable to find job plugin: nope" in events[0]["message"]


async def test_real_plugins_are_applied() -> None:
    h = await started(vcjob("j", task("worker", 2), plugins={"env": [], "svc": []}))
    await h.admit()
    pod = (await h.pods())["j-worker-1"]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
    assert env.get("VK_TASK_INDEX") == "1"
    assert (await h.store.list("v1", "Service")).items


async def test_deleted_job_takes_its_pods_and_group_along() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.store.delete(*JOB, "j", "default")
    assert await h.step() == 0
    assert await h.pods() == {}
    assert await h.podgroups() == {}
    assert h.controller.jobs == {}


async def test_restart_partition_restarts_only_that_partition() -> None:
    partitioned = task(
        "worker",
        4,
        partitionPolicy={"totalPartitions": 2, "partitionSize": 2},
        policies=[{"event": "PodFailed", "action": "RestartPartition"}],
    )
    h = await started(vcjob("j", partitioned))
    await h.admit()
    await h.run_pods()
    uids = {n: p["metadata"]["uid"] for n, p in (await h.pods()).items()}
    await h.set_pod("j-worker-3", "Failed", exit_code=1)  # partition 1: pods 2 and 3
    pods = await h.pods()
    kept = {n for n in uids if pods[n]["metadata"]["uid"] == uids[n]}
    assert kept == {"j-worker-0", "j-worker-1"}
    assert (await h.job())["status"]["retryCount"] == 1


async def test_an_existing_claim_is_used_as_is() -> None:
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteMany"]},
    }
    h = await Harness().start()
    await h.store.create(pvc)
    await h.create(
        vcjob("j", task("worker", 1), volumes=[{"mountPath": "/d", "volumeClaimName": "shared"}])
    )
    job = await h.job()
    assert job["status"]["controlledResources"] == {"volume-pvc-shared": "shared"}
    assert len((await h.store.list("v1", "PersistentVolumeClaim")).items) == 1
    await h.admit()
    claim = (await h.pods())["j-worker-0"]["spec"]["volumes"][0]["persistentVolumeClaim"]
    assert claim == {"claimName": "shared"}


async def test_unschedulable_podgroup_is_reported_on_the_job() -> None:
    h = await started(vcjob("j", task("worker", 2)))
    pg = await h.podgroup()
    assert pg is not None
    pg["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "message": "2/2 tasks in gang unschedulable",
                "lastTransitionTime": "1970-01-01T00:00:00Z",
            }
        ],
    }
    await h.store.update(pg)
    job = await h.job()
    job["spec"]["minAvailable"] = 1  # any change that makes the controller look again
    await h.store.update(job)
    await h.step()
    events = await h.events("PodGroupPending")
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == (
        "PodGroup default:j unschedulable, reason: 2/2 tasks in gang unschedulable"
    )


async def test_jobs_of_a_forwarding_queue_are_marked() -> None:
    h = await Harness().start()
    queue = await h.store.get(k.SCHEDULING_V1BETA1, "Queue", "default")
    queue["spec"]["extendClusters"] = [{"name": "member-1", "weight": 1}]
    await h.store.update(queue)
    await h.create(vcjob("j", task("worker", 1)))
    job = await h.job()
    assert job["metadata"]["annotations"][k.JOB_FORWARDING_KEY] == "true"
    await h.admit()
    pod = (await h.pods())["j-worker-0"]
    assert pod["metadata"]["annotations"][k.JOB_FORWARDING_KEY] == "true"
    assert pod["metadata"]["labels"][k.JOB_FORWARDING_KEY] == "true"


async def test_run_follows_the_watches() -> None:
    h = await Harness().start()
    running = asyncio.create_task(h.controller.run())
    try:
        await h.store.create(vcjob("j", task("worker", 2)))
        pg = None
        for _ in range(200):
            await asyncio.sleep(0.005)
            pg = await h.podgroup()
            if pg is not None:
                break
        assert pg is not None
        pg["status"] = {"phase": "Inqueue"}
        await h.store.update(pg)
        for _ in range(200):
            await asyncio.sleep(0.005)
            if len(await h.pods()) == 2:
                break
        assert sorted(await h.pods()) == ["j-worker-0", "j-worker-1"]
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
