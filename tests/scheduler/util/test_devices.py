"""Device tracking: requests, registrations, the vGPU/MIG/GPU-share fits and the annotation
text that carries assignments across scheduler restarts."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.util.devices import gpushare, vgpu
from stromboli.core.scheduler.util.devices.mig import (
    DEFAULT_GEOMETRIES,
    MigState,
    geometries_from,
    groups_for,
)
from stromboli.core.scheduler.util.devices.request import (
    DeviceError,
    DeviceRequest,
    VgpuAsk,
    device_request,
    type_allowed,
    uuid_allowed,
)


def pod(*containers: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations or {}},
        "spec": {
            "containers": [
                {"name": f"c{i}", "resources": {"limits": amounts}}
                for i, amounts in enumerate(containers)
            ]
        },
    }


def cards(*memories: int, split: int = 10, mode: str = "hami-core", kind: str = "A100") -> list:
    text = json.dumps(
        [
            {
                "id": f"GPU-{i}",
                "index": i,
                "count": split,
                "devmem": m,
                "devcore": 100,
                "type": kind,
                "mode": mode,
            }
            for i, m in enumerate(memories)
        ]
    )
    return vgpu.cards_from_register(text, DEFAULT_GEOMETRIES)


def ask(
    number: int = 1, memory: int = 0, percentage: int = 0, cores: int = 0, **more
) -> DeviceRequest:
    return DeviceRequest(vgpu=(VgpuAsk(number, memory, percentage, cores),), **more)


HOLDER = vgpu.Holder("t", "job")

# -- requests -----------------------------------------------------------------------------------


def test_vgpu_memory_without_number_asks_for_one_and_no_memory_means_whole_card() -> None:
    request = device_request(
        pod({"volcano.sh/vgpu-memory": "2000"}, {"volcano.sh/vgpu-number": "2"})
    )
    assert request.vgpu == (VgpuAsk(1, 2000, 0, 0), VgpuAsk(2, 0, 100, 0))


def test_a_container_without_vgpus_keeps_its_place() -> None:
    request = device_request(pod({"cpu": "1"}, {"volcano.sh/vgpu-number": "1"}))
    assert request.vgpu[0] is None and request.vgpu[1] is not None


@pytest.mark.parametrize(
    "amounts, field",
    [
        ({"volcano.sh/vgpu-cores": "150"}, "volcano.sh/vgpu-cores"),
        ({"volcano.sh/vgpu-memory": "lots"}, "volcano.sh/vgpu-memory"),
        ({"volcano.sh/vgpu-number": "100000"}, "volcano.sh/vgpu-number"),
        ({"volcano.sh/gpu-memory": "-5"}, "volcano.sh/gpu-memory"),
    ],
)
def test_bad_requests_name_pod_and_field(amounts: dict[str, str], field: str) -> None:
    with pytest.raises(DeviceError, match=field) as err:
        device_request(pod(amounts))
    assert "ns/p" in str(err.value)


def test_selection_annotations() -> None:
    request = device_request(
        pod(
            {"volcano.sh/vgpu-number": "1"},
            annotations={
                "nvidia.com/use-gputype": "A100, H100",
                "volcano.sh/vgpu-nouse-gpuuuid": "GPU-1",
                "volcano.sh/vgpu-podgroup-policy": "spread",
                "volcano.sh/vgpu-mode": "mig",
            },
        )
    )
    assert request.use_types == ("A100", "H100") and request.mode == "mig"
    assert request.spread_podgroup and request.nouse_uuids == {"GPU-1"}


def test_type_and_uuid_filters() -> None:
    request = DeviceRequest(use_types=("a100",), nouse_types=("PCIE",))
    assert type_allowed("NVIDIA-A100-SXM4-40GB", request)
    assert not type_allowed("NVIDIA-A100-PCIE-40GB", request)
    assert not type_allowed("NVIDIA-H100", request)
    both = DeviceRequest(use_uuids=frozenset({"a", "b"}), nouse_uuids=frozenset({"b"}))
    assert uuid_allowed("a", both) and not uuid_allowed("b", both) and not uuid_allowed("c", both)


# -- registrations and assignment text ------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not JSON"),
        ('{"id": "a"}', "not a JSON list"),
        ('[{"index": 0}]', "no string id"),
        ('[{"id": "a", "devmem": -1}]', "devmem"),
        ('[{"id": "a", "count": true}]', "count"),
        ('[{"id": "a"}, {"id": "a"}]', "twice"),
        ("[" + ",".join(f'{{"id": "g{i}"}}' for i in range(200)) + "]", "more than"),
    ],
)
def test_malformed_registrations_are_refused(text: str, message: str) -> None:
    with pytest.raises(DeviceError, match=message):
        vgpu.cards_from_register(text, DEFAULT_GEOMETRIES)


def test_assignment_text_round_trip_with_mig_ids() -> None:
    assignment = (
        (vgpu.Grant("GPU-a", "A100", 5120, 0, "group2", 3),),
        (),
        (vgpu.Grant("GPU-b", "A100", 3000, 30), vgpu.Grant("GPU-c", "A100", 3000, 30)),
    )
    text = vgpu.encode(assignment)
    assert text == "GPU-a[group2-3],A100,5120,0:;;GPU-b,A100,3000,30:GPU-c,A100,3000,30:"
    assert vgpu.decode(text) == assignment


@given(st.text(max_size=200))
def test_decoding_any_text_either_works_or_says_why(text: str) -> None:
    with contextlib.suppress(DeviceError):
        vgpu.decode(text)


@given(st.text(max_size=100))
def test_any_registration_text_either_parses_or_says_why(text: str) -> None:
    with contextlib.suppress(DeviceError):
        vgpu.cards_from_register(text, DEFAULT_GEOMETRIES)


# -- vGPU fit ----------------------------------------------------------------------------------


def test_binpack_fills_the_used_card_spread_the_idle_one() -> None:
    pool = cards(10000, 10000)
    first = vgpu.fit(pool, ask(1, 1000), HOLDER)
    assert not isinstance(first, str)
    vgpu.apply(next(c for c in pool if c.uuid == first[0][0].uuid), first[0][0], HOLDER, +1)
    used = next(c.uuid for c in pool if c.used_count)
    other = vgpu.Holder("u", "job2")
    packed = vgpu.fit(pool, ask(1, 1000), other, vgpu.BINPACK)
    spread = vgpu.fit(pool, ask(1, 1000), other, vgpu.SPREAD)
    assert not isinstance(packed, str) and not isinstance(spread, str)
    assert packed[0][0].uuid == used and spread[0][0].uuid != used


def test_vgpus_of_one_container_sit_on_distinct_cards() -> None:
    assert vgpu.fit(cards(10000), ask(2, 1000), HOLDER) == vgpu.NO_VGPU
    fitted = vgpu.fit(cards(10000, 10000), ask(2, 1000), HOLDER)
    assert not isinstance(fitted, str) and {g.uuid for g in fitted[0]} == {"GPU-0", "GPU-1"}


def test_percentage_and_whole_cores() -> None:
    pool = cards(8000)
    fitted = vgpu.fit(pool, ask(1, percentage=25), HOLDER)
    assert not isinstance(fitted, str) and fitted[0][0].memory == 2000
    vgpu.apply(pool[0], fitted[0][0], HOLDER, +1)
    assert vgpu.fit(pool, ask(1, 100, cores=100), vgpu.Holder("u", "j")) == vgpu.NO_CORES


def test_split_count_limits_sharers() -> None:
    pool = cards(100000, split=2)
    for uid in ("a", "b"):
        holder = vgpu.Holder(uid, uid)
        fitted = vgpu.fit(pool, ask(1, 10), holder)
        assert not isinstance(fitted, str)
        vgpu.apply(pool[0], fitted[0][0], holder, +1)
    assert isinstance(vgpu.fit(pool, ask(1, 10), vgpu.Holder("c", "c")), str)


def test_podgroup_spread_and_exclusivity() -> None:
    pool = cards(100000)
    mate = vgpu.Holder("a", "job", frozenset({0}))
    fitted = vgpu.fit(pool, ask(1, 10), mate)
    assert not isinstance(fitted, str)
    vgpu.apply(pool[0], fitted[0][0], mate, +1)
    assert isinstance(
        vgpu.fit(pool, ask(1, 10, spread_podgroup=True), vgpu.Holder("b", "job")), str
    )
    assert not isinstance(vgpu.fit(pool, ask(1, 10), vgpu.Holder("b", "job")), str)
    assert isinstance(vgpu.fit(pool, ask(1, 10), vgpu.Holder("c", "other", frozenset({0}))), str)
    assert not isinstance(
        vgpu.fit(pool, ask(1, 10), vgpu.Holder("d", "other", frozenset({1}))), str
    )


def test_unhealthy_and_mode_filtered() -> None:
    pool = cards(10000)
    pool[0].healthy = False
    assert isinstance(vgpu.fit(pool, ask(1, 10), HOLDER), str)
    assert isinstance(vgpu.fit(cards(10000), ask(1, 10, mode="mig"), HOLDER), str)


requests = st.lists(
    st.tuples(
        st.integers(1, 3),  # vGPUs
        st.integers(0, 12000),  # memory
        st.integers(0, 100),  # percentage (used when memory is 0)
        st.sampled_from([0, 10, 30, 50, 100]),  # cores
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(requests, st.sampled_from([vgpu.BINPACK, vgpu.SPREAD]), st.integers(1, 6))
def test_random_pod_mixes_never_exceed_a_card(mix: list, policy: str, split: int) -> None:
    pool = cards(16000, 24000, 40000, split=split)
    placed: list[tuple[vgpu.Holder, vgpu.Assignment]] = []
    for i, (number, memory, percentage, cores) in enumerate(mix):
        holder = vgpu.Holder(f"t{i}", f"j{i}")
        request = ask(number, memory, max(percentage, 1) if not memory else 0, cores)
        fitted = vgpu.fit(pool, request, holder, policy)
        if isinstance(fitted, str):
            continue
        by = {c.uuid: c for c in pool}
        for grants in fitted:
            for grant in grants:
                assert vgpu.apply(by[grant.uuid], grant, holder, +1)
        placed.append((holder, fitted))
        for card in pool:
            assert 0 <= card.used_memory <= card.memory
            assert 0 <= card.used_cores <= card.cores
            assert 0 <= card.used_count <= card.split
    # A restart: fresh cards, rebuilt from the written text alone, hold exactly the same.
    rebuilt = cards(16000, 24000, 40000, split=split)
    by = {c.uuid: c for c in rebuilt}
    for holder, fitted in placed:
        for grants in vgpu.decode(vgpu.encode(fitted)):
            for grant in grants:
                assert vgpu.apply(by[grant.uuid], grant, holder, +1)
    for old, new in zip(pool, rebuilt, strict=True):
        assert (old.used_memory, old.used_cores, old.used_count) == (
            new.used_memory,
            new.used_cores,
            new.used_count,
        )
    for holder, fitted in placed:
        for grants in fitted:
            for grant in grants:
                vgpu.apply(by[grant.uuid], grant, holder, -1)
    assert all((c.used_memory, c.used_cores, c.used_count) == (0, 0, 0) for c in rebuilt)


# -- MIG ---------------------------------------------------------------------------------------


def test_mig_two_8000_on_an_empty_a100_take_two_2g_10gb() -> None:
    pool = cards(40960, mode="mig", kind="NVIDIA-A100-SXM4-40GB")
    fitted = vgpu.fit(pool, ask(2, 8000), HOLDER)
    assert not isinstance(fitted, str)
    assert [(g.mig_group, g.memory) for g in fitted[0]] == [("group2", 10240)] * 2


def test_mig_smallest_fitting_instance_and_group_fixed_while_used() -> None:
    pool = cards(40960, mode="mig", kind="NVIDIA-A100-SXM4-40GB")
    fitted = vgpu.fit(pool, ask(1, 3000), HOLDER)
    assert not isinstance(fitted, str) and fitted[0][0].memory == 5120
    assert vgpu.apply(pool[0], fitted[0][0], HOLDER, +1)
    # group1 (7 × 1g.5gb) is in use: a 20 GB request has no instance until the card empties.
    big = vgpu.Holder("big", "big")
    assert isinstance(vgpu.fit(pool, ask(1, 20000), big), str)
    vgpu.apply(pool[0], fitted[0][0], HOLDER, -1)
    assert not isinstance(vgpu.fit(pool, ask(1, 20000), big), str)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 45000), max_size=12),
    st.sampled_from(["A100-SXM4-40GB", "A100-SXM4-80GB", "A30"]),
)
def test_mig_instances_are_valid_for_the_model(memories: list[int], model: str) -> None:
    groups = groups_for(model, DEFAULT_GEOMETRIES)
    state = MigState(groups)
    for memory in memories:
        chosen = state.choose(memory)
        if chosen is None:
            continue
        group, position, size = chosen
        instances = next(g for g in groups if g.group == group).instances()
        assert instances[position].memory == size >= memory
        assert state.take(group, position) == size
        assert {state.group} == {group}
        assert len(state.taken) <= len(instances)


def test_geometries_config_is_checked() -> None:
    parsed = geometries_from(
        [
            {
                "models": ["X1"],
                "allowedGeometries": [
                    {"group": "g", "geometries": [{"name": "1g", "memory": 100, "count": 2}]}
                ],
            }
        ]
    )
    assert groups_for("vendor-X1-card", parsed)[0].instances()[1].memory == 100
    with pytest.raises(DeviceError, match=r"geometries\[0\].count"):
        geometries_from(
            [{"models": ["X"], "allowedGeometries": [{"geometries": [{"memory": 1, "count": 0}]}]}]
        )
    with pytest.raises(DeviceError, match="models"):
        geometries_from([{"models": "X"}])


# -- GPU share ---------------------------------------------------------------------------------


def test_share_cards_split_memory_and_skip_unhealthy() -> None:
    pool = gpushare.share_cards(4, 64000, "1, x,3")
    assert [c.memory for c in pool] == [16000] * 4
    assert [c.id for c in pool if c.healthy] == [0, 2]


def test_share_binpack_spread_and_whole_cards() -> None:
    pool = gpushare.share_cards(3, 30000, None)
    gpushare.apply_share(pool, [1], DeviceRequest(gpu_memory=4000), "a", +1)
    memory = DeviceRequest(gpu_memory=2000)
    assert gpushare.fit_share(pool, memory, spread=False) == [1]
    assert gpushare.fit_share(pool, memory, spread=True) == [0]
    assert gpushare.fit_share(pool, DeviceRequest(gpu_number=2), spread=False) == [0, 2]
    assert (
        gpushare.fit_share(pool, DeviceRequest(gpu_number=3), spread=False)
        == "no enough gpu number"
    )
    assert (
        gpushare.fit_share(pool, DeviceRequest(gpu_memory=20000), spread=False)
        == "no enough gpu memory"
    )
    gpushare.apply_share(pool, [1], DeviceRequest(gpu_memory=4000), "a", -1)
    assert all(c.used_memory == 0 for c in pool)


def test_gpu_index_text() -> None:
    assert gpushare.parse_index("0,2") == [0, 2]
    with pytest.raises(DeviceError, match="not a card id"):
        gpushare.parse_index("0,-1")
