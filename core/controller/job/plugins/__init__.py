"""Job plugins (``spec.plugins`` of a vcjob) with Volcano's names and arguments.

``JOB_PLUGINS`` maps each plugin name to its class; build one per job with
``JOB_PLUGINS[name](arguments, job)`` (an unknown name raises :class:`UnknownJobPluginError`,
whose message is the validating webhook's ``unable to find job plugin: <name>``), or all of a
job's at once with :func:`build_plugins`. See :class:`JobPlugin` for the three calls the job
controller makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api.jobflags import Flag, FlagError, parse_flags
from stromboli.core.controller.job.plugins.base import (
    JobPlugin,
    JobPluginError,
    ObjectRef,
    UnknownJobPluginError,
    domain_name,
    owner_reference,
    pod_name,
    task_hosts,
)
from stromboli.core.controller.job.plugins.env import EnvPlugin
from stromboli.core.controller.job.plugins.hcclrank import HcclRankPlugin
from stromboli.core.controller.job.plugins.mpi import MpiPlugin
from stromboli.core.controller.job.plugins.pytorch import PytorchPlugin
from stromboli.core.controller.job.plugins.ray import RayPlugin
from stromboli.core.controller.job.plugins.ssh import SshPlugin
from stromboli.core.controller.job.plugins.svc import SvcPlugin
from stromboli.core.controller.job.plugins.tensorflow import TensorflowPlugin


class _PluginTable(dict[str, type[JobPlugin]]):
    """A plain dict whose missing keys raise :class:`UnknownJobPluginError`."""

    def __missing__(self, name: str) -> type[JobPlugin]:
        raise UnknownJobPluginError(name)


JOB_PLUGINS: dict[str, type[JobPlugin]] = _PluginTable(
    {
        cls.name: cls
        for cls in (
            EnvPlugin,
            SvcPlugin,
            SshPlugin,
            TensorflowPlugin,
            MpiPlugin,
            PytorchPlugin,
            RayPlugin,
            HcclRankPlugin,
        )
    }
)


def build_plugins(job: Mapping[str, Any]) -> list[JobPlugin]:
    """The plugins of ``job``'s ``spec.plugins``, in the order the job lists them."""
    plugins = (job.get("spec") or {}).get("plugins") or {}
    return [JOB_PLUGINS[name](arguments, job) for name, arguments in plugins.items()]


__all__ = [
    "JOB_PLUGINS",
    "EnvPlugin",
    "Flag",
    "FlagError",
    "HcclRankPlugin",
    "JobPlugin",
    "JobPluginError",
    "MpiPlugin",
    "ObjectRef",
    "PytorchPlugin",
    "RayPlugin",
    "SshPlugin",
    "SvcPlugin",
    "TensorflowPlugin",
    "UnknownJobPluginError",
    "build_plugins",
    "domain_name",
    "owner_reference",
    "parse_flags",
    "pod_name",
    "task_hosts",
]
