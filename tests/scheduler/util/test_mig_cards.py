"""MIG across the cards of a node: the card is chosen first (by the policy's order), then the
smallest free instance on it, as Volcano's vGPU MIG mode does (it tries cards one by one and
takes the first whose split holds the request)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.scheduler.util.devices import vgpu
from stromboli.core.scheduler.util.devices.mig import DEFAULT_GEOMETRIES
from stromboli.core.scheduler.util.devices.request import DeviceRequest, VgpuAsk

A100 = "NVIDIA-A100-SXM4-40GB"


def mig_cards(count: int) -> list[vgpu.Card]:
    text = json.dumps(
        [
            {"id": f"GPU-{i}", "index": i, "count": 7, "devmem": 40960, "devcore": 100,
             "type": A100, "mode": "mig"}
            for i in range(count)
        ]
    )  # fmt: skip
    return vgpu.cards_from_register(text, DEFAULT_GEOMETRIES)


def ask(memory: int) -> DeviceRequest:
    return DeviceRequest(vgpu=(VgpuAsk(1, memory, 0, 0),), mode="mig")


def place(pool: list[vgpu.Card], memory: int, name: str, policy: str = vgpu.BINPACK) -> vgpu.Grant:
    holder = vgpu.Holder(name, name)
    fitted = vgpu.fit(pool, ask(memory), holder, policy)
    assert not isinstance(fitted, str), fitted
    grant = fitted[0][0]
    card = next(c for c in pool if c.uuid == grant.uuid)
    assert vgpu.apply(card, grant, holder, +1)
    return grant


def split_two_ways() -> list[vgpu.Card]:
    """Card 0 split 2 x 3g.20gb with one in use; card 1 split 7 x 1g.5gb with one in use."""
    pool = mig_cards(2)
    assert place(pool, 19000, "big").uuid == "GPU-0"
    assert place(pool, 4000, "small", vgpu.SPREAD).uuid == "GPU-1"
    return pool


def test_binpack_keeps_to_the_fuller_card_even_if_its_free_instance_is_larger() -> None:
    pool = split_two_ways()
    grant = place(pool, 4000, "next")
    # Card-first, as Volcano: the fuller card's free 3g.20gb, not card 1's free 1g.5gb.
    assert (grant.uuid, grant.mig_group, grant.memory) == ("GPU-0", "group3", 20480)


def test_spread_takes_the_emptier_card_and_its_smallest_instance() -> None:
    pool = split_two_ways()
    grant = place(pool, 4000, "next", vgpu.SPREAD)
    assert (grant.uuid, grant.mig_group, grant.memory) == ("GPU-1", "group1", 5120)


def test_a_card_that_cannot_hold_the_request_is_passed_over() -> None:
    pool = split_two_ways()
    place(pool, 19000, "big-2")  # card 0's second 3g.20gb: card 0 is now full
    grant = place(pool, 4000, "next")
    assert (grant.uuid, grant.memory) == ("GPU-1", 5120)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 42000), min_size=1, max_size=14),
    st.sampled_from([vgpu.BINPACK, vgpu.SPREAD]),
)
def test_each_grant_is_the_smallest_instance_its_card_had(memories: list[int], policy: str) -> None:
    pool = mig_cards(3)
    for n, memory in enumerate(memories):
        fitted = vgpu.fit(pool, ask(memory), vgpu.Holder(f"p{n}", f"p{n}"), policy)
        if isinstance(fitted, str):
            # Nothing fits: no card offers any free instance that large.
            assert all(c.mig is not None and c.mig.choose(memory) is None for c in pool)
            continue
        grant = fitted[0][0]
        card = next(c for c in pool if c.uuid == grant.uuid)
        assert card.mig is not None
        best = card.mig.choose(memory)
        assert best is not None and grant.memory == best[2] >= memory
        assert vgpu.apply(card, grant, vgpu.Holder(f"p{n}", f"p{n}"), +1)
