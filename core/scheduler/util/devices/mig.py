"""Dynamic MIG: the instance layouts (geometry groups) a GPU model allows, and the choice of
the smallest free instance that holds a request.

A card in ``mig`` mode is split by one geometry group at a time: its instances are the group's
geometries expanded in order (position 0, 1, ...). An empty card may take any group of its
model; once an instance is in use the card's group is fixed until it is empty again. The
choice is best fit: the smallest instance whose memory holds the request, on the card's group
or, for an empty card, the first group offering the smallest such instance.

Best fit is per card, not across the node's cards: :func:`vgpu.fit` orders the cards by the
policy (binpack: fullest first) and the first card with a free instance that holds the request
gives its smallest one. So under binpack a 4000 MiB pod may take a free 3g.20gb on a fuller card
while another card has a free 1g.5gb. Volcano's MIG mode is card-first the same way (it tries
the cards one by one and takes the first whose split holds the request); keeping its choice
means a pod lands on the card, and the instance, that it would under Volcano.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stromboli.core.scheduler.util.devices.request import DeviceError


@dataclass(frozen=True, slots=True)
class Geometry:
    """``count`` instances named ``name`` (such as ``1g.10gb``) of ``memory`` MiB each."""

    name: str
    memory: int
    count: int


@dataclass(frozen=True, slots=True)
class GeometryGroup:
    group: str
    geometries: tuple[Geometry, ...]

    def instances(self) -> tuple[Geometry, ...]:
        """One entry per instance position."""
        return tuple(g for g in self.geometries for _ in range(g.count))


@dataclass(frozen=True, slots=True)
class ModelGeometries:
    """The groups allowed on cards whose type contains one of ``models``."""

    models: tuple[str, ...]
    groups: tuple[GeometryGroup, ...]


def _group(name: str, *parts: tuple[str, int, int]) -> GeometryGroup:
    return GeometryGroup(name, tuple(Geometry(n, m, c) for n, m, c in parts))


def _profiles(total_gb: int) -> tuple[GeometryGroup, ...]:
    """The usual layouts of a 7-slice card with ``total_gb`` of memory (A100, H100 class)."""
    unit = total_gb // 8
    one, two, three = unit, unit * 2, unit * 4
    return (
        _group("group1", (f"1g.{one}gb", one * 1024, 7)),
        _group("group2", (f"2g.{two}gb", two * 1024, 3), (f"1g.{one}gb", one * 1024, 1)),
        _group("group3", (f"3g.{three}gb", three * 1024, 2)),
        _group("group4", (f"7g.{total_gb}gb", total_gb * 1024, 1)),
    )


#: Built-in layouts, used when the device config names none; the device config's
#: ``knownMigGeometries`` replaces them.
DEFAULT_GEOMETRIES: tuple[ModelGeometries, ...] = (
    ModelGeometries(("A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"), _profiles(40)),
    ModelGeometries(
        ("A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB", "H100-SXM5-80GB", "H100-PCIE-80GB"),
        _profiles(80),
    ),
    ModelGeometries(
        ("A30",),
        (
            _group("group1", ("1g.6gb", 6 * 1024, 4)),
            _group("group2", ("2g.12gb", 12 * 1024, 2)),
            _group("group3", ("4g.24gb", 24 * 1024, 1)),
        ),
    ),
)


def geometries_from(
    config: object, where: str = "knownMigGeometries"
) -> tuple[ModelGeometries, ...]:
    """``knownMigGeometries`` of a device config: ``[{models, allowedGeometries: [{group,
    geometries: [{name, memory, count}]}]}]``; anything else is a :class:`DeviceError`."""
    if not isinstance(config, list):
        raise DeviceError(f"{where}: expected a list, got {type(config).__name__}")
    out: list[ModelGeometries] = []
    for i, entry in enumerate(config):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise DeviceError(f"{at}: expected a mapping")
        models = entry.get("models")
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise DeviceError(f"{at}.models: expected a list of model names")
        groups: list[GeometryGroup] = []
        for j, group in enumerate(entry.get("allowedGeometries") or ()):
            gat = f"{at}.allowedGeometries[{j}]"
            if not isinstance(group, dict) or not isinstance(group.get("geometries"), list):
                raise DeviceError(f"{gat}: expected {{group, geometries: [...]}}")
            parts: list[Geometry] = []
            for n, geometry in enumerate(group["geometries"]):
                pat = f"{gat}.geometries[{n}]"
                if not isinstance(geometry, dict):
                    raise DeviceError(f"{pat}: expected {{name, memory, count}}")
                memory, count = geometry.get("memory"), geometry.get("count")
                if not isinstance(memory, int) or not 0 < memory <= 1 << 30:
                    raise DeviceError(f"{pat}.memory: expected MiB, a positive integer")
                if not isinstance(count, int) or not 0 < count <= 64:
                    raise DeviceError(f"{pat}.count: expected an integer from 1 to 64")
                parts.append(Geometry(str(geometry.get("name") or ""), memory, count))
            groups.append(GeometryGroup(str(group.get("group") or f"group{j + 1}"), tuple(parts)))
        out.append(ModelGeometries(tuple(models), tuple(groups)))
    return tuple(out)


def groups_for(card_type: str, known: tuple[ModelGeometries, ...]) -> tuple[GeometryGroup, ...]:
    """The geometry groups of the first entry naming a model the card's type contains."""
    lowered = card_type.lower()
    for entry in known:
        if any(model.lower() in lowered for model in entry.models):
            return entry.groups
    return ()


@dataclass(slots=True)
class MigState:
    """Which group a card is split by and which of its instance positions are taken."""

    groups: tuple[GeometryGroup, ...]
    group: str = ""
    taken: set[int] = field(default_factory=set)

    def group_named(self, name: str) -> GeometryGroup | None:
        return next((g for g in self.groups if g.group == name), None)

    def choose(self, memory: int) -> tuple[str, int, int] | None:
        """(group, position, instance memory) of the smallest free instance holding
        ``memory`` MiB, or None."""
        candidates = self.groups if not self.taken else ()
        if self.taken:
            current = self.group_named(self.group)
            candidates = (current,) if current is not None else ()
        best: tuple[int, int, str, int] | None = None
        for order, group in enumerate(candidates):
            for position, geometry in enumerate(group.instances()):
                if position in self.taken or geometry.memory < memory:
                    continue
                key = (geometry.memory, order, group.group, position)
                if best is None or key[:2] < best[:2]:
                    best = key
        if best is None:
            return None
        return best[2], best[3], best[0]

    def take(self, group: str, position: int) -> int:
        """Mark an instance used; its memory, or -1 when the card cannot hold it (another
        group in use, no such position, or taken already)."""
        chosen = self.group_named(group)
        if chosen is None or (self.taken and group != self.group):
            return -1
        instances = chosen.instances()
        if not 0 <= position < len(instances) or position in self.taken:
            return -1
        self.group = group
        self.taken.add(position)
        return instances[position].memory

    def give_back(self, group: str, position: int) -> None:
        if group == self.group:
            self.taken.discard(position)
            if not self.taken:
                self.group = ""
