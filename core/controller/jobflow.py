"""The JobFlow controller: a DAG of vcjobs instantiated from JobTemplates.

For each flow of a JobFlow, the job ``<jobflow>-<flow>`` is created from the JobTemplate
``<flow>`` (same namespace) once every job of ``dependsOn.targets`` is ``Completed``. Created
jobs carry ``volcano.sh/createdByJobTemplate`` and ``volcano.sh/createdByJobFlow`` as labels
and annotations, and the JobFlow as controller ownerReference. The JobFlow's status lists its
jobs by phase and sums them up in ``state.phase``: Pending, Running once any job runs or
completed, Failed once any failed or was terminated, Succeed once every flow's job completed.
With ``jobRetainPolicy: delete`` the jobs are deleted once the flow has succeeded. Each
JobTemplate lists the jobs made from it in ``status.jobDependsOnList``.

A flow with ``dependsOn.probe`` starts instead once its targets' jobs exist and every probe
entry passes (see :mod:`.probe`; Volcano defines the probe but does not act on it).
``taskStatusList`` is read from the target jobs' status. ``httpGetList`` and ``tcpSocketList``
reach the target tasks' pod IPs in background tasks, so a slow pod holds up no other flow; a
failed check is retried every :data:`PROBE_PERIOD` seconds. On a virtual clock (the simulator)
nothing can be reached, so there a network probe passes once every pod of its task is Running.
``patch`` is not acted on (Volcano's controller ignores it too).
Same ``start/step/next_wakeup/run`` shape as the vcjob controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from stromboli.core.api import constants as k
from stromboli.core.api.keys import Key, object_key
from stromboli.core.clock import Clock, VirtualClock
from stromboli.core.cluster.errors import AlreadyExistsError, ConflictError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.cluster.writes import put_status
from stromboli.core.controller.metrics import ControllerMetrics
from stromboli.core.controller.probe import (
    NetworkCheck,
    ProbeEntries,
    ProbeSpecError,
    check_task_status,
    network_checks,
    parse_probe,
    pods_running,
    reach,
)
from stromboli.core.controller.reconciler import JobMutator, Reconciler, is_newer
from stromboli.core.events import EventRecorder

log = logging.getLogger(__name__)

COMPONENT: Final = "jobflow-controller"
JOBFLOW: Final = (k.FLOW_V1ALPHA1, "JobFlow")
JOBTEMPLATE: Final = (k.FLOW_V1ALPHA1, "JobTemplate")
JOB: Final = (k.BATCH_V1ALPHA1, "Job")
POD: Final = (k.CORE_V1, "Pod")
#: Seconds between two network probe attempts of a flow whose last one failed.
PROBE_PERIOD: Final = 5.0
PROBING: Final = "probing"

RUNNING: Final = frozenset({"Running", "Restarting", "Completing"})
TERMINATED: Final = frozenset({"Terminated", "Terminating", "Aborted", "Aborting"})
PENDING: Final = frozenset({"", "Pending"})


def _phase(job: Mapping[str, Any]) -> str:
    return str(((job.get("status") or {}).get("state") or {}).get("phase") or "")


def flow_job_name(jobflow: str, flow: str) -> str:
    return f"{jobflow}-{flow}"


@dataclass(slots=True)
class _ProbeRun:
    """The network probe of one waiting flow: the check in flight, or its last answer ('' when
    it passed, else why not) and when to try again. ``reached``: the answer came from the
    pods (kept until the retry time), not from their not being there yet (looked at again on
    every sync)."""

    task: asyncio.Task[None] | None = None
    result: str | None = None
    retry_at: float = 0.0
    reached: bool = False


class JobFlowController(Reconciler[Key]):
    """See the module docstring. ``mutate_job`` is applied to each job before it is created;
    ``metrics`` counts flows that succeed or fail; ``network_probes`` makes HTTP/TCP probes
    reach pods (default: unless the clock is virtual).
    """

    noun = "jobflow"

    def __init__(
        self,
        store: ClusterStore,
        clock: Clock,
        recorder: EventRecorder | None = None,
        *,
        mutate_job: JobMutator | None = None,
        metrics: ControllerMetrics | None = None,
        network_probes: bool | None = None,
    ) -> None:
        super().__init__(store, clock, [JOBFLOW, JOBTEMPLATE, JOB], recorder, COMPONENT, mutate_job)
        self.metrics = metrics
        self.network_probes = (
            not isinstance(clock, VirtualClock) if network_probes is None else network_probes
        )
        self.flows: dict[Key, dict[str, Any]] = {}
        self.templates: dict[Key, dict[str, Any]] = {}
        self.jobs: dict[Key, dict[str, Any]] = {}
        self._probe_runs: dict[tuple[Key, str], _ProbeRun] = {}
        #: What each waiting flow was last reported (as an Event) to wait for.
        self._probe_notes: dict[tuple[Key, str], str] = {}

    # --- intake ------------------------------------------------------------------------------

    def _seen(self, kind: tuple[str, str], event_type: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        cache = {JOBFLOW: self.flows, JOBTEMPLATE: self.templates, JOB: self.jobs}[kind]
        if event_type == "DELETED":
            cache.pop(key, None)
            if kind == JOBFLOW:
                self._drop_probes(key)
        elif is_newer(obj, cache.get(key)):
            cache[key] = obj
        else:
            return
        if kind == JOBFLOW:
            if event_type != "DELETED":
                self._mark(key)
        elif kind == JOB:
            owner = _owner_flow(obj)
            if owner:
                self._mark((key[0], owner))
        else:  # a template appeared or changed: flows waiting for it may go on
            for flow_key, flow in self.flows.items():
                if flow_key[0] == key[0] and key[1] in _flow_names(flow):
                    self._mark(flow_key)

    # --- reconcile ---------------------------------------------------------------------------

    async def _sync(self, key: Key) -> None:
        jobflow = self.flows.get(key)
        if jobflow is None or jobflow["metadata"].get("deletionTimestamp"):
            return
        namespace, name = key
        spec = jobflow.get("spec") or {}
        flows = spec.get("flows") or []
        status = copy.deepcopy(jobflow.get("status") or {})
        if ((status.get("state") or {}).get("phase")) == k.JobFlowPhase.SUCCEED:
            await self._retain(jobflow)
            return
        jobs = {
            flow["name"]: self.jobs.get((namespace, flow_job_name(name, flow["name"])))
            for flow in flows
        }
        for index, flow in enumerate(flows):
            if jobs[flow["name"]] is not None:
                self._drop_probe((key, flow["name"]))
                continue
            if await self._dependencies_met(jobflow, index, flow, jobs):
                jobs[flow["name"]] = await self._create_job(jobflow, flow["name"])
        status = self._status(status, flows, jobs)
        await self._write_status(jobflow, status)
        if status["state"]["phase"] == k.JobFlowPhase.SUCCEED:
            await self._retain(self.flows.get(key, jobflow))

    async def _dependencies_met(
        self,
        jobflow: dict[str, Any],
        index: int,
        flow: Mapping[str, Any],
        jobs: Mapping[str, dict[str, Any] | None],
    ) -> bool:
        """Every target completed; or, with a probe, every target's job exists and the probe
        passes."""
        depends = flow.get("dependsOn") or {}
        targets = [jobs.get(t) for t in depends.get("targets") or []]
        try:
            probe = parse_probe(depends.get("probe"), f"spec.flows[{index}].dependsOn.probe")
        except ProbeSpecError as err:
            await self._note(jobflow, flow["name"], "Warning", "InvalidProbe", str(err))
            return False
        if probe is None:
            return all(job is not None and _phase(job) == "Completed" for job in targets)
        present = [job for job in targets if job is not None]
        if len(present) < len(targets):
            return False
        why = check_task_status(probe, present)
        if not why and probe.network:
            if self.network_probes:
                why = await self._network_probe(object_key(jobflow), flow["name"], probe, present)
            else:
                why = pods_running(probe, present)
        if why and why != PROBING:
            await self._note(jobflow, flow["name"], "Normal", "WaitingForProbe", why)
        return not why

    # --- network probes ----------------------------------------------------------------------

    async def _network_probe(
        self, key: Key, flow: str, probe: ProbeEntries, jobs: Sequence[Mapping[str, Any]]
    ) -> str:
        """'' once the flow's HTTP/TCP checks passed; otherwise starts them in the background
        (at most one run per flow, none before the retry time) and says why not yet."""
        run = self._probe_runs.setdefault((key, flow), _ProbeRun())
        if run.task is not None:
            return PROBING
        if run.result == "":
            return ""
        if run.reached and run.result and self.clock.monotonic() < run.retry_at:
            return run.result
        checks, why = network_checks(probe, jobs, await self._task_pods(key[0], probe, jobs))
        if why:
            run.result, run.retry_at = why, self.clock.monotonic() + PROBE_PERIOD
            run.reached = False
            return why
        run.task = asyncio.create_task(self._reach(key, flow, run, checks))
        return PROBING

    async def _reach(self, key: Key, flow: str, run: _ProbeRun, checks: list[NetworkCheck]) -> None:
        try:
            result = await reach(checks)
        except Exception as err:  # an unexpected client error must not end the flow's probing
            log.exception("jobflow %s/%s: probe of flow %s failed", *key, flow)
            result = f"probe error: {err}"
        run.task = None
        run.result, run.retry_at = result, self.clock.monotonic() + PROBE_PERIOD
        run.reached = True
        if self._probe_runs.get((key, flow)) is run:
            self._mark(key)

    async def _task_pods(
        self, namespace: str, probe: ProbeEntries, jobs: Sequence[Mapping[str, Any]]
    ) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Live pods of each probed (job, task), listed on demand: this controller does not
        watch pods, which would cost every pod event of the cluster."""
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for job in jobs:
            job_name = str(job["metadata"]["name"])
            uid = job["metadata"].get("uid")
            tasks = {t.get("name") for t in (job.get("spec") or {}).get("tasks") or ()}
            for task in probe.tasks() & tasks:
                listed = await self.store.list(
                    *POD,
                    namespace,
                    label_selector=f"{k.JOB_NAME_KEY}={job_name},{k.TASK_SPEC_KEY}={task}",
                )
                out[(job_name, task)] = [
                    pod
                    for pod in listed.items
                    if not pod["metadata"].get("deletionTimestamp")
                    and any(
                        ref.get("uid") == uid
                        for ref in pod["metadata"].get("ownerReferences") or ()
                    )
                ]
        return out

    async def _collect_due(self) -> None:
        now = self.clock.monotonic()
        for (key, _flow), run in self._probe_runs.items():
            if run.task is None and run.result and run.retry_at <= now:
                self._mark(key)

    def next_wakeup(self) -> float | None:
        due = [r.retry_at for r in self._probe_runs.values() if r.task is None and r.result]
        return min(due, default=None)

    async def wait_probes(self) -> None:
        """Wait for the network checks in flight (tests; a live loop is woken by them)."""
        tasks = [r.task for r in self._probe_runs.values() if r.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    def _drop_probe(self, flow_key: tuple[Key, str]) -> None:
        self._probe_notes.pop(flow_key, None)
        run = self._probe_runs.pop(flow_key, None)
        if run is not None and run.task is not None:
            run.task.cancel()

    def _drop_probes(self, key: Key) -> None:
        for flow_key in [fk for fk in (*self._probe_runs, *self._probe_notes) if fk[0] == key]:
            self._drop_probe(flow_key)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            tasks = [r.task for r in self._probe_runs.values() if r.task is not None]
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _note(
        self, jobflow: dict[str, Any], flow: str, kind: str, reason: str, message: str
    ) -> None:
        """An Event about what a flow waits for, once per change of it."""
        flow_key = (object_key(jobflow), flow)
        if self._probe_notes.get(flow_key) == message:
            return
        self._probe_notes[flow_key] = message
        await self._event(jobflow, kind, reason, f"flow {flow}: {message}")

    def _status(
        self,
        old: dict[str, Any],
        flows: list[dict[str, Any]],
        jobs: Mapping[str, dict[str, Any] | None],
    ) -> dict[str, Any]:
        lists: dict[str, list[str]] = {
            "pendingJobs": [],
            "runningJobs": [],
            "failedJobs": [],
            "completedJobs": [],
            "terminatedJobs": [],
            "unKnowJobs": [],
        }
        statuses = []
        conditions: dict[str, Any] = {}
        for flow in flows:
            job = jobs.get(flow["name"])
            if job is None:
                continue
            job_name = job["metadata"]["name"]
            phase = _phase(job)
            if phase == "Completed":
                lists["completedJobs"].append(job_name)
            elif phase == "Failed":
                lists["failedJobs"].append(job_name)
            elif phase in TERMINATED:
                lists["terminatedJobs"].append(job_name)
            elif phase in RUNNING:
                lists["runningJobs"].append(job_name)
            elif phase in PENDING:
                lists["pendingJobs"].append(job_name)
            else:
                lists["unKnowJobs"].append(job_name)
            job_status = job.get("status") or {}
            entry: dict[str, Any] = {
                "name": job_name,
                "state": phase or "Pending",
                "startTimestamp": job["metadata"].get("creationTimestamp"),
                "restartCount": int(job_status.get("retryCount") or 0),
            }
            ended = (job_status.get("state") or {}).get("lastTransitionTime")
            if phase in {"Completed", "Failed"} | TERMINATED and ended:
                entry["endTimestamp"] = ended
            statuses.append({key: value for key, value in entry.items() if value is not None})
            condition: dict[str, Any] = {
                "phase": phase or "Pending",
                "createTime": job["metadata"].get("creationTimestamp"),
            }
            if job_status.get("taskStatusCount"):
                condition["taskStatusCount"] = job_status["taskStatusCount"]
            conditions[job_name] = {key: v for key, v in condition.items() if v is not None}
        if lists["failedJobs"] or lists["terminatedJobs"]:
            phase = k.JobFlowPhase.FAILED
        elif flows and len(lists["completedJobs"]) == len(flows):
            phase = k.JobFlowPhase.SUCCEED
        elif lists["runningJobs"] or lists["completedJobs"]:
            phase = k.JobFlowPhase.RUNNING
        else:
            phase = k.JobFlowPhase.PENDING
        status: dict[str, Any] = {key: value for key, value in lists.items() if value}
        if statuses:
            status["jobStatusList"] = statuses
        if conditions:
            status["conditions"] = conditions
        status["state"] = {"phase": str(phase)}
        return status

    async def _retain(self, jobflow: dict[str, Any]) -> None:
        """With ``jobRetainPolicy: delete``, delete the flow's jobs once it has succeeded."""
        if (jobflow.get("spec") or {}).get("jobRetainPolicy") != k.RetainPolicy.DELETE:
            return
        namespace, name = object_key(jobflow)
        marker = f"{namespace}.{name}"
        for (ns, job_name), job in list(self.jobs.items()):
            annotations = job["metadata"].get("annotations") or {}
            if ns != namespace or annotations.get(k.CREATED_BY_JOB_FLOW_KEY) != marker:
                continue
            try:
                await self.store.delete(*JOB, job_name, namespace, propagation="Background")
            except NotFoundError:
                pass
            else:
                self.writes += 1
            self.jobs.pop((ns, job_name), None)

    # --- writes ------------------------------------------------------------------------------

    async def _create_job(self, jobflow: dict[str, Any], flow: str) -> dict[str, Any] | None:
        namespace, name = object_key(jobflow)
        template = self.templates.get((namespace, flow))
        if template is None:
            await self._event(
                jobflow, "Warning", "JobTemplateNotFound", f"JobTemplate {flow} not found"
            )
            return None
        tmeta = template.get("metadata") or {}
        marks = {
            k.CREATED_BY_JOB_TEMPLATE_KEY: f"{namespace}.{flow}",
            k.CREATED_BY_JOB_FLOW_KEY: f"{namespace}.{name}",
        }
        job: dict[str, Any] = {
            "apiVersion": k.BATCH_V1ALPHA1,
            "kind": "Job",
            "metadata": {
                "name": flow_job_name(name, flow),
                "namespace": namespace,
                "labels": {**(tmeta.get("labels") or {}), **marks},
                "annotations": {**(tmeta.get("annotations") or {}), **marks},
                "ownerReferences": [
                    {
                        "apiVersion": k.FLOW_V1ALPHA1,
                        "kind": "JobFlow",
                        "name": name,
                        "uid": jobflow["metadata"].get("uid", ""),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": copy.deepcopy(template.get("spec") or {}),
        }
        if self.mutate_job is not None:
            job = self.mutate_job(job)
        try:
            created = await self.store.create(job)
        except AlreadyExistsError:
            try:
                return await self.store.get(*JOB, job["metadata"]["name"], namespace)
            except NotFoundError:
                return None
        except Exception as err:
            await self._event(jobflow, "Warning", "FailedCreate", f"Error creating job: {err}")
            return None
        self.writes += 1
        self.jobs[object_key(created)] = created
        await self._note_template(template, created["metadata"]["name"])
        await self._event(
            jobflow, "Normal", "Created", f"Created job {created['metadata']['name']}"
        )
        return created

    async def _note_template(self, template: dict[str, Any], job_name: str) -> None:
        """List the job in the template's ``status.jobDependsOnList`` (as the jobtemplate
        controller does), against the template's latest version."""

        def listed(current: dict[str, Any]) -> dict[str, Any] | None:
            names = list((current.get("status") or {}).get("jobDependsOnList") or [])
            if job_name in names:
                return None
            return {**(current.get("status") or {}), "jobDependsOnList": [*names, job_name]}

        try:
            written = await put_status(self.store, template, listed)
        except ConflictError:
            return  # the template kept changing under us; listing it is best effort
        if written is None:
            return
        self.writes += 1
        if is_newer(written, self.templates.get(object_key(written))):
            self.templates[object_key(written)] = written

    async def _write_status(self, jobflow: dict[str, Any], wanted: dict[str, Any]) -> None:
        old = jobflow.get("status") or {}
        if wanted == old:
            return
        written = await put_status(self.store, jobflow, lambda _current: wanted)
        if written is None:
            return
        self.writes += 1
        phase = wanted["state"]["phase"]
        if self.metrics is not None and phase != (old.get("state") or {}).get("phase"):
            self.metrics.jobflow_finished(object_key(jobflow)[0], phase)
        if is_newer(written, self.flows.get(object_key(written))):
            self.flows[object_key(written)] = written

    async def _event(self, jobflow: Mapping[str, Any], kind: str, reason: str, msg: str) -> None:
        meta = jobflow["metadata"]
        ref = {
            "apiVersion": k.FLOW_V1ALPHA1,
            "kind": "JobFlow",
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", "default"),
            "uid": meta.get("uid", ""),
        }
        await self.recorder.record(ref, kind, reason, msg)


def _owner_flow(job: Mapping[str, Any]) -> str | None:
    for ref in (job.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "JobFlow":
            return str(ref.get("name") or "")
    return None


def _flow_names(jobflow: Mapping[str, Any]) -> set[str]:
    return {f.get("name") for f in (jobflow.get("spec") or {}).get("flows") or []}
