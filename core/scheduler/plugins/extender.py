"""extender: hand scheduling decisions to an HTTP service, as Volcano's scheduler extender does.

Each configured verb is a POST of a JSON body to ``<extender.urlPrefix>/<verb>``; a verb left
unset is not called and its extension point is not registered. Calls are synchronous (a
session is), over one keep-alive connection per session, and each waits at most
``extender.httpTimeout`` (a Go duration, default 1s). A response must be ``200 OK`` with a JSON
body (at most 10 MiB).

=====================  ===========================================  ================================
verb argument          request body                                 response body
=====================  ===========================================  ================================
onSessionOpenVerb      ``{Jobs, Nodes, Queues, NamespaceInfo,        ignored
                       RevocableNodes, NodeList}``
onSessionCloseVerb     ``{}``                                       ignored
predicateVerb          ``{task, node}`` (one call per node)         ``{status: "<why not>", code}``
prioritizeVerb         ``{task, nodes}``                            ``{nodeScore: {node: score},
                                                                    errorMessage}``
preemptableVerb /      ``{evictor, evictees}``                      ``{status: vote, victims}``
reclaimableVerb
queueOverusedVerb      ``{queue}``                                  ``{overused: bool}``
jobEnqueueableVerb     ``{job}``                                    ``{status: vote}``
jobEnqueuedVerb        ``{job}``                                    ignored
jobReadyVerb           ``{job}``                                    ``{status: bool}``
allocateFuncVerb /     ``{task}``                                   ``{errorMessage}``
deallocateFuncVerb
=====================  ===========================================  ================================

Objects are described with Volcano's field names: a task is ``{UID, Job, Name, Namespace,
TaskRole, NodeName, Status, Priority, Preemptable, Resreq, InitResreq, Pod}``, a node
``{Name, Node, Allocatable, Idle, Used, Releasing, Pipelined}``, a job ``{UID, Name, Namespace,
Queue, Priority, MinAvailable, PodGroup, Allocated, TotalRequest, Tasks}`` (tasks without their
pod), a queue ``{UID, Name, Weight, Priority, Queue}``; ``Pod``, ``Node``, ``PodGroup`` and
``Queue`` are the Kubernetes objects, resources are ``{MilliCPU, Memory, ScalarResources}``.
Votes are 1 (permit), 0 (abstain), -1 (reject); victims are task objects or their uids. The
predicate ``code`` is Volcano's status code: 2 unschedulable, 3 unschedulable and unresolvable.

``extender.managedResources`` (a list, or a comma-separated string) limits the task-level
calls to pods that request or limit one of those resources. With ``extender.ignorable: true``
a failed call counts as no opinion; without it, it counts against the task, job or queue. Two
departures from Volcano, on purpose: an ignorable failure abstains instead of voting permit
(which would have skipped every later tier) and never makes a job ready or a queue overused;
and after a connection failure the rest of the session fails fast instead of waiting out the
timeout once per node.
"""

from __future__ import annotations

import http.client
import logging
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
import orjson

from stromboli.core.api.durations import go_duration
from stromboli.core.scheduler.api.job import JobInfo, TaskInfo
from stromboli.core.scheduler.api.node import NodeInfo
from stromboli.core.scheduler.api.queue import QueueInfo
from stromboli.core.scheduler.api.resource import CPU, MEMORY, Resource
from stromboli.core.scheduler.framework.filters import Filter
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import (
    ABSTAIN,
    PERMIT,
    REJECT,
    EventHandler,
    Session,
)

log = logging.getLogger(__name__)

URL_PREFIX = "extender.urlPrefix"
HTTP_TIMEOUT = "extender.httpTimeout"
IGNORABLE = "extender.ignorable"
MANAGED_RESOURCES = "extender.managedResources"
VERBS = (
    "onSessionOpenVerb",
    "onSessionCloseVerb",
    "predicateVerb",
    "prioritizeVerb",
    "preemptableVerb",
    "reclaimableVerb",
    "queueOverusedVerb",
    "jobEnqueueableVerb",
    "jobEnqueuedVerb",
    "jobReadyVerb",
    "allocateFuncVerb",
    "deallocateFuncVerb",
)
MAX_BODY = 10 << 20
#: Volcano's status codes in predicate answers.
UNSCHEDULABLE_AND_UNRESOLVABLE = 3


class ExtenderError(RuntimeError):
    """A call to the extender failed (transport, status or body)."""


class ExtenderClient:
    """POSTs JSON to ``<prefix>/<verb>`` over one reused connection."""

    def __init__(self, prefix: str, timeout: float) -> None:
        parts = urlsplit(prefix)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{URL_PREFIX} {prefix!r} must be an http:// or https:// URL")
        self.prefix = prefix.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.path = parts.path.rstrip("/")
        self.timeout = timeout
        self._connection: http.client.HTTPConnection | None = None
        #: Set after a connection failure: later calls of the session fail at once.
        self.down: str = ""

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            kind = (
                http.client.HTTPSConnection
                if self.scheme == "https"
                else http.client.HTTPConnection
            )
            self._connection = kind(self.host, self.port, timeout=self.timeout)
        return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def post(self, verb: str, body: Any) -> Any:
        """The decoded JSON answer of ``verb`` (None for an empty body)."""
        url = f"{self.prefix}/{verb}"
        if self.down:
            raise ExtenderError(f"extender at {self.prefix} is unreachable: {self.down}")
        payload = orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        headers = {"Content-Type": "application/json"}
        for attempt in (1, 2):
            connection = self._connect()
            try:
                connection.request("POST", f"{self.path}/{verb}", payload, headers)
                response = connection.getresponse()
                data = response.read(MAX_BODY + 1)
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as err:
                # A kept-alive connection the server has closed: try once on a fresh one.
                self.close()
                if attempt == 2:
                    self.down = str(err) or type(err).__name__
                    raise ExtenderError(f"POST {url}: {self.down}") from None
            except (OSError, http.client.HTTPException) as err:
                self.close()
                self.down = str(err) or type(err).__name__
                raise ExtenderError(f"POST {url}: {self.down}") from None
        if response.status != 200:
            raise ExtenderError(f"POST {url}: status {response.status}, expected 200")
        if len(data) > MAX_BODY:
            raise ExtenderError(f"POST {url}: answer larger than {MAX_BODY} bytes")
        if not data.strip():
            return None
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as err:
            raise ExtenderError(f"POST {url}: answer is not JSON: {err}") from None


# -- how objects are described to the extender -------------------------------------------------


def resource_json(resource: Resource) -> dict[str, Any]:
    return {
        "MilliCPU": resource.get(CPU),
        "Memory": resource.get(MEMORY),
        "ScalarResources": {
            n: v for n, v in sorted(resource.amounts.items()) if n not in (CPU, MEMORY)
        },
    }


def task_json(task: TaskInfo, with_pod: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "UID": task.uid,
        "Job": task.job_id,
        "Name": task.name,
        "Namespace": task.namespace,
        "TaskRole": task.role,
        "NodeName": task.node_name,
        "Status": task.status.label,
        "Priority": task.priority,
        "Preemptable": task.preemptable,
        "Resreq": resource_json(task.resreq),
        "InitResreq": resource_json(task.init_resreq),
    }
    if with_pod:
        out["Pod"] = task.pod
    return out


def job_json(job: JobInfo) -> dict[str, Any]:
    return {
        "UID": job.uid,
        "Name": job.name,
        "Namespace": job.namespace,
        "Queue": job.queue,
        "Priority": job.priority,
        "MinAvailable": job.min_available,
        "PodGroup": job.podgroup,
        "Allocated": resource_json(job.allocated),
        "TotalRequest": resource_json(job.total_request),
        "Tasks": {uid: task_json(t, with_pod=False) for uid, t in job.tasks.items()},
    }


def queue_json(queue: QueueInfo) -> dict[str, Any]:
    return {
        "UID": queue.uid,
        "Name": queue.name,
        "Weight": queue.weight,
        "Priority": queue.priority,
        "Queue": queue.queue,
    }


def node_json(ssn: Session, info: NodeInfo) -> dict[str, Any]:
    nodes, row = ssn.nodes, info.position
    index = nodes.index
    return {
        "Name": info.name,
        "Node": info.node,
        "Allocatable": resource_json(index.resource(nodes.allocatable[row])),
        "Idle": resource_json(index.resource(nodes.idle_now[row])),
        "Used": resource_json(index.resource(nodes.used[row])),
        "Releasing": resource_json(index.resource(nodes.releasing[row])),
        "Pipelined": resource_json(index.resource(nodes.pipelined[row])),
    }


def _resource_names(containers: list[dict] | None) -> set[str]:
    names: set[str] = set()
    for container in containers or ():
        resources = container.get("resources") or {}
        names.update((resources.get("requests") or {}).keys())
        names.update((resources.get("limits") or {}).keys())
    return names


class ExtenderPlugin(Plugin):
    name = "extender"
    known_arguments: ClassVar[dict[str, object]] = {
        URL_PREFIX: "",
        HTTP_TIMEOUT: "1s",
        IGNORABLE: False,
        MANAGED_RESOURCES: [],
        **{f"extender.{verb}": "" for verb in VERBS},
    }

    def _verb(self, name: str) -> str:
        return self.arguments.get_str(f"extender.{name}", "")

    def _managed(self) -> set[str]:
        value = self.arguments.get(MANAGED_RESOURCES)
        if value is None:
            return set()
        if isinstance(value, str):
            return {v.strip() for v in value.split(",") if v.strip()}
        return {str(v) for v in value}

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ignorable = self.arguments.get_bool(IGNORABLE, False)
        self.managed = self._managed()
        timeout = 1.0
        if HTTP_TIMEOUT in self.arguments:
            try:
                timeout = go_duration(self.arguments.get_str(HTTP_TIMEOUT, "1s")).total_seconds()
            except ValueError as err:
                log.error("extender: %s: %s; using 1s", HTTP_TIMEOUT, err)
        self.client: ExtenderClient | None = None
        prefix = self.arguments.get_str(URL_PREFIX, "")
        if not prefix:
            log.error("extender: %s is not set; the extender plugin does nothing", URL_PREFIX)
            return
        try:
            self.client = ExtenderClient(prefix, timeout)
        except ValueError as err:
            log.error("extender: %s; the extender plugin does nothing", err)
            return
        verb = self._verb("onSessionOpenVerb")
        if verb:
            try:
                self.client.post(verb, self._session_body(ssn))
            except ExtenderError as err:
                log.warning("extender: OnSessionOpen failed: %s", err)
                if not self.ignorable:
                    return
        self._register(ssn)

    def _register(self, ssn: Session) -> None:
        P = ExtensionPoint
        points: list[tuple[str, ExtensionPoint, Callable[..., Any]]] = [
            ("predicateVerb", P.PREDICATE, self.predicate),
            ("prioritizeVerb", P.BATCH_NODE_ORDER, self.prioritize),
            ("preemptableVerb", P.PREEMPTABLE, self._victims("preemptableVerb")),
            ("reclaimableVerb", P.RECLAIMABLE, self._victims("reclaimableVerb")),
            ("jobEnqueueableVerb", P.JOB_ENQUEUEABLE, self.job_enqueueable),
            ("jobEnqueuedVerb", P.JOB_ENQUEUED, self.job_enqueued),
            ("queueOverusedVerb", P.OVERUSED, self.overused),
            ("jobReadyVerb", P.JOB_READY, self.job_ready),
        ]
        for verb, point, fn in points:
            if self._verb(verb):
                ssn.register(point, self.name, fn)
        allocate, deallocate = self._verb("allocateFuncVerb"), self._verb("deallocateFuncVerb")
        if allocate or deallocate:
            ssn.add_event_handler(
                EventHandler(
                    allocate=self._event(allocate) if allocate else None,
                    deallocate=self._event(deallocate) if deallocate else None,
                )
            )

    def on_session_close(self, ssn: Session) -> None:
        if self.client is None:
            return
        verb = self._verb("onSessionCloseVerb")
        try:
            if verb:
                self.client.post(verb, {})
        except ExtenderError as err:
            log.warning("extender: OnSessionClose failed: %s", err)
        finally:
            self.client.close()

    def _session_body(self, ssn: Session) -> dict[str, Any]:
        nodes = {info.name: node_json(ssn, info) for info in ssn.nodes.nodes}
        return {
            "Jobs": {uid: job_json(job) for uid, job in ssn.jobs.items()},
            "Nodes": nodes,
            "Queues": {name: queue_json(q) for name, q in ssn.queues.items()},
            "NamespaceInfo": {
                namespace: {
                    "Name": namespace,
                    "QuotaStatus": {q["metadata"]["name"]: q.get("status") or {} for q in quotas},
                }
                for namespace, quotas in ssn.snapshot.resource_quotas.items()
            },
            "RevocableNodes": {},
            "NodeList": list(nodes),
        }

    def _call(self, verb: str, body: dict[str, Any]) -> Any:
        assert self.client is not None
        return self.client.post(self._verb(verb), body)

    def interested(self, task: TaskInfo) -> bool:
        """Whether the task uses a resource this extender manages (all tasks when it names
        none)."""
        if not self.managed:
            return True
        spec = task.pod.get("spec") or {}
        used = _resource_names(spec.get("containers")) | _resource_names(spec.get("initContainers"))
        return bool(used & self.managed)

    # -- callbacks --------------------------------------------------------------------------------

    def predicate(self, task: TaskInfo) -> Filter:
        nodes = self.ssn.nodes.nodes
        result = Filter.all_pass(len(nodes))
        if not self.interested(task):
            return result
        body = {"task": task_json(task)}
        for info in nodes:
            mask = np.zeros(len(nodes), dtype=bool)
            mask[info.position] = True
            try:
                answer = self._call("predicateVerb", {**body, "node": node_json(self.ssn, info)})
            except ExtenderError as err:
                log.warning("extender: predicate failed: %s", err)
                if not self.ignorable:
                    result.fail(mask, f"extender: {err}", False)
                continue
            answer = answer if isinstance(answer, dict) else {}
            message = str(answer.get("status") or "")
            if message:
                code = answer.get("code")
                result.fail(mask, message, code == UNSCHEDULABLE_AND_UNRESOLVABLE)
        return result

    def prioritize(self, task: TaskInfo, positions: np.ndarray) -> np.ndarray:
        scores = np.zeros(positions.shape[0])
        if not self.interested(task):
            return scores
        nodes = [self.ssn.nodes.nodes[int(p)] for p in positions]
        try:
            answer = self._call(
                "prioritizeVerb",
                {"task": task_json(task), "nodes": [node_json(self.ssn, n) for n in nodes]},
            )
        except ExtenderError as err:
            log.warning("extender: prioritize failed: %s", err)
            return scores
        answer = answer if isinstance(answer, dict) else {}
        if answer.get("errorMessage"):
            log.warning("extender: prioritize: %s", answer["errorMessage"])
            return scores
        node_scores = answer.get("nodeScore") or {}
        for i, info in enumerate(nodes):
            try:
                scores[i] = float(node_scores.get(info.name, 0.0))
            except (TypeError, ValueError):
                log.warning("extender: prioritize: score of %s is not a number", info.name)
        return scores

    def _victims(
        self, verb: str
    ) -> Callable[[TaskInfo, list[TaskInfo]], tuple[list[TaskInfo], int]]:
        def victims(evictor: TaskInfo, evictees: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            if not self.interested(evictor):
                return [], ABSTAIN
            body = {
                "evictor": task_json(evictor),
                "evictees": [task_json(t) for t in evictees],
            }
            try:
                answer = self._call(verb, body)
            except ExtenderError as err:
                log.warning("extender: %s failed: %s", verb, err)
                return [], ABSTAIN if self.ignorable else REJECT
            answer = answer if isinstance(answer, dict) else {}
            chosen: set[str] = set()
            for victim in answer.get("victims") or ():
                if isinstance(victim, str):
                    chosen.add(victim)
                elif isinstance(victim, dict):
                    chosen.add(str(victim.get("UID") or victim.get("uid") or ""))
            picked = [t for t in evictees if t.uid in chosen]
            return picked, _vote(answer.get("status"))

        return victims

    def job_enqueueable(self, job: JobInfo) -> int:
        try:
            answer = self._call("jobEnqueueableVerb", {"job": job_json(job)})
        except ExtenderError as err:
            log.warning("extender: jobEnqueueable failed: %s", err)
            return ABSTAIN if self.ignorable else REJECT
        return _vote((answer or {}).get("status") if isinstance(answer, dict) else None)

    def job_enqueued(self, job: JobInfo) -> None:
        try:
            self._call("jobEnqueuedVerb", {"job": job_json(job)})
        except ExtenderError as err:
            log.warning("extender: jobEnqueued failed: %s", err)

    def overused(self, queue: QueueInfo) -> bool:
        try:
            answer = self._call("queueOverusedVerb", {"queue": queue_json(queue)})
        except ExtenderError as err:
            log.warning("extender: queueOverused failed: %s", err)
            return not self.ignorable
        return bool(answer.get("overused")) if isinstance(answer, dict) else False

    def job_ready(self, job: JobInfo) -> bool:
        try:
            answer = self._call("jobReadyVerb", {"job": job_json(job)})
        except ExtenderError as err:
            log.warning("extender: jobReady failed: %s", err)
            return self.ignorable
        return bool(answer.get("status")) if isinstance(answer, dict) else False

    def _event(self, verb: str) -> Callable[[TaskInfo], None]:
        def handle(task: TaskInfo) -> None:
            if not self.interested(task):
                return
            try:
                answer = self.client.post(verb, {"task": task_json(task)}) if self.client else None
            except ExtenderError as err:
                log.warning("extender: %s failed: %s", verb, err)
                return
            if isinstance(answer, dict) and answer.get("errorMessage"):
                log.warning("extender: %s: %s", verb, answer["errorMessage"])

        return handle


def _vote(value: Any) -> int:
    try:
        vote = int(value)
    except (TypeError, ValueError):
        return ABSTAIN
    return PERMIT if vote > 0 else REJECT if vote < 0 else ABSTAIN
