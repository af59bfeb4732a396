"""Network topology beyond one gang: the ``volcano.sh/job-allocated-hypernode`` annotation
written when a topology job is placed (so its restarted pods return there, across scheduler
restarts), and partitioned jobs (``subGroupPolicy``, vcjob ``partitionPolicy``)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.scheduler import Scheduler
from tests.scheduler.builders import Cluster, conf, pod, podgroup
from tests.scheduler.plugins.test_network_topology import (
    HARD1,
    HARD2,
    PLAIN_CONF,
    SOFT,
    allocate,
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


# -- partitions: subGroupPolicy as a vcjob's partitionPolicy makes it --------------------------


def partitioned(
    name: str,
    partitions: int,
    size: int,
    *,
    partition_topology: dict | None = HARD1,
    job_topology: dict | None = None,
    min_partitions: int | None = None,
    cpu: str = "4",
) -> list[dict]:
    """A job of one task ``worker`` split into ``partitions`` partitions of ``size`` pods,
    as the job controller writes it (``minMember`` = minPartitions × size when given)."""
    minimum = partitions if min_partitions is None else min_partitions
    group = podgroup(name, minimum * size, phase="Inqueue")
    policy: dict = {
        "name": "worker",
        "subGroupSize": size,
        "minSubGroups": minimum,
        "labelSelector": {"matchLabels": {k.TASK_SPEC_KEY: "worker"}},
        "matchLabelKeys": [k.PARTITION_ID_KEY],
    }
    if partition_topology is not None:
        policy["networkTopology"] = partition_topology
    group["spec"]["subGroupPolicy"] = [policy]
    if job_topology is not None:
        group["spec"]["networkTopology"] = job_topology
    pods = []
    for i in range(partitions * size):
        labels = {k.TASK_SPEC_KEY: "worker", k.PARTITION_ID_KEY: str(i // size)}
        pods.append(pod(f"{name}-worker-{i}", group=name, cpu=cpu, role="worker", labels=labels))
    return [group, *pods]


def by_partition(placed: dict[str, str], size: int) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for name, node_name in placed.items():
        index = int(name.rsplit("-", 1)[1])
        out.setdefault(index // size, []).append(node_name)
    return out


def test_each_partition_lands_in_one_rack_and_the_job_in_one_spine() -> None:
    objects = [*topology_tree(), *partitioned("j", 2, 2, job_topology=HARD2)]
    _, placed = allocate(objects)
    assert len(placed) == 4
    parts = by_partition(placed, 2)
    assert all(len({RACK[n] for n in nodes}) == 1 for nodes in parts.values())
    assert len({int(n[1:]) // 4 for n in placed.values()}) == 1  # one spine


def test_a_partition_no_rack_holds_keeps_the_whole_job_pending() -> None:
    ssn, placed = allocate([*topology_tree(), *partitioned("j", 2, 3)])
    assert placed == {}
    job = ssn.jobs["default/j"]
    assert any("sub-group worker-0" in e for e in job.fit_errors.values())


def test_min_partitions_lets_the_job_start_with_whole_partitions_only() -> None:
    # Racks s0 and s1 are busy (one node each taken), so only s2 and s3 hold a partition.
    objects = [
        *topology_tree(),
        *running("busy-0", "n0"),
        *running("busy-1", "n2"),
        *partitioned("j", 3, 2, min_partitions=2),
    ]
    _, placed = allocate(objects)
    parts = by_partition(placed, 2)
    assert len(parts) == 2 and all(len(nodes) == 2 for nodes in parts.values())
    assert {RACK[n] for nodes in parts.values() for n in nodes} == {"s2", "s3"}


def test_too_few_whole_partitions_place_nothing() -> None:
    objects = [
        *topology_tree(),
        *running("busy-0", "n0"),
        *running("busy-1", "n2"),
        *running("busy-2", "n4"),
        *partitioned("j", 3, 2, min_partitions=2),
    ]
    _, placed = allocate(objects)
    assert placed == {}  # one rack holds one partition; two are needed


def test_partitions_without_topology_are_still_whole() -> None:
    objects = [
        node_obj
        for node_obj in topology_tree()
        if node_obj["kind"] == "Node" and node_obj["metadata"]["name"] in ("n0", "n1", "n2")
    ]
    objects += partitioned("j", 2, 2, partition_topology=None, min_partitions=1, cpu="4")
    _, placed = allocate(objects)
    assert len(placed) == 2  # three nodes: the second partition would be split, so it waits
    assert len(by_partition(placed, 2)) == 1


@st.composite
def partition_cases(draw: st.DrawFn) -> tuple[list[str], int, int, int, int]:
    busy = draw(st.lists(st.sampled_from([f"n{i}" for i in range(8)]), unique=True, max_size=6))
    partitions = draw(st.integers(1, 4))
    size = draw(st.integers(1, 3))
    minimum = draw(st.integers(0, partitions))
    tier = draw(st.sampled_from([1, 2]))
    return busy, partitions, size, minimum, tier


@settings(max_examples=60, deadline=None)
@given(partition_cases())
def test_partitions_are_never_split_nor_placed_across_their_tier(
    case: tuple[list[str], int, int, int, int],
) -> None:
    busy, partitions, size, minimum, tier = case
    objects = [*topology_tree()]
    for i, name in enumerate(busy):
        objects += running(f"busy-{i}", name)
    objects += partitioned(
        "j",
        partitions,
        size,
        min_partitions=minimum,
        partition_topology={"mode": "hard", "highestTierAllowed": tier},
    )
    _, placed = allocate(objects)
    parts = by_partition(placed, size)
    for nodes in parts.values():
        assert len(nodes) == size  # whole or not at all
        domain = RACK if tier == 1 else {n: int(n[1:]) // 4 for n in RACK}
        assert len({domain[n] for n in nodes}) == 1
    if placed:
        assert len(parts) >= max(minimum, 1)


def test_a_restarted_pod_of_a_partition_returns_to_its_partitions_rack() -> None:
    objects = [*topology_tree(), *partitioned("j", 2, 2)]
    group = objects[len(topology_tree())]
    group["status"] = {"phase": "Running"}
    pods = objects[len(topology_tree()) + 1 :]
    # Partition 0 runs in rack s3 (n6, n7) and partition 1 in s0; pod 1 of partition 0 was
    # restarted (pending again).
    for p, on in zip(pods, ["n6", None, "n0", "n1"], strict=True):
        if on:
            p["spec"]["nodeName"] = on
            p["status"] = {"phase": "Running"}
    # Without the scoring plugin every rack ties and the first by name would be s1.
    _, placed = allocate(objects, PLAIN_CONF)
    assert placed == {"j-worker-1": "n7"}  # back into s3, though s1 and s2 are empty


def test_job_hard_tier_2_with_soft_partitions_keeps_the_job_in_one_spine() -> None:
    # Two busy nodes, one per rack of spine s4: soft partitions may span racks, the job not
    # spines.
    objects = [
        *topology_tree(),
        *running("busy-0", "n0"),
        *running("busy-1", "n2"),
        *partitioned("j", 2, 2, partition_topology=SOFT, job_topology=HARD2),
    ]
    _, placed = allocate(objects)
    assert len(placed) == 4
    assert {int(n[1:]) // 4 for n in placed.values()} == {1}  # spine s5: s4 has 2 nodes free
    parts = by_partition(placed, 2)
    assert all(len({RACK[n] for n in nodes}) == 1 for nodes in parts.values())  # lowest tier


def test_partitions_of_a_job_without_its_own_topology_fill_the_fullest_rack_first() -> None:
    # Rack s2 holds a 1-cpu pod: HyperNode binpacking puts the 2-pod partition there, not in
    # s0 (the first by name), though no job of the session has a job-level networkTopology.
    objects = [
        *topology_tree(),
        *running("busy", "n4", cpu="1"),
        *partitioned("j", 1, 2, cpu="1"),
    ]
    _, placed = allocate(objects)
    assert {RACK[n] for n in placed.values()} == {"s2"} and len(placed) == 2
    _, unscored = allocate(objects, PLAIN_CONF)
    assert {RACK[n] for n in unscored.values()} == {"s0"}
