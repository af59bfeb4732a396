"""The CronJob and JobFlow examples run through `stromboli simulate`."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.api import constants as k
from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def simulate(name: str) -> dict[str, dict[str, dict]]:
    result = CliRunner().invoke(main, ["simulate", str(EXAMPLES / name), "--output", "json"])
    assert result.exit_code == 0, result.output
    by_kind: dict[str, dict[str, dict]] = {}
    for obj in orjson.loads(result.stdout)["items"]:
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    return by_kind


def phase(job: dict) -> str:
    return job["status"]["state"]["phase"]


def test_cronjob_runs_every_minute_and_keeps_its_history_limit() -> None:
    state = simulate("cronjob.yaml")
    jobs = state["Job"]
    assert sorted(jobs) == ["report-3", "report-4"]
    for minute in (3, 4):
        job = jobs[f"report-{minute}"]
        assert phase(job) == "Completed"
        assert job["metadata"]["creationTimestamp"] == f"1970-01-01T00:0{minute}:00Z"
        annotations = job["metadata"]["annotations"]
        assert annotations[k.CRONJOB_SCHEDULED_TIMESTAMP_KEY] == f"1970-01-01T00:0{minute}:00Z"
        assert job["metadata"]["ownerReferences"][0]["name"] == "report"
        assert job["status"]["state"]["lastTransitionTime"] < f"1970-01-01T00:0{minute}:40Z"
    status = state["CronJob"]["report"]["status"]
    assert status["lastScheduleTime"] == "1970-01-01T00:04:00Z"
    assert not status.get("active")
    assert status["lastSuccessfulTime"] >= "1970-01-01T00:04:30Z"


def test_jobflow_runs_its_steps_in_order_and_succeeds() -> None:
    state = simulate("jobflow.yaml")
    jobs = state["Job"]
    names = ["pipeline-prepare", "pipeline-train", "pipeline-evaluate"]
    assert sorted(jobs) == sorted(names)
    assert all(phase(jobs[name]) == "Completed" for name in names)
    for before, after in itertools.pairwise(names):
        finished = jobs[before]["status"]["state"]["lastTransitionTime"]
        assert jobs[after]["metadata"]["creationTimestamp"] >= finished
    train = jobs["pipeline-train"]["metadata"]
    assert train["labels"][k.CREATED_BY_JOB_FLOW_KEY] == "default.pipeline"
    assert train["annotations"][k.CREATED_BY_JOB_TEMPLATE_KEY] == "default.train"
    status = state["JobFlow"]["pipeline"]["status"]
    assert status["state"]["phase"] == "Succeed"
    assert status["completedJobs"] == names
