"""The ``volcano_job`` kfp component run by kfp's own local runner against the real control
plane, with ``stromboli scheduler`` and ``stromboli controller`` as subprocesses and kwok as the
kubelet (pods finish through the ``succeed-after``/``fail-after`` annotations).

``kfp.local.SubprocessRunner`` executes the component exactly as a pipeline pod would: the
compiled command, ``kfp.dsl.executor_main``, the executor input and output files; only the
container is missing. Each test checks what the step did (its outputs, its log, its exit) and
what it left on the cluster.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kfp import local

from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.controlplane import free_port
from stromboli.core.devcluster.stages import (
    EXIT_CODE_ANNOTATION,
    FAIL_AFTER_ANNOTATION,
    SUCCEED_AFTER_ANNOTATION,
)
from stromboli.integrations.kubeflow.pipelines import volcano_job

from .jobs_live import (  # noqa: F401  (fixtures)
    JOB,
    POD,
    QUEUE,
    Live,
    live_fixture,
    pod_phase,
    stack_fixture,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "pipelines" / "gang_training.py"
POLL = 0.2
#: The components run on the Stromboli image; kfp's local runner warns that the name has no
#: "python" in it, which is beside the point here (the step runs in this interpreter).
pytestmark = pytest.mark.filterwarnings("ignore:You may be attemping:RuntimeWarning")
FAST = {SUCCEED_AFTER_ANNOTATION: "1s"}


@pytest.fixture(autouse=True)
def kfp_local(tmp_path: Path) -> None:
    """kfp's local runner in this interpreter's environment (no venv, nothing installed)."""
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(tmp_path / "kfp-outputs"),
    )


@pytest.fixture(autouse=True)
async def default_queue(live: Live) -> None:
    """The scheduler creates the ``default`` queue when it starts; wait for it."""

    async def names() -> list[str]:
        return [q["metadata"]["name"] for q in (await live.store.list(*QUEUE)).items]

    await live.wait(names, lambda found: "default" in found, "the default queue", timeout=60)


class StepRun:
    """One run of the component in a thread (kfp's local runner blocks), with its log."""

    def __init__(self, capsys: pytest.CaptureFixture[str], **arguments: Any) -> None:
        self.capsys = capsys
        self.arguments = arguments
        self.outputs: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            task = volcano_job(**self.arguments)
            self.outputs = dict(task.outputs)
        except BaseException as error:
            self.error = error

    def start(self) -> StepRun:
        self._thread.start()
        return self

    async def finish(self, timeout: float = 90.0) -> str:
        """Wait for the step; returns everything printed while it ran."""
        deadline = time.monotonic() + timeout
        while self._thread.is_alive():
            assert time.monotonic() < deadline, f"the step did not end in {timeout:.0f}s"
            await asyncio.sleep(POLL)
        return self.capsys.readouterr().out


async def run_step(capsys: pytest.CaptureFixture[str], **arguments: Any) -> tuple[StepRun, str]:
    step = StepRun(capsys, **arguments).start()
    out = await step.finish()
    return step, out


def base(live: Live, cp: ControlPlane, **arguments: Any) -> dict[str, Any]:
    return {
        "image": "busybox",
        "namespace": live.ns,
        "kubeconfig": str(cp.kubeconfig_path),
        "poll_seconds": POLL,
        "resources": {"cpu": "100m", "memory": "64Mi"},
        **arguments,
    }


async def jobs(live: Live) -> list[dict[str, Any]]:
    return (await live.store.list(*JOB, live.ns)).items


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("gang_training_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def executor_pids() -> list[int]:
    """The kfp executors started by this test process (descendants running executor_main)."""
    me = os.getpid()
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # the process ended while we looked
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        commands[int(entry.name)] = cmdline

    def descends(pid: int) -> bool:
        seen = 0
        while pid in parents and seen < 64:
            pid = parents[pid]
            if pid == me:
                return True
            seen += 1
        return False

    return [
        pid
        for pid, cmd in commands.items()
        if "kfp.dsl.executor_main" in cmd and not cmd.startswith("sh ") and descends(pid)
    ]


# --- a job that completes ------------------------------------------------------------------------


async def test_job_runs_to_completed(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    step, out = await run_step(
        capsys,
        **base(
            live,
            control_plane,
            name="train",
            replicas=2,
            command=["sh", "-c", "echo hi"],
            plugins={"env": []},
            pod_annotations=FAST,
        ),
    )
    assert step.error is None, out
    assert step.outputs is not None
    assert step.outputs["job_name"] == "train"
    assert step.outputs["phase"] == "Completed"
    artifact = step.outputs["status"]
    assert artifact.metadata["phase"] == "Completed"
    assert artifact.metadata["queue"] == "default"
    document = json.loads(Path(artifact.path).read_text())
    assert document["metadata"]["name"] == "train"
    assert document["metadata"]["namespace"] == live.ns
    assert document["status"]["state"]["phase"] == "Completed"
    assert document["status"]["succeeded"] == 2
    # Each phase the job entered is logged once, in order.
    lines = [line for line in out.splitlines() if f"vcjob {live.ns}/train: " in line]
    phases = [line.split(": ", 1)[1].split(" (")[0] for line in lines if "waiting" not in line]
    assert phases == ["Pending", "Running", "Completed"], out
    assert f"vcjob {live.ns}/train created in queue default: 1 task(s), 2 pod(s), gang of 2" in out
    # The job is kept (its pods' logs), with what the step asked for.
    (job,) = await jobs(live)
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano" and spec["queue"] == "default"
    assert spec["plugins"] == {"env": []}
    pods = await live.pods("train")
    assert {pod_phase(p) for p in pods.values()} == {"Succeeded"}
    container = next(iter(pods.values()))["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c", "echo hi"]
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}


async def test_template_with_placeholders(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    template = yaml.safe_dump(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "from-template"},
            "spec": {
                "minAvailable": "${workers}",
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": "${workers}",
                        "template": {
                            "metadata": {"annotations": {SUCCEED_AFTER_ANNOTATION: "${after}"}},
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "busybox:${tag}",
                                        "resources": {"requests": {"cpu": "100m"}},
                                    }
                                ],
                            },
                        },
                    }
                ],
            },
        }
    )
    step, out = await run_step(
        capsys,
        template=template,
        template_values={"workers": 3, "tag": "1.36", "after": "1s"},
        namespace=live.ns,
        kubeconfig=str(control_plane.kubeconfig_path),
        poll_seconds=POLL,
    )
    assert step.error is None, out
    assert step.outputs is not None and step.outputs["phase"] == "Completed"
    (job,) = await jobs(live)
    assert job["spec"]["minAvailable"] == 3
    assert job["spec"]["tasks"][0]["replicas"] == 3
    pod = next(iter((await live.pods("from-template")).values()))
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.36"


# --- a job that fails or waits --------------------------------------------------------------------


async def test_failed_job_fails_the_task_with_its_message(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    step, out = await run_step(
        capsys,
        **base(
            live,
            control_plane,
            name="broken",
            replicas=1,
            pod_annotations={FAIL_AFTER_ANNOTATION: "1s", EXIT_CODE_ANNOTATION: "3"},
        ),
    )
    assert isinstance(step.error, RuntimeError), out
    assert "FAILURE" in str(step.error)
    assert f"failed: vcjob {live.ns}/broken: Failed" in out, out
    assert "pod broken-worker-0 exited with code 3" in out, out
    # A job that failed on its own is kept for its logs.
    (job,) = await jobs(live)
    assert job["status"]["state"]["phase"] == "Failed"


async def test_waiting_job_says_why_and_is_deleted_at_timeout(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = base(
        live,
        control_plane,
        name="too-big",
        replicas=2,
        resources={"cpu": "100"},  # the nodes have 32 CPUs each
        timeout_seconds=6,
    )
    step = StepRun(capsys, **arguments).start()

    async def held_pending() -> bool:
        # 200 cpu can never be admitted: the group stays Pending and, as in Volcano, carries
        # no condition (the enqueue refusal is an event).
        groups = await live.podgroups()
        return bool(groups) and all(
            (pg.get("status") or {}).get("phase", "Pending") == "Pending"
            and not (pg.get("status") or {}).get("conditions")
            for pg in groups
        )

    await live.wait(held_pending, bool, "the job's PodGroup held Pending at enqueue")
    said = "PodGroup Pending: the scheduler has not admitted the gang into queue default"
    out = await step.finish()
    assert isinstance(step.error, RuntimeError), out
    # The scheduler's own sentence reaches the pipeline's log, with its enqueue refusal (a
    # Normal event on the group: the proportion or overcommit plugin's words, naming cpu).
    waiting = f"vcjob {live.ns}/too-big: waiting: {said}: "
    refusals = [line for line in out.splitlines() if waiting in line]
    assert refusals, out
    assert "insufficient cpu" in refusals[0] or "overused cpu" in refusals[0], out
    assert "not finished after timeout_seconds=6 (last phase Pending)" in out, out
    assert f"vcjob {live.ns}/too-big: deleted (" in out, out
    assert await jobs(live) == []


# --- cancellation ---------------------------------------------------------------------------------


async def test_cancelled_run_leaves_no_vcjob(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    step = StepRun(capsys, **base(live, control_plane, name="long", replicas=2)).start()
    # Pods without a finishing annotation run until deleted: the job stays Running.
    await live.wait_running_pods("long", 2, timeout=60)
    pids = executor_pids()
    assert len(pids) == 1, pids
    os.kill(pids[0], signal.SIGTERM)  # what the kubelet sends when the run is cancelled
    out = await step.finish()
    assert isinstance(step.error, RuntimeError), out
    assert f"vcjob {live.ns}/long: deleted (step stopped by SIGTERM)" in out, out
    assert await jobs(live) == []
    # Its pods and PodGroup go with it: kube-controller-manager's garbage collector follows
    # their owner references to the deleted job.
    await live.wait(lambda: live.pods("long"), lambda pods: pods == {}, "pods of long deleted")
    await live.wait(live.podgroups, lambda pgs: pgs == [], "PodGroup of long deleted")


# --- bad input: refused before anything is created ------------------------------------------------


async def refused(
    live: Live, capsys: pytest.CaptureFixture[str], expected: str, **arguments: Any
) -> str:
    step, out = await run_step(capsys, **arguments)
    assert isinstance(step.error, RuntimeError), out
    assert f"not started: {expected}" in out, out
    assert await jobs(live) == []
    assert (await live.store.list(*POD, live.ns)).items == []
    return out


async def test_template_that_is_not_a_vcjob(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n"
    await refused(
        live,
        capsys,
        "template: is a Pod (v1), not a Volcano Job",
        template=pod,
        namespace=live.ns,
        kubeconfig=str(control_plane.kubeconfig_path),
    )


async def test_queue_that_does_not_exist(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await refused(
        live,
        capsys,
        "queue: Queue nowhere does not exist on the cluster; its queues: ",
        **base(live, control_plane, queue="nowhere"),
    )
    assert "default" in out.split("its queues: ", 1)[1].splitlines()[0]


async def test_unreachable_cluster(
    live: Live,
    control_plane: ControlPlane,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    config = yaml.safe_load(Path(control_plane.kubeconfig_path).read_text())
    port = free_port()  # nothing listens there
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    kubeconfig = tmp_path / "unreachable.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    await refused(
        live,
        capsys,
        f"kubeconfig: cannot reach the Kubernetes API at https://127.0.0.1:{port}",
        **base(live, control_plane, kubeconfig=str(kubeconfig)),
    )


async def test_bad_quantity_names_the_parameter(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    await refused(
        live,
        capsys,
        "resources.memory: '1e400' is out of range",
        **base(live, control_plane, resources={"cpu": "1", "memory": "1e400"}),
    )


# --- the example pipeline -------------------------------------------------------------------------


async def test_example_pipeline_runs(
    live: Live, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    gang_training = load_example().gang_training
    done: list[Any] = []

    def run() -> None:
        try:
            done.append(
                gang_training(
                    workers=2,
                    image="python:3.11-slim",
                    pod_annotations=FAST,
                    namespace=live.ns,
                    kubeconfig=str(control_plane.kubeconfig_path),
                )
            )
        except BaseException as error:
            done.append(error)

    await asyncio.to_thread(run)
    out = capsys.readouterr().out
    (result,) = done
    assert not isinstance(result, BaseException), f"{result}\n{out}"
    assert result.output == "Completed"
    assert "prepared shard-0,shard-1" in out
    (job,) = await jobs(live)
    assert job["status"]["state"]["phase"] == "Completed"
    assert job["spec"]["tasks"][0]["replicas"] == 2
