"""Structural CRDs for the framework kinds, for tests that play the operator themselves.

Each CRD has the group, version, kind, plural and scope the real operator's CRD declares
(``integrations/kinds.py``), a status subresource, and a schema that keeps every field
(``x-kubernetes-preserve-unknown-fields``): the adapters, not the API server, are what must
read the objects. Where a CRD of that name is already installed (a real operator's, from
``hack/operators/``), it is left as it is: the real one is always preferred.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stromboli.core.api.registry import KindInfo
from stromboli.core.devcluster.client import KubeAPIError, KubeHTTP
from stromboli.integrations.kinds import FRAMEWORK_KINDS

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_OPEN: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def crd_for(infos: Iterable[KindInfo]) -> dict[str, Any]:
    """One CRD serving every version among ``infos`` (one group and plural); the first is
    the storage version."""
    infos = list(infos)
    first = infos[0]
    metadata: dict[str, Any] = {"name": f"{first.plural}.{first.group}"}
    if first.group.endswith((".k8s.io", ".kubernetes.io")):
        # A protected group (the Spark operator's): the API server wants this annotation.
        metadata["annotations"] = {"api-approved.kubernetes.io": "unapproved, a test stand-in"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": first.group,
            "names": {
                "kind": first.kind,
                "listKind": f"{first.kind}List",
                "plural": first.plural,
                "singular": first.kind.lower(),
            },
            "scope": "Namespaced" if first.namespaced else "Cluster",
            "versions": [
                {
                    "name": info.version,
                    "served": True,
                    "storage": n == 0,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": _OPEN},
                }
                for n, info in enumerate(infos)
            ],
        },
    }


def install_framework_crds(
    client: KubeHTTP, kinds: Iterable[tuple[str, str]] | None = None
) -> list[str]:
    """Install the CRDs of ``kinds`` ((apiVersion, kind); None: all), waiting until each is
    served; returns the names of those created (already installed ones are kept)."""
    wanted = None if kinds is None else set(kinds)
    by_crd: dict[str, list[KindInfo]] = {}
    for info in FRAMEWORK_KINDS:
        if wanted is None or (info.api_version, info.kind) in wanted:
            by_crd.setdefault(f"{info.plural}.{info.group}", []).append(info)
    created = []
    for name, infos in by_crd.items():
        try:
            client.get(f"{CRDS}/{name}")
            continue
        except KubeAPIError as err:
            if err.status != 404:
                raise
        client.post(CRDS, crd_for(infos))
        created.append(name)
    for name in created:
        client.wait_crd_established(name)
    if created:
        client.forget_discovery()
    return created
