"""Typed models of the Volcano API (one module per API group) and of the core objects read."""

from stromboli.core.api.models.batch import CronJob, Job
from stromboli.core.api.models.bus import Command
from stromboli.core.api.models.common import ObjectMeta
from stromboli.core.api.models.core import (
    KubeObject,
    Namespace,
    Node,
    Pod,
    PriorityClass,
    ResourceQuota,
)
from stromboli.core.api.models.flow import JobFlow, JobTemplate
from stromboli.core.api.models.nodeinfo import Numatopology
from stromboli.core.api.models.scheduling import PodGroup, Queue
from stromboli.core.api.models.topology import HyperNode

__all__ = [
    "Command",
    "CronJob",
    "HyperNode",
    "Job",
    "JobFlow",
    "JobTemplate",
    "KubeObject",
    "Namespace",
    "Node",
    "Numatopology",
    "ObjectMeta",
    "Pod",
    "PodGroup",
    "PriorityClass",
    "Queue",
    "ResourceQuota",
]
