"""examples/queue-policy.yaml through `stromboli simulate --queue-policy`: the work in
queue-policy-cluster.yaml lands in the queues the policy gives it, queue-policy-refused.yaml
is refused with the queue to use instead, and without the policy the same job is taken."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICY = EXAMPLES / "queue-policy.yaml"


def run(name: str, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["simulate", str(EXAMPLES / name), *args, "--output", "json"])


def by_kind(state: dict, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == kind}


def test_the_work_goes_to_the_queues_the_policy_gives_it() -> None:
    result = run("queue-policy-cluster.yaml", "--queue-policy", str(POLICY))
    assert result.exit_code == 0, result.output
    state = orjson.loads(result.stdout)
    jobs = by_kind(state, "Job")
    assert jobs["train"]["spec"]["queue"] == "research"  # the namespace's default
    assert jobs["sweep"]["spec"]["queue"] == "spot"
    assert {j["status"]["state"]["phase"] for j in jobs.values()} == {"Completed"}
    pods = by_kind(state, "Pod")
    api = pods["api-0"]
    assert api["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "shared"
    assert api["status"]["phase"] == "Succeeded"
    groups = by_kind(state, "PodGroup")
    assert groups["batch"]["spec"]["queue"] == "shared"
    enrolled = groups[api["metadata"]["annotations"]["scheduling.k8s.io/group-name"]]
    assert enrolled["spec"]["queue"] == "shared"
    queues = {g["spec"]["queue"] for g in groups.values()}
    assert "default" not in queues


def test_without_the_policy_nothing_is_defaulted() -> None:
    result = run("queue-policy-cluster.yaml")
    assert result.exit_code == 0, result.output
    jobs = by_kind(orjson.loads(result.stdout), "Job")
    assert jobs["train"]["spec"]["queue"] == "default"


def test_a_job_over_the_limits_is_refused_with_the_queue_to_use_instead() -> None:
    result = run("queue-policy-refused.yaml", "--queue-policy", str(POLICY), "--fail-on-rejection")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "rejected: "
        + str(EXAMPLES / "queue-policy-refused.yaml")
        + " document 4: Job 'big-sweep': "
        'admission webhook "validatejob.volcano.sh" denied the request: queue policy: '
        'queue "research" takes at most 8 pods per job; this Job has 12'
    )
    assert 'queue "research" takes at most 16 cpu per job; this Job requests 24' in result.stderr
    assert result.stderr.rstrip().endswith(
        'queues that namespace "research" may use and that take this Job: spot'
    )
    assert run("queue-policy-refused.yaml").exit_code == 0


def test_a_bad_policy_file_stops_the_run_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("namespaces: {research: {queues: research}}\n")
    result = run("queue-policy-cluster.yaml", "--queue-policy", str(bad))
    assert result.exit_code == 1
    assert f"{bad}: namespaces.research.queues: must be of list type" in result.output
