"""The vcjob examples run through `stromboli simulate`, checked for their story."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulate(name: str) -> dict:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLES / name), "--output", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def of_kind(state: dict, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == kind}


def job_events(state: dict, job: str) -> list[tuple[str, str]]:
    """(reason, message) of the Events about vcjob ``job``."""
    return [
        (o["reason"], o["message"])
        for o in state["items"]
        if o["kind"] == "Event"
        and o["involvedObject"].get("kind") == "Job"
        and o["involvedObject"].get("name") == job
    ]


def test_vcjob_complete() -> None:
    state = simulate("vcjob-complete.yaml")
    job = of_kind(state, "Job")["train"]
    assert job["status"]["state"]["phase"] == "Completed"
    assert job["status"]["succeeded"] == 4
    assert job["status"]["taskStatusCount"] == {
        "master": {"phase": {"Succeeded": 1}},
        "worker": {"phase": {"Succeeded": 3}},
    }
    assert [c["status"] for c in job["status"]["conditions"]] == [
        "Pending",
        "Running",
        "Completed",
    ]
    pods = of_kind(state, "Pod")
    assert sorted(pods) == ["train-master-0", "train-worker-0", "train-worker-1", "train-worker-2"]
    assert {p["status"]["startTime"] for p in pods.values()} == {"1970-01-01T00:00:01Z"}
    master = pods["train-master-0"]
    assert master["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == (
        f"train-{job['metadata']['uid']}"
    )
    assert job["status"]["state"]["lastTransitionTime"] == "1970-01-01T00:01:31Z"


def test_vcjob_retry() -> None:
    state = simulate("vcjob-retry.yaml")
    job = of_kind(state, "Job")["flaky"]
    assert job["status"]["state"]["phase"] == "Failed"
    assert job["status"]["retryCount"] == 2
    statuses = [c["status"] for c in job["status"]["conditions"]]
    assert "Restarting" in statuses and statuses[-1] == "Failed"
    pods = of_kind(state, "Pod")
    assert {p["status"]["phase"] for p in pods.values()} == {"Failed"}
    exit_codes = {
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        for p in pods.values()
    }
    assert exit_codes == {1}
    reasons = [reason for reason, _ in job_events(state, "flaky")]
    assert "ExecuteAction" in reasons


def test_vcjob_suspend() -> None:
    state = simulate("vcjob-suspend.yaml")
    job = of_kind(state, "Job")["batch"]
    assert job["status"]["state"]["phase"] == "Completed"
    assert job["status"]["retryCount"] == 1
    statuses = [c["status"] for c in job["status"]["conditions"]]
    assert statuses[:4] == ["Aborting", "Aborted", "Restarting", "Pending"]
    assert of_kind(state, "Command") == {}  # both consumed
    pods = of_kind(state, "Pod")
    assert {p["status"]["startTime"] for p in pods.values()} == {"1970-01-01T00:02:01Z"}
    assert {p["metadata"]["annotations"]["volcano.sh/job-version"] for p in pods.values()} == {
        str(job["status"]["version"] - 1)
    }
    messages = [m for reason, m in job_events(state, "batch") if reason == "CommandIssued"]
    assert [m.split()[4] for m in messages] == ["AbortJob,", "ResumeJob,"]
