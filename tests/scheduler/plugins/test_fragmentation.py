"""The fragmentation measure (util/devices/fragmentation.py) and the ``fragmentation`` plugin:
the measure's defining cases and properties, and through a real session, cards never given
past their memory or cores and shared pods kept off cards whole-GPU pods will need."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.api import constants as k
from stromboli.core.scheduler.actions.allocate import AllocateAction
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.util.devices import vgpu
from stromboli.core.scheduler.util.devices.fragmentation import (
    BY_COUNT,
    BY_DEMAND,
    FULL,
    NEVER,
    PodShape,
    WorkloadMix,
    expected_fragments,
    mix_arrays,
    placements,
)
from tests.scheduler.builders import conf, container, make_session, node, pod, podgroup

register_builtins()

GIB = float(1 << 30)


def mix_of(
    *shapes: PodShape, cards: int = 2, memory: int = 16000, by: str = BY_COUNT
) -> tuple[Any, np.ndarray]:
    mix = WorkloadMix(limit=64, by=by)
    for shape in shapes:
        mix.observe(shape)
    mix._derive()
    card_memory = np.full((1, cards), memory)
    card_types = np.full((1, cards), "T4", dtype=object)
    return mix_arrays(mix, card_memory, card_types), card_memory


def frag(
    free: list[int],
    shapes: list[PodShape],
    cpu: float = 64000,
    mem: float = 64 * GIB,
    by: str = BY_COUNT,
) -> float:
    arrays, _ = mix_of(*shapes, cards=len(free), by=by)
    return float(
        expected_fragments(
            np.array([free], dtype=np.int32), np.array([cpu]), np.array([mem]), arrays.need, arrays
        )[0]
    )


SHARE_60 = PodShape(1000, GIB, 1, 0, 60, 60)
WHOLE_1 = PodShape(1000, GIB, 1, 0, 100, 100)
WHOLE_2 = PodShape(1000, GIB, 2, 0, 100, 100)
CPU_ONLY = PodShape(4000, GIB)


# -- the measure's defining cases ------------------------------------------------------------


def test_a_card_too_small_for_the_shape_is_a_fragment() -> None:
    assert frag([1000, 500], [SHARE_60]) == 500


def test_when_the_shape_fits_nowhere_all_free_capacity_is_fragment() -> None:
    assert frag([1000, 500], [WHOLE_2]) == 1500
    assert frag([1000, 1000], [SHARE_60], cpu=500) == 2000  # too little cpu left


def test_a_shape_without_gpus_can_use_no_free_gpu() -> None:
    assert frag([1000, 300], [CPU_ONLY]) == 1300
    assert frag([1000, 300], [CPU_ONLY], cpu=1000) == 1300


def test_the_mix_weighs_each_shape_by_how_often_it_was_seen() -> None:
    # SHARE_60 seen three times (fragment 500), WHOLE_2 once (fragment 1500).
    assert frag([1000, 500], [SHARE_60, SHARE_60, SHARE_60, WHOLE_2]) == 0.75 * 500 + 0.25 * 1500


def test_by_demand_the_mix_weighs_each_shape_by_the_gpus_its_pods_asked_for() -> None:
    # SHARE_60 three times (3 x 60 hundredths, fragment 500), WHOLE_2 once (200, fragment 1500).
    mixed = [SHARE_60, SHARE_60, SHARE_60, WHOLE_2]
    assert frag([1000, 500], mixed, by=BY_DEMAND) == (180 * 500 + 200 * 1500) / 380


def test_the_demand_of_a_shape_is_its_cards_times_its_share() -> None:
    assert [SHARE_60.demand, WHOLE_1.demand, WHOLE_2.demand, CPU_ONLY.demand] == [60, 100, 200, 100]
    assert PodShape(0, 0, 2, gpu_memory=8000).demand == 200  # asked in MiB: a whole card each
    assert PodShape(0, 0, 1, 0, 250, 0).demand == 100  # never more than the card


def test_by_demand_a_rare_pod_of_many_gpus_is_not_outvoted_by_many_small_ones() -> None:
    """Node a has two idle cards, node b one card 70% free; the history is twenty 30% pods and
    one 2-GPU pod. A 50% pod on a breaks the only pair the 2-GPU pod could use; on b it leaves
    200 no 30% pod can use. Counting pods, twenty small ones outvote the pair; weighing by the
    GPUs asked (600 against 200 hundredths), the pair is kept: the 2-GPU pod brings as much
    demand as seven of the small ones."""
    small = PodShape(1000, GIB, 1, 0, 30, 30)
    history = [small] * 20 + [WHOLE_2]
    card_memory = np.array([[16000, 16000], [16000, 0]])
    card_types = np.full((2, 2), "T4", dtype=object)
    before = np.array([[1000, 1000], [700, 0]], dtype=np.int32)
    after = np.array([[500, 1000], [200, 0]], dtype=np.int32)
    added = {}
    for by in (BY_COUNT, BY_DEMAND):
        mix = WorkloadMix(limit=64, by=by)
        for shape in history:
            mix.observe(shape)
        mix._derive()
        arrays = mix_arrays(mix, card_memory, card_types)
        idle = np.full(2, 64000.0), np.full(2, 64 * GIB)
        added[by] = expected_fragments(after, *idle, arrays.need, arrays) - expected_fragments(
            before, *idle, arrays.need, arrays
        )
    assert added[BY_COUNT][0] < added[BY_COUNT][1]  # counting pods: break a's pair
    assert added[BY_DEMAND][1] < added[BY_DEMAND][0]  # by demand: take b's sliver
    assert added[BY_DEMAND].tolist() == [1500 * 200 / 800, (200 * 600 - 500 * 200) / 800]


def test_a_card_of_a_model_the_shape_may_not_use_is_a_fragment() -> None:
    shape = PodShape(1000, GIB, 1, 0, 50, 50, use_types=("A100",))
    need = shape.need(np.array([[16000, 16000]]), np.array([["T4", "NVIDIA-A100"]], dtype=object))
    assert need.tolist() == [[int(NEVER), 500]]


def test_memory_in_mib_is_read_against_each_card() -> None:
    shape = PodShape(1000, GIB, 1, gpu_memory=8000)
    need = shape.need(np.array([[16000, 32000, 0]]), np.array([["a", "b", ""]], dtype=object))
    assert need.tolist() == [[500, 250, int(NEVER)]]


def test_placements_of_one_gpu_one_option_per_card_that_holds_it() -> None:
    choices, after = placements(np.array([[1000, 400, 700]]), np.array([[600, 600, 600]]), 1)
    assert choices.tolist() == [[0, -1, 2]]
    assert after[0, 0].tolist() == [400, 400, 700]
    assert after[0, 2].tolist() == [1000, 400, 100]


def test_placements_of_several_gpus_take_the_tightest_cards() -> None:
    free = np.array([[1000, 1000, 1000, 500], [1000, 500, 500, 500]])
    choices, after = placements(free, np.full((2, 4), FULL), 2)
    assert choices[:, 0].tolist() == [0, -1]
    assert after[0, 0].tolist() == [0, 0, 1000, 500]


def test_the_mix_keeps_the_most_frequent_shapes_and_changes_epoch_on_doubling() -> None:
    mix = WorkloadMix(limit=2, by=BY_COUNT)
    epochs = []
    for shape in [SHARE_60] * 5 + [WHOLE_1] * 3 + [CPU_ONLY]:
        mix.observe(shape)
        epochs.append(mix.epoch)
    mix._derive()
    assert mix.shapes == (SHARE_60, WHOLE_1)
    assert mix.weights.tolist() == [5, 3]
    assert epochs == [1, 2, 2, 3, 3, 3, 3, 4, 4]
    mix.by = BY_DEMAND
    mix._derive()
    assert mix.weights.tolist() == [5 * 60, 3 * 100]  # the most frequent, weighed by demand


# -- properties --------------------------------------------------------------------------------

frees = st.lists(st.integers(0, FULL), min_size=1, max_size=8)
shapes = st.builds(
    PodShape,
    st.sampled_from([0.0, 1000.0, 8000.0, 64000.0]),
    st.just(GIB),
    st.integers(0, 4),
    st.just(0),
    st.integers(1, 100),
    st.integers(0, 100),
)


@settings(max_examples=200, deadline=None)
@given(frees, st.lists(shapes, min_size=1, max_size=6), st.floats(0, 128000))
def test_fragment_lies_between_nothing_and_all_free_capacity(
    free: list[int], mix: list[PodShape], cpu: float
) -> None:
    value = frag(free, mix, cpu=cpu)
    assert -1e-9 <= value <= sum(free) + 1e-9


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.lists(shapes, min_size=1, max_size=6))
def test_idle_cards_are_no_fragment_for_a_shape_that_fits(cards: int, mix: list[PodShape]) -> None:
    fitting = [s for s in mix if 0 < s.gpus <= cards and s.cpu <= 64000]
    if not fitting:
        return
    assert frag([FULL] * cards, fitting) == 0
    assert frag([0] * cards, mix) == 0  # nothing free, nothing fragmented


@settings(max_examples=200, deadline=None)
@given(frees, st.integers(1, FULL), st.integers(1, 4))
def test_no_placement_takes_more_than_a_card_has(free: list[int], need: int, gpus: int) -> None:
    row = np.array([free])
    choices, after = placements(row, np.full_like(row, need), gpus)
    for option in range(choices.shape[1]):
        if choices[0, option] == -1:
            continue
        assert (after[0, option] >= 0).all()
        taken = row[0] - after[0, option]
        assert set(taken.tolist()) <= {0, need}
        assert int((taken == need).sum()) == gpus


# -- the plugin in a session --------------------------------------------------------------------


def _register(*cards: tuple[str, int]) -> str:
    return json.dumps(
        [
            {"id": uuid, "index": i, "count": 16, "devmem": memory, "devcore": 100, "type": "T4"}
            for i, (uuid, memory) in enumerate(cards)
        ]
    )


def gpu_node(name: str, cards: int, memory: int = 10000) -> dict:
    obj = node(name, cpu="64", memory="256Gi", extra={"volcano.sh/vgpu-number": str(16 * cards)})
    uuids = [(f"{name}-gpu{i}", memory) for i in range(cards)]
    obj["metadata"]["annotations"] = {k.NODE_VGPU_REGISTER_KEY: _register(*uuids)}
    return obj


def gpu_pod(name: str, number: int, percent: int, at: int) -> list[dict]:
    extra = {
        "volcano.sh/vgpu-number": str(number),
        "volcano.sh/vgpu-memory-percentage": str(percent),
        "volcano.sh/vgpu-cores": str(percent),
    }
    created = f"1970-01-01T00:{at // 60:02d}:{at % 60:02d}Z"
    group = podgroup(name, 1, created=created, phase="Inqueue")
    return [
        group,
        pod(name, group=name, created=created, containers=[container("1", "1Gi", extra=extra)]),
    ]


CONFIG = conf(
    "allocate",
    ["priority", "gang"],
    [{"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}}, "fragmentation"],
)


def allocate(objects: list[dict]) -> dict[str, dict[str, str]]:
    ssn = make_session(objects, CONFIG)
    AllocateAction().execute(ssn)
    names = {t.uid: t.name for job in ssn.jobs.values() for t in job.tasks.values()}
    return {names[uid]: notes for uid, notes in ssn.outcome.pod_annotations.items()}


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
    st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(5, 100)), min_size=1, max_size=14),
)
def test_a_card_is_never_given_past_its_memory_or_cores(
    cards: list[int], asks: list[tuple[int, int]]
) -> None:
    objects = [gpu_node(f"n{i}", count) for i, count in enumerate(cards)]
    for i, (number, percent) in enumerate(asks):
        objects += gpu_pod(f"p{i}", number, percent, i)
    memory: dict[str, int] = {}
    cores: dict[str, int] = {}
    for notes in allocate(objects).values():
        for grants in vgpu.decode(notes[k.VGPU_IDS_NEW_KEY]):
            assert len({g.uuid for g in grants}) == len(grants)  # one pod's vGPUs on distinct cards
            for grant in grants:
                memory[grant.uuid] = memory.get(grant.uuid, 0) + grant.memory
                cores[grant.uuid] = cores.get(grant.uuid, 0) + grant.cores
    assert all(used <= 10000 for used in memory.values())
    assert all(used <= 100 for used in cores.values())


def test_a_shared_pod_fills_a_used_card_before_breaking_an_idle_one() -> None:
    """n1 has one card 60% used and one idle; n2 is idle. A 40% pod on n1's used card keeps
    three idle cards for the whole-GPU pods seen so far; binpack by holders would agree, but
    spreading or taking n2 would break one."""
    objects = [gpu_node("n1", 2), gpu_node("n2", 1)]
    objects += gpu_pod("whole", 1, 100, 0)
    objects += gpu_pod("big", 1, 60, 1)
    objects += gpu_pod("small", 1, 40, 2)
    placed = allocate(objects)
    big = vgpu.decode(placed["big"][k.VGPU_IDS_NEW_KEY])[0][0].uuid
    small = vgpu.decode(placed["small"][k.VGPU_IDS_NEW_KEY])[0][0].uuid
    assert small == big


def test_the_mix_counts_pods_unless_told_to_weigh_by_demand() -> None:
    objects = [gpu_node("n1", 1), *gpu_pod("p", 1, 50, 0)]
    plugins: list[str | dict] = [
        {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}}
    ]
    ways = {}
    for arguments in ({}, {"fragmentation.mixWeight": "demand"}, {"fragmentation.mixWeight": "x"}):
        config = conf(
            "allocate", ["gang"], [*plugins, {"name": "fragmentation", "arguments": arguments}]
        )
        ways[str(arguments)] = make_session(objects, config).plugins["fragmentation"].mix.by
    assert list(ways.values()) == [BY_COUNT, BY_DEMAND, BY_COUNT]  # an unknown way: the default


def test_without_deviceshare_the_plugin_scores_nothing() -> None:
    objects = [gpu_node("n1", 1), gpu_node("n2", 1), *gpu_pod("p", 1, 50, 0)]
    ssn = make_session(objects, conf("allocate", ["gang"], ["fragmentation"]))
    plugin = ssn.plugins["fragmentation"]
    task = next(t for job in ssn.jobs.values() for t in job.tasks.values())
    assert plugin.node_order(task, np.arange(2)).tolist() == [0.0, 0.0]


def test_a_node_registering_the_most_cards_is_scored_like_any_other() -> None:
    """One node may register 128 cards (deviceshare's bound); the others keep their few and
    the pods still go where they fragment least."""
    objects = [gpu_node("wide", 128), gpu_node("n1", 2)]
    objects += gpu_pod("first", 1, 60, 0)
    objects += gpu_pod("second", 1, 40, 1)
    placed = allocate(objects)
    first = vgpu.decode(placed["first"][k.VGPU_IDS_NEW_KEY])[0][0].uuid
    second = vgpu.decode(placed["second"][k.VGPU_IDS_NEW_KEY])[0][0].uuid
    assert second == first  # 40% fills the card the 60% pod started


def test_the_resolution_defaults_to_80_milli_and_refuses_what_is_not_a_share_of_a_card() -> None:
    objects = [gpu_node("n1", 1), *gpu_pod("p", 1, 50, 0)]
    share = {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}}
    got = []
    for arguments in ({}, {"fragmentation.resolution": 0}, {"fragmentation.resolution": 2000}):
        config = conf(
            "allocate", ["gang"], [share, {"name": "fragmentation", "arguments": arguments}]
        )
        got.append(make_session(objects, config).plugins["fragmentation"].resolution)
    assert got == [80.0, 0.0, 80.0]


def test_a_resolution_that_is_not_a_finite_share_of_a_card_falls_back_to_80() -> None:
    """NaN, infinity and a negative step would make every score NaN or reverse the order:
    each is warned about and the default used, the session still opens."""
    objects = [gpu_node("n1", 1), *gpu_pod("p", 1, 50, 0)]
    share = {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}}
    got = []
    for value in (float("nan"), float("inf"), -1):
        arguments = {"fragmentation.resolution": value}
        config = conf(
            "allocate", ["gang"], [share, {"name": "fragmentation", "arguments": arguments}]
        )
        got.append(make_session(objects, config).plugins["fragmentation"].resolution)
    assert got == [80.0, 80.0, 80.0]


def after_history(
    nodes: list[tuple[int, int]], asks: list[tuple[int, int]], resolution: int
) -> tuple[Any, Any]:
    """Nodes of (cards, cpu) and GPU pods of (cards, percent) allocated with deviceshare and
    fragmentation at ``resolution``: the plugin and the task of the first pod."""
    objects = []
    for i, (cards, cpu) in enumerate(nodes):
        obj = gpu_node(f"n{i}", cards)
        obj["status"]["allocatable"]["cpu"] = obj["status"]["capacity"]["cpu"] = str(cpu)
        objects.append(obj)
    for i, (number, percent) in enumerate(asks):
        objects += gpu_pod(f"p{i}", number, percent, i)
    config = conf(
        "allocate",
        ["priority", "gang"],
        [
            {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}},
            {"name": "fragmentation", "arguments": {"fragmentation.resolution": resolution}},
        ],
    )
    ssn = make_session(objects, config)
    AllocateAction().execute(ssn)
    plugin = ssn.plugins["fragmentation"]
    task = next(t for job in ssn.jobs.values() for t in job.tasks.values() if t.name == "p0")
    return plugin, task


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(2, 64)), min_size=2, max_size=5),
    st.lists(st.tuples(st.sampled_from([1, 2]), st.integers(5, 100)), min_size=1, max_size=10),
    st.sampled_from([0, 40, 80, 300]),
)
def test_the_best_node_adds_the_fewest_steps_and_then_leaves_the_least_free(
    nodes: list[tuple[int, int]], asks: list[tuple[int, int]], resolution: int
) -> None:
    """After a random history, the top-scored node for a pod is one whose added fragment
    counts the fewest whole steps of the resolution (exactly the least at 0) and, of those,
    the one with the least free GPU."""
    plugin, task = after_history(nodes, asks, resolution)
    positions = np.arange(len(nodes))
    scores = plugin.node_order(task, positions)
    added = plugin.added(task, positions)
    if not np.isfinite(added).any():
        return
    steps = np.ceil(added / resolution) if resolution else added
    best = int(np.argmax(scores))
    assert steps[best] == steps[np.isfinite(steps)].min()
    alike = np.flatnonzero(steps == steps[best])
    free = plugin.free[positions].sum(axis=1)
    assert free[best] == free[alike].min()


def test_a_difference_under_one_step_goes_to_the_fuller_node() -> None:
    """After the history below, another 5% pod would lower n1's fragment by 50 milli and
    leave n0's as it is: ranked exactly, n1 wins; in steps of 80 both count as alike and n0,
    with less free GPU (950 against 1800 milli), wins."""
    best = {}
    for resolution in (0, 80):
        plugin, task = after_history([(1, 3), (2, 2)], [(1, 5), (2, 5), (2, 5)], resolution)
        assert plugin.added(task, np.arange(2)).tolist() == [0.0, -50.0]
        best[resolution] = int(np.argmax(plugin.node_order(task, np.arange(2))))
    assert best == {0: 1, 80: 0}
