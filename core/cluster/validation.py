"""Checks the API server applies to objects before storing them.

Metadata checks (every kind) are run by the memory store, so that an object the simulator
accepts would also be accepted by a real cluster (an integer label value from careless YAML, an
upper-case name). The kind-specific ones (:func:`object_problems`, :func:`status_problems`:
pods without containers, negative or malformed resource amounts of pods, nodes and
ResourceQuotas) are run by the simulator's admission on everything it stores. Each check
returns a list of causes in the API server's ``field: problem`` style; empty means valid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stromboli.core.api.quantity import QuantityError, parse_quantity
from stromboli.core.cluster.errors import group_of
from stromboli.core.cluster.selectors import SelectorError, validate_label_key, validate_label_value

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH_SEGMENT_GROUPS = frozenset({"rbac.authorization.k8s.io"})


def name_problems(api_version: str, kind: str, name: str) -> list[str]:
    """Names are DNS subdomains, namespaces DNS labels, RBAC objects any path segment."""
    if api_version == "v1" and kind == "Namespace":
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return [
                f'metadata.name: Invalid value: "{name}": a namespace name must be at most 63 '
                "lowercase letters, digits or '-', starting and ending with a letter or digit"
            ]
        return []
    if group_of(api_version) in _PATH_SEGMENT_GROUPS:
        if name in (".", "..") or "/" in name or "%" in name:
            return [
                f'metadata.name: Invalid value: "{name}": may not be "." or ".." or contain "/"'
            ]
        return []
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return [
            f'metadata.name: Invalid value: "{name}": must be at most 253 lowercase letters, '
            "digits, '-' or '.', starting and ending with a letter or digit (e.g. 'my-job-0')"
        ]
    return []


def metadata_problems(metadata: Mapping[str, Any]) -> list[str]:
    """Labels, annotations, finalizers and ownerReferences must have the wire types.

    Label pairs already found valid are remembered: the same few keys and values recur on
    thousands of pods, and this runs on every write.
    """
    problems: list[str] = []
    labels = metadata.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            problems.append("metadata.labels: Invalid value: must be a map of strings")
        else:
            for pair in labels.items():
                if pair not in _VALID_LABELS:
                    problems.extend(_label_problems(*pair))
    annotations = metadata.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            problems.append("metadata.annotations: Invalid value: must be a map of strings")
        else:
            for key, value in annotations.items():
                if type(key) is not str or type(value) is not str:
                    problems.append(
                        f"metadata.annotations: Invalid value: {key!r}: {value!r}: keys and "
                        "values must be strings (quote numbers and booleans in YAML)"
                    )
    finalizers = metadata.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) and f for f in finalizers)
    ):
        problems.append("metadata.finalizers: Invalid value: must be a list of non-empty strings")
    owners = metadata.get("ownerReferences")
    if owners is not None:
        if not isinstance(owners, list):
            problems.append("metadata.ownerReferences: Invalid value: must be a list")
        else:
            for index, ref in enumerate(owners):
                if not isinstance(ref, dict) or not all(
                    isinstance(ref.get(f), str) and ref.get(f)
                    for f in ("apiVersion", "kind", "name", "uid")
                ):
                    problems.append(
                        f"metadata.ownerReferences[{index}]: Required value: apiVersion, kind, "
                        "name and uid must all be set"
                    )
    return problems


_VALID_LABELS: set[tuple[Any, Any]] = set()
_VALID_LABELS_LIMIT = 1 << 16


def _label_problems(key: Any, value: Any) -> list[str]:
    if not isinstance(key, str) or not isinstance(value, str):
        return [
            f"metadata.labels: Invalid value: {key!r}: {value!r}: keys and values must be "
            "strings (quote numbers and booleans in YAML)"
        ]
    try:
        validate_label_key(key)
        validate_label_value(value)
    except SelectorError as error:
        return [f"metadata.labels: Invalid value: {error}"]
    if len(_VALID_LABELS) >= _VALID_LABELS_LIMIT:
        _VALID_LABELS.clear()
    _VALID_LABELS.add((key, value))
    return []


# --- kind-specific checks: what the API server's own validation refuses -------------------------

_QUANTITY_PATTERN = "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_QUANTITY_SYNTAX = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
#: (resource name, value) pairs already found valid and non-negative (they recur on every pod).
_VALID_QUANTITIES: set[tuple[str, Any]] = set()


def _quote(value: Any) -> str:
    return '"' + str(value).replace('"', '\\"') + '"'


def resource_list_problems(path: str, resources: Any) -> list[str]:
    """Each amount of a ResourceList (``requests``, ``allocatable``, ``hard``) a valid, non-
    negative quantity, in the API server's words
    (``spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0``)."""
    if resources is None:
        return []
    if not isinstance(resources, Mapping):
        return [f"{path}: Invalid value: {_quote(resources)}: must be a map of quantities"]
    problems: list[str] = []
    for name, value in resources.items():
        try:
            pair = (name, value)
            if pair in _VALID_QUANTITIES:
                continue
        except TypeError:  # an unhashable value: not a quantity
            pair = None
        where = f"{path}[{name}]"
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            problems.append(f"{where}: Invalid value: {_quote(value)}: must be a quantity")
            continue
        try:
            amount = parse_quantity(value)
        except QuantityError as err:
            if isinstance(value, str) and not _QUANTITY_SYNTAX.match(value):
                detail = f"quantities must match the regular expression {_QUANTITY_PATTERN}"
            else:  # well formed, but beyond what a quantity can hold
                detail = str(err).removeprefix("quantity: ")
            problems.append(f"{where}: Invalid value: {_quote(value)}: {detail}")
            continue
        if amount < 0:
            problems.append(
                f"{where}: Invalid value: {_quote(value)}: must be greater than or equal to 0"
            )
            continue
        if pair is not None:
            if len(_VALID_QUANTITIES) >= _VALID_LABELS_LIMIT:
                _VALID_QUANTITIES.clear()
            _VALID_QUANTITIES.add(pair)
    return problems


def _container_problems(path: str, container: Any) -> list[str]:
    if not isinstance(container, Mapping):
        return [f"{path}: Invalid value: {_quote(container)}: must be an object"]
    problems: list[str] = []
    if not container.get("name"):
        problems.append(f"{path}.name: Required value")
    resources = container.get("resources")
    if resources is None:
        return problems
    if not isinstance(resources, Mapping):
        return [
            *problems,
            f"{path}.resources: Invalid value: {_quote(resources)}: must be an object",
        ]
    for part in ("limits", "requests"):
        problems += resource_list_problems(f"{path}.resources.{part}", resources.get(part))
    if problems:
        return problems
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    for name, request in requests.items():
        if name in limits and parse_quantity(request) > parse_quantity(limits[name]):
            problems.append(
                f"{path}.resources.requests: Invalid value: {_quote(request)}: must be less "
                f"than or equal to {name} limit of {limits[name]}"
            )
    return problems


def pod_spec_problems(path: str, spec: Any) -> list[str]:
    """A pod spec with at least one container, each named, its requests and limits valid
    quantities, none negative, no request above its limit; the overhead likewise."""
    if not isinstance(spec, Mapping):
        return (
            [f"{path}: Required value"]
            if spec is None
            else [f"{path}: Invalid value: {_quote(spec)}: must be an object"]
        )
    problems: list[str] = []
    containers = spec.get("containers")
    if not containers:
        problems.append(f"{path}.containers: Required value")
    for group in ("initContainers", "containers"):
        items = spec.get(group)
        if items is None:
            continue
        if not isinstance(items, list):
            problems.append(f"{path}.{group}: Invalid value: {_quote(items)}: must be a list")
            continue
        for index, container in enumerate(items):
            problems += _container_problems(f"{path}.{group}[{index}]", container)
    problems += resource_list_problems(f"{path}.overhead", spec.get("overhead"))
    return problems


def _part(obj: Mapping[str, Any], name: str) -> Any:
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def object_problems(api_version: str, kind: str, obj: Mapping[str, Any]) -> list[str]:
    """What the API server's validation of ``kind`` refuses beyond metadata and status: pods
    without containers or with negative or malformed resource amounts, ResourceQuotas with
    negative amounts. Other kinds: nothing."""
    if api_version != "v1":
        return []
    if kind == "Pod":
        return pod_spec_problems("spec", obj.get("spec"))
    if kind == "ResourceQuota":
        return resource_list_problems("spec.hard", _part(obj, "spec").get("hard"))
    if kind == "PodTemplate":
        return pod_spec_problems("template.spec", _part(obj, "template").get("spec"))
    return []


def status_problems(api_version: str, kind: str, obj: Mapping[str, Any]) -> list[str]:
    """What the API server refuses in a status write: a node's negative or malformed
    capacity and allocatable amounts."""
    if api_version != "v1" or kind != "Node":
        return []
    status = _part(obj, "status")
    return resource_list_problems("status.capacity", status.get("capacity")) + (
        resource_list_problems("status.allocatable", status.get("allocatable"))
    )
