"""Object-metadata checks the API server applies to every kind.

The memory store runs them so that an object the simulator accepts would also be accepted by a
real cluster (an integer label value from careless YAML, an upper-case name). Each check returns
a list of causes in the API server's ``field: problem`` style; empty means valid.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

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
