"""The job-plugin interface and the helpers every plugin shares.

The job controller builds each pod of a vcjob as a plain dict and, before creating it, lets
every plugin named in ``spec.plugins`` change it (:meth:`JobPlugin.on_pod_create`). When the job
first syncs it asks each plugin for the objects it needs in the job's namespace
(:meth:`JobPlugin.on_job_add`: Services, ConfigMaps, Secrets, NetworkPolicies, all owned by the
job) and, when the job is killed, for the ones to remove (:meth:`JobPlugin.on_job_delete`).
Plugins never talk to the API server themselves, so they are plain functions of the job.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from stromboli.core.api import constants as k
from stromboli.core.api.jobflags import Flag, FlagError, parse_flags

log = logging.getLogger(__name__)

Obj = dict[str, Any]
ObjectRef = tuple[str, str, str]
"""``(apiVersion, kind, name)`` of an object in the job's namespace."""


class JobPluginError(Exception):
    """A plugin cannot do its work for this job (for example ray without a head task)."""


class UnknownJobPluginError(JobPluginError, KeyError):
    """``spec.plugins`` names a plugin that does not exist."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"unable to find job plugin: {self.name}"


class JobPlugin:
    """One job plugin bound to one job; see the module docstring.

    ``arguments`` are the plugin's CLI-style arguments from ``spec.plugins`` (see
    :mod:`~stromboli.core.api.jobflags`), ``job`` the Job object. Parsed values
    are in :attr:`options`; an argument that could not be read leaves its flag (and the ones
    after it) at the default and is reported in :attr:`argument_error`, as Volcano does.
    """

    name: ClassVar[str] = ""
    flags: ClassVar[tuple[Flag, ...]] = ()

    def __init__(self, arguments: Sequence[str] | None, job: Mapping[str, Any]) -> None:
        self.arguments = list(arguments or [])
        self.job = job
        self.options, error = parse_flags(self.arguments, self.flags)
        self.argument_error: FlagError | None = error
        if error is not None:
            log.warning(
                "job %s/%s: plugin %s arguments %s: %s",
                self.namespace,
                self.job_name,
                self.name,
                self.arguments,
                error,
            )

    # --- the interface the job controller calls ----------------------------------------------

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        """Change ``pod`` (being built for replica ``index`` of task ``task_name``) in place."""

    def on_job_add(self) -> list[Obj]:
        """Objects that must exist in the job's namespace for the job to run."""
        return []

    def on_job_update(self) -> list[Obj]:
        """Objects whose content follows the job's spec (e.g. host lists after a scale);
        the controller updates them when their data differs."""
        return []

    def on_job_delete(self) -> list[ObjectRef]:
        """Objects created by :meth:`on_job_add` that go away when the job is killed."""
        return []

    @property
    def controlled_resource_key(self) -> str:
        """Key of this plugin in the job's ``status.controlledResources`` (value: its name)."""
        return f"plugin-{self.name}"

    # --- helpers -----------------------------------------------------------------------------

    @property
    def job_name(self) -> str:
        return str((self.job.get("metadata") or {}).get("name") or "")

    @property
    def namespace(self) -> str:
        return str((self.job.get("metadata") or {}).get("namespace") or "default")

    @property
    def tasks(self) -> list[Mapping[str, Any]]:
        return list((self.job.get("spec") or {}).get("tasks") or [])

    def task(self, name: str) -> Mapping[str, Any] | None:
        return next((t for t in self.tasks if t.get("name") == name), None)

    def owned(self, api_version: str, kind: str, name: str, **fields: Any) -> Obj:
        """A new object in the job's namespace, controlled by the job."""
        return {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "ownerReferences": [owner_reference(self.job)],
            },
            **fields,
        }


def owner_reference(job: Mapping[str, Any]) -> Obj:
    """The controller ownerReference of an object belonging to ``job``."""
    meta = job.get("metadata") or {}
    return {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_name(job_name: str, task_name: str, index: int) -> str:
    """``<job>-<task>-<index>``, the name of a vcjob pod."""
    return f"{job_name}-{task_name}-{index}"


def replicas(task: Mapping[str, Any]) -> int:
    return int(task.get("replicas") or 0)


def _template_spec(task: Mapping[str, Any]) -> Mapping[str, Any]:
    return (task.get("template") or {}).get("spec") or {}


def domain_name(job_name: str, task: Mapping[str, Any], index: int) -> str:
    """``<hostname>.<subdomain>`` of a replica: the template's hostname and subdomain when set,
    else the pod name and the job name (the svc plugin's headless Service)."""
    spec = _template_spec(task)
    host = spec.get("hostname") or pod_name(job_name, str(task.get("name", "")), index)
    return f"{host}.{spec.get('subdomain') or job_name}"


def task_hosts(job_name: str, task: Mapping[str, Any]) -> list[str]:
    """Domain names of a task's replicas; a template with a fixed hostname gives one host."""
    if _template_spec(task).get("hostname"):
        return [domain_name(job_name, task, 0)] if replicas(task) > 0 else []
    return [domain_name(job_name, task, i) for i in range(replicas(task))]


def env_key(task_name: str) -> str:
    """A task name as it appears in environment variable names: ``-`` becomes ``_``."""
    return task_name.replace("-", "_")


def containers(pod: Obj, *, init: bool = True) -> Iterator[Obj]:
    """The pod's containers, then (with ``init``) its init containers."""
    spec = pod.setdefault("spec", {})
    yield from spec.get("containers") or []
    if init:
        yield from spec.get("initContainers") or []


def add_env(container: Obj, *variables: Obj) -> None:
    container.setdefault("env", []).extend(dict(v) for v in variables)


def add_port(container: Obj, port: int, name: str) -> None:
    """Open ``port`` on the container unless some port entry already has that number."""
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"name": name, "containerPort": port})


def env_value(pod: Obj, name: str) -> str:
    """The first plain value of environment variable ``name`` among the pod's containers."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        for var in container.get("env") or []:
            if var.get("name") == name:
                return str(var.get("value") or "")
    return ""
