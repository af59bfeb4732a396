"""The openb benchmark's machinery on small traces of the same format that this test writes:
the paper's arrival protocol, the allocation curve, the published figures read back, and a
crafted trace where binpacking strands whole GPUs that the fragmentation policy keeps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import fragmentation_bench as bench  # noqa: E402

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time"
)
#: Nodes of 4, 4 and 1 GPUs; whole pods of 2 and 1 GPUs with shared pods between them.
#: Binpacking puts the first half-GPU pod beside the 1-GPU pod on a 4-GPU node and then has
#: no two idle cards for the last 2-GPU pod; keeping the mix's whole pods in mind places the
#: shared pods where they break no pair of cards.
CRAFTED_NODES = [("n0", 4), ("n1", 4), ("n2", 1)]
CRAFTED_PODS = [(2, 1000), (1, 1000), (1, 1000), (1, 500), (2, 1000), (2, 1000), (1, 500),
                (1, 600), (1, 500)]  # fmt: skip


def write_trace(folder: Path, nodes: list[tuple[str, int]], pods: list[tuple[int, int]]) -> None:
    lines = [NODE_HEADER] + [f"{name},64000,262144,{gpus},T4" for name, gpus in nodes]
    (folder / bench.NODE_FILE).write_text("\n".join(lines) + "\n")
    rows = [POD_HEADER]
    for i, (number, milli) in enumerate(pods):
        rows.append(f"p{i},1000,1024,{number},{milli},,LS,Running,{i},{i + 100},{i}")
    (folder / "openb_pod_list_default.csv").write_text("\n".join(rows) + "\n")


def placed_gpus(nodes: list[bench.TraceNode], pods: list[bench.TracePod], policy: str) -> float:
    result = bench.replay(nodes, pods, bench.POLICIES[policy])
    return sum(p.gpu_demand for p, ok in zip(pods, result.placed, strict=True) if ok)


def test_the_fragmentation_policy_allocates_what_binpack_strands(tmp_path: Path) -> None:
    write_trace(tmp_path, CRAFTED_NODES, CRAFTED_PODS)
    nodes = bench.read_nodes(tmp_path / bench.NODE_FILE)
    pods = bench.read_pods(tmp_path / "openb_pod_list_default.csv")
    ours = placed_gpus(nodes, pods, "ours")
    assert ours == pytest.approx(9.0)  # every GPU of the cluster
    for policy in ("deviceshare-binpack", "binpack"):
        assert ours > placed_gpus(nodes, pods, policy) + 0.5


def test_a_replay_gives_back_the_adaptive_node_sampling(tmp_path: Path) -> None:
    """The replay scores every node as the paper does; tests of node sampling that run after it
    in the same process must still see Volcano's adaptive default."""
    from stromboli.core.scheduler.util import placement

    before = placement.PERCENTAGE_NODES_TO_FIND
    write_trace(tmp_path, CRAFTED_NODES, CRAFTED_PODS)
    nodes = bench.read_nodes(tmp_path / bench.NODE_FILE)
    placed_gpus(nodes, bench.read_pods(tmp_path / "openb_pod_list_default.csv"), "ours")
    assert placement.PERCENTAGE_NODES_TO_FIND == before == 0


def test_arrivals_tune_up_by_resampling_the_trace() -> None:
    pods = [bench.TracePod(f"p{i}", 1000, 1024, 1, 500) for i in range(4)]
    sequence = bench.arrivals(pods, capacity=4.0, seed=7, tune=1.3)
    assert sorted(sequence[:4], key=lambda p: p.name) == pods  # the trace, shuffled
    demand = sum(p.gpu_demand for p in sequence)
    assert 5.2 - 0.5 < demand <= 5.2
    assert all(p in pods for p in sequence[4:])
    assert bench.arrivals(pods, 4.0, 7, 1.3) == sequence  # the seed decides
    in_order = bench.arrivals(pods, 4.0, 7, 1.3, shuffle=False)
    assert in_order[:4] == pods


def test_arrivals_tune_down_a_trace_that_asks_for_more() -> None:
    pods = [bench.TracePod(f"p{i}", 1000, 1024, 2, 1000) for i in range(10)]
    sequence = bench.arrivals(pods, capacity=4.0, seed=3, tune=1.3)
    assert sum(p.gpu_demand for p in sequence) == 4.0  # the most pods of 2 under 5.2
    assert len(set(p.name for p in sequence)) == len(sequence)


def test_the_curve_counts_what_was_placed_by_arrived_demand() -> None:
    pods = [bench.TracePod(f"p{i}", 1000, 1024, 1, 1000) for i in range(4)]
    curve = bench.curve(pods, [True, False, True, True], capacity=4.0, points=(25, 50, 100))
    assert curve == {25: 25.0, 50: 25.0, 100: 75.0}


def test_the_published_figures_are_averaged_per_policy(tmp_path: Path) -> None:
    header = "workload,sc_policy,tune,seed,total_gpus," + ",".join(str(i) for i in range(131))
    rows = [header]
    for seed, value in ((42, 90.0), (43, 92.0)):
        cells = ",".join(str(value) for _ in range(131))
        rows.append(f"openb_pod_list_default,06-FGD,1.3,{seed},6212,{cells}")
    rows.append("openb_pod_list_multigpu50,06-FGD,1.3,42,6212," + ",".join("1" for _ in range(131)))
    path = tmp_path / bench.EXPECTED_FILE
    path.write_text("\n".join(rows) + "\n")
    figures = bench.expected(path, "openb_pod_list_default", (100,))
    assert figures == {"FGD": {100: 91.0}}


def test_a_gpu_spec_becomes_the_use_gputype_annotation() -> None:
    group, pod = bench.pod_objects(3, bench.TracePod("x", 1000, 1024, 1, 250, "V100M16|T4"))
    notes = pod["metadata"]["annotations"]
    assert notes["nvidia.com/use-gputype"] == "V100M16,T4"
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    assert requests["volcano.sh/vgpu-memory-percentage"] == "25"
    assert requests["volcano.sh/vgpu-cores"] == "25"
    assert group["metadata"]["name"] == pod["metadata"]["name"]


def test_seeds_are_replayed_alike_for_every_policy_and_averaged(tmp_path: Path) -> None:
    write_trace(tmp_path, CRAFTED_NODES, CRAFTED_PODS)
    nodes = bench.read_nodes(tmp_path / bench.NODE_FILE)
    pods = bench.read_pods(tmp_path / "openb_pod_list_default.csv")
    runs = bench.run_seeds(nodes, pods, ["ours", "binpack"], [5, 6], tune=1.0)
    for policy, run in runs.items():
        assert len(run.curves) == len(run.replays) == 2
        for seed, values in zip((5, 6), run.curves, strict=True):
            sequence = bench.arrivals(pods, 9.0, seed, 1.0)
            alone = bench.replay(nodes, sequence, bench.POLICIES[policy])
            assert values == bench.curve(sequence, alone.placed, 9.0, bench.POINTS)
        assert run.mean(100) == pytest.approx(sum(run.at(100)) / 2)


def test_the_paper_value_of_each_seed_is_read_back(tmp_path: Path) -> None:
    header = "workload,sc_policy,tune,seed,total_gpus," + ",".join(str(i) for i in range(131))
    rows = [header]
    for seed, value in ((42, 95.0), (43, 95.5)):
        cells = ",".join(str(value + i / 1000) for i in range(131))
        rows.append(f"openb_pod_list_default,06-FGD,1.3,{seed},6212,{cells}")
    rows.append(
        "openb_pod_list_default,05-BestFit,1.3,42,6212," + ",".join("1" for _ in range(131))
    )
    path = tmp_path / bench.EXPECTED_FILE
    path.write_text("\n".join(rows) + "\n")
    assert bench.paper_seeds(path, "openb_pod_list_default") == [95.1, 95.6]
    assert bench.paper_seeds(path, "openb_pod_list_default", "BestFit", 0) == [1.0]


def test_the_reference_fgd_keeps_the_pairs_and_agrees_with_the_policy(tmp_path: Path) -> None:
    """On the crafted trace the reference placer, under each scoring, places every GPU like
    the policy, and the benchmark runs it as a policy of its own."""
    import fgd_reference

    write_trace(tmp_path, CRAFTED_NODES, CRAFTED_PODS)
    nodes = bench.read_nodes(tmp_path / bench.NODE_FILE)
    pods = bench.read_pods(tmp_path / "openb_pod_list_default.csv")
    for scores in ("int/fit", "exact/fit", "q80/fit"):
        placed = fgd_reference.replay_reference(nodes, pods, pods, scores)
        assert sum(p.gpu_demand for p, ok in zip(pods, placed, strict=True) if ok) == 9.0
    runs = bench.run_seeds(nodes, pods, ["fgd-reference", "ours"], [42], 1.0)
    assert runs["fgd-reference"].at(100) == runs["ours"].at(100)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4),
    st.lists(
        st.tuples(st.sampled_from([0, 1, 2, 4]), st.integers(1, 1000), st.integers(0, 40000)),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from(["int/random", "int/fit", "exact/fit", "q80/first"]),
)
def test_the_reference_never_gives_a_card_or_a_node_past_its_capacity(
    gpus: list[int], asks: list[tuple[int, int, int]], scores: str
) -> None:
    import fgd_reference

    nodes = [bench.TraceNode(f"n{i}", 32000, 65536, g, "T4") for i, g in enumerate(gpus)]
    pods = [
        bench.TracePod(f"p{i}", cpu, 1024, n, milli if n == 1 else 1000)
        for i, (n, milli, cpu) in enumerate(asks)
    ]
    fgd = fgd_reference.ReferenceFGD(nodes, fgd_reference.target_workload(pods), scores, 1)
    for p in pods:
        fgd.place(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_spec)
    assert (fgd.left >= 0).all() and (fgd.cpu >= 0).all() and (fgd.mem >= 0).all()
    assert (fgd.left <= fgd_reference.FULL).all()
