"""KubeRay RayCluster, RayJob and RayService as ``--batch-scheduler=volcano`` makes their gangs.

PodGroup ``ray-<name>-pg``, owned by the RayCluster, or by the RayJob whose cluster it is (the
cluster then carries ``ray.io/originated-from-crd: RayJob`` and gets no PodGroup of its own);
owner annotations copied; created ``Pending``.

- ``minMember`` = 1 (head) + Σ workers: without autoscaling each group's replicas clamped to
  [minReplicas, maxReplicas] × numOfHosts; with ``enableInTreeAutoscaling`` minReplicas ×
  numOfHosts; suspended groups count 0. A RayJob's submitter pod is *not* counted (it would
  wait for a cluster that waits for it).
- ``minResources`` = head pod + Σ groups pod × numOfHosts × ``replicas`` as written, not
  clamped (KubeRay's own asymmetry, kept), or × minReplicas with autoscaling; per container
  requests, each missing one from limits; init containers ignored. A RayJob adds its submitter:
  the ``submitterPodTemplate`` (K8sJobMode) or the default submitter (500m cpu, 200Mi memory
  requested) in K8sJobMode and SidecarMode.
- ``queue`` / ``priorityClassName`` / network topology from the owner's *labels*
  ``volcano.sh/queue-name``, ``ray.io/priority-class-name``, ``volcano.sh/network-topology-mode``
  and ``volcano.sh/network-topology-highest-tier-allowed``; set at creation only (a stored
  PodGroup keeps them, only minMember/minResources follow the spec).

Pods: ``schedulerName: volcano`` (always), ``volcano.sh/task-spec`` = ``headgroup``, the worker
group's name, or ``submittergroup``; the queue and priority labels copied from the owner.
A RayJob on an existing cluster (``clusterSelector``) has no gang; a finished RayJob's
PodGroup shrinks to its live cluster (``Context.related``), or to nothing once it is gone.
A RayService has none of its own: each RayCluster it makes gets its own ``ray-<cluster>-pg``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.integrations.common import (
    INT32_MAX,
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    Meta,
    PodMutation,
    Resources,
    add_count,
    boolean,
    exact_name,
    integer,
    is_ours,
    labels_of,
    mapping,
    mutation,
    network_topology,
    object_name,
    owner_reference,
    pod_resources,
    pod_template,
    podgroup,
    read_meta,
    sequence,
    settle,
    stored_spec,
    string,
    times,
)

API_VERSION = "ray.io/v1"
FRAMEWORK = "kuberay"
PRIORITY_LABEL = "ray.io/priority-class-name"
TIER_LABEL = "volcano.sh/network-topology-highest-tier-allowed"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
CLUSTER_LABEL = "ray.io/cluster"
ORIGIN_CRD_LABEL = "ray.io/originated-from-crd"
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
HEAD_GROUP = "headgroup"
SUBMITTER_GROUP = "submittergroup"
#: KubeRay's default submitter (pod or sidecar container) requests.
DEFAULT_SUBMITTER = Resources.parse({"cpu": "500m", "memory": "200Mi"}, "submitter")
FINISHED = ("Complete", "Failed")


def group_name(owner: str) -> str:
    return exact_name(f"ray-{owner}-pg")


def _pod(template: Mapping[str, Any], field: str) -> Resources:
    spec = mapping(template.get("spec"), f"{field}.spec")
    return pod_resources(spec, f"{field}.spec", fallback="per-resource")


def desired_workers(group: Mapping[str, Any], where: str) -> tuple[int, int, int, int]:
    """(clamped replicas, raw replicas, minReplicas, numOfHosts) of a worker group, 0 when
    suspended; with CRD defaults 0, 0, 2³¹−1 and 1."""
    replicas = integer(group.get("replicas"), f"{where}.replicas", 0)
    low = integer(group.get("minReplicas"), f"{where}.minReplicas", 0)
    high = integer(group.get("maxReplicas"), f"{where}.maxReplicas", INT32_MAX)
    hosts = integer(group.get("numOfHosts"), f"{where}.numOfHosts", 1, minimum=1)
    if boolean(group.get("suspend"), f"{where}.suspend", False):
        return 0, 0, 0, hosts
    clamped = high if low > high else min(max(replicas, low), high)
    return clamped, replicas, low, hosts


class ClusterGang:
    """The counts of one RayCluster spec, and its pod mutations."""

    def __init__(self, spec: Mapping[str, Any], field: str) -> None:
        head = mapping(spec.get("headGroupSpec"), f"{field}.headGroupSpec")
        head_field = f"{field}.headGroupSpec.template"
        self.head_template = pod_template(head.get("template"), head_field)
        self.head_field = head_field
        self.resources = _pod(self.head_template, head_field)
        autoscaling = boolean(
            spec.get("enableInTreeAutoscaling"), f"{field}.enableInTreeAutoscaling", False
        )
        self.min_member = 1
        self.groups: list[tuple[str, str]] = []
        seen = {HEAD_GROUP}
        groups = sequence(spec.get("workerGroupSpecs"), f"{field}.workerGroupSpecs")
        for i, group in enumerate(groups):
            where = f"{field}.workerGroupSpecs[{i}]"
            group = mapping(group, where)
            name = string(group.get("groupName"), f"{where}.groupName")
            if not name:
                raise ConversionError(f"{where}.groupName", "is required")
            if name in seen:
                raise ConversionError(f"{where}.groupName", f"{name!r} is used twice")
            seen.add(name)
            template = pod_template(group.get("template"), f"{where}.template")
            clamped, raw, low, hosts = desired_workers(group, where)
            pods, resource_pods = (low, low) if autoscaling else (clamped, raw)
            self.min_member = add_count(self.min_member, times(pods, hosts, where), where)
            pod = _pod(template, f"{where}.template")
            self.resources.add(pod, times(resource_pods, hosts, where), "minResources")
            self.groups.append((name, f"{where}.template"))

    def mutations(self, name: str, copied: Mapping[str, str]) -> list[PodMutation]:
        roles = [(HEAD_GROUP, {NODE_TYPE_LABEL: "head"}, self.head_field)]
        roles += [(g, {NODE_TYPE_LABEL: "worker", GROUP_LABEL: g}, f) for g, f in self.groups]
        return [
            mutation(role, name, match, field, labels=copied, force_scheduler=True)
            for role, match, field in roles
        ]


def owner_keys(meta: Meta) -> tuple[dict[str, str], str | None, str | None, Any]:
    """(labels copied onto pods, queue, priority class, network topology) from owner labels."""
    copied = {
        key: meta.labels[key] for key in (k.QUEUE_NAME_KEY, PRIORITY_LABEL) if key in meta.labels
    }
    topology = network_topology(
        meta.labels, k.NETWORK_TOPOLOGY_MODE_KEY, TIER_LABEL, "metadata.labels"
    )
    return copied, meta.labels.get(k.QUEUE_NAME_KEY), meta.labels.get(PRIORITY_LABEL), topology


def build(
    meta: Meta,
    name: str,
    min_member: int,
    resources: Resources,
    context: Context,
) -> dict[str, Any]:
    """The PodGroup; a stored one of ours keeps everything but minMember and minResources."""
    _, queue, priority, topology = owner_keys(meta)
    group = podgroup(
        name=name,
        namespace=meta.namespace,
        owner=owner_reference(meta),
        adapter=FRAMEWORK,
        min_member=min_member,
        queue=queue,
        priority_class=priority,
        min_resources=resources,
        topology=topology,
        annotations=meta.annotations,
        phase=k.PodGroupPhase.PENDING,
    )
    stored = context.existing.get(name)
    if stored is not None and is_ours(stored):
        spec = dict(stored_spec(context, name))
        spec["minMember"] = min_member
        spec.pop("minResources", None)
        if resources:
            spec["minResources"] = resources.to_list()
        group["spec"] = spec
        group.pop("status", None)  # the scheduler owns the phase once it exists
    return group


class RayClusterAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        spec = mapping(obj.get("spec"), "spec")
        gang = ClusterGang(spec, "spec")
        copied = owner_keys(meta)[0]
        if meta.labels.get(ORIGIN_CRD_LABEL) == "RayJob":
            job = meta.labels.get(ORIGIN_NAME_LABEL) or ""
            note = f"cluster of RayJob {job}: the RayJob's PodGroup applies"
            if not job:
                raise ConversionError(f"metadata.labels[{ORIGIN_NAME_LABEL}]", "is required")
            return Conversion(
                mutations=tuple(gang.mutations(group_name(job), copied)), notes=(note,)
            )
        name = group_name(meta.name)
        mutations = gang.mutations(name, copied)
        if boolean(spec.get("suspend"), "spec.suspend", False):
            return Conversion(mutations=tuple(mutations), notes=("RayCluster is suspended",))
        group = build(meta, name, gang.min_member, gang.resources, context)
        return settle([group], mutations, context)

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        labels = labels_of(owner)
        if labels.get(ORIGIN_CRD_LABEL) == "RayJob" and labels.get(ORIGIN_NAME_LABEL):
            return f"ray-{labels[ORIGIN_NAME_LABEL]}-pg"
        name = object_name(owner)
        return f"ray-{name}-pg" if name else None


class RayJobAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        spec = mapping(obj.get("spec"), "spec")
        if mapping(spec.get("clusterSelector"), "spec.clusterSelector"):
            return Conversion(
                notes=("a RayJob on an existing cluster (clusterSelector) has no gang",)
            )
        if spec.get("rayClusterSpec") is None:
            raise ConversionError("spec.rayClusterSpec", "is required without clusterSelector")
        gang = ClusterGang(
            mapping(spec.get("rayClusterSpec"), "spec.rayClusterSpec"), "spec.rayClusterSpec"
        )
        name = group_name(meta.name)
        copied = owner_keys(meta)[0]
        mutations = gang.mutations(name, copied)
        mode = string(spec.get("submissionMode"), "spec.submissionMode", "K8sJobMode")
        if mode not in ("K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode"):
            raise ConversionError("spec.submissionMode", f"unknown submission mode {mode!r}")
        resources = Resources(gang.resources.amounts)
        if mode == "K8sJobMode":
            field = "spec.submitterPodTemplate"
            if spec.get("submitterPodTemplate") is None:
                submitter = DEFAULT_SUBMITTER
            else:
                submitter = _pod(pod_template(spec.get("submitterPodTemplate"), field), field)
            resources.add(submitter, field="minResources")
            mutations.append(
                mutation(
                    SUBMITTER_GROUP,
                    name,
                    {JOB_NAME_LABEL: meta.name},
                    field,
                    labels=copied,
                    force_scheduler=True,
                )
            )
        elif mode == "SidecarMode":
            resources.add(DEFAULT_SUBMITTER, field="minResources")
        min_member = gang.min_member
        status = mapping(obj.get("status"), "status")
        if status.get("jobDeploymentStatus") in FINISHED:
            min_member, resources = self._live_cluster(status, meta.namespace, context)
        group = build(meta, name, min_member, resources, context)
        return settle([group], mutations, context)

    def _live_cluster(
        self, status: Mapping[str, Any], namespace: str, context: Context
    ) -> tuple[int, Resources]:
        """A finished RayJob's gang is what is left of its cluster (nothing once deleted)."""
        cluster = string(status.get("rayClusterName"), "status.rayClusterName")
        for obj in context.related_of(["RayCluster"]):
            meta = read_meta(obj)
            if meta.name == cluster and meta.namespace == namespace:
                gang = ClusterGang(mapping(obj.get("spec"), "RayCluster.spec"), "RayCluster.spec")
                return gang.min_member, gang.resources
        return 0, Resources()

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        name = object_name(owner)
        return f"ray-{name}-pg" if name else None


class RayServiceAdapter(BaseAdapter):
    """A RayService's clusters are plain RayClusters, each its own gang."""

    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        mapping(obj.get("spec"), "spec")
        status = mapping(obj.get("status"), "status")
        names = set()
        for key in ("activeServiceStatus", "pendingServiceStatus"):
            part = mapping(status.get(key), f"status.{key}")
            name = string(part.get("rayClusterName"), f"status.{key}.rayClusterName")
            if name:
                names.add(name)
        groups: list[dict[str, Any]] = []
        mutations: list[PodMutation] = []
        adopted: list[str] = []
        for cluster in context.related_of(["RayCluster"]):
            cmeta = read_meta(cluster)
            if cmeta.name in names and cmeta.namespace == meta.namespace:
                converted = RayClusterAdapter().convert(cluster, context)
                groups += converted.podgroups
                mutations += converted.mutations
                adopted += converted.adopted
        return Conversion(
            tuple(groups),
            tuple(mutations),
            tuple(adopted),
            ("each RayCluster of a RayService is its own gang ray-<cluster>-pg",),
        )

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        cluster = labels_of(pod).get(CLUSTER_LABEL)
        return f"ray-{cluster}-pg" if isinstance(cluster, str) and cluster else None
