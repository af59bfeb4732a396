"""``nodeinfo.volcano.sh/v1alpha1``: Numatopology, NUMA layout reported by the node agent."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stromboli.core.api.constants import NODEINFO_V1ALPHA1
from stromboli.core.api.models.common import ApiModel, Int32, Resource


class ResourceInfo(ApiModel):
    allocatable: str | None = Field(None, description="CPU set still allocatable, e.g. 0-3,8.")
    capacity: Int32 | None = None


class CPUInfo(ApiModel):
    numa: Int32 | None = None
    socket: Int32 | None = None
    core: Int32 | None = None


class NumatopoSpec(ApiModel):
    policies: dict[str, str] | None = Field(
        None, description="Kubelet policies by name (CPUManagerPolicy, TopologyManagerPolicy)."
    )
    res_reserved: dict[str, str] | None = None
    numares: dict[str, ResourceInfo] | None = Field(
        None, description="Per-resource NUMA allocatable and capacity."
    )
    cpu_detail: dict[str, CPUInfo] | None = Field(
        None, description="NUMA node, socket and core of each logical CPU."
    )


class Numatopology(Resource):
    """One node's NUMA topology; named after the node."""

    api_version: Literal["nodeinfo.volcano.sh/v1alpha1"] = NODEINFO_V1ALPHA1
    kind: Literal["Numatopology"] = "Numatopology"
    spec: NumatopoSpec = Field(default_factory=NumatopoSpec)
