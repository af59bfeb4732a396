"""The vGPU device configuration (HAMi's ``device-config.yaml``, in Volcano's
``volcano-vgpu-device-config`` ConfigMap) as far as the scheduler uses it: the
``nvidia.knownMigGeometries`` that say how each GPU model may be split into MIG instances.

The other settings (``deviceSplitCount``, memory and core scaling, resource names) shape what
the device plugin registers on the node (``volcano.sh/node-vgpu-register``), which the
scheduler reads as it is. Parsed texts are kept by content, so a session per second does not
parse the same YAML again.
"""

from __future__ import annotations

from collections.abc import Mapping

from stromboli.core.api.yamlbounds import YamlBoundsError, load_documents
from stromboli.core.scheduler.util.devices.mig import ModelGeometries, geometries_from
from stromboli.core.scheduler.util.devices.request import DeviceError

#: The ConfigMap key HAMi and Volcano read.
CONFIG_KEY = "device-config.yaml"
#: Longest configuration text read.
MAX_TEXT = 1 << 20

_parsed: dict[str, tuple[ModelGeometries, ...] | None] = {}


def known_geometries(data: Mapping[str, str], where: str) -> tuple[ModelGeometries, ...] | None:
    """The MIG geometries a ConfigMap's ``data`` gives, or None when it gives none; a
    configuration that cannot be read raises :class:`DeviceError` naming ``where`` and the
    field."""
    text = data.get(CONFIG_KEY)
    if text is None:
        return None
    if len(text) > MAX_TEXT:
        raise DeviceError(f"{where}: data[{CONFIG_KEY}] is longer than {MAX_TEXT} characters")
    if text in _parsed:
        return _parsed[text]
    try:
        documents = load_documents(text)
    except YamlBoundsError as err:
        raise DeviceError(f"{where}: data[{CONFIG_KEY}]: {err}") from None
    doc = documents[0] if documents else None
    nvidia = doc.get("nvidia") if isinstance(doc, Mapping) else None
    known = nvidia.get("knownMigGeometries") if isinstance(nvidia, Mapping) else None
    found = (
        None
        if known is None
        else geometries_from(known, f"{where}: data[{CONFIG_KEY}].nvidia.knownMigGeometries")
    )
    if len(_parsed) > 16:
        _parsed.clear()
    _parsed[text] = found
    return found
