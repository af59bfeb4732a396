"""One admission pass per object, in the API server's order (mutating, schema, validating); the
loader only parses and shape-checks; plain pods enrolled by the live controller's PodEnroller."""

from __future__ import annotations

from pathlib import Path

import pytest

from stromboli.core.api import constants as k
from stromboli.core.controller.enrol import PodEnroller
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.simulate.admission import Admission, AdmissionError
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import SimulationInputError, load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""


def pod(name: str = "p", spec: dict | None = None, annotations: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "x"}]}
        | (spec or {}),
    }


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    return path


# --- the loader ----------------------------------------------------------------------------------


def test_loader_keeps_documents_as_written(tmp_path: Path) -> None:
    text = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {weight: 0}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  tasks: [{replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}]
"""
    queue, job = (item.obj for item in load([write(tmp_path, text)]))
    # Volcano's defaults are admission's, applied when the object is submitted.
    assert queue["spec"] == {"weight": 0}
    assert job["spec"]["tasks"][0].get("name") is None
    assert "minAvailable" not in job["spec"]
    assert job["metadata"] == {"name": "j", "namespace": "default"}


def test_loader_still_refuses_what_the_defaults_would_not_mend(tmp_path: Path) -> None:
    text = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\n"
    with pytest.raises(SimulationInputError, match=r'document 1: Queue "q": spec\.weight'):
        load([write(tmp_path, text + "spec: {weight: -2}\n")])
    assert load([write(tmp_path, text + "spec: {weight: 0}\n")])


# --- the order of the pass -----------------------------------------------------------------------


def test_mutating_runs_before_the_schema() -> None:
    # The Priority plugin refuses the pod before the API server looks at its containers.
    bad = pod(spec={"priorityClassName": "nope", "containers": []})
    with pytest.raises(AdmissionError, match="no PriorityClass named 'nope'"):
        Admission().admit(bad)
    with pytest.raises(AdmissionError, match=r'Pod "p" is invalid: spec\.containers'):
        Admission().admit(pod(spec={"containers": []}))


def test_the_schema_checks_what_mutation_made() -> None:
    admission = Admission()
    admission.admit(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "t", "annotations": {k.QUEUE_NAME_ANNOTATION_KEY: "Bad_Name"}},
        }
    )
    podgroup = {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "t"},
        "spec": {"minMember": 1},
    }
    with pytest.raises(AdmissionError, match=r'PodGroup "g" is invalid: spec\.queue'):
        admission.admit(podgroup)


def test_the_schema_runs_before_the_validating_webhooks() -> None:
    queue = {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 70000, "deserved": {"cpu": "4"}, "capability": {"cpu": "2"}},
    }
    with pytest.raises(AdmissionError, match=r"spec\.weight") as caught:
        Admission().admit(queue)
    assert "validatequeue" not in str(caught.value)


def test_admitted_objects_carry_the_defaults_of_every_stage() -> None:
    admission = Admission()
    admission.admit(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "base"},
            "value": 7,
            "globalDefault": True,
        }
    )
    assert admission.admit(pod())["spec"]["priority"] == 7
    job = admission.admit(
        {
            "apiVersion": k.BATCH_V1ALPHA1,
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "default"},
            "spec": {
                "tasks": [
                    {
                        "replicas": 3,
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                    }
                ]
            },
        }
    )
    assert job["spec"]["tasks"][0]["name"] == "default0"  # the job webhook's default
    assert job["spec"]["minAvailable"] == 3
    assert job["spec"]["maxRetry"] == 3


def test_jobs_the_controllers_make_take_the_same_pass() -> None:
    simulation = Simulation([])
    job = simulation._admit_job(
        {
            "apiVersion": k.BATCH_V1ALPHA1,
            "kind": "Job",
            "metadata": {"name": "made", "namespace": "default"},
            "spec": {
                "tasks": [
                    {
                        "replicas": 2,
                        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
                    }
                ]
            },
        }
    )
    assert job["spec"]["minAvailable"] == 2 and job["spec"]["queue"] == k.DEFAULT_QUEUE
    with pytest.raises(AdmissionError, match=r'validatejob\.volcano\.sh" denied'):
        simulation._admit_job({**job, "spec": {**job["spec"], "queue": "nowhere"}})


@pytest.mark.parametrize(
    "path",
    sorted(p for p in EXAMPLES.glob("*.yaml") if "conf" not in p.name and "policy" not in p.name),
    ids=lambda p: p.stem,
)
def test_admitting_an_admitted_object_changes_nothing(path: Path) -> None:
    """The pass is idempotent: an object that took it (a job a test harness defaulted itself,
    a pod re-created from a stored copy) comes out the same."""
    first, second = Admission(), Admission()
    for item in load([path]):
        admitted = first.admit(item.obj)
        assert second.admit(admitted) == admitted


# --- enrolment -----------------------------------------------------------------------------------


async def test_plain_pods_are_enrolled_by_the_pod_enroller(tmp_path: Path) -> None:
    text = NODE + (
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
        "  annotations: {scheduling.volcano.sh/queue-name: default}\n"
        "spec: {schedulerName: volcano, containers: [{name: c, image: x}]}\n"
    )
    simulation = Simulation(load([write(tmp_path, text)]))
    assert isinstance(simulation.enroller, PodEnroller)
    await simulation.run()
    stored = await simulation.store.get("v1", "Pod", "p", "default")
    group = stored["metadata"]["annotations"][k.GROUP_NAME_ANNOTATION]
    assert group == f"podgroup-{stored['metadata']['uid']}"
    podgroup = await simulation.store.get(k.SCHEDULING_V1BETA1, "PodGroup", group, "default")
    assert podgroup["spec"]["minMember"] == 1
    assert stored["spec"].get("nodeName") == "n1"


async def test_a_pod_the_enroller_cannot_read_is_reported_not_fatal(tmp_path: Path) -> None:
    text = NODE + (
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
        "    volcano.sh/network-topology-mode: hard\n"
        "    volcano.sh/network-topology-highest-tier: 'x'\n"
        "spec: {schedulerName: volcano, containers: [{name: c, image: x}]}\n"
    )
    simulation = Simulation(load([write(tmp_path, text)]))
    await simulation.run()
    events = (await simulation.store.list("v1", "Event")).items
    warnings = [e for e in events if e.get("type") == "Warning"]
    assert [e["involvedObject"]["name"] for e in warnings] == ["p"]
    assert "vc-controller-manager" in warnings[0]["message"]


# --- the session is closed last ------------------------------------------------------------------


async def test_nothing_edits_a_session_after_it_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[Session] = []
    statuses_at_close: list[TaskStatus] = []
    close, update_status = Session.close, JobInfo.update_status

    def closing(ssn: Session) -> None:
        statuses_at_close.extend(t.status for job in ssn.jobs.values() for t in job.tasks.values())
        close(ssn)
        closed.append(ssn)

    def updating(job: JobInfo, task: object, status: TaskStatus) -> None:
        owners = [ssn for ssn in closed if ssn.jobs.get(job.uid) is job]
        assert not owners, f"task status set to {status!r} after its session closed"
        update_status(job, task, status)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "close", closing)
    monkeypatch.setattr(JobInfo, "update_status", updating)
    text = NODE + (
        "---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\n"
        "metadata: {name: g}\nspec: {minMember: 2}\n"
        + "".join(
            f"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: g-{i}\n"
            "  annotations: {scheduling.k8s.io/group-name: g}\n"
            "spec: {schedulerName: volcano, containers: [{name: c, image: x}]}\n"
            for i in range(2)
        )
    )
    simulation = Simulation(load([write(tmp_path, text)]), max_time=5)
    await simulation.run()
    assert closed
    # The closing hooks saw the bindings of their own cycle.
    assert TaskStatus.BOUND in statuses_at_close
    podgroup = await simulation.store.get(k.SCHEDULING_V1BETA1, "PodGroup", "g", "default")
    assert podgroup["status"]["phase"] == "Running"
