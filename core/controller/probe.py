"""JobFlow ``dependsOn.probe``: readiness checks on the tasks of a flow's target jobs.

Volcano's API defines the probe (its design calls it a "probe type dependency") but its
controller does not act on it. Stromboli gives it this meaning: a flow with a probe starts as
soon as every target's job exists and every probe entry passes, without waiting for the
targets to complete (a finished pod serves nothing, so "Completed and probed" could never
hold). Each entry names a task; it applies to every target job that has a task of that name,
and to all of that task's pods (at least its ``replicas``):

- ``taskStatusList[{taskName, phase}]``: every pod of the task is in ``phase`` (a pod phase),
  read from the job's ``status.taskStatusCount``;
- ``httpGetList[{taskName, port, path, httpHeader}]``: a GET to ``http://<podIP>:<port><path>``
  answers 200-399 within :data:`PROBE_TIMEOUT` seconds;
- ``tcpSocketList[{taskName, port}]``: ``<podIP>:<port>`` accepts a connection in time.

The checks here are pure, except :func:`reach`, which does the network part; the controller
runs that in the background and retries it (see :mod:`.jobflow`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import aiohttp

from stromboli.core.api.constants import PodPhase

#: Seconds a single HTTP or TCP check may take.
PROBE_TIMEOUT: Final = 1.0
POD_PHASES: Final = frozenset(str(p) for p in PodPhase)


class ProbeSpecError(ValueError):
    """A probe entry that cannot be checked; the message names the field."""


@dataclass(frozen=True, slots=True)
class NetworkCheck:
    """One HTTP or TCP check of one pod."""

    kind: str  # "http" or "tcp"
    pod: str
    ip: str
    port: int
    path: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        if self.kind == "http":
            return f"httpGet {self.path or '/'} on pod {self.pod} port {self.port}"
        return f"tcpSocket on pod {self.pod} port {self.port}"


@dataclass(slots=True)
class ProbeEntries:
    """A flow's probe, read and checked against its field paths."""

    http: list[Mapping[str, Any]] = field(default_factory=list)
    tcp: list[Mapping[str, Any]] = field(default_factory=list)
    status: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def network(self) -> bool:
        return bool(self.http or self.tcp)

    def tasks(self) -> set[str]:
        return {str(e["taskName"]) for e in (*self.http, *self.tcp, *self.status)}


def parse_probe(probe: Mapping[str, Any] | None, where: str) -> ProbeEntries | None:
    """The probe at ``where`` (e.g. ``spec.flows[1].dependsOn.probe``); None when it has no
    entries; :class:`ProbeSpecError` naming the field when an entry is unusable."""
    if not probe:
        return None
    if not isinstance(probe, Mapping):
        raise ProbeSpecError(f"{where}: must be an object")
    entries = ProbeEntries()
    for list_name, target, needs_port in (
        ("httpGetList", entries.http, True),
        ("tcpSocketList", entries.tcp, True),
        ("taskStatusList", entries.status, False),
    ):
        items = probe.get(list_name) or []
        if not isinstance(items, list):
            raise ProbeSpecError(f"{where}.{list_name}: must be a list")
        for i, item in enumerate(items):
            path = f"{where}.{list_name}[{i}]"
            if not isinstance(item, Mapping) or not item.get("taskName"):
                raise ProbeSpecError(f"{path}.taskName: required")
            if needs_port:
                port = item.get("port")
                if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
                    raise ProbeSpecError(f"{path}.port: must be a port number, got {port!r}")
            else:
                phase = item.get("phase")
                if phase not in POD_PHASES:
                    raise ProbeSpecError(
                        f"{path}.phase: must be one of {', '.join(sorted(POD_PHASES))}, "
                        f"got {phase!r}"
                    )
            target.append(item)
    if not (entries.http or entries.tcp or entries.status):
        return None
    return entries


def task_replicas(job: Mapping[str, Any]) -> dict[str, int]:
    return {
        str(t.get("name")): int(t.get("replicas") or 0)
        for t in (job.get("spec") or {}).get("tasks") or ()
        if isinstance(t, Mapping)
    }


def jobs_with_task(jobs: Iterable[Mapping[str, Any]], task: str) -> list[Mapping[str, Any]]:
    return [job for job in jobs if task in task_replicas(job)]


def _job_name(job: Mapping[str, Any]) -> str:
    return str(job["metadata"]["name"])


def check_task_status(entries: ProbeEntries, jobs: Sequence[Mapping[str, Any]]) -> str:
    """'' when every ``taskStatusList`` entry holds, else why not."""
    for entry in entries.status:
        task, phase = str(entry["taskName"]), str(entry["phase"])
        targets = jobs_with_task(jobs, task)
        if not targets:
            return f"no target job has a task {task}"
        for job in targets:
            replicas = task_replicas(job)[task]
            counts = ((job.get("status") or {}).get("taskStatusCount") or {}).get(task) or {}
            in_phase = int((counts.get("phase") or {}).get(phase) or 0)
            if in_phase < max(replicas, 1):
                return f"task {task} of job {_job_name(job)}: {in_phase}/{replicas} pods {phase}"
    return ""


def network_checks(
    entries: ProbeEntries,
    jobs: Sequence[Mapping[str, Any]],
    pods_of: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]],
) -> tuple[list[NetworkCheck], str]:
    """The HTTP/TCP checks to make, given each (job, task)'s pods; or '' checks and why they
    cannot be made yet (too few pods, a pod without an IP)."""
    checks: list[NetworkCheck] = []
    for kind, items in (("http", entries.http), ("tcp", entries.tcp)):
        for entry in items:
            task = str(entry["taskName"])
            targets = jobs_with_task(jobs, task)
            if not targets:
                return [], f"no target job has a task {task}"
            for job in targets:
                pods = pods_of.get((_job_name(job), task)) or ()
                replicas = task_replicas(job)[task]
                if len(pods) < max(replicas, 1):
                    return [], f"task {task} of job {_job_name(job)}: {len(pods)}/{replicas} pods"
                for pod in pods:
                    name = str(pod["metadata"]["name"])
                    ip = (pod.get("status") or {}).get("podIP")
                    if not ip:
                        return [], f"pod {name} has no IP yet"
                    checks.append(
                        NetworkCheck(
                            kind,
                            name,
                            str(ip),
                            int(entry["port"]),
                            str(entry.get("path") or ""),
                            _headers(entry.get("httpHeader")),
                        )
                    )
    return checks, ""


def pods_running(
    entries: ProbeEntries,
    jobs: Sequence[Mapping[str, Any]],
) -> str:
    """The simulator's stand-in for the network checks: '' once every probed task's pods all
    run (a simulated container counts as serving), else why not."""
    running = ProbeEntries(
        status=[
            {"taskName": e["taskName"], "phase": str(PodPhase.RUNNING)}
            for e in (*entries.http, *entries.tcp)
        ]
    )
    return check_task_status(running, jobs)


def _headers(header: Any) -> tuple[tuple[str, str], ...]:
    """``httpHeader`` is one ``{name, value}`` in Volcano's API; a list of them is accepted."""
    items = header if isinstance(header, list) else [header] if header else []
    return tuple(
        (str(h["name"]), str(h.get("value") or ""))
        for h in items
        if isinstance(h, Mapping) and h.get("name")
    )


async def reach(checks: Sequence[NetworkCheck], timeout: float = PROBE_TIMEOUT) -> str:
    """Run ``checks`` concurrently; '' when all pass, else the first failure."""
    if not checks:
        return ""
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=client_timeout) as session:
        failures = await asyncio.gather(*(_reach_one(session, c, timeout) for c in checks))
    return next((f for f in failures if f), "")


async def _reach_one(session: aiohttp.ClientSession, check: NetworkCheck, timeout: float) -> str:
    host = f"[{check.ip}]" if ":" in check.ip else check.ip
    try:
        if check.kind == "tcp":
            _reader, writer = await asyncio.wait_for(
                asyncio.open_connection(check.ip, check.port), timeout
            )
            writer.close()
            await writer.wait_closed()
            return ""
        path = check.path if check.path.startswith("/") else f"/{check.path}"
        url = f"http://{host}:{check.port}{path}"
        async with session.get(url, headers=dict(check.headers), allow_redirects=False) as resp:
            if 200 <= resp.status < 400:
                return ""
            return f"{check.describe()}: HTTP {resp.status}"
    except (TimeoutError, OSError, aiohttp.ClientError) as err:
        return f"{check.describe()}: {type(err).__name__} {err}".rstrip()
