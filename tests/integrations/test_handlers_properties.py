"""Property test of the live handlers: a framework object mutilated anywhere in its spec (wrong
types, negative and huge numbers, hostile quantities, deep lists) leaves the controller
running, and ends in one of three ways: its PodGroup is stored, a Warning event
``PodGroupError`` names what is wrong, or the conversion itself says there is none (a job
suspended by the change); a sound object next to it gets its PodGroup regardless."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.integrations.kinds import with_framework_kinds
from stromboli.integrations.live import PODGROUP, REASON, FrameworkController

from . import test_kubeflow, test_kuberay
from .test_properties import mutilate


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[dict, str, str, str]] = []

    async def record(self, involved: dict, event_type: str, reason: str, message: str) -> None:
        self.seen.append((involved, event_type, reason, message))


SOURCES = {
    "pytorchjob": test_kubeflow.pytorchjob,
    "raycluster": lambda: test_kuberay.raycluster(test_kuberay.group()),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SOURCES)), st.data())
async def test_a_mutilated_object_gets_a_podgroup_or_a_warning(name: str, data: Any) -> None:
    store = MemoryStore(SystemClock(), kinds=with_framework_kinds(), seed=0)
    events = Events()
    adapters = FrameworkController(store, events=events, every_namespace=True)
    await adapters.prepare()
    await adapters.informer.start()
    base = SOURCES[name]()
    hostile = dict(base)
    mutated = mutilate(data, {"spec": base["spec"]})
    hostile["spec"] = mutated.get("spec") if isinstance(mutated, dict) else mutated
    hostile["metadata"] = {**base["metadata"], "name": "hostile", "uid": "uid-hostile"}
    sound = {**base, "metadata": {**base["metadata"], "name": "sound", "uid": "uid-sound"}}
    kind = (base["apiVersion"], base["kind"])
    adapters.handle(kind, "ADDED", hostile)
    adapters.handle(kind, "ADDED", sound)
    await adapters.step()
    stored = {g["metadata"]["name"] for g in (await store.list(*PODGROUP, "ns")).items}
    warned = [e for e in events.seen if e[0].get("name") == "hostile"]
    hostile_group = "hostile" if name == "pytorchjob" else "ray-hostile-pg"
    sound_group = "sound" if name == "pytorchjob" else "ray-sound-pg"
    assert sound_group in stored
    if hostile_group in stored:
        assert not warned
    else:
        conversion = adapters.conversion_of((*kind, "ns", "hostile"))
        assert warned or (conversion is not None and conversion.notes), "no PodGroup, no word"
        for involved, event_type, reason, message in warned:
            assert (event_type, reason) == ("Warning", REASON)
            assert involved["kind"] == base["kind"] and message
