"""Helpers for vcjob lifecycle tests on the real test control plane.

- :class:`Process` / :class:`Stack`: ``stromboli scheduler`` and ``stromboli controller`` as
  subprocesses against the ``control_plane`` fixture (the controller can be SIGKILLed and
  started again);
- :func:`vcjob` / :func:`task`: Job objects as ``kubectl create`` stores them after Volcano's
  mutating webhook (the test control plane runs no webhook);
- :class:`Live`: one test's namespace: create jobs, play the kubelet (finish a pod with a
  phase and exit code through the status subresource), send Commands, read Events, and wait
  for conditions with failure messages that show what was seen last;
- :class:`PhaseLog`: every phase each job of the namespace passes through, from a watch, so
  that short-lived phases (Completing, Restarting) are not missed between polls.

kwok's stages (see :mod:`stromboli.core.devcluster.stages`) make bound pods ``Running`` and
leave them so unless the template carries ``devcluster.stromboli.io/succeed-after`` or
``fail-after``; a pod patched to ``Failed``/``Succeeded`` matches no stage, so kwok never
overwrites a phase a test sets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.admission.mutate import mutate_job
from stromboli.core.api import constants as k
from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.stages import (
    EXIT_CODE_ANNOTATION,
    FAIL_AFTER_ANNOTATION,
    SUCCEED_AFTER_ANNOTATION,
)

STROMBOLI = Path(sys.executable).with_name("stromboli")
JOB = (k.BATCH_V1ALPHA1, "Job")
POD = ("v1", "Pod")
PODGROUP = (k.SCHEDULING_V1BETA1, "PodGroup")
QUEUE = (k.SCHEDULING_V1BETA1, "Queue")
COMMAND = (k.BUS_V1ALPHA1, "Command")
POLL = 0.1
DRIVER_ENV = "STROMBOLI_TEST_CONTROLLER_DRIVER"
"""Run the controller with this ``--driver`` instead of the default (both must pass)."""


# --- processes ---------------------------------------------------------------------------------


class Process:
    """One ``stromboli <command>`` subprocess, its output appended to ``log``."""

    def __init__(self, cp: ControlPlane, log: Path, command: str, *args: str) -> None:
        self.cp = cp
        self.log = log
        self.argv = [
            str(STROMBOLI),
            command,
            f"--kubeconfig={cp.kubeconfig_path}",
            "--healthz-address=",
            *args,
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        """SIGKILL: no clean-up, as when a node dies under the process."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.terminate()
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def check_alive(self) -> None:
        assert self.process is not None and self.process.poll() is None, (
            f"{self.argv[1]} exited ({self.process and self.process.returncode}):\n{self.tail()}"
        )


class Stack:
    """The scheduler and the controller of one test module."""

    def __init__(self, cp: ControlPlane, log_dir: Path) -> None:
        self.cp = cp
        scheduler_args = ("--schedule-period=100ms", "--listen-address=")
        self.scheduler = Process(cp, log_dir / "scheduler.log", "scheduler", *scheduler_args)
        self.controller_log = log_dir / "controller.log"
        self.controller = self._controller()

    def _controller(self) -> Process:
        driver = os.environ.get(DRIVER_ENV)
        return Process(
            self.cp,
            self.controller_log,
            "controller",
            "--leader-elect=false",
            "--listen-address=",
            *([f"--driver={driver}"] if driver else []),
        )

    def start(self) -> Stack:
        self.scheduler.start()
        self.controller.start()
        return self

    def restart_controller(self) -> None:
        """SIGKILL the controller and start a fresh one (nothing carried over in memory)."""
        self.controller.kill()
        self.controller = self._controller().start()

    def check_alive(self) -> None:
        self.scheduler.check_alive()
        self.controller.check_alive()

    def logs(self) -> str:
        return (
            f"--- controller log ---\n{self.controller.tail()}\n"
            f"--- scheduler log ---\n{self.scheduler.tail(1500)}"
        )

    def stop(self) -> None:
        for process in (self.controller.process, self.scheduler.process):
            if process is not None and process.poll() is None:
                process.terminate()  # both at once: each takes a moment to shut down
        self.controller.stop()
        self.scheduler.stop()


# --- objects -----------------------------------------------------------------------------------


def task(
    name: str,
    replicas: int = 1,
    *,
    succeed_after: str | None = None,
    fail_after: str | None = None,
    exit_code: int | None = None,
    cpu: str = "50m",
    policies: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A task whose pods run until the test finishes them, unless ``succeed_after`` or
    ``fail_after`` (a duration) asks kwok to do it, with ``exit_code`` on failure."""
    annotations: dict[str, str] = {}
    if succeed_after is not None:
        annotations[SUCCEED_AFTER_ANNOTATION] = succeed_after
    if fail_after is not None:
        annotations[FAIL_AFTER_ANNOTATION] = fail_after
    if exit_code is not None:
        annotations[EXIT_CODE_ANNOTATION] = str(exit_code)
    out: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}},
                    }
                ],
            },
        },
        **fields,
    }
    if policies is not None:
        out["policies"] = policies
    return out


def vcjob(name: str, *tasks: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A Job as stored after Volcano's mutating webhook (queue, maxRetry, minAvailable...)."""
    job = {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": list(tasks) or [task("worker", 2)], **spec},
    }
    return mutate_job(job)


def phase_of(job: dict[str, Any] | None) -> str:
    return str((((job or {}).get("status") or {}).get("state") or {}).get("phase") or "")


def pod_phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


# --- waiting -----------------------------------------------------------------------------------


async def eventually(
    probe: Callable[[], Awaitable[Any]],
    accept: Callable[[Any], bool],
    what: str,
    timeout: float = 20.0,
    on_fail: Callable[[], str] | None = None,
) -> Any:
    """Poll ``probe()`` until ``accept`` takes its value; returns that value, or fails naming
    ``what`` and showing the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            extra = on_fail() if on_fail else ""
            raise AssertionError(
                f"{what} not reached in {timeout:.0f}s; last seen: {value!r}\n{extra}"
            )
        await asyncio.sleep(POLL)


class PhaseLog:
    """The phases each job of a namespace passes through, in order, from a watch."""

    def __init__(self, store: KubeStore, namespace: str) -> None:
        self.store = store
        self.namespace = namespace
        self.phases: dict[str, list[str]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> PhaseLog:
        self._task = asyncio.create_task(self._follow())
        return self

    async def _follow(self) -> None:
        async with contextlib.aclosing(self.store.watch(*JOB, self.namespace)) as events:
            async for event in events:
                name = event.object["metadata"]["name"]
                if event.type == "DELETED":
                    self.jobs.pop(name, None)
                    self.phases.setdefault(name, []).append("<deleted>")
                    continue
                self.jobs[name] = event.object
                phase = phase_of(event.object)
                seen = self.phases.setdefault(name, [])
                if phase and (not seen or seen[-1] != phase):
                    seen.append(phase)

    def of(self, name: str) -> list[str]:
        return list(self.phases.get(name, ()))

    async def phases_of(self, name: str) -> list[str]:
        """:meth:`of` as a probe for :func:`eventually`."""
        return self.of(name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


# --- one test's namespace ----------------------------------------------------------------------


class Live:
    """A namespace of the live cluster, with what a test does there."""

    def __init__(self, store: KubeStore, namespace: str, stack: Stack) -> None:
        self.store = store
        self.ns = namespace
        self.stack = stack
        self.log = PhaseLog(store, namespace)

    # objects

    async def create(self, job: dict[str, Any]) -> dict[str, Any]:
        job = {**job, "metadata": {**job["metadata"], "namespace": self.ns}}
        return await self.store.create(job)

    async def job(self, name: str) -> dict[str, Any]:
        return await self.store.get(*JOB, name, self.ns)

    async def status(self, name: str) -> dict[str, Any]:
        return (await self.job(name)).get("status") or {}

    async def pods(self, job: str | None = None) -> dict[str, dict[str, Any]]:
        pods = (await self.store.list(*POD, self.ns)).items
        return {
            p["metadata"]["name"]: p
            for p in pods
            if job is None or ((p["metadata"].get("annotations") or {}).get(k.JOB_NAME_KEY) == job)
        }

    async def live_pods(self, job: str) -> dict[str, dict[str, Any]]:
        """The job's pods that are not being deleted."""
        return {
            n: p
            for n, p in (await self.pods(job)).items()
            if not p["metadata"].get("deletionTimestamp")
        }

    async def podgroups(self) -> list[dict[str, Any]]:
        return (await self.store.list(*PODGROUP, self.ns)).items

    async def events(self, name: str) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the Events about the object ``name``, oldest first."""
        items = (await self.store.list("v1", "Event", self.ns)).items
        items = [e for e in items if (e.get("involvedObject") or {}).get("name") == name]
        items.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        return [(e.get("type", ""), e.get("reason", ""), e.get("message", "")) for e in items]

    async def times(self, name: str, message: str) -> int:
        """How often the Event ``message`` was recorded about ``name`` (repeats of an Event
        are aggregated into its ``count``, as client-go's recorder does)."""
        items = (await self.store.list("v1", "Event", self.ns)).items
        return sum(
            int(e.get("count") or 1)
            for e in items
            if (e.get("involvedObject") or {}).get("name") == name and e.get("message") == message
        )

    async def reasons(self, name: str) -> list[str]:
        return [reason for _, reason, _ in await self.events(name)]

    async def command(self, job: str, action: str) -> str:
        """A bus.volcano.sh Command as ``vcctl job suspend/resume`` creates it."""
        target = await self.job(job)
        created = await self.store.create(
            {
                "apiVersion": k.BUS_V1ALPHA1,
                "kind": "Command",
                "metadata": {
                    "generateName": f"{job}-{action.lower()}-",
                    "namespace": self.ns,
                    "ownerReferences": [
                        {
                            "apiVersion": k.BATCH_V1ALPHA1,
                            "kind": "Job",
                            "name": job,
                            "uid": target["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "action": action,
                "target": {
                    "apiVersion": k.BATCH_V1ALPHA1,
                    "kind": "Job",
                    "name": job,
                    "uid": target["metadata"]["uid"],
                },
            }
        )
        return created["metadata"]["name"]

    # the kubelet's part

    async def finish(self, pod: str, phase: str, exit_code: int = 0) -> None:
        """Make a running pod ``Succeeded`` or ``Failed`` with ``exit_code``, as a kubelet
        reports a container that exited (through the status subresource)."""
        await eventually(
            lambda: self.store.get(*POD, pod, self.ns),
            lambda p: pod_phase(p) == "Running",
            f"pod {pod} Running before it finishes",
            on_fail=self.stack.logs,
        )
        reason = "Completed" if phase == "Succeeded" else "Error"
        await self.store.patch(
            *POD,
            pod,
            {
                "status": {
                    "phase": phase,
                    "containerStatuses": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "imageID": "kwok://busybox",
                            "ready": False,
                            "started": False,
                            "restartCount": 0,
                            "state": {
                                "terminated": {
                                    "exitCode": exit_code,
                                    "reason": reason,
                                }
                            },
                        }
                    ],
                }
            },
            namespace=self.ns,
            subresource="status",
        )

    async def restart_containers(self, pod: str, restarts: int) -> None:
        """Report ``restarts`` container restarts of a running pod (``restartPolicy`` aside),
        as a kubelet does after a container crashed and came back."""
        await self.store.patch(
            *POD,
            pod,
            {
                "status": {
                    "containerStatuses": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "imageID": "kwok://busybox",
                            "ready": True,
                            "started": True,
                            "restartCount": restarts,
                            "state": {"running": {}},
                        }
                    ]
                }
            },
            namespace=self.ns,
            subresource="status",
        )

    # waiting

    async def wait_phase(self, name: str, phase: str, timeout: float = 20.0) -> dict[str, Any]:
        """Wait for the job's phase; returns the job."""

        async def probe() -> dict[str, Any] | None:
            try:
                return await self.job(name)
            except NotFoundError:
                return None

        def explain() -> str:
            return f"phases seen: {self.log.of(name)}\n{self.stack.logs()}"

        job = await eventually(
            probe, lambda j: phase_of(j) == phase, f"job {name} phase {phase}", timeout, explain
        )
        return job

    async def wait_phases(self, name: str, *phases: str, timeout: float = 20.0) -> dict[str, Any]:
        """Wait until the job has passed through exactly ``phases`` (from its creation, as the
        phase log saw them); returns the job."""

        await eventually(
            lambda: self.log.phases_of(name),
            lambda seen: seen == list(phases),
            f"job {name} phases {list(phases)}",
            timeout,
            self.stack.logs,
        )
        return await self.job(name)

    async def wait_status(
        self, name: str, accept: Callable[[dict[str, Any]], bool], timeout: float = 20.0
    ) -> dict[str, Any]:
        """Wait until ``accept(status)`` holds for the job; returns the job."""
        return await eventually(
            lambda: self.job(name),
            lambda j: accept(j.get("status") or {}),
            f"status of job {name}",
            timeout,
            lambda: f"phases seen: {self.log.of(name)}\n{self.stack.logs()}",
        )

    async def wait_running_pods(self, name: str, count: int, timeout: float = 20.0) -> dict:
        """Wait until exactly ``count`` live pods of the job run and the job's status says so
        (phase Running, ``count`` running), so that what the test does next happens to a
        Running job; returns the pods by name."""

        async def probe() -> dict[str, str]:
            return {n: pod_phase(p) for n, p in (await self.live_pods(name)).items()}

        await eventually(
            probe,
            lambda ps: len(ps) == count and all(v == "Running" for v in ps.values()),
            f"{count} running pods of job {name}",
            timeout,
            self.stack.logs,
        )
        await self.wait_status(
            name,
            lambda s: s.get("state", {}).get("phase") == "Running" and s.get("running") == count,
            timeout,
        )
        return await self.live_pods(name)

    async def wait(
        self,
        probe: Callable[[], Awaitable[Any]],
        accept: Callable[[Any], bool],
        what: str,
        timeout: float = 20.0,
    ) -> Any:
        """:func:`eventually`, with the processes' logs on failure."""
        return await eventually(probe, accept, what, timeout, self.stack.logs)

    async def cleanup(self) -> None:
        """Delete the namespace's jobs, then their pods and PodGroups, so that later tests find
        the nodes and queues free at once (the garbage collector would get there too, but
        only some moments later)."""
        await self.log.stop()
        for kind in (JOB, POD, PODGROUP):
            for obj in (await self.store.list(*kind, self.ns)).items:
                with contextlib.suppress(NotFoundError):
                    await self.store.delete(*kind, obj["metadata"]["name"], self.ns)


# --- fixtures (import stack_fixture and live_fixture into a test module) -------------------------


@pytest.fixture(name="stack", scope="module")
def stack_fixture(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The scheduler and controller of the module, on the shared control plane."""
    control_plane.apply_manifests(build_crds())
    started = Stack(control_plane, tmp_path_factory.mktemp("job-lifecycle")).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(name="live")
async def live_fixture(
    control_plane: ControlPlane, stack: Stack, request: pytest.FixtureRequest
) -> AsyncIterator[Live]:
    """A fresh namespace named after the test, its phase log following."""
    store = KubeStore(KubeConfig.load(str(control_plane.kubeconfig_path)))
    name = "jl-" + request.node.name.removeprefix("test_").replace("_", "-")[:40].lower()
    name = f"{name.rstrip('-')}-{uuid.uuid4().hex[:4]}"
    await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    ns = Live(store, name, stack)
    ns.log.start()
    try:
        yield ns
    finally:
        try:
            await ns.cleanup()
        finally:
            await store.close()
    stack.check_alive()
