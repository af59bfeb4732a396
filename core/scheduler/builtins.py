"""Stromboli's own actions and plugins, registered by the processes that schedule.

The framework knows no action or plugin by name; every entry point that builds a scheduler or
reads a configuration file (``stromboli scheduler``, ``explain``, the simulator, benchmarks)
calls :func:`register_builtins` first, as Volcano's main registers its actions and plugins.
A new built-in is one module under ``actions/`` or ``plugins/`` plus one line below.
"""

from __future__ import annotations

from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.actions.backfill import BackfillAction
from stromboli.core.scheduler.actions.enqueue import EnqueueAction
from stromboli.core.scheduler.actions.gangpreempt import GangPreemptAction
from stromboli.core.scheduler.actions.gangreclaim import GangReclaimAction
from stromboli.core.scheduler.actions.preempt import PreemptAction
from stromboli.core.scheduler.actions.reclaim import ReclaimAction
from stromboli.core.scheduler.actions.shuffle import ShuffleAction
from stromboli.core.scheduler.framework.plugin import (
    Action,
    Plugin,
    register_action,
    register_plugin,
)
from stromboli.core.scheduler.plugins.binpack import BinpackPlugin
from stromboli.core.scheduler.plugins.capacity import CapacityPlugin
from stromboli.core.scheduler.plugins.cdp import CdpPlugin
from stromboli.core.scheduler.plugins.conformance import ConformancePlugin
from stromboli.core.scheduler.plugins.deviceshare import DeviceSharePlugin
from stromboli.core.scheduler.plugins.drf import DrfPlugin
from stromboli.core.scheduler.plugins.extender import ExtenderPlugin
from stromboli.core.scheduler.plugins.fragmentation import FragmentationPlugin
from stromboli.core.scheduler.plugins.gang import GangPlugin
from stromboli.core.scheduler.plugins.network_topology import NetworkTopologyPlugin
from stromboli.core.scheduler.plugins.nodegroup import NodeGroupPlugin
from stromboli.core.scheduler.plugins.nodeorder import NodeOrderPlugin
from stromboli.core.scheduler.plugins.numa_aware import NumaAwarePlugin
from stromboli.core.scheduler.plugins.overcommit import OvercommitPlugin
from stromboli.core.scheduler.plugins.pdb import PdbPlugin
from stromboli.core.scheduler.plugins.predicates import PredicatesPlugin
from stromboli.core.scheduler.plugins.priority import PriorityPlugin
from stromboli.core.scheduler.plugins.proportion import ProportionPlugin
from stromboli.core.scheduler.plugins.reservation import ReservationPlugin
from stromboli.core.scheduler.plugins.resourcequota import ResourceQuotaPlugin
from stromboli.core.scheduler.plugins.sla import SlaPlugin
from stromboli.core.scheduler.plugins.tdm import TdmPlugin

BUILTIN_ACTIONS: tuple[type[Action], ...] = (
    AllocateAction,
    BackfillAction,
    EnqueueAction,
    GangPreemptAction,
    GangReclaimAction,
    PreemptAction,
    ReclaimAction,
    ShuffleAction,
)

BUILTIN_PLUGINS: tuple[type[Plugin], ...] = (
    BinpackPlugin,
    CapacityPlugin,
    CdpPlugin,
    ConformancePlugin,
    DeviceSharePlugin,
    DrfPlugin,
    ExtenderPlugin,
    FragmentationPlugin,
    GangPlugin,
    NetworkTopologyPlugin,
    NodeGroupPlugin,
    NodeOrderPlugin,
    NumaAwarePlugin,
    OvercommitPlugin,
    PdbPlugin,
    PredicatesPlugin,
    PriorityPlugin,
    ProportionPlugin,
    ReservationPlugin,
    ResourceQuotaPlugin,
    SlaPlugin,
    TdmPlugin,
)


def register_builtins() -> None:
    """Register every built-in action and plugin; calling it again changes nothing."""
    for action in BUILTIN_ACTIONS:
        register_action(action)
    for plugin in BUILTIN_PLUGINS:
        register_plugin(plugin)
