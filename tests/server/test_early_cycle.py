"""Early cycles: new work seen by the watch starts the next cycle before the period ends, and
nothing else does (the loop on the in-memory store, with a period far longer than the test)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler import arrivals as arrivals_module
from stromboli.core.scheduler.arrivals import Arrivals
from stromboli.core.scheduler.cache import SchedulerCache
from stromboli.core.scheduler.server import SchedulerOptions, SchedulerServer
from tests.scheduler import builders
from tests.server.test_scheduler_server import bound, gang, node, wait_for

#: Longer than any of these tests runs: a cycle after the first is an early one.
PERIOD = 600.0


async def started(gap: float) -> tuple[MemoryStore, SchedulerServer, asyncio.Task]:
    store = MemoryStore(SystemClock())
    await store.create(node("n1"))
    options = SchedulerOptions(
        schedule_period=PERIOD, listen_address="", healthz_address="", early_cycle_gap=gap
    )
    server = SchedulerServer(store, options)
    running = asyncio.create_task(server.run())

    async def first_cycle() -> bool:
        return server.cycles >= 1

    await wait_for(first_cycle)
    return store, server, running


async def stopped(server: SchedulerServer, running: asyncio.Task) -> None:
    server.stop()
    await asyncio.wait_for(running, 5)


async def test_a_gang_created_mid_period_is_bound_before_the_period_ends() -> None:
    store, server, running = await started(gap=0.02)
    try:
        for obj in gang("g", 2, "1"):
            await store.create(obj)

        async def placed() -> bool:
            return all((await bound(store)).values())

        await wait_for(placed)  # ten seconds at most, against a 600 s period
        assert server.early_cycles >= 1
    finally:
        await stopped(server, running)


async def test_without_early_cycles_new_work_waits_for_the_period() -> None:
    store, server, running = await started(gap=0.0)
    try:
        for obj in gang("g", 2, "1"):
            await store.create(obj)
        await asyncio.sleep(0.5)
        assert server.cycles == 1 and server.early_cycles == 0
        assert not any((await bound(store)).values())
    finally:
        await stopped(server, running)


async def test_status_changes_of_placed_pods_start_no_cycle() -> None:
    store, server, running = await started(gap=0.02)
    try:
        for obj in gang("g", 2, "1"):
            await store.create(obj)

        async def placed() -> bool:
            return all((await bound(store)).values())

        await wait_for(placed)
        await asyncio.sleep(0.2)  # the binding's own watch events settle
        cycles = server.cycles
        for name in ("g-0", "g-1"):
            pod = await store.get("v1", "Pod", name, "default")
            pod["status"] = {"phase": "Running"}
            await store.update_status(pod)
        await asyncio.sleep(0.3)
        assert server.cycles == cycles
    finally:
        await stopped(server, running)


POD = ("v1", "Pod")
PODGROUP = ("scheduling.volcano.sh/v1beta1", "PodGroup")


def watched() -> tuple[SchedulerCache, Arrivals, Callable[..., bool]]:
    """A cache and its arrivals signal, and a function that feeds one event to both (as the
    scheduler's intake does) and tells whether it was new work."""
    cache = SchedulerCache(("volcano",))
    arrivals = Arrivals(cache)

    def feed(kind: tuple[str, str], event_type: str, obj: dict) -> bool:
        arrivals.clear()
        cache.apply(kind, event_type, obj)
        arrivals.notice(kind, event_type, obj)
        return arrivals.is_set()

    return cache, arrivals, feed


def a_pod(name: str, group: str | None = None, **kwargs: Any) -> dict:
    return builders.pod(name, group=group, uid=f"uid-{name}", **kwargs)


def test_a_pending_pod_of_a_known_group_is_work() -> None:
    _, arrivals, feed = watched()
    assert not feed(PODGROUP, "ADDED", builders.podgroup("g"))  # no pods yet: nothing to do
    assert feed(POD, "ADDED", a_pod("p", "g"))
    assert arrivals.seen == 1
    assert not feed(POD, "MODIFIED", a_pod("p", "g"))  # e.g. our own condition written


def test_a_pod_before_its_group_is_work_when_the_group_comes() -> None:
    _, _, feed = watched()
    assert not feed(POD, "ADDED", a_pod("p", "g"))
    assert feed(PODGROUP, "ADDED", builders.podgroup("g"))
    assert not feed(POD, "MODIFIED", a_pod("p", "g"))  # already counted with its group


def test_a_plain_pod_is_work_once_the_controller_links_it_to_its_group() -> None:
    _, _, feed = watched()
    assert not feed(POD, "ADDED", a_pod("p"))  # no group named yet
    assert not feed(PODGROUP, "ADDED", builders.podgroup("podgroup-p"))  # no pod names it yet
    assert feed(POD, "MODIFIED", a_pod("p", "podgroup-p"))  # annotated: now it is work
    assert not feed(POD, "MODIFIED", a_pod("p", "podgroup-p"))


def test_a_gang_is_work_once_it_has_its_min_member_pods() -> None:
    _, _, feed = watched()
    assert not feed(PODGROUP, "ADDED", builders.podgroup("g", 3))
    assert not feed(POD, "ADDED", a_pod("p0", "g"))
    assert not feed(POD, "ADDED", a_pod("p1", "g"))
    assert feed(POD, "ADDED", a_pod("p2", "g"))
    assert feed(POD, "ADDED", a_pod("p3", "g"))  # beyond minMember: may fit on its own


def test_a_group_arriving_after_its_pods_is_work_only_when_complete() -> None:
    _, _, feed = watched()
    feed(POD, "ADDED", a_pod("p0", "g"))
    assert not feed(PODGROUP, "ADDED", builders.podgroup("g", 2))
    assert feed(POD, "ADDED", a_pod("p1", "g"))


@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.floats(allow_nan=True),
        st.text(max_size=5),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    ),
    st.integers(0, 5),
)
def test_any_min_member_is_judged_without_raising(min_member: object, pods: int) -> None:
    complete = arrivals_module._complete({"spec": {"minMember": min_member}}, range(pods))
    if isinstance(min_member, int) and not isinstance(min_member, bool):
        assert complete == (pods >= (min_member or 1))


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        (POD, a_pod("p", "g", node_name="n1")),  # placed already
        (POD, a_pod("p", "g", scheduler="default-scheduler")),  # not ours
        (POD, a_pod("p", "g", scheduler=None)),  # default-scheduler's
        (("v1", "Node"), builders.node("n")),
        (("scheduling.volcano.sh/v1beta1", "Queue"), builders.queue("q")),
    ],
)
def test_what_is_not_work(kind: tuple[str, str], obj: dict) -> None:
    _, arrivals, feed = watched()
    feed(PODGROUP, "ADDED", builders.podgroup("g"))
    for event_type in ("ADDED", "MODIFIED", "DELETED"):
        assert not feed(kind, event_type, obj)
    assert arrivals.seen == 0


def test_pods_waiting_for_a_group_are_remembered_boundedly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(arrivals_module, "UNLINKED_LIMIT", 10)
    _, arrivals, feed = watched()
    for i in range(50):
        feed(POD, "ADDED", a_pod(f"p{i}"))
    assert len(arrivals._unlinked) == 10
    feed(POD, "DELETED", a_pod("p49"))
    assert len(arrivals._unlinked) == 9
