"""A refused input object is an outcome, not a stop: the rest of the file still runs, the
refusal is printed on stderr and recorded as a Warning Event ``AdmissionRejected``."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""


def vcjob(name: str, queue: str, *, namespace: str = "default") -> str:
    return f"""---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  queue: {queue}
  tasks:
  - name: t
    replicas: 1
    template:
      spec:
        containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def queue(name: str, spec: str = "{weight: 1}") -> str:
    return (
        f"---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"
        f"metadata: {{name: {name}}}\nspec: {spec}\n"
    )


MISSING = 'unable to find job queue: queue.scheduling.volcano.sh "nowhere" not found'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    return path


def simulate(*args: str) -> tuple[int, dict, str]:
    result = CliRunner().invoke(main, ["simulate", *args, "--output", "json"])
    assert result.stdout, result.output
    return result.exit_code, orjson.loads(result.stdout), result.stderr


def kinds(state: dict, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in state["items"] if o["kind"] == kind}


def rejected_events(state: dict) -> list[dict]:
    return [e for e in kinds(state, "Event").values() if e["reason"] == "AdmissionRejected"]


def test_the_other_objects_still_run(tmp_path: Path) -> None:
    path = write(tmp_path, NODE + vcjob("before", "default") + vcjob("lost", "nowhere")
                 + vcjob("after", "default"))  # fmt: skip
    code, state, stderr = simulate(str(path))
    assert code == 0
    jobs = kinds(state, "Job")
    assert sorted(jobs) == ["after", "before"]
    pods = kinds(state, "Pod")
    assert {p["metadata"]["name"] for p in pods.values() if p["spec"].get("nodeName")} == {
        "before-t-0",
        "after-t-0",
    }
    assert stderr == (
        f"rejected: {path} document 3: Job 'lost': admission webhook "
        f'"validatejob.volcano.sh" denied the request: {MISSING}\n'
    )


def test_the_rejection_is_an_event_on_the_object(tmp_path: Path) -> None:
    path = write(tmp_path, NODE + vcjob("lost", "nowhere", namespace="team"))
    _, state, _ = simulate(str(path))
    [event] = rejected_events(state)
    assert event["type"] == "Warning"
    assert event["involvedObject"] == {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "lost",
        "namespace": "team",
    }
    assert event["metadata"]["namespace"] == "team"
    assert MISSING in event["message"]


def test_fail_on_rejection_exits_1_after_the_whole_run(tmp_path: Path) -> None:
    path = write(tmp_path, NODE + vcjob("lost", "nowhere") + vcjob("ok", "default"))
    code, state, stderr = simulate(str(path), "--fail-on-rejection")
    assert code == 1
    assert "ok" in kinds(state, "Job")  # the run went to the end, the output is complete
    assert stderr.startswith("rejected: ")


def test_fail_on_rejection_exits_0_when_nothing_is_refused(tmp_path: Path) -> None:
    code, _, stderr = simulate(str(write(tmp_path, NODE + vcjob("ok", "default"))),
                               "--fail-on-rejection")  # fmt: skip
    assert (code, stderr) == (0, "")


async def test_rejections_are_in_the_result_in_arrival_order(tmp_path: Path) -> None:
    text = NODE + vcjob("b", "nowhere") + vcjob("a", "gone")
    result = await Simulation(load([write(tmp_path, text)])).run()
    assert [(r.kind, r.name) for r in result.rejections] == [("Job", "b"), ("Job", "a")]
    assert 'queue.scheduling.volcano.sh "gone" not found' in result.rejections[1].message


# --- the built-in queues may be declared ---------------------------------------------------------


def test_a_declared_default_queue_wins_over_the_built_in_one(tmp_path: Path) -> None:
    spec = '{weight: 4, capability: {cpu: "1"}, reclaimable: false}'
    path = write(tmp_path, NODE + queue("default", spec) + vcjob("a", "default")
                 + vcjob("b", "default"))  # fmt: skip
    code, state, stderr = simulate(str(path))
    assert (code, stderr) == (0, "")
    declared = kinds(state, "Queue")["default"]
    assert declared["spec"]["weight"] == 4
    assert declared["spec"]["capability"] == {"cpu": "1"}
    assert declared["spec"]["reclaimable"] is False
    assert declared["status"]["state"] == "Open"
    # The capability holds: one 1-cpu job runs, the other waits.
    bound = [p for p in kinds(state, "Pod").values() if p["spec"].get("nodeName")]
    assert len(bound) == 1


def test_a_declared_root_queue_is_taken(tmp_path: Path) -> None:
    path = write(tmp_path, NODE + queue("root", '{weight: 1, capability: {cpu: "3"}}'))
    code, state, stderr = simulate(str(path))
    assert (code, stderr) == (0, "")
    assert kinds(state, "Queue")["root"]["spec"]["capability"] == {"cpu": "3"}


def test_a_declared_closed_default_queue_refuses_jobs(tmp_path: Path) -> None:
    closed = (
        "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n"
        "metadata: {name: default}\nspec: {weight: 1}\nstatus: {state: Closed}\n"
    )
    code, state, stderr = simulate(str(write(tmp_path, NODE + closed + vcjob("a", "default"))))
    assert code == 0
    assert kinds(state, "Queue")["default"]["status"]["state"] == "Closed"
    assert "queue `default` status is `Closed`" in stderr
