"""What a native ``spark-submit --master k8s://...`` needs to run under Stromboli.

Two ways in, with Spark's own Volcano support or without it:

* ``volcano-feature-step``: Spark's own ``VolcanoFeatureStep`` (Spark >= 3.3 built with
  ``-Pvolcano``; the PyPI ``pyspark`` jars have it) creates the PodGroup
  ``<spark.app.id>-podgroup`` from a template file before the driver pod, owns it by the driver
  and annotates driver and executors with ``scheduling.k8s.io/group-name``. We hand it the
  template: ``minMember`` 1 (only the driver must start: it creates the executors), the queue,
  the priority class and ``minResources`` = driver + the executors to reserve.
* ``enrol``: a Spark without the feature step. Pod templates carry ``schedulerName`` and the
  queue annotation; the controller's plain-pod enrolment makes the group (the executors are
  controlled by the driver pod, so both land in the driver's group). With ``group_name`` the
  templates name a PodGroup instead, and :func:`plan` writes it to be created before submitting.

Everything here is pure: :func:`plan` turns :class:`SparkConfOptions` into the ``--conf``
pairs and the text of the files they point at; the CLI writes them. Sizes follow Spark's own
arithmetic (``BasicDriverFeatureStep``/``BasicExecutorFeatureStep``): a pod asks for
``cores`` cpu and ``memory + max(factor × memory, 384MiB)``, memory counted in whole MiB.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePath
from typing import Any

import yaml

from stromboli.core.api import constants as k
from stromboli.core.api.quantity import MAX_VALUE, format_bytes, format_cpu
from stromboli.integrations.common import ConversionError
from stromboli.integrations.spark.units import MIB, jvm_memory

FEATURE_STEP = "org.apache.spark.deploy.k8s.features.VolcanoFeatureStep"
#: Spark's floor for the memory overhead of a pod (``spark.{driver,executor}.minMemoryOverhead``).
MIN_OVERHEAD_MIB = 384
DEFAULT_OVERHEAD_FACTOR = 0.1
#: Bounds on what one submission may ask for; beyond them a typo, not a plan.
MAX_CORES = 1024
MAX_EXECUTORS = 100_000
MAX_OVERHEAD_FACTOR = 10.0

DRIVER_TEMPLATE = "driver-pod-template.yaml"
EXECUTOR_TEMPLATE = "executor-pod-template.yaml"
PODGROUP_TEMPLATE = "podgroup-template.yaml"
PODGROUP_MANIFEST = "podgroup.yaml"
PROPERTIES_FILE = "stromboli-spark.properties"

_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(_LABEL, re.ASCII)
_DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*", re.ASCII)
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?", re.ASCII)


class Mode(StrEnum):
    VOLCANO_FEATURE_STEP = "volcano-feature-step"
    ENROL = "enrol"


class SparkConfError(ValueError):
    """An option that cannot make a valid submission; ``field`` names the option."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class SparkConfOptions:
    """What the user asks for; field names match the CLI's flags (``min_executors`` is
    ``--min-executors``), which is what errors name."""

    queue: str
    mode: Mode = Mode.VOLCANO_FEATURE_STEP
    scheduler_name: str = k.DEFAULT_SCHEDULER_NAME
    namespace: str | None = None
    priority_class: str | None = None
    #: ``enrol`` only: pods name this PodGroup, created from ``podgroup.yaml`` before submitting.
    group_name: str | None = None
    #: Executors the PodGroup reserves room for (``minResources``), and Spark starts with.
    min_executors: int = 0
    driver_cores: int = 1
    driver_memory: str = "1g"
    executor_cores: int = 1
    executor_memory: str = "1g"
    #: Spark's ``spark.{driver,executor}.memoryOverheadFactor`` (0.4 suits PySpark apps).
    memory_overhead_factor: float = DEFAULT_OVERHEAD_FACTOR
    #: Inline the template as ``podGroupTemplateJson`` (Spark >= 4.2) instead of a file.
    inline_podgroup: bool = False


@dataclass(frozen=True, slots=True)
class PodSize:
    """One pod's request as Spark computes it."""

    cores: int
    memory_mib: int
    overhead_mib: int

    @property
    def request_mib(self) -> int:
        return self.memory_mib + self.overhead_mib


@dataclass(frozen=True, slots=True)
class SparkConfPlan:
    """The ``--conf`` pairs, in order, and the files (name → YAML) they refer to."""

    conf: list[tuple[str, str]]
    files: dict[str, str] = field(default_factory=dict)
    #: The PodGroup spec the submission ends up with (template or manifest), for reports.
    podgroup_spec: dict[str, Any] = field(default_factory=dict)


# --- checks -------------------------------------------------------------------------------------


def _name(value: str | None, flag: str, pattern: re.Pattern[str], limit: int, what: str) -> None:
    if value is None:
        return
    if not isinstance(value, str) or len(value) > limit or not pattern.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise SparkConfError(
            flag,
            f"{shown} is not a valid DNS-1123 {what}: at most {limit} lowercase letters, digits "
            "and '-'" + (" or '.'" if what == "subdomain" else "") + ", starting and ending with "
            "a letter or digit",
        )


def _count(value: int, flag: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SparkConfError(flag, f"{value!r} must be a whole number from {low} to {high}")
    return value


def check(options: SparkConfOptions) -> None:
    """Refuse what Spark or the API server would refuse later, naming the flag."""
    if not isinstance(options.mode, Mode):
        raise SparkConfError("--mode", f"{options.mode!r} is not one of {[m.value for m in Mode]}")
    if not options.queue:
        raise SparkConfError("--queue", "is required: the Volcano queue the application runs in")
    _name(options.queue, "--queue", _DNS_SUBDOMAIN, 253, "subdomain")
    _name(options.scheduler_name, "--scheduler-name", _DNS_SUBDOMAIN, 253, "subdomain")
    _name(options.namespace, "--namespace", _DNS_LABEL, 63, "label")
    _name(options.priority_class, "--priority-class", _DNS_SUBDOMAIN, 253, "subdomain")
    _name(options.group_name, "--group-name", _DNS_SUBDOMAIN, 253, "subdomain")
    if options.group_name and options.mode is Mode.VOLCANO_FEATURE_STEP:
        raise SparkConfError(
            "--group-name",
            "only with --mode enrol: Spark's VolcanoFeatureStep always names the PodGroup "
            "<spark.app.id>-podgroup",
        )
    if options.inline_podgroup and options.mode is not Mode.VOLCANO_FEATURE_STEP:
        raise SparkConfError("--inline-podgroup", "only with --mode volcano-feature-step")
    _count(options.min_executors, "--min-executors", 0, MAX_EXECUTORS)
    _count(options.driver_cores, "--driver-cores", 1, MAX_CORES)
    _count(options.executor_cores, "--executor-cores", 1, MAX_CORES)
    factor = options.memory_overhead_factor
    if (
        isinstance(factor, bool)
        or not isinstance(factor, int | float)
        or not math.isfinite(factor)
        or not 0 < factor <= MAX_OVERHEAD_FACTOR
    ):
        raise SparkConfError(
            "--memory-overhead-factor",
            f"{factor!r} must be a number above 0 and at most {MAX_OVERHEAD_FACTOR:g}",
        )
    min_resources(options)  # sizes parse and the total fits a Kubernetes quantity


# --- sizes --------------------------------------------------------------------------------------


def pod_size(cores: int, memory: str, factor: float, flag: str) -> PodSize:
    """A driver's or executor's request: Spark counts memory in whole MiB (``byteStringAsMb``
    rounds down) and adds ``max(factor × memory, 384)`` MiB of overhead."""
    try:
        memory_mib = jvm_memory(memory, flag) // MIB
    except ConversionError as err:
        raise SparkConfError(flag, err.message) from None
    if memory_mib < 1:
        raise SparkConfError(flag, f"{memory!r} is below 1 MiB, less than a JVM can start with")
    if memory_mib * MIB > MAX_VALUE:
        raise SparkConfError(flag, f"{memory!r} does not fit a Kubernetes quantity")
    overhead = max(int(factor * memory_mib), MIN_OVERHEAD_MIB)
    return PodSize(cores, memory_mib, overhead)


def driver_size(options: SparkConfOptions) -> PodSize:
    return pod_size(
        options.driver_cores,
        options.driver_memory,
        options.memory_overhead_factor,
        "--driver-memory",
    )


def executor_size(options: SparkConfOptions) -> PodSize:
    return pod_size(
        options.executor_cores,
        options.executor_memory,
        options.memory_overhead_factor,
        "--executor-memory",
    )


def min_resources(options: SparkConfOptions) -> dict[str, str]:
    """The driver plus ``min_executors`` executors: what the PodGroup holds back in its queue
    before the driver starts (Spark's docs recommend exactly this with ``minMember: 1``)."""
    driver, executor = driver_size(options), executor_size(options)
    count = options.min_executors
    cores = driver.cores + count * executor.cores
    memory = (driver.request_mib + count * executor.request_mib) * MIB
    if memory > MAX_VALUE:
        raise SparkConfError(
            "--min-executors",
            f"{count} executors of {options.executor_memory} do not fit a Kubernetes quantity",
        )
    return {"cpu": format_cpu(cores * 1000), "memory": format_bytes(memory)}


# --- objects ------------------------------------------------------------------------------------


def podgroup_spec(options: SparkConfOptions) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "minMember": 1,
        "queue": options.queue,
        "minResources": min_resources(options),
    }
    if options.priority_class:
        spec["priorityClassName"] = options.priority_class
    return spec


def pod_template(options: SparkConfOptions, role: str) -> dict[str, Any]:
    """The base pod Spark builds the driver or executors on: our scheduler, the queue, the role
    as ``volcano.sh/task-spec`` (executors are alike, the driver is not), the priority class and,
    with ``group_name``, the group."""
    annotations = {k.QUEUE_NAME_ANNOTATION_KEY: options.queue, k.TASK_SPEC_KEY: role}
    if options.group_name:
        annotations[k.GROUP_NAME_ANNOTATION] = options.group_name
    metadata: dict[str, Any] = {"annotations": annotations}
    if len(options.queue) <= 63 and _LABEL_VALUE.fullmatch(options.queue):
        metadata["labels"] = {k.QUEUE_NAME_KEY: options.queue}
    spec: dict[str, Any] = {"schedulerName": options.scheduler_name}
    if options.priority_class:
        spec["priorityClassName"] = options.priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def podgroup_manifest(options: SparkConfOptions) -> dict[str, Any]:
    """The PodGroup an ``enrol`` submission with ``group_name`` needs before its driver."""
    metadata: dict[str, Any] = {"name": options.group_name}
    if options.namespace:
        metadata["namespace"] = options.namespace
    return {
        "apiVersion": k.SCHEDULING_V1BETA1,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": podgroup_spec(options),
    }


def _yaml(obj: dict[str, Any]) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def plan(options: SparkConfOptions, directory: PurePath) -> SparkConfPlan:
    """The confs and files for ``options``; file confs point into ``directory``, which should
    be absolute (spark-submit reads the templates from its own working directory otherwise)."""
    check(options)
    files = {
        DRIVER_TEMPLATE: _yaml(pod_template(options, "driver")),
        EXECUTOR_TEMPLATE: _yaml(pod_template(options, "executor")),
    }
    conf: list[tuple[str, str]] = [
        ("spark.kubernetes.scheduler.name", options.scheduler_name),
        ("spark.kubernetes.driver.podTemplateFile", str(directory / DRIVER_TEMPLATE)),
        ("spark.kubernetes.executor.podTemplateFile", str(directory / EXECUTOR_TEMPLATE)),
    ]
    spec = podgroup_spec(options)
    if options.mode is Mode.VOLCANO_FEATURE_STEP:
        conf += [
            ("spark.kubernetes.driver.pod.featureSteps", FEATURE_STEP),
            ("spark.kubernetes.executor.pod.featureSteps", FEATURE_STEP),
        ]
        template = {"apiVersion": k.SCHEDULING_V1BETA1, "kind": "PodGroup", "spec": spec}
        if options.inline_podgroup:
            text = json.dumps({"spec": spec}, separators=(",", ":"))
            conf.append(("spark.kubernetes.scheduler.volcano.podGroupTemplateJson", text))
        else:
            files[PODGROUP_TEMPLATE] = _yaml(template)
            path = str(directory / PODGROUP_TEMPLATE)
            conf.append(("spark.kubernetes.scheduler.volcano.podGroupTemplateFile", path))
    elif options.group_name:
        files[PODGROUP_MANIFEST] = _yaml(podgroup_manifest(options))
    if options.namespace:
        conf.append(("spark.kubernetes.namespace", options.namespace))
    factor = f"{options.memory_overhead_factor:g}"
    conf += [
        ("spark.driver.cores", str(options.driver_cores)),
        ("spark.driver.memory", f"{driver_size(options).memory_mib}m"),
        ("spark.driver.memoryOverheadFactor", factor),
        ("spark.executor.cores", str(options.executor_cores)),
        ("spark.executor.memory", f"{executor_size(options).memory_mib}m"),
        ("spark.executor.memoryOverheadFactor", factor),
    ]
    if options.min_executors:
        conf.append(("spark.executor.instances", str(options.min_executors)))
    files[PROPERTIES_FILE] = properties(conf)
    return SparkConfPlan(conf, files, spec)


# --- rendering ----------------------------------------------------------------------------------


def conf_flags(conf: Iterable[tuple[str, str]]) -> list[str]:
    """``spark-submit`` arguments: ``--conf`` and ``key=value`` for each pair."""
    return [arg for key, value in conf for arg in ("--conf", f"{key}={value}")]


def flag_lines(conf: Sequence[tuple[str, str]]) -> str:
    """One ``--conf key=value`` per line, each quoted for a POSIX shell where it needs it:
    ``spark-submit $(stromboli spark-conf ...) ...`` works for plain values (no spaces or
    quotes); otherwise use the properties file."""
    return "".join(f"--conf {shlex.quote(f'{key}={value}')}\n" for key, value in conf)


def _escape_property(text: str, key: bool) -> str:
    """Escape ``text`` so that Java's ``Properties.load`` reads it back unchanged: backslashes
    and line breaks always, separators in a key, a leading blank or separator in a value."""
    out = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif char == "\f":
            out.append("\\f")
        elif (key or i == 0) and char in " =:#!":
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def properties(conf: Iterable[tuple[str, str]]) -> str:
    """The pairs as a Java properties file, for ``spark-submit --properties-file``."""
    return "".join(
        f"{_escape_property(key, True)}={_escape_property(value, False)}\n" for key, value in conf
    )
