"""vcctl's commands as ``stromboli`` sub-commands: ``job``, ``queue``, ``jobflow`` and
``jobtemplate``, with the flags (short forms included), defaults and table columns of
Volcano's own ``vcctl``.

The commands reach the cluster through a :class:`~stromboli.core.cluster.store.ClusterStore`;
see :class:`~stromboli.core.cli.vcctl.common.VcctlContext` to hand them one.
"""

from stromboli.core.cli.vcctl.common import VcctlContext, VcctlError, kube_store
from stromboli.core.cli.vcctl.flow import jobflow, jobtemplate
from stromboli.core.cli.vcctl.job import job
from stromboli.core.cli.vcctl.queue import queue

__all__ = ["VcctlContext", "VcctlError", "job", "jobflow", "jobtemplate", "kube_store", "queue"]
