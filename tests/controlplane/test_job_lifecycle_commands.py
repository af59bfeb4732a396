"""vcjob lifecycle on a real API server, second part: what users and operators do to jobs —
bus.volcano.sh Commands (suspend/resume, TerminateJob, CompleteJob, queue close/open),
``ttlSecondsAfterFinished``, scaling by editing replicas — and robustness: a controller
SIGKILLed mid-job, and a malformed job next to good ones.

See ``test_job_lifecycle.py`` for the pod-driven part and ``jobs_live.py`` for the helpers.
"""

from __future__ import annotations

from stromboli.core.api import constants as k

from .jobs_live import (  # noqa: F401  (fixtures)
    COMMAND,
    JOB,
    QUEUE,
    Live,
    live_fixture,
    phase_of,
    pod_phase,
    stack_fixture,
    task,
    vcjob,
)


def uids(pods: dict[str, dict]) -> dict[str, str]:
    return {name: pod["metadata"]["uid"] for name, pod in pods.items()}


async def commands_left(live: Live) -> list[str]:
    return [c["metadata"]["name"] for c in (await live.store.list(*COMMAND, live.ns)).items]


async def test_suspend_and_resume_commands(live: Live) -> None:
    await live.create(vcjob("sus", task("worker", 2)))
    before = await live.wait_running_pods("sus", 2)
    name = await live.command("sus", "AbortJob")  # vcctl job suspend
    await live.wait_phases("sus", "Pending", "Running", "Aborting", "Aborted")
    await live.wait(lambda: commands_left(live), lambda c: c == [], "Command consumed")
    assert await live.live_pods("sus") == {}
    assert await live.podgroups() == []
    message = (
        "Start to execute command AbortJob, and clean it up to make sure executed not more "
        "than once."
    )
    assert ("Normal", "CommandIssued", message) in await live.events("sus")
    assert name.startswith("sus-abortjob-")
    # Aborted takes any action but ResumeJob without leaving the phase.
    await live.command("sus", "TerminateJob")
    await live.wait(
        lambda: live.times("sus", "Start to execute action TerminateJob "),
        lambda n: n == 1,
        "TerminateJob executed on sus",
    )
    assert phase_of(await live.job("sus")) == "Aborted"

    await live.command("sus", "ResumeJob")  # vcctl job resume
    job = await live.wait_phases(
        "sus", "Pending", "Running", "Aborting", "Aborted", "Restarting", "Pending", "Running"
    )
    after = await live.wait_running_pods("sus", 2)
    assert not set(uids(after).values()) & set(uids(before).values())
    assert job["status"]["retryCount"] == 1
    (pg,) = await live.podgroups()
    assert pg["spec"]["minMember"] == 2
    await live.wait(lambda: commands_left(live), lambda c: c == [], "Command consumed")


async def test_terminate_and_complete_commands(live: Live) -> None:
    await live.create(vcjob("term", task("worker", 2)))
    await live.create(vcjob("comp", task("worker", 2)))
    await live.wait_running_pods("term", 2)
    await live.wait_running_pods("comp", 2)
    await live.finish("comp-worker-0", "Succeeded")
    await live.command("term", "TerminateJob")
    await live.command("comp", "CompleteJob")
    await live.wait_phases("term", "Pending", "Running", "Terminating", "Terminated")
    job = await live.wait_phases("comp", "Pending", "Running", "Completing", "Completed")
    # Completing keeps what has finished and kills the rest.
    left = await live.live_pods("comp")
    assert {n: pod_phase(p) for n, p in left.items()} == {"comp-worker-0": "Succeeded"}
    assert job["status"]["succeeded"] == 1 and not job["status"].get("running")
    assert await live.live_pods("term") == {}
    assert await live.podgroups() == []
    for name, action in (("term", "TerminateJob"), ("comp", "CompleteJob")):
        assert f"Start to execute action {action} " in [m for _, _, m in await live.events(name)]
    await live.wait(lambda: commands_left(live), lambda c: c == [], "Commands consumed")

    # A finished job takes no more orders: the Command is consumed, the phase stays.
    await live.command("comp", "RestartJob")
    await live.wait(lambda: commands_left(live), lambda c: c == [], "RestartJob consumed")
    await live.wait(
        lambda: live.times("comp", "Start to execute action RestartJob "),
        lambda n: n == 1,
        "RestartJob executed on comp",
    )
    job = await live.job("comp")
    assert phase_of(job) == "Completed" and not job["status"].get("retryCount")
    assert {n: pod_phase(p) for n, p in (await live.live_pods("comp")).items()} == {
        "comp-worker-0": "Succeeded"
    }


async def test_unschedulable_jobs(live: Live) -> None:
    """Pods that fit no node (a node selector nothing matches): the PodGroup is admitted, the
    pods stay Pending, the scheduler's reason reaches the job as a PodGroupPending warning."""
    nowhere = {"nodeSelector": {"stromboli.dev/no-such-node": "true"}}

    def stuck(**fields: object) -> dict:
        out = task("worker", 2, **fields)  # type: ignore[arg-type]
        out["template"]["spec"].update(nowhere)
        return out

    pending_abort = {"event": "PodPending", "action": "AbortJob", "timeout": "1s"}
    await live.create(vcjob("pa", stuck(policies=[pending_abort])))
    await live.create(vcjob("pr", stuck()))
    await live.create(vcjob("pc", stuck()))
    await live.create(vcjob("pt", stuck()))
    await live.wait(
        lambda: live.pods("pr"), lambda ps: len(ps) == 2, "pods of pr created (PodGroup admitted)"
    )
    await live.wait(
        lambda: live.reasons("pr"), lambda rs: "PodGroupPending" in rs, "PodGroupPending on pr"
    )
    # PodPending fires only policies with a timeout, and only when it is over.
    await live.wait_phases("pa", "Pending", "Aborting", "Aborted", timeout=15)
    assert ("Normal", "ExecuteAction", "Execute action AbortJob after 1s") in await live.events(
        "pa"
    )
    assert await live.live_pods("pa") == {}

    # RestartJob on a Pending job: everything killed, one retry spent, Pending again.
    await live.command("pr", "RestartJob")
    job = await live.wait_phases("pr", "Pending", "Restarting", "Pending")
    assert job["status"]["retryCount"] == 1 and job["status"]["version"] >= 1
    pods = await live.wait(
        lambda: live.live_pods("pr"), lambda ps: len(ps) == 2, "pods of pr created again"
    )
    versions = {p["metadata"]["annotations"][k.JOB_VERSION_KEY] for p in pods.values()}
    assert versions == {str(job["status"]["version"])}
    assert all(pod_phase(p) == "Pending" for p in pods.values())

    # CompleteJob and TerminateJob work on Pending jobs too.
    await live.command("pc", "CompleteJob")
    await live.command("pt", "TerminateJob")
    await live.wait_phases("pc", "Pending", "Completing", "Completed")
    await live.wait_phases("pt", "Pending", "Terminating", "Terminated")
    assert await live.live_pods("pc") == {} and await live.live_pods("pt") == {}


async def test_task_completed_policy_completes_the_job(live: Live) -> None:
    chief = task("chief", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}])
    await live.create(vcjob("tc", chief, task("worker", 2)))
    await live.wait_running_pods("tc", 3)
    await live.finish("tc-chief-0", "Succeeded")
    await live.wait_phases("tc", "Pending", "Running", "Completing", "Completed")
    left = await live.live_pods("tc")
    assert {n: pod_phase(p) for n, p in left.items()} == {"tc-chief-0": "Succeeded"}


async def test_ttl_after_finished_deletes_the_job(live: Live) -> None:
    await live.create(
        vcjob("ttl", task("worker", 1, succeed_after="200ms"), ttlSecondsAfterFinished=1)
    )
    job = await live.wait_phase("ttl", "Completed")
    finished_uid = job["metadata"]["uid"]

    async def gone_or_going() -> dict | None:
        items = (await live.store.list(*JOB, live.ns)).items
        return next((j for j in items if j["metadata"]["name"] == "ttl"), None)

    left = await live.wait(
        gone_or_going,
        lambda j: j is None or bool(j["metadata"].get("deletionTimestamp")),
        "job ttl deleted after its TTL",
        timeout=15,
    )
    if left is not None:
        # Foreground deletion: the garbage collector deletes the pods, then drops the
        # finalizer and the job goes.
        assert left["metadata"]["uid"] == finished_uid
        assert "foregroundDeletion" in left["metadata"].get("finalizers", [])
        await live.wait(gone_or_going, lambda j: j is None, "job ttl gone", timeout=30)
    pods = (await live.store.list("v1", "Pod", live.ns)).items
    assert not [p for p in pods if p["metadata"]["name"].startswith("ttl-")]  # went first
    lifetime = live.log.of("ttl")
    assert lifetime[:3] == ["Pending", "Running", "Completed"], lifetime


async def test_scale_up_and_down(live: Live) -> None:
    await live.create(vcjob("sc", task("worker", 2)))
    before = await live.wait_running_pods("sc", 2)
    await live.wait_phase("sc", "Running")

    async def set_replicas(n: int) -> None:
        job = await live.job("sc")
        job["spec"]["tasks"][0]["replicas"] = n
        await live.store.update(job)

    await set_replicas(4)
    up = await live.wait_running_pods("sc", 4)
    assert sorted(up) == [f"sc-worker-{i}" for i in range(4)]
    assert {n: up[n]["metadata"]["uid"] for n in before} == uids(before)
    status = (await live.wait_status("sc", lambda s: s.get("running") == 4))["status"]
    assert status["state"]["phase"] == "Running" and status["minAvailable"] == 2
    (pg,) = await live.podgroups()
    assert pg["spec"]["minMember"] == 2

    await set_replicas(2)
    down = await live.wait_running_pods("sc", 2)
    assert uids(down) == uids(before)
    await live.wait_status("sc", lambda s: s.get("running") == 2 and not s.get("terminating"))
    assert live.log.of("sc") == ["Pending", "Running"]
    (pg,) = await live.podgroups()
    assert pg["spec"]["minMember"] == 2


async def test_queue_close_and_open_commands(live: Live) -> None:
    queue = live.ns  # cluster-scoped: unique per test run
    await live.store.create(
        {
            "apiVersion": QUEUE[0],
            "kind": QUEUE[1],
            "metadata": {"name": queue},
            "spec": {"weight": 1, "reclaimable": True},
        }
    )

    async def state() -> str:
        return str(((await live.store.get(*QUEUE, queue)).get("status") or {}).get("state"))

    await live.wait(state, lambda s: s == "Open", f"queue {queue} Open")
    await live.create(vcjob("qj", task("worker", 1), queue=queue))
    await live.wait_running_pods("qj", 1)

    async def queue_command(action: str) -> None:
        await live.store.create(
            {
                "apiVersion": COMMAND[0],
                "kind": COMMAND[1],
                "metadata": {"generateName": f"{queue}-{action.lower()}-", "namespace": live.ns},
                "action": action,
                "target": {"apiVersion": QUEUE[0], "kind": "Queue", "name": queue},
            }
        )

    await queue_command("CloseQueue")
    await live.wait(state, lambda s: s == "Closing", f"queue {queue} Closing while qj runs")
    await live.wait(lambda: commands_left(live), lambda c: c == [], "CloseQueue consumed")
    await live.finish("qj-worker-0", "Succeeded")
    await live.wait_phase("qj", "Completed")
    await live.wait(state, lambda s: s == "Closed", f"queue {queue} Closed once qj finished")
    await queue_command("OpenQueue")
    await live.wait(state, lambda s: s == "Open", f"queue {queue} Open again")
    await live.store.delete(*QUEUE, queue)


async def test_controller_killed_mid_job(live: Live) -> None:
    await live.create(vcjob("crash", task("worker", 3)))
    before = await live.wait_running_pods("crash", 3)
    live.stack.restart_controller()  # SIGKILL, then a fresh process
    await live.create(vcjob("late", task("worker", 2)))  # while the new one starts
    for name in sorted(before):
        await live.finish(name, "Succeeded")
    job = await live.wait_phases("crash", "Pending", "Running", "Completed")
    assert job["status"]["succeeded"] == 3
    after = await live.pods("crash")
    assert uids(after) == uids(before), "a pod of crash was created twice"
    late_pods = await live.wait_running_pods("late", 2)
    await live.wait_phases("late", "Pending", "Running")

    # Killed again in the middle of an abort (Aborting written, Aborted not yet, or just):
    # the restarted controller finishes it, and nothing is created again.
    await live.command("late", "AbortJob")
    await live.wait(
        lambda: live.status("late"),
        lambda s: s.get("state", {}).get("phase") in ("Aborting", "Aborted"),
        "late aborting",
    )
    live.stack.restart_controller()
    await live.wait_phases("late", "Pending", "Running", "Aborting", "Aborted")
    assert await live.live_pods("late") == {}
    gone = await live.pods("late")
    assert not set(uids(gone).values()) - set(uids(late_pods).values())


async def test_controller_killed_while_creating_pods(live: Live) -> None:
    # The kill lands somewhere in the creation of the pods (after the first one).
    await live.create(vcjob("mid", task("worker", 12)))
    seen = await live.wait(lambda: live.pods("mid"), lambda ps: len(ps) >= 1, "first pod of mid")
    live.stack.restart_controller()
    pods = await live.wait_running_pods("mid", 12)
    assert sorted(pods) == sorted(f"mid-worker-{i}" for i in range(12))
    # The pods created before the kill were kept, not replaced.
    assert {n: pods[n]["metadata"]["uid"] for n in seen} == uids(seen)
    job = await live.wait_phases("mid", "Pending", "Running")
    assert job["status"].get("version", 0) == 0 and not job["status"].get("retryCount")


async def test_malformed_job_is_reported_and_others_run(live: Live) -> None:
    bad_policy = [{"event": "PodFailed", "action": "RestartJob", "timeout": "soon"}]
    await live.create(vcjob("bad", task("worker", 1), policies=bad_policy))
    boom = task("worker", 1, policies=[{"event": "PodFailed", "action": "Explode"}])
    await live.create(vcjob("boom", boom))
    await live.create(vcjob("good", task("worker", 1)))
    await live.wait_running_pods("good", 1)
    await live.wait_phase("good", "Running")
    job = await live.wait_status("bad", lambda s: s.get("state", {}).get("reason") == "InvalidSpec")
    message = job["status"]["state"]["message"]
    assert "spec.policies[0].timeout" in message and "'soon'" in message, message
    warnings = [(r, m) for t, r, m in await live.events("bad") if t == "Warning"]
    assert ("InvalidSpec", message) in warnings, warnings
    assert await live.pods("bad") == {}
    assert phase_of(job) == "Pending"
    boom_job = await live.wait_status(
        "boom", lambda s: s.get("state", {}).get("reason") == "InvalidSpec"
    )
    assert "spec.tasks[0].policies[0].action" in boom_job["status"]["state"]["message"]
    assert "'Explode'" in boom_job["status"]["state"]["message"]
    assert "InvalidSpec" in await live.reasons("boom")
    assert await live.pods("boom") == {}

    # Fixing the spec is enough: the job runs, the message goes.
    job = await live.job("bad")
    job["spec"]["policies"][0]["timeout"] = "30s"
    await live.store.update(job)
    fixed = await live.wait_phase("bad", "Running")
    assert "message" not in fixed["status"]["state"]
    pod = await live.store.get("v1", "Pod", "bad-worker-0", live.ns)
    assert pod["metadata"]["annotations"][k.JOB_NAME_KEY] == "bad"
