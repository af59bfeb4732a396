"""The job controller's API writes: one job status write per transition, a finished job's kill
in the same write as its finish, ``PodGroupPending`` once per PodGroup condition, and the same
objects at the end as when the kill follows on the next look (Volcano's order)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.job.base import PENDING_REPORT_AGAIN

from .jobkit import JOB, Harness, Stack, command, node, phase, task, vcjob


def count_job_status_writes(store: MemoryStore) -> list[dict[str, Any]]:
    """Record every Job status the store is asked to write (in order)."""
    written: list[dict[str, Any]] = []
    update_status = store.update_status

    async def counting(obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "Job":
            written.append(obj["status"])
        return await update_status(obj)

    store.update_status = counting  # type: ignore[method-assign]
    return written


def phases_of(written: list[dict[str, Any]]) -> list[tuple[str, int, int, int]]:
    return [
        (s["state"]["phase"], s.get("pending", 0), s.get("running", 0), s.get("succeeded", 0))
        for s in written
    ]


async def test_one_status_write_per_transition_and_the_kill_of_a_finished_job_in_it() -> None:
    h = await Harness().start()
    written = count_job_status_writes(h.store)
    await h.create(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    await h.run_pods(pod_phase="Succeeded")
    await h.step()
    assert phases_of(written) == [
        ("Pending", 0, 0, 0),
        ("Pending", 2, 0, 0),
        ("Running", 0, 2, 0),
        ("Completed", 0, 0, 2),  # with the version bump of its kill, not a second write
    ]
    job = await h.job()
    assert job["status"]["version"] == 1
    assert [c["status"] for c in job["status"]["conditions"]] == ["Pending", "Running", "Completed"]
    assert await h.podgroups() == {}
    assert sorted(p["status"]["phase"] for p in (await h.pods()).values()) == ["Succeeded"] * 2
    assert await h.step() == 0


async def test_the_echo_of_the_finishing_write_does_not_kill_the_job_again() -> None:
    """On a live cluster the watch may deliver a write before its response arrives: that
    echo (Running → Completed) must not be taken for a phase change to act on."""
    h = await Harness().start()
    update_status = h.store.update_status

    async def echo_first(obj: dict[str, Any]) -> dict[str, Any]:
        written = await update_status(obj)
        if written.get("kind") == "Job":
            h.controller._seen(JOB, "MODIFIED", written)
        return written

    h.store.update_status = echo_first  # type: ignore[method-assign]
    await h.create(vcjob("j", task("worker", 1)))
    await h.admit()
    await h.run_pods()
    await h.run_pods(pod_phase="Succeeded")
    for _ in range(3):
        await h.step()
    job = await h.job()
    assert phase(job) == "Completed"
    assert job["status"]["version"] == 1


async def test_a_terminated_job_is_written_once_as_its_last_kill_leaves_it() -> None:
    h = await Harness().start()
    written = count_job_status_writes(h.store)
    await h.create(vcjob("j", task("worker", 2)))
    await h.admit()
    await h.run_pods()
    await h.create(command("j", "TerminateJob"))
    for _ in range(3):
        await h.step()
    # The TerminateJob kill (version 1), the kill once its pods are gone (2: Terminated) and
    # the kill every look at a terminated job is (3), in two writes, not three.
    assert [(s["state"]["phase"], s.get("version")) for s in written][-2:] == [
        ("Terminating", 1),
        ("Terminated", 3),
    ]
    assert await h.pods() == {}
    assert await h.step() == 0


def unschedulable(message: str, at: str) -> dict[str, Any]:
    return {
        "type": "Unschedulable",
        "status": "True",
        "reason": "NotEnoughResources",
        "message": message,
        "lastTransitionTime": at,
        "transitionID": f"session-{at}",
    }


async def test_podgroup_pending_is_reported_once_per_condition_not_per_sync() -> None:
    h = await Harness().start()
    await h.create(vcjob("j", task("worker", 2)))
    pg = await h.podgroup()
    assert pg is not None
    pg["status"] = {
        "phase": "Inqueue",
        "conditions": [unschedulable("2/2 tasks in gang unschedulable", "1970-01-01T00:00:01Z")],
    }
    await h.store.update(pg)
    await h.step()
    for restarts in range(1, 4):  # three syncs before the scheduler looks again
        await h.set_pod("j-worker-0", "Pending", restarts=restarts)
    events = await h.events("PodGroupPending")
    assert [(e["message"], e["count"]) for e in events] == [
        ("PodGroup default:j unschedulable, reason: 2/2 tasks in gang unschedulable", 1)
    ]
    pg = await h.podgroup()
    assert pg is not None
    pg["status"]["conditions"] = [unschedulable("1/2 tasks", "1970-01-01T00:00:05Z")]
    await h.store.update(pg)
    await h.set_pod("j-worker-0", "Pending", restarts=5)
    await h.set_pod("j-worker-0", "Pending", restarts=6)
    assert sorted((e["message"][-9:], e["count"]) for e in await h.events("PodGroupPending")) == [
        ("1/2 tasks", 1),
        ("hedulable", 1),
    ]
    # A condition that stands is reported again after a while (the event outlives its TTL).
    h.clock.advance(PENDING_REPORT_AGAIN + 1)
    await h.set_pod("j-worker-0", "Pending", restarts=7)
    again = {e["message"][-9:]: e["count"] for e in await h.events("PodGroupPending")}
    assert again["1/2 tasks"] == 2


async def test_a_scheduled_podgroup_forgets_what_was_reported() -> None:
    h = await Harness().start()
    await h.create(vcjob("j", task("worker", 1)))
    pg = await h.podgroup()
    assert pg is not None
    condition = unschedulable("1/1 tasks in gang unschedulable", "1970-01-01T00:00:01Z")
    pg["status"] = {"phase": "Inqueue", "conditions": [condition]}
    pg = await h.store.update(pg)
    await h.step()
    scheduled = {
        "type": "Scheduled",
        "status": "True",
        "reason": "tasks in gang are ready to be scheduled",
        "lastTransitionTime": "1970-01-01T00:00:02Z",
    }
    pg["status"]["conditions"] = [{**condition, "status": "False"}, scheduled]
    pg = await h.store.update(pg)
    await h.set_pod("j-worker-0", "Pending", restarts=1)
    assert ("default", "j") not in h.controller._pending_reported
    pg["status"]["conditions"] = [condition, {**scheduled, "status": "False"}]
    await h.store.update(pg)
    await h.set_pod("j-worker-0", "Pending", restarts=2)
    assert [e["count"] for e in await h.events("PodGroupPending")] == [2]


# --- the same objects at the end as Volcano's order (write the finish, then kill) ---------


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    jobs = []
    for index in range(draw(st.integers(1, 3))):
        tasks = []
        for t in range(draw(st.integers(1, 2))):
            tasks.append(
                task(
                    f"t{t}",
                    draw(st.integers(1, 3)),
                    runtime=f"{draw(st.integers(1, 6))}s",
                    exit_code=draw(st.sampled_from([None, None, 1])),
                )
            )
        spec: dict[str, Any] = {"maxRetry": draw(st.integers(1, 3))}
        policy = draw(
            st.sampled_from(
                [
                    None,
                    {"event": "PodFailed", "action": "RestartJob"},
                    {"event": "PodFailed", "action": "AbortJob"},
                    {"event": "TaskCompleted", "action": "CompleteJob"},
                ]
            )
        )
        if policy is not None:
            spec["policies"] = [policy]
        if draw(st.booleans()):
            spec["minSuccess"] = 1
        jobs.append(vcjob(f"j{index}", *tasks, **spec))
    commands = draw(
        st.lists(
            st.tuples(
                st.integers(0, 15),
                st.integers(0, len(jobs) - 1),
                st.sampled_from(["TerminateJob", "AbortJob", "RestartJob", "ResumeJob"]),
            ),
            max_size=2,
        )
    )
    return {"jobs": jobs, "cpu": draw(st.sampled_from(["2", "4", "8"])), "commands": commands}


async def play(scenario: dict[str, Any], one_write: bool) -> tuple[Any, int]:
    stack = await Stack().start(node("node-0", cpu=scenario["cpu"]))
    stack.controller.finish_in_one_write = one_write
    written = count_job_status_writes(stack.store)
    for job in scenario["jobs"]:
        await stack.store.create(job)
    for second in range(40):
        for index, (at, target, action) in enumerate(scenario["commands"]):
            if at == second:
                await stack.store.create(command(f"j{target}", action, f"c{index}"))
        await stack.tick()
        stack.clock.advance(1.0)
    state: dict[str, Any] = {}
    for kind in (JOB, ("v1", "Pod"), (k.SCHEDULING_V1BETA1, "PodGroup")):
        for obj in (await stack.store.list(*kind, "default")).items:
            meta = obj["metadata"]
            status = obj.get("status")
            if kind[1] == "PodGroup":
                # The scheduler's conditions say when it looked; a group deleted a step
                # sooner may change what another group's cycle saw, not what it decided.
                status = (status or {}).get("phase")
            state[(kind[1], meta["name"])] = (
                status,
                obj.get("spec"),
                meta.get("annotations"),
                meta.get("deletionTimestamp"),
            )
    events = (await stack.store.list("v1", "Event")).items
    state["events"] = sorted(
        (e["involvedObject"]["name"], e["reason"], e["message"]) for e in events
    )
    return state, len(written)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenarios())
def test_finishing_in_one_write_leaves_the_objects_that_the_kill_after_it_leaves(
    scenario: dict[str, Any],
) -> None:
    import asyncio

    ours, our_writes = asyncio.run(play(scenario, one_write=True))
    volcano, volcano_writes = asyncio.run(play(scenario, one_write=False))
    assert ours == volcano
    assert our_writes <= volcano_writes
