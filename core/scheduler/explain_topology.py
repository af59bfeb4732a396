"""How a gang with ``networkTopology`` fits HyperNode by HyperNode.

Allocate places such a job inside one HyperNode, tried tier by tier from the lowest it may use
(a hard job never above its highest tier; a soft one up to the virtual root). A gang trial
over all nodes would say it fits when only a span it may not use holds it, so the trial is
run inside each HyperNode the job may use, in allocate's order, until one holds the gang's
minimum; when none does, the one that held the most members is named.
"""

from __future__ import annotations

from dataclasses import dataclass

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.explain_gang import GangFit, gang_fit
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.hypernodes import (
    ROOT,
    JobTopology,
    gradients,
    job_anchor,
    job_topology,
    session_tree,
)

#: HyperNodes tried at most per job: enough to answer, bounded for a wide tier.
MAX_HYPERNODES_TRIED = 32


@dataclass(slots=True)
class TopologyFit:
    topology: JobTopology
    #: The HyperNode the job is already in, if any.
    anchor: str | None
    #: The HyperNode the gang fits in (``found``), else the one holding the most members.
    hypernode: str
    tier: int
    gang: GangFit
    found: bool
    #: HyperNodes left untried after :data:`MAX_HYPERNODES_TRIED`.
    untried: int = 0

    def where(self) -> str:
        if self.hypernode == ROOT:
            return "the whole cluster (no HyperNode below the root holds it)"
        return f"hyperNode {self.hypernode} (tier {self.tier})"

    def refusal(self) -> str:
        """Why the gang waits, as allocate's fit error says it, with the closest try."""
        scope = f"hyperNode {self.anchor}" if self.anchor else "any hyperNode"
        text = (
            f"the gang does not fit in {scope} of tier <= {self.topology.highest_tier} "
            f"(networkTopology mode {self.topology.mode})"
        )
        if self.hypernode:
            text += f"; closest: {self.where()}, {self.gang.sentence()}"
        if self.untried:
            text += f" ({self.untried} more hyperNodes not tried)"
        return text


def topology_fit(ssn: Session, job: JobInfo) -> TopologyFit | None:
    """The gang trial inside the HyperNodes the job may use; None without ``networkTopology``
    or HyperNodes."""
    tree = session_tree(ssn)
    topology = job_topology(job, tree)
    if topology is None:
        return None
    anchor = job_anchor(job, tree)
    nodes = ssn.nodes
    best: TopologyFit | None = None
    tried = untried = 0
    for level in gradients(topology, tree, anchor):
        for name in level:
            if tried >= MAX_HYPERNODES_TRIED:
                untried += 1
                continue
            tried += 1
            domain = (name, tree.mask(name, nodes.position, len(nodes)))
            fit = gang_fit(ssn, job, domain)
            tier = tree.hypernodes[name].tier
            if not fit.short:
                return TopologyFit(topology, anchor, name, tier, fit, True)
            if best is None or fit.fit > best.gang.fit:
                best = TopologyFit(topology, anchor, name, tier, fit, False)
    if best is None:
        return None
    best.untried = untried
    return best
