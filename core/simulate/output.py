"""The final state of a simulation as a Kubernetes ``List`` (``kubectl get -o json`` shape)."""

from __future__ import annotations

from stromboli.core.api.registry import known_kinds
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.simulate.engine import SimulationResult
from stromboli.core.simulate.gpu_figures import gpu_document
from stromboli.core.simulate.inert import BUILTIN_KINDS
from stromboli.integrations.kinds import FRAMEWORK_KINDS

#: Kinds printed first, in this order; every other stored kind follows by name.
LEADING_KINDS = ("Namespace", "PriorityClass", "Queue", "Node", "HyperNode", "PodGroup", "Pod")


async def final_objects(store: MemoryStore) -> list[dict]:
    """Every stored object (inert and framework kinds included), Events last."""
    served = (*known_kinds(), *BUILTIN_KINDS.values(), *FRAMEWORK_KINDS)
    kinds = sorted(
        {(info.api_version, info.kind) for info in served},
        key=lambda ak: (
            LEADING_KINDS.index(ak[1]) if ak[1] in LEADING_KINDS else len(LEADING_KINDS),
            ak[1] == "Event",
            ak[1],
            ak[0],
        ),
    )
    items: list[dict] = []
    for api_version, kind in kinds:
        listed = await store.list(api_version, kind)
        items.extend(listed.items)
    return items


async def as_list(store: MemoryStore) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": await final_objects(store),
    }


#: Key of the simulator's GPU figures in the output ``List`` (beside ``items``), present when
#: some node had GPUs; ``kubectl`` reads a ``List`` by its items and ignores it.
GPU_KEY = "gpu"


def with_gpu(final: dict, result: SimulationResult) -> dict:
    """``final`` with the GPU figures (over time, per node) under :data:`GPU_KEY`, when the
    cluster had GPUs."""
    document = gpu_document(result)
    return final if document is None else {**final, GPU_KEY: document}
