"""What a session is configured with: actions, plugin tiers, switches and arguments.

These are the types the configuration file (``scheduler/conf.py``) is parsed into. They live in
the framework so that the session needs nothing above it; checking names against the
registered actions and plugins is the loader's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.points import ExtensionPoint

P = ExtensionPoint

#: Extension point → the YAML switch that turns it off for one plugin (default on). Points
#: missing here (``job_valid``, ``victim_queue_order``) have no switch, as in Volcano.
SWITCHES: dict[str, str] = {
    P.JOB_ORDER: "enableJobOrder",
    P.JOB_READY: "enableJobReady",
    P.JOB_PIPELINED: "enableJobPipelined",
    P.JOB_ENQUEUEABLE: "enableJobEnqueued",
    P.JOB_ENQUEUED: "enableJobEnqueued",
    P.TASK_ORDER: "enableTaskOrder",
    P.PREEMPTABLE: "enablePreemptable",
    P.RECLAIMABLE: "enableReclaimable",
    P.PREEMPTIVE: "enablePreemptive",
    P.QUEUE_ORDER: "enableQueueOrder",
    P.PREDICATE: "enablePredicate",
    P.PRE_PREDICATE: "enablePredicate",
    P.BEST_NODE: "enableBestNode",
    P.NODE_ORDER: "enableNodeOrder",
    P.BATCH_NODE_ORDER: "enableNodeOrder",
    P.VICTIM_TASKS: "enabledVictim",
    P.JOB_STARVING: "enableJobStarving",
    P.OVERUSED: "enabledOverused",
    P.ALLOCATABLE: "enabledAllocatable",
    P.HYPER_NODE_ORDER: "enabledHyperNodeOrder",
}
#: Volcano's switches of points no Stromboli plugin has (see ``framework/points.py``):
#: accepted, so a Volcano configuration file loads, and without effect.
INERT_SWITCHES = frozenset(
    {
        "enableTargetJob",
        "enableReservedNodes",
        "enabledSubJobReady",
        "enabledSubJobPipelined",
        "enabledSubJobOrder",
        "enabledHyperNodeGradient",
    }
)
#: Switches that default to off.
OFF_BY_DEFAULT = frozenset({"enableHierarchy", "enabledClusterOrder"})
KNOWN_SWITCHES = frozenset(SWITCHES.values()) | INERT_SWITCHES | OFF_BY_DEFAULT


@dataclass(slots=True)
class PluginOption:
    """One plugin of a tier: its name, arguments and ``enable*`` switches."""

    name: str
    arguments: Arguments
    switches: dict[str, bool] = field(default_factory=dict)

    def enabled(self, point: str) -> bool:
        """Whether this plugin's callback on extension ``point`` takes part."""
        switch = SWITCHES.get(point)
        if switch is None:
            return True
        return self.switches.get(switch, True)

    @property
    def hierarchy(self) -> bool:
        return self.switches.get("enableHierarchy", False)


@dataclass(slots=True)
class SchedulerConfig:
    """A whole configuration: actions in order, plugin tiers, per-action arguments."""

    actions: list[str]
    tiers: list[list[PluginOption]]
    action_arguments: dict[str, Arguments]
    source: str = "<default>"

    def plugin_names(self) -> list[str]:
        return [option.name for tier in self.tiers for option in tier]

    def action_args(self, action: str) -> Arguments:
        return self.action_arguments.get(action) or Arguments(action)
