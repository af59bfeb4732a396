"""Spark operator ``SparkApplication`` (``sparkoperator.k8s.io/v1beta2``) as its Volcano batch
scheduler makes the gang.

PodGroup ``spark-<app>-pg``, owned by the application (controller), created ``Pending``:
``minMember`` 1 (the driver starts first; the executors' room is reserved by minResources);
``queue`` / ``priorityClassName`` from ``spec.batchSchedulerOptions``; ``minResources`` =
``batchSchedulerOptions.resources`` when given, else driver + executors in cluster mode,
executors only in client mode:

- driver cpu = ``driver.cores``, else ``driver.coreLimit``; executor cpu = ``coreRequest``,
  else ``cores``, else ``coreLimit`` — per executor;
- memory = ``memory`` (API default ``1g``) + ``memoryOverhead`` when set;
- executors = with dynamic allocation max(instances, initialExecutors, minExecutors), else
  ``instances`` (2 when unset).

``Context.options["spark.resources"]`` chooses how memory is read:

- ``jvm`` (default): as Spark reads it (``512m`` = 512 MiB; see ``units.py``);
- ``upstream``: as the operator does (``512m`` = 512 milli-bytes, ``1g`` dropped), bit for bit;
- ``accurate``: ``jvm`` plus what the pods really ask for: Spark's default overhead
  max(``memoryOverheadFactor`` (0.1) × memory, 384 MiB) where none is set, one core where
  none is set, and ``driver.gpu`` / ``executor.gpu``.

The operator writes queue and priority only at creation; we also follow them while the stored
PodGroup is still ``Pending`` (a re-submitted app), and otherwise keep the stored spec. Pods
(``spark-role`` driver / executor; only executors in client mode) get
``scheduling.k8s.io/group-name``, ``volcano.sh/task-spec`` = the role, and ``schedulerName`` =
``spec.batchScheduler`` (else ``volcano`` where none is set). A finished app has no PodGroup.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from stromboli.core.api import constants as k
from stromboli.integrations.common import (
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    Meta,
    Resources,
    boolean,
    exact_name,
    integer,
    is_ours,
    labels_of,
    mapping,
    mutation,
    object_name,
    owner_reference,
    podgroup,
    quantity,
    read_meta,
    settle,
    stored_phase,
    string,
    volcano_network_topology,
)
from stromboli.integrations.spark.units import MIB, jvm_memory, kubernetes_memory

API_VERSION = "sparkoperator.k8s.io/v1beta2"
FRAMEWORK = "spark-operator"
ROLE_LABEL = "spark-role"
APP_NAME_LABEL = "sparkoperator.k8s.io/app-name"
RESOURCES_OPTION = "spark.resources"
MODES = ("jvm", "upstream", "accurate")
DEFAULT_MEMORY = "1g"
DEFAULT_EXECUTORS = 2
MIN_OVERHEAD = 384 * MIB
DEFAULT_OVERHEAD_FACTOR = Fraction(1, 10)
FINISHED = ("COMPLETED", "FAILED")


def group_name(app: str) -> str:
    return exact_name(f"spark-{app}-pg")


class RoleResources:
    """One Spark role's per-pod cpu, memory and gpu under a resource mode."""

    def __init__(self, spec: Mapping[str, Any], role: str, mode: str, factor: Fraction) -> None:
        self.role, self.mode, self.factor = role, mode, factor
        self.field = f"spec.{role}"
        self.spec = mapping(spec.get(role), self.field)

    def cpu(self) -> Fraction | None:
        f, s = self.field, self.spec
        if self.role == "executor" and s.get("coreRequest") is not None:
            return quantity(string(s.get("coreRequest"), f"{f}.coreRequest"), f"{f}.coreRequest")
        if s.get("cores") is not None:
            return Fraction(integer(s.get("cores"), f"{f}.cores", 1))
        if s.get("coreLimit") is not None:
            return quantity(string(s.get("coreLimit"), f"{f}.coreLimit"), f"{f}.coreLimit")
        return Fraction(1) if self.mode == "accurate" else None

    def memory(self) -> Fraction | None:
        f, s = self.field, self.spec
        text = string(s.get("memory"), f"{f}.memory", DEFAULT_MEMORY)
        overhead = string(s.get("memoryOverhead"), f"{f}.memoryOverhead")
        if self.mode == "upstream":
            total = kubernetes_memory(text, f"{f}.memory")
            if overhead is not None:
                extra = kubernetes_memory(overhead, f"{f}.memoryOverhead")
                if extra is not None:
                    total = (total or Fraction(0)) + extra
            return total
        memory = jvm_memory(text, f"{f}.memory")
        if overhead is not None:
            return Fraction(memory + jvm_memory(overhead, f"{f}.memoryOverhead"))
        if self.mode == "accurate":
            return Fraction(memory) + max(self.factor * memory, Fraction(MIN_OVERHEAD))
        return Fraction(memory)

    def resources(self) -> Resources:
        per_pod = Resources()
        cpu, memory = self.cpu(), self.memory()
        if cpu is not None:
            per_pod.add_one("cpu", cpu, f"{self.field}.cores")
        if memory is not None:
            per_pod.add_one("memory", memory, f"{self.field}.memory")
        gpu = mapping(self.spec.get("gpu"), f"{self.field}.gpu")
        if self.mode == "accurate" and gpu:
            name = string(gpu.get("name"), f"{self.field}.gpu.name")
            if not name:
                raise ConversionError(f"{self.field}.gpu.name", "is required")
            count = integer(gpu.get("quantity"), f"{self.field}.gpu.quantity", 0)
            per_pod.add_one(name, Fraction(count), f"{self.field}.gpu.quantity")
        return per_pod


def executor_count(spec: Mapping[str, Any]) -> int:
    executor = mapping(spec.get("executor"), "spec.executor")
    instances = executor.get("instances")
    dynamic = mapping(spec.get("dynamicAllocation"), "spec.dynamicAllocation")
    if boolean(dynamic.get("enabled"), "spec.dynamicAllocation.enabled", False):
        return max(
            integer(instances, "spec.executor.instances", 0),
            integer(dynamic.get("initialExecutors"), "spec.dynamicAllocation.initialExecutors", 0),
            integer(dynamic.get("minExecutors"), "spec.dynamicAllocation.minExecutors", 0),
        )
    return integer(instances, "spec.executor.instances", DEFAULT_EXECUTORS)


def resource_mode(context: Context) -> str:
    mode = context.options.get(RESOURCES_OPTION, "jvm")
    if mode not in MODES:
        raise ConversionError(f"options[{RESOURCES_OPTION}]", f"must be one of {', '.join(MODES)}")
    return mode


def overhead_factor(spec: Mapping[str, Any]) -> Fraction:
    text = string(spec.get("memoryOverheadFactor"), "spec.memoryOverheadFactor")
    if text is None:
        return DEFAULT_OVERHEAD_FACTOR
    try:
        factor = Fraction(text.strip()) if len(text) <= 32 else None
    except ValueError:
        factor = None
    if factor is None or factor < 0 or factor > 100:
        raise ConversionError("spec.memoryOverheadFactor", f"{text[:32]!r} must be a number ≥ 0")
    return factor


def min_resources(spec: Mapping[str, Any], client_mode: bool, mode: str) -> Resources:
    options = mapping(spec.get("batchSchedulerOptions"), "spec.batchSchedulerOptions")
    override = mapping(options.get("resources"), "spec.batchSchedulerOptions.resources")
    if override:
        return Resources.parse(override, "spec.batchSchedulerOptions.resources")
    factor = overhead_factor(spec)
    total = Resources()
    if not client_mode:
        total.add(RoleResources(spec, "driver", mode, factor).resources(), field="spec.driver")
    executor = RoleResources(spec, "executor", mode, factor).resources()
    total.add(executor, executor_count(spec), "spec.executor.instances")
    return total


class SparkApplicationAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        spec = mapping(obj.get("spec"), "spec")
        mode = resource_mode(context)
        app_mode = string(spec.get("mode"), "spec.mode", "cluster")
        if app_mode not in ("cluster", "client", "in-cluster-client"):
            raise ConversionError("spec.mode", f"{app_mode!r} must be cluster or client")
        client_mode = app_mode != "cluster"
        name = group_name(meta.name)
        mutations = self._mutations(meta, spec, name, client_mode)
        state = mapping(mapping(obj.get("status"), "status").get("applicationState"), "status")
        if state.get("state") in FINISHED:
            return Conversion(mutations=tuple(mutations), notes=("application has finished",))
        options = mapping(spec.get("batchSchedulerOptions"), "spec.batchSchedulerOptions")
        where = "spec.batchSchedulerOptions"
        group = podgroup(
            name=name,
            namespace=meta.namespace,
            owner=owner_reference(meta, block_owner_deletion=False),
            adapter=FRAMEWORK,
            min_member=1,
            queue=string(options.get("queue"), f"{where}.queue"),
            priority_class=string(options.get("priorityClassName"), f"{where}.priorityClassName"),
            min_resources=min_resources(spec, client_mode, mode),
            topology=volcano_network_topology(meta),
            phase=k.PodGroupPhase.PENDING,
        )
        stored = context.existing.get(name)
        if stored is not None and is_ours(stored):
            group.pop("status")
            if stored_phase(context, name) not in (None, k.PodGroupPhase.PENDING):
                group["spec"] = dict(mapping(stored.get("spec"), "spec"))
        return settle([group], mutations, context)

    def _mutations(self, meta: Meta, spec: Mapping[str, Any], name: str, client_mode: bool) -> list:
        scheduler = string(spec.get("batchScheduler"), "spec.batchScheduler")
        roles = ("executor",) if client_mode else ("driver", "executor")
        return [
            mutation(
                role,
                name,
                {APP_NAME_LABEL: meta.name, ROLE_LABEL: role},
                f"spec.{role}",
                scheduler_name=scheduler or k.DEFAULT_SCHEDULER_NAME,
                force_scheduler=bool(scheduler),
            )
            for role in roles
        ]

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        app = object_name(owner) or labels_of(pod).get(APP_NAME_LABEL)
        return f"spark-{app}-pg" if isinstance(app, str) and app else None
