"""What a pod asks of GPUs: legacy share (memory, whole cards), HAMi vGPUs, selection keys.

Amounts are read per container from requests (defaulted from limits, as Kubernetes does); a
bad quantity is a :class:`DeviceError` naming the pod and the field.
"""

from __future__ import annotations

from dataclasses import dataclass

from stromboli.core.api import constants as k
from stromboli.core.api.quantity import QuantityError, base_value, parse_quantity

GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_MEMORY_PERCENTAGE = "volcano.sh/vgpu-memory-percentage"
VGPU_CORES = "volcano.sh/vgpu-cores"
NVIDIA_GPU = "nvidia.com/gpu"
#: Most vGPUs one container may ask for, and the largest amount read (MiB, %): beyond it a
#: request is refused instead of driving a long search.
MAX_VGPUS = 64
MAX_AMOUNT = 1 << 40


class DeviceError(ValueError):
    """A pod's device request or a node's device registration that cannot be read."""


@dataclass(frozen=True, slots=True)
class VgpuAsk:
    """One container's vGPU request: ``number`` vGPUs, each with ``memory`` MiB (or
    ``percentage`` % of its card's memory when memory is 0) and ``cores`` % of its SMs."""

    number: int
    memory: int
    percentage: int
    cores: int


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A pod's device request; ``vgpu`` has one entry per app container (``None`` for a
    container that asks for no vGPU), so an assignment can be encoded container by container."""

    gpu_memory: int = 0
    gpu_number: int = 0
    vgpu: tuple[VgpuAsk | None, ...] = ()
    whole_gpus: int = 0
    mode: str = ""
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    use_uuids: frozenset[str] = frozenset()
    nouse_uuids: frozenset[str] = frozenset()
    spread_podgroup: bool = False

    @property
    def wants_vgpu(self) -> bool:
        return any(ask is not None for ask in self.vgpu)

    @property
    def wants_share(self) -> bool:
        return self.gpu_memory > 0 or self.gpu_number > 0

    @property
    def empty(self) -> bool:
        return not (self.wants_share or self.wants_vgpu or self.whole_gpus)


def _amount(pod_name: str, where: str, value: object) -> int:
    try:
        amount = base_value(parse_quantity(value, where))
    except QuantityError as err:
        raise DeviceError(f"pod {pod_name}: {err}") from None
    if amount < 0 or amount > MAX_AMOUNT:
        raise DeviceError(f"pod {pod_name}: {where} is {value!r}, outside 0..{MAX_AMOUNT}")
    return amount


def _words(value: str | None) -> tuple[str, ...]:
    return tuple(w.strip() for w in (value or "").split(",") if w.strip())


def device_request(pod: dict, default_gpu_number: int = 1) -> DeviceRequest:
    """The device request of ``pod``; a vGPU memory or cores request without a number asks for
    ``default_gpu_number`` vGPUs (the device config's ``defaultGPUNum``)."""
    meta = pod.get("metadata") or {}
    name = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
    notes = meta.get("annotations") or {}
    gpu_memory = gpu_number = whole = 0
    asks: list[VgpuAsk | None] = []
    for i, container in enumerate((pod.get("spec") or {}).get("containers") or ()):
        resources = container.get("resources") or {}
        amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        where = f"spec.containers[{i}].resources"

        def read(key: str, where: str = where, amounts: dict = amounts) -> int:
            value = amounts.get(key)
            return 0 if value is None else _amount(name, f"{where}[{key}]", value)

        gpu_memory += read(GPU_MEMORY)
        gpu_number += read(GPU_NUMBER)
        whole += read(NVIDIA_GPU)
        number, memory = read(VGPU_NUMBER), read(VGPU_MEMORY)
        percentage, cores = read(VGPU_MEMORY_PERCENTAGE), read(VGPU_CORES)
        if not number and (memory or percentage or cores):
            number = default_gpu_number
        if number > MAX_VGPUS:
            raise DeviceError(
                f"pod {name}: {where}[{VGPU_NUMBER}] asks for {number} vGPUs, more than {MAX_VGPUS}"
            )
        if percentage > 100 or cores > 100:
            raise DeviceError(
                f"pod {name}: {where}: {VGPU_MEMORY_PERCENTAGE} and {VGPU_CORES} are "
                "percentages (0-100)"
            )
        if number and not memory and not percentage:
            percentage = 100  # no memory asked: the whole card's memory, as HAMi does
        asks.append(VgpuAsk(number, memory, percentage, cores) if number else None)
    return DeviceRequest(
        gpu_memory=gpu_memory,
        gpu_number=gpu_number,
        vgpu=tuple(asks) if any(a is not None for a in asks) else (),
        whole_gpus=whole,
        mode=str(notes.get(k.VGPU_MODE_KEY) or "").strip(),
        use_types=_words(notes.get(k.USE_GPU_TYPE_KEY)),
        nouse_types=_words(notes.get(k.NOUSE_GPU_TYPE_KEY)),
        use_uuids=frozenset(_words(notes.get(k.VGPU_USE_UUID_KEY))),
        nouse_uuids=frozenset(_words(notes.get(k.VGPU_NOUSE_UUID_KEY))),
        spread_podgroup=str(notes.get(k.VGPU_PODGROUP_POLICY_KEY) or "").strip() == "spread",
    )


def type_allowed(card_type: str, request: DeviceRequest) -> bool:
    """HAMi's type filter: the card's type contains one of ``use`` (when any is given) and
    none of ``nouse``, compared without case."""
    lowered = card_type.lower()
    if request.use_types and not any(t.lower() in lowered for t in request.use_types):
        return False
    return not any(t.lower() in lowered for t in request.nouse_types)


def uuid_allowed(uuid: str, request: DeviceRequest) -> bool:
    """The UUID filters: deny wins over allow."""
    if uuid in request.nouse_uuids:
        return False
    return not request.use_uuids or uuid in request.use_uuids
