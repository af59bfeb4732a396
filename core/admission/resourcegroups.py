"""Volcano's pod resource groups (``vc-webhook-manager --admission-conf FILE``).

The file is Volcano's admission configuration::

    resourceGroups:
    - resourceGroup: gpu              # the group's name
      object:                         # which pods belong (optional)
        key: namespace                # namespace | annotation
        value: [ml-team, ml-batch]    # namespaces, or "key: value" annotation pairs
      schedulerName: volcano
      labels: {node-pool: gpu}        # merged into the pod's nodeSelector
      tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
      affinity: '{"nodeAffinity": {...}}'   # JSON, used only when the pod has none

A group without ``object`` takes the pods annotated ``volcano.sh/resource-group: <name>``.
At pod CREATE the first group that takes the pod is applied: its labels are set in
``spec.nodeSelector``, its tolerations appended, its affinity set when the pod has none, its
scheduler name set when it names one. The file is read once and checked whole, so a mistake
stops the webhook at start-up naming the group and field instead of mutating pods wrongly.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
import yaml

from stromboli.core.api.yamlbounds import YamlBoundsError, scan

RESOURCE_GROUP_ANNOTATION: Final = "volcano.sh/resource-group"
OBJECT_KEYS: Final = ("namespace", "annotation")
MAX_FILE_BYTES: Final = 1 << 20
"""An admission configuration is a few groups; anything bigger is a mistake, not a config."""
MAX_AFFINITY_BYTES: Final = 64 << 10


class AdmissionConfError(ValueError):
    """An --admission-conf file that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """One ``resourceGroups[]`` entry, checked."""

    name: str
    object_key: str = ""
    values: tuple[str, ...] = ()
    scheduler_name: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    affinity: Mapping[str, Any] | None = None

    def takes(self, namespace: str, annotations: Mapping[str, Any]) -> bool:
        """Whether a pod in ``namespace`` with ``annotations`` belongs to this group."""
        if self.object_key == "namespace":
            return namespace in self.values
        if self.object_key == "annotation":
            for pair in self.values:
                key, _, value = pair.partition(":")
                if annotations.get(key.strip()) == value.strip():
                    return True
            return False
        return annotations.get(RESOURCE_GROUP_ANNOTATION) == self.name


def _string(value: Any, where: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise AdmissionConfError(f"{where}: must be a non-empty string, got {value!r:.80}")
    return value


def _group(raw: Any, where: str) -> ResourceGroup:
    if not isinstance(raw, Mapping):
        raise AdmissionConfError(f"{where}: must be a mapping")
    name = _string(raw.get("resourceGroup"), f"{where}.resourceGroup", required=True)
    where = f"resourceGroups[{name}]"
    obj = raw.get("object") or {}
    if not isinstance(obj, Mapping):
        raise AdmissionConfError(f"{where}.object: must be a mapping with key and value")
    key = _string(obj.get("key"), f"{where}.object.key")
    if key and key not in OBJECT_KEYS:
        raise AdmissionConfError(f"{where}.object.key: {key!r} is not one of {OBJECT_KEYS}")
    values = obj.get("value") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise AdmissionConfError(f"{where}.object.value: must be a list of strings")
    if key and not values:
        raise AdmissionConfError(f"{where}.object.value: names no {key} (the group takes no pod)")
    if key == "annotation":
        for pair in values:
            if not pair.partition(":")[0].strip() or ":" not in pair:
                raise AdmissionConfError(
                    f"{where}.object.value: {pair!r:.80} is not an annotation 'key: value'"
                )
    labels = raw.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise AdmissionConfError(f"{where}.labels: must map strings to strings")
    tolerations = raw.get("tolerations") or []
    if not isinstance(tolerations, list) or not all(isinstance(t, Mapping) for t in tolerations):
        raise AdmissionConfError(f"{where}.tolerations: must be a list of tolerations")
    return ResourceGroup(
        name=name,
        object_key=key,
        values=tuple(values),
        scheduler_name=_string(raw.get("schedulerName"), f"{where}.schedulerName"),
        node_selector=dict(labels),
        tolerations=tuple(dict(t) for t in tolerations),
        affinity=_affinity(raw.get("affinity"), f"{where}.affinity"),
    )


def _affinity(value: Any, where: str) -> Mapping[str, Any] | None:
    """Volcano keeps the affinity as a JSON string; a mapping written as YAML is accepted too."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if len(value) > MAX_AFFINITY_BYTES:
            raise AdmissionConfError(f"{where}: over {MAX_AFFINITY_BYTES} bytes")
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as err:
            raise AdmissionConfError(f"{where}: not JSON ({err})") from None
    if not isinstance(value, Mapping):
        raise AdmissionConfError(f"{where}: must be a JSON object (a pod's spec.affinity)")
    return dict(value)


def parse_admission_conf(text: str) -> tuple[ResourceGroup, ...]:
    """The resource groups of an admission configuration (YAML or JSON text)."""
    if len(text) > MAX_FILE_BYTES:
        raise AdmissionConfError(f"the file is over {MAX_FILE_BYTES} bytes")
    try:
        scan(text)  # depth and alias expansion bounded before anything is built
        document = yaml.safe_load(text)
    except YamlBoundsError as err:
        raise AdmissionConfError(f"not YAML within the bounds: {err}") from None
    except yaml.YAMLError as err:
        raise AdmissionConfError(f"not YAML: {err}") from None
    if document is None:
        return ()
    if not isinstance(document, Mapping):
        raise AdmissionConfError("the file must be a mapping with resourceGroups")
    raw = document.get("resourceGroups") or []
    if not isinstance(raw, list):
        raise AdmissionConfError("resourceGroups: must be a list")
    return tuple(_group(entry, f"resourceGroups[{i}]") for i, entry in enumerate(raw))


def load_admission_conf(path: str | Path) -> tuple[ResourceGroup, ...]:
    """Read and check ``path``; errors name the file."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise AdmissionConfError(f"{path}: {err.strerror}") from None
    try:
        return parse_admission_conf(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise AdmissionConfError(f"{path}: not UTF-8 text") from None
    except AdmissionConfError as err:
        raise AdmissionConfError(f"{path}: {err}") from None


def matching_group(
    groups: Sequence[ResourceGroup], namespace: str, annotations: Mapping[str, Any]
) -> ResourceGroup | None:
    """The first group that takes the pod, as Volcano picks it."""
    return next((g for g in groups if g.takes(namespace, annotations)), None)


def apply_resource_group(pod: Mapping[str, Any], group: ResourceGroup) -> dict[str, Any]:
    """A copy of ``pod`` with ``group`` applied (see the module docstring)."""
    out = dict(pod)
    spec = out.get("spec")
    spec = copy.deepcopy(dict(spec)) if isinstance(spec, Mapping) else {}
    out["spec"] = spec
    if group.node_selector:
        selector = spec.get("nodeSelector")
        selector = dict(selector) if isinstance(selector, Mapping) else {}
        spec["nodeSelector"] = {**selector, **group.node_selector}
    if group.tolerations:
        present = spec.get("tolerations")
        present = list(present) if isinstance(present, list) else []
        spec["tolerations"] = present + [dict(t) for t in group.tolerations]
    if group.affinity is not None and not spec.get("affinity"):
        spec["affinity"] = copy.deepcopy(dict(group.affinity))
    if group.scheduler_name:
        spec["schedulerName"] = group.scheduler_name
    return out
