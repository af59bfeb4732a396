"""Network topology beyond one gang: the ``volcano.sh/job-allocated-hypernode`` annotation
written when a topology job is placed (so its restarted pods return there, across scheduler
restarts), and partitioned jobs (``subGroupPolicy``, vcjob ``partitionPolicy``)."""

from __future__ import annotations

from pathlib import Path

from stromboli.core.api import constants as k
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.scheduler import Scheduler
from tests.scheduler.builders import Cluster, conf, pod, podgroup
from tests.scheduler.plugins.test_network_topology import (
    HARD1,
    HARD2,
    SOFT,
    running,
    topology_tree,
)

register_builtins()

TOPO_CONF = conf(
    "enqueue, allocate", ["priority", "gang"], ["proportion", "network-topology-aware"]
)
RACK = {f"n{i}": f"s{i // 2}" for i in range(8)}


def topology_gang(name: str, size: int, topology: dict, cpu: str = "4") -> list[dict]:
    group = podgroup(name, size)
    group["spec"]["networkTopology"] = topology
    return [group, *[pod(f"{name}-{i}", group=name, cpu=cpu) for i in range(size)]]


async def test_allocated_hypernode_is_written_and_brings_restarted_pods_back(
    tmp_path: Path,
) -> None:
    cluster = await Cluster(tmp_path, TOPO_CONF).start()
    await cluster.add(*topology_tree())
    await cluster.add(*topology_gang("j", 2, HARD2, cpu="3"))
    await cluster.run(3)
    nodes = [await cluster.node_of(f"j-{i}") for i in range(2)]
    assert all(nodes) and len({RACK[n] for n in nodes}) == 1
    group = await cluster.pg("j")
    assert group["metadata"]["annotations"][k.JOB_ALLOCATED_HYPERNODE_KEY] == RACK[nodes[0]]

    # The job restarts: its pods are deleted and made anew, and the scheduler restarts too.
    # Another rack is now the fullest that holds the gang (HyperNode binpacking would pick
    # it), but the new pods go back to the rack the annotation names.
    for i in range(2):
        await cluster.store.delete("v1", "Pod", f"j-{i}", "default")
    other = "n0" if RACK[nodes[0]] != "s0" else "n6"
    await cluster.add(*running("busy", other, cpu="1"))
    cluster.scheduler = Scheduler(cluster.store, cluster.clock, cluster.config)
    await cluster.start()
    await cluster.add(*[pod(f"j-{i}", group="j", cpu="3") for i in range(2, 4)])
    await cluster.run(2)
    again = [await cluster.node_of(f"j-{i}") for i in range(2, 4)]
    assert {RACK[n] for n in again} == {RACK[nodes[0]]}


async def test_soft_job_spanning_racks_records_its_spine_and_plain_jobs_nothing(
    tmp_path: Path,
) -> None:
    cluster = await Cluster(tmp_path, TOPO_CONF).start()
    await cluster.add(*topology_tree())
    await cluster.add(*topology_gang("wide", 3, SOFT), *topology_gang("tight", 2, HARD1))
    plain = podgroup("plain", 1)
    await cluster.add(plain, pod("plain-0", group="plain", cpu="1"))
    await cluster.run(3)
    wide = (await cluster.pg("wide"))["metadata"]["annotations"]
    assert wide[k.JOB_ALLOCATED_HYPERNODE_KEY] in ("s4", "s5")  # three nodes: one spine
    assert k.JOB_ALLOCATED_HYPERNODE_KEY in (await cluster.pg("tight"))["metadata"]["annotations"]
    plain_notes = (await cluster.pg("plain"))["metadata"].get("annotations") or {}
    assert k.JOB_ALLOCATED_HYPERNODE_KEY not in plain_notes
