"""LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``) groups as LWS's Volcano provider makes them.

Each group (a leader and its workers) is one gang, made when the group's leader pod exists:
name ``<lws>-<groupIndex>-<revision>`` (the leader's ``template-revision-hash`` label), owned
by the leader pod; ``minMember`` = ``leaderWorkerTemplate.size``, or 1 with ``startupPolicy:
LeaderReady`` (workers start only once the leader is ready); ``minResources`` = the leader's
pod + (size − 1) workers (the worker template doubles as the leader's when there is no
``leaderTemplate``); ``queue`` from the LWS's ``scheduling.volcano.sh/queue-name`` annotation;
the LWS's ``volcano.sh/*`` annotations are copied onto the PodGroup; network topology from
Volcano's ``volcano.sh/network-topology-*`` annotations on the LWS.

Leader pods are read from ``Context.related``; a group whose leader does not exist yet has no
PodGroup yet. Pods get ``volcano.sh/task-spec`` ``leader`` / ``worker``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.integrations.common import (
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    Meta,
    Resources,
    exact_name,
    integer,
    labels_of,
    mapping,
    mutation,
    object_name,
    owner_reference,
    pod_resources,
    pod_template,
    podgroup,
    read_meta,
    settle,
    string,
    volcano_network_topology,
)

API_VERSION = "leaderworkerset.x-k8s.io/v1"
FRAMEWORK = "leaderworkerset"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
LEADER_READY = "LeaderReady"


def group_name(lws: str, index: str, revision: str) -> str:
    return exact_name(f"{lws}-{index}-{revision}")


class LeaderWorkerSetAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj)
        spec = mapping(obj.get("spec"), "spec")
        lwt = mapping(spec.get("leaderWorkerTemplate"), "spec.leaderWorkerTemplate")
        where = "spec.leaderWorkerTemplate"
        size = integer(lwt.get("size"), f"{where}.size", 1, minimum=1)
        replicas = integer(spec.get("replicas"), "spec.replicas", 1)
        worker = pod_template(lwt.get("workerTemplate"), f"{where}.workerTemplate")
        leader_field = f"{where}.leaderTemplate"
        if lwt.get("leaderTemplate") is None:
            leader, leader_field = worker, f"{where}.workerTemplate"
        else:
            leader = pod_template(lwt.get("leaderTemplate"), leader_field)
        policy = string(spec.get("startupPolicy"), "spec.startupPolicy", "LeaderCreated")
        if policy not in ("LeaderCreated", LEADER_READY):
            raise ConversionError("spec.startupPolicy", "must be LeaderCreated or LeaderReady")
        resources = _pod(leader, leader_field)
        resources.add(_pod(worker, f"{where}.workerTemplate"), size - 1, where)
        min_member = 1 if policy == LEADER_READY else size
        groups, mutations = [], []
        for pod in context.related_of(["Pod"]):
            labels = labels_of(pod)
            if labels.get(NAME_LABEL) != meta.name or labels.get(WORKER_INDEX_LABEL) != "0":
                continue
            pod_meta = read_meta(pod, "v1", "Pod")
            if pod_meta.namespace != meta.namespace:
                continue
            index, revision = _group_keys(pod_meta)
            if int(index) >= replicas:
                continue  # a leader being scaled away
            name = group_name(meta.name, index, revision)
            groups.append(self._group(meta, pod_meta, name, min_member, resources))
            base = {NAME_LABEL: meta.name, GROUP_INDEX_LABEL: index}
            mutations.append(
                mutation("leader", name, {**base, WORKER_INDEX_LABEL: "0"}, leader_field)
            )
            mutations.append(mutation("worker", name, base, f"{where}.workerTemplate"))
        notes = () if groups else ("no leader pod yet: a group's PodGroup follows its leader",)
        return settle(groups, mutations, context, notes)

    def _group(
        self, lws: Meta, leader: Meta, name: str, min_member: int, resources: Resources
    ) -> dict[str, Any]:
        inherited = {key: v for key, v in lws.annotations.items() if key.startswith("volcano.sh/")}
        return podgroup(
            name=name,
            namespace=lws.namespace,
            owner=owner_reference(leader),
            adapter=FRAMEWORK,
            min_member=min_member,
            queue=lws.annotations.get(k.QUEUE_NAME_ANNOTATION_KEY),
            min_resources=resources,
            topology=volcano_network_topology(lws),
            annotations=inherited,
        )

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        """``<lws>-<groupIndex>-<revision>`` from the labels LWS puts on every pod of a group."""
        labels = labels_of(pod)
        lws = object_name(owner) or labels.get(NAME_LABEL)
        index, revision = labels.get(GROUP_INDEX_LABEL), labels.get(REVISION_LABEL)
        if not all(isinstance(v, str) and v for v in (lws, index, revision)):
            return None
        return f"{lws}-{index}-{revision}"


def _pod(template: Mapping[str, Any], field: str) -> Resources:
    spec = mapping(template.get("spec"), f"{field}.spec")
    return pod_resources(spec, f"{field}.spec", fallback="per-resource", init_containers=True)


def _group_keys(leader: Meta) -> tuple[str, str]:
    index = leader.labels.get(GROUP_INDEX_LABEL, "")
    revision = leader.labels.get(REVISION_LABEL, "")
    where = f"Pod {leader.name}: metadata.labels"
    if not index.isascii() or not index.isdigit() or len(index) > 9:
        raise ConversionError(f"{where}[{GROUP_INDEX_LABEL}]", "must be a group index")
    if not revision:
        raise ConversionError(f"{where}[{REVISION_LABEL}]", "is required on a leader pod")
    return index, revision
