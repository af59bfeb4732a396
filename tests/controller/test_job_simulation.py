"""vcjobs end to end: the real scheduler, pod lifecycle and job controller on a virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load

from .jobkit import JOB, POD, Stack, command, node, phase, task, vcjob


async def simulate(tmp_path: Path, *objects: dict[str, Any]) -> dict[str, list[dict]]:
    """Run the simulator on ``objects`` (written as YAML, loaded as the CLI would) and return
    the final objects by kind."""
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    result = await Simulation(load([path])).run()
    assert not result.hit_max_time
    out: dict[str, list[dict]] = {}
    for kind in (JOB, POD, (k.SCHEDULING_V1BETA1, "PodGroup"), ("v1", "Event")):
        out[kind[1]] = (await result.store.list(*kind)).items
    out["end"] = [{"time": result.end_time}]
    return out


def submitted_at(obj: dict[str, Any], seconds: int) -> dict[str, Any]:
    obj["metadata"].setdefault("annotations", {})[k.SIM_SUBMIT_AT_ANNOTATION] = f"{seconds}s"
    return obj


def only_job(state: dict[str, list[dict]]) -> dict[str, Any]:
    (job,) = state["Job"]
    return job


def started(pod: dict[str, Any]) -> str:
    return pod["status"]["startTime"]


async def test_job_completes(tmp_path: Path) -> None:
    state = await simulate(
        tmp_path,
        node("node-0"),
        vcjob("j", task("master", 1, runtime="30s"), task("worker", 2, runtime="20s")),
    )
    job = only_job(state)
    assert phase(job) == "Completed"
    assert job["status"]["succeeded"] == 3
    assert [c["status"] for c in job["status"]["conditions"]] == ["Pending", "Running", "Completed"]
    assert {p["status"]["phase"] for p in state["Pod"]} == {"Succeeded"}
    assert job["status"]["state"]["lastTransitionTime"] == "1970-01-01T00:00:31Z"


async def test_restart_job_on_pod_failed_until_max_retry(tmp_path: Path) -> None:
    job = vcjob(
        "j",
        task("worker", 2, runtime="10s", exit_code=1),
        maxRetry=3,
        policies=[{"event": "PodFailed", "action": "RestartJob"}],
    )
    state = await simulate(tmp_path, node("node-0"), job)
    job = only_job(state)
    assert phase(job) == "Failed"
    assert job["status"]["retryCount"] == 3
    assert job["status"]["version"] >= 3
    # Three runs of 10s; the failed pods of the last one stay.
    assert sorted(p["metadata"]["name"] for p in state["Pod"]) == ["j-worker-0", "j-worker-1"]
    assert all(p["status"]["phase"] == "Failed" for p in state["Pod"])
    restarts = [e for e in state["Event"] if e["reason"] == "ExecuteAction"]
    assert restarts and restarts[0]["message"].startswith("Start to execute action RestartJob")


async def test_terminate_job_on_pod_failed(tmp_path: Path) -> None:
    job = vcjob(
        "j",
        task("bad", 1, runtime="10s", exit_code=2),
        task("good", 2, runtime="1h"),
        policies=[{"event": "PodFailed", "action": "TerminateJob"}],
    )
    state = await simulate(tmp_path, node("node-0"), job)
    job = only_job(state)
    assert phase(job) == "Terminated"
    assert [p["metadata"]["name"] for p in state["Pod"]] == ["j-bad-0"]
    assert state["end"][0]["time"] < 60


async def test_abort_then_resume_by_commands(tmp_path: Path) -> None:
    state = await simulate(
        tmp_path,
        node("node-0"),
        vcjob("j", task("worker", 2, runtime="100s")),
        submitted_at(command("j", Action.ABORT_JOB), 30),
        submitted_at(command("j", Action.RESUME_JOB), 60),
    )
    job = only_job(state)
    assert phase(job) == "Completed"
    assert job["status"]["retryCount"] == 1
    statuses = [c["status"] for c in job["status"]["conditions"]]
    assert statuses[:2] == ["Aborting", "Aborted"]
    assert {started(p) for p in state["Pod"]} == {"1970-01-01T00:01:01Z"}
    issued = [e["message"] for e in state["Event"] if e["reason"] == "CommandIssued"]
    assert len(issued) == 2


async def test_complete_job_when_the_workers_are_done(tmp_path: Path) -> None:
    job = vcjob(
        "j",
        task("ps", 1, runtime="1h"),
        task(
            "worker",
            2,
            runtime="30s",
            policies=[{"event": "TaskCompleted", "action": "CompleteJob"}],
        ),
    )
    state = await simulate(tmp_path, node("node-0"), job)
    job = only_job(state)
    assert phase(job) == "Completed"
    assert sorted(p["metadata"]["name"] for p in state["Pod"]) == ["j-worker-0", "j-worker-1"]
    assert state["end"][0]["time"] < 60


async def test_min_success(tmp_path: Path) -> None:
    state = await simulate(
        tmp_path,
        node("node-0"),
        vcjob("j", task("fast", 2, runtime="10s"), task("slow", 2, runtime="1h"), minSuccess=2),
    )
    job = only_job(state)
    assert phase(job) == "Completed"
    assert job["status"]["succeeded"] == 2
    assert state["end"][0]["time"] < 60


async def test_depends_on_starts_workers_after_the_master(tmp_path: Path) -> None:
    state = await simulate(
        tmp_path,
        node("node-0"),
        vcjob(
            "j",
            task("master", 1, runtime="60s"),
            task("worker", 2, runtime="30s", depends_on=["master"]),
            minAvailable=1,  # the gang must not wait for workers that wait for the master
        ),
    )
    pods = {p["metadata"]["name"]: p for p in state["Pod"]}
    assert started(pods["j-master-0"]) < started(pods["j-worker-0"])
    assert started(pods["j-worker-0"]) == started(pods["j-worker-1"])
    assert phase(only_job(state)) == "Completed"


async def test_gang_waits_for_room(tmp_path: Path) -> None:
    # Two jobs of 3 × 2 cpu on a 8-cpu node: the second is admitted when the first is done.
    state = await simulate(
        tmp_path,
        node("node-0", cpu="8"),
        vcjob("a", task("worker", 3, cpu="2", runtime="60s")),
        submitted_at(vcjob("b", task("worker", 3, cpu="2", runtime="60s")), 5),
    )
    pods = {p["metadata"]["name"]: p for p in state["Pod"]}
    assert started(pods["b-worker-0"]) >= "1970-01-01T00:01:01Z"
    assert all(phase(j) == "Completed" for j in state["Job"])


async def test_scale_up_and_down_while_running() -> None:
    stack = await Stack().start(node("node-0", cpu="16"))
    await stack.store.create(vcjob("j", task("worker", 2, runtime="1h")))
    await stack.run(10, until=lambda: stack.phase_is("j", "Running"))
    assert len(await stack.pods("j")) == 2

    job = await stack.job("j")
    job["spec"]["tasks"][0]["replicas"] = 4
    await stack.store.update(job)
    await stack.run(5)
    pods = await stack.pods("j")
    assert sorted(pods) == [f"j-worker-{i}" for i in range(4)]
    assert all(p["status"]["phase"] == "Running" for p in pods.values())

    job = await stack.job("j")
    job["spec"]["tasks"][0].update(replicas=1, minAvailable=1)
    job["spec"]["minAvailable"] = 1
    await stack.store.update(job)
    await stack.run(5)
    assert sorted(await stack.pods("j")) == ["j-worker-0"]
    job = await stack.job("j")
    assert (phase(job), job["status"]["running"], job["status"]["minAvailable"]) == (
        "Running",
        1,
        1,
    )


async def test_suspend_and_resume_while_running_with_commands() -> None:
    stack = await Stack().start()
    await stack.store.create(vcjob("j", task("worker", 2, runtime="1h")))
    await stack.run(10, until=lambda: stack.phase_is("j", "Running"))
    await stack.store.create(command("j", Action.ABORT_JOB))
    await stack.run(5, until=lambda: stack.phase_is("j", "Aborted"))
    assert await stack.pods("j") == {}
    await stack.store.create(command("j", Action.RESUME_JOB))
    await stack.run(10, until=lambda: stack.phase_is("j", "Running"))
    pods = await stack.pods("j")
    assert len(pods) == 2
    job = await stack.job("j")
    assert all(
        p["metadata"]["annotations"][k.JOB_VERSION_KEY] == str(job["status"]["version"])
        for p in pods.values()
    )
