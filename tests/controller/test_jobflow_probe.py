"""JobFlow ``dependsOn.probe`` on a memory store: the test plays the job controller (job status,
pods with their IPs); HTTP and TCP probes reach real servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from click.testing import CliRunner

from stromboli.core.api import constants as k
from stromboli.core.cli import main
from stromboli.core.controller.jobflow import PROBE_PERIOD, JobFlowController

from .test_jobflow import JOB, Flows, jobflow, template

POD = ("v1", "Pod")


def probed(probe: dict[str, Any], target: str = "a", name: str = "b") -> dict[str, Any]:
    return {"name": name, "dependsOn": {"targets": [target], "probe": probe}}


async def flows(*flow_specs: dict[str, Any], network: bool | None = True) -> Flows:
    f = Flows()
    f.controller = JobFlowController(f.store, f.clock, network_probes=network)
    return await f.setup(template("a"), template("b"), jobflow("flow", {"name": "a"}, *flow_specs))


async def set_task(f: Flows, job_name: str, phase: str, ip: str | None = "127.0.0.1") -> None:
    """The job controller's part: the job's status counts and its pod ``<job>-worker-0``."""
    job = await f.store.get(*JOB, job_name, "default")
    job["status"] = {
        "state": {"phase": "Running" if phase == "Running" else "Pending"},
        "taskStatusCount": {"worker": {"phase": {phase: 1}}},
    }
    await f.store.update_status(job)
    name = f"{job_name}-worker-0"
    try:
        pod = await f.store.get(*POD, name, "default")
    except Exception:
        pod = await f.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "labels": {k.JOB_NAME_KEY: job_name, k.TASK_SPEC_KEY: "worker"},
                    "ownerReferences": [
                        {
                            "apiVersion": k.BATCH_V1ALPHA1,
                            "kind": "Job",
                            "name": job_name,
                            "uid": job["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            }
        )
    pod["status"] = {"phase": phase, **({"podIP": ip} if ip else {})}
    await f.store.update_status(pod)


async def settle(f: Flows) -> list[str]:
    """Reconcile, let the checks in flight answer, reconcile again; the flow's job names."""
    await f.controller.step()
    await f.controller.wait_probes()
    await f.controller.step()
    return sorted(await f.jobs())


async def messages(f: Flows, reason: str) -> list[str]:
    listed = await f.store.list("v1", "Event")
    return [e["message"] for e in listed.items if e["reason"] == reason]


class Server:
    """An HTTP endpoint standing for the target task's pod; its answer can be changed."""

    def __init__(self) -> None:
        self.status = 503
        self.delay = 0.0
        self.seen: list[tuple[str, str | None]] = []
        self.port = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.path, request.headers.get("X-Probe")))
        await asyncio.sleep(self.delay)
        return web.Response(status=self.status)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    app = web.Application()
    app.router.add_get("/{tail:.*}", srv.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    srv.port = runner.addresses[0][1]
    yield srv
    await runner.cleanup()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- taskStatusList ------------------------------------------------------------------------------


async def test_task_status_probe_starts_the_flow_once_the_task_runs() -> None:
    f = await flows(probed({"taskStatusList": [{"taskName": "worker", "phase": "Running"}]}))
    assert list(await f.jobs()) == ["flow-a"]
    await set_task(f, "flow-a", "Pending")
    await f.controller.step()
    assert list(await f.jobs()) == ["flow-a"]
    assert await messages(f, "WaitingForProbe") == [
        "flow b: task worker of job flow-a: 0/1 pods Running"
    ]
    await set_task(f, "flow-a", "Running")
    await f.controller.step()
    # The probe replaces waiting for completion: flow-a still runs.
    assert sorted(await f.jobs()) == ["flow-a", "flow-b"]


async def test_probe_naming_a_task_no_target_has_waits_and_says_so() -> None:
    f = await flows(probed({"taskStatusList": [{"taskName": "ps", "phase": "Running"}]}))
    await set_task(f, "flow-a", "Running")
    await f.controller.step()
    assert list(await f.jobs()) == ["flow-a"]
    assert await messages(f, "WaitingForProbe") == ["flow b: no target job has a task ps"]


async def test_invalid_probe_is_reported_with_its_field() -> None:
    f = await flows(probed({"taskStatusList": [{"taskName": "worker", "phase": "Done"}]}))
    await set_task(f, "flow-a", "Running")
    await f.controller.step()
    assert list(await f.jobs()) == ["flow-a"]
    (message,) = await messages(f, "InvalidProbe")
    assert message.startswith("flow b: spec.flows[1].dependsOn.probe.taskStatusList[0].phase:")
    assert "'Done'" in message


async def test_http_probe_without_a_port_is_invalid() -> None:
    f = await flows(probed({"httpGetList": [{"taskName": "worker", "path": "/"}]}))
    (message,) = await messages(f, "InvalidProbe")
    assert "spec.flows[1].dependsOn.probe.httpGetList[0].port" in message


# --- httpGetList -------------------------------------------------------------------------------


async def test_http_probe_retries_until_the_pod_answers(server: Server) -> None:
    http = {
        "taskName": "worker",
        "port": server.port,
        "path": "/healthz",
        "httpHeader": {"name": "X-Probe", "value": "flow"},
    }
    f = await flows(probed({"httpGetList": [http]}))
    await set_task(f, "flow-a", "Pending", ip=None)
    assert await settle(f) == ["flow-a"]
    assert server.seen == []  # no IP yet, nothing to reach
    assert await messages(f, "WaitingForProbe") == [
        "flow b: task worker of job flow-a: 0/1 pods",
        "flow b: pod flow-a-worker-0 has no IP yet",
    ]

    await set_task(f, "flow-a", "Running")
    f.clock.advance(PROBE_PERIOD)
    assert await settle(f) == ["flow-a"]
    assert server.seen == [("/healthz", "flow")]
    assert (await messages(f, "WaitingForProbe"))[-1] == (
        f"flow b: httpGet /healthz on pod flow-a-worker-0 port {server.port}: HTTP 503"
    )
    # Not retried before the period is up...
    assert await settle(f) == ["flow-a"]
    assert len(server.seen) == 1
    assert f.controller.next_wakeup() == pytest.approx(f.clock.monotonic() + PROBE_PERIOD)
    # ...then retried, and the pod now answers.
    server.status = 200
    f.clock.advance(PROBE_PERIOD)
    assert await settle(f) == ["flow-a", "flow-b"]
    assert len(server.seen) == 2
    assert f.controller.next_wakeup() is None


async def test_slow_probe_holds_up_no_other_flow(server: Server) -> None:
    server.status, server.delay = 200, 3.0
    slow = probed({"httpGetList": [{"taskName": "worker", "port": server.port}]})
    quick = probed({"taskStatusList": [{"taskName": "worker", "phase": "Running"}]}, name="c")
    f = Flows()
    f.controller = JobFlowController(f.store, f.clock, network_probes=True)
    await f.setup(template("a"), template("b"), template("c"))
    await f.store.create(jobflow("flow", {"name": "a"}, slow, quick))
    await f.controller.step()
    await set_task(f, "flow-a", "Running")
    loop = asyncio.get_running_loop()
    started = loop.time()
    await f.controller.step()
    assert loop.time() - started < 0.5  # the step did not wait for the slow pod
    assert sorted(await f.jobs()) == ["flow-a", "flow-c"]
    await f.controller.wait_probes()  # the check times out after PROBE_TIMEOUT
    await f.controller.step()
    assert sorted(await f.jobs()) == ["flow-a", "flow-c"]
    assert "TimeoutError" in (await messages(f, "WaitingForProbe"))[-1]


# --- tcpSocketList -----------------------------------------------------------------------------


async def test_tcp_probe_passes_when_the_port_accepts() -> None:
    accepted: list[int] = []

    async def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        f = await flows(probed({"tcpSocketList": [{"taskName": "worker", "port": port}]}))
        await set_task(f, "flow-a", "Running")
        assert await settle(f) == ["flow-a", "flow-b"]
        assert accepted == [1]
    finally:
        listener.close()
        await listener.wait_closed()


async def test_tcp_probe_on_a_closed_port_waits() -> None:
    port = free_port()
    f = await flows(probed({"tcpSocketList": [{"taskName": "worker", "port": port}]}))
    await set_task(f, "flow-a", "Running")
    assert await settle(f) == ["flow-a"]
    message = (await messages(f, "WaitingForProbe"))[-1]
    assert message.startswith(f"flow b: tcpSocket on pod flow-a-worker-0 port {port}:")


async def test_probe_and_task_status_must_both_hold(server: Server) -> None:
    server.status = 200
    probe = {
        "httpGetList": [{"taskName": "worker", "port": server.port}],
        "taskStatusList": [{"taskName": "worker", "phase": "Succeeded"}],
    }
    f = await flows(probed(probe))
    await set_task(f, "flow-a", "Running")
    assert await settle(f) == ["flow-a"]
    assert server.seen == []  # the task status is checked first, without the network


# --- simulator (virtual clock: nothing to reach) ------------------------------------------


async def test_on_a_virtual_clock_network_probes_pass_once_the_pods_run() -> None:
    port = free_port()  # nothing listens: reaching it would fail
    f = await flows(
        probed({"httpGetList": [{"taskName": "worker", "port": port}]}),
        network=None,
    )
    assert f.controller.network_probes is False
    await set_task(f, "flow-a", "Pending")
    await f.controller.step()
    assert list(await f.jobs()) == ["flow-a"]
    assert await messages(f, "WaitingForProbe") == [
        "flow b: task worker of job flow-a: 0/1 pods Running"
    ]
    await set_task(f, "flow-a", "Running")
    await f.controller.step()
    assert sorted(await f.jobs()) == ["flow-a", "flow-b"]


SIMULATED_FLOW = """
apiVersion: v1
kind: Node
metadata: {name: node-0}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: server}
spec:
  schedulerName: volcano
  minAvailable: 2
  tasks:
    - name: api
      replicas: 2
      template:
        metadata: {annotations: {sim.stromboli.dev/runtime: 300s}}
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobTemplate
metadata: {name: client}
spec:
  schedulerName: volcano
  minAvailable: 1
  tasks:
    - name: main
      replicas: 1
      template:
        metadata: {annotations: {sim.stromboli.dev/runtime: 30s}}
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: flow.volcano.sh/v1alpha1
kind: JobFlow
metadata: {name: serve}
spec:
  flows:
    - name: server
    - name: client
      dependsOn:
        targets: [server]
        probe:
          httpGetList: [{taskName: api, port: 8080, path: /ready}]
"""


def test_simulated_http_probe_starts_the_client_while_the_server_runs(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(SIMULATED_FLOW)
    result = CliRunner().invoke(main, ["simulate", str(path), "--output", "json"])
    assert result.exit_code == 0, result.output
    items = orjson.loads(result.stdout)["items"]
    jobs = {o["metadata"]["name"]: o for o in items if o["kind"] == "Job"}
    pods = {o["metadata"]["name"]: o for o in items if o["kind"] == "Pod"}
    server, client = jobs["serve-server"], jobs["serve-client"]
    client_created = client["metadata"]["creationTimestamp"]
    started = max(pods[f"serve-server-api-{i}"]["status"]["startTime"] for i in (0, 1))
    assert started <= client_created < server["status"]["state"]["lastTransitionTime"]
    assert client["status"]["state"]["phase"] == "Completed"
