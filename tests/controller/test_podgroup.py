"""The PodGroup controller's enrolment of bare pods (reference §5.5 pg-controller)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from stromboli.core.api import constants as k
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.errors import InternalError
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.enrol import POD, PodEnroller
from stromboli.core.controller.podgroup import enrol_pod, needs_podgroup, podgroup_for


def container(cpu: str | None = None, memory: str | None = None, name: str = "main") -> dict:
    requests = {r: v for r, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    spec: dict = {"name": name, "image": "busybox"}
    if requests:
        spec["resources"] = {"requests": requests}
    return spec


def pod(
    name: str,
    *,
    uid: str | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    scheduler: str | None = k.DEFAULT_SCHEDULER_NAME,
    group: str | None = None,
    node_name: str | None = None,
    deleting: bool = False,
    owner: dict | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
    containers: list[dict] | None = None,
    init_containers: list[dict] | None = None,
) -> dict:
    meta: dict = {"name": name, "namespace": "default", "annotations": dict(annotations or {})}
    if group:
        meta["annotations"][k.GROUP_NAME_ANNOTATION] = group
    if uid:
        meta["uid"] = uid
    if deleting:
        meta["deletionTimestamp"] = "1970-01-01T00:00:00Z"
    if owner:
        meta["ownerReferences"] = [owner]
    spec: dict = {"containers": containers or [container(cpu, memory)]}
    if init_containers:
        spec["initContainers"] = init_containers
    if scheduler:
        spec["schedulerName"] = scheduler
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


NAMES = {k.DEFAULT_SCHEDULER_NAME}
OWNER = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "name": "web-abc",
    "uid": "rs-uid",
    "controller": True,
}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(VirtualClock(100), seed=3)


# -- which pods ----------------------------------------------------------------------------------


def test_bare_volcano_pod_needs_a_group() -> None:
    assert needs_podgroup(pod("p", uid="u"), NAMES)


def test_pod_with_a_group_needs_none() -> None:
    assert not needs_podgroup(pod("p", uid="u", group="mine"), NAMES)


@pytest.mark.parametrize("scheduler", ["default-scheduler", "other", None])
def test_pods_of_other_schedulers_are_left_alone(scheduler: str | None) -> None:
    assert not needs_podgroup(pod("p", uid="u", scheduler=scheduler), NAMES)


def test_any_configured_scheduler_name_counts() -> None:
    assert needs_podgroup(pod("p", uid="u", scheduler="batch"), {"volcano", "batch"})


def test_assigned_or_deleting_pods_are_left_alone() -> None:
    assert not needs_podgroup(pod("p", uid="u", node_name="n1"), NAMES)
    assert not needs_podgroup(pod("p", uid="u", deleting=True), NAMES)


# -- the group it gets -----------------------------------------------------------------------------


def test_group_named_after_the_pod_uid() -> None:
    pg = podgroup_for(pod("p", uid="pod-uid", cpu="1", memory="1Gi"))
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert pg["kind"] == "PodGroup"
    assert pg["metadata"]["name"] == "podgroup-pod-uid"
    assert pg["metadata"]["namespace"] == "default"
    assert pg["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True}
    ]
    assert pg["spec"] == {
        "minMember": 1,
        "queue": "default",
        "minResources": {
            "count/pods": "1",
            "cpu": "1",
            "memory": "1Gi",
            "pods": "1",
            "requests.cpu": "1",
            "requests.memory": "1Gi",
        },
    }
    assert pg["status"] == {"phase": "Pending"}


def test_group_named_after_the_controller_owner() -> None:
    pg = podgroup_for(pod("web-abc-x1", uid="pod-uid", owner=OWNER))
    assert pg["metadata"]["name"] == "podgroup-rs-uid"
    assert pg["metadata"]["ownerReferences"] == [OWNER]


def test_non_controller_owner_is_not_used() -> None:
    owner = {**OWNER, "controller": False}
    pg = podgroup_for(pod("p", uid="pod-uid", owner=owner))
    assert pg["metadata"]["name"] == "podgroup-pod-uid"


def test_queue_from_the_pod_annotation() -> None:
    p = pod("p", uid="u", annotations={k.QUEUE_NAME_ANNOTATION_KEY: "research"})
    assert podgroup_for(p)["spec"]["queue"] == "research"


def test_priority_class_is_copied() -> None:
    p = pod("p", uid="u", priority_class="high")
    assert podgroup_for(p)["spec"]["priorityClassName"] == "high"
    assert "priorityClassName" not in podgroup_for(pod("q", uid="v"))["spec"]


def test_min_resources_cover_init_containers() -> None:
    p = pod("p", uid="u", containers=[container("1")], init_containers=[container("3", name="i")])
    assert podgroup_for(p)["spec"]["minResources"] == {
        "count/pods": "1",
        "cpu": "3",
        "pods": "1",
        "requests.cpu": "3",
    }


def test_min_resources_scale_with_min_member() -> None:
    p = pod("p", uid="u", cpu="500m", memory="1Gi")
    pg = podgroup_for(p, min_member=3)
    assert pg["spec"]["minMember"] == 3
    assert pg["spec"]["minResources"] == {
        "count/pods": "3",
        "cpu": "1500m",
        "memory": "3Gi",
        "pods": "3",
        "requests.cpu": "1500m",
        "requests.memory": "3Gi",
    }


def test_behaviour_annotations_are_propagated() -> None:
    p = pod(
        "p",
        uid="u",
        annotations={k.PREEMPTABLE_KEY: "true", "unrelated.example.com/x": "y"},
    )
    assert podgroup_for(p)["metadata"]["annotations"] == {k.PREEMPTABLE_KEY: "true"}


def test_network_topology_from_annotations() -> None:
    p = pod(
        "p",
        uid="u",
        annotations={
            k.NETWORK_TOPOLOGY_MODE_KEY: "hard",
            k.NETWORK_TOPOLOGY_HIGHEST_TIER_KEY: "2",
        },
    )
    assert podgroup_for(p)["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}


# -- enrolment against a store ---------------------------------------------------------------------


async def test_enrol_creates_the_group_and_annotates_the_pod(store: MemoryStore) -> None:
    created = await store.create(pod("solo", cpu="1"))
    name = await enrol_pod(store, created)
    assert name == f"podgroup-{created['metadata']['uid']}"
    pg = await store.get(k.SCHEDULING_V1BETA1, "PodGroup", name, "default")
    assert pg["spec"]["minMember"] == 1
    assert pg["status"]["phase"] == "Pending"
    annotated = await store.get("v1", "Pod", "solo", "default")
    assert annotated["metadata"]["annotations"][k.GROUP_NAME_ANNOTATION] == name
    # Its own fallback name still counts (the webhook writes it before the group exists);
    # PodEnroller remembers the groups it made, so later events cost no create.
    assert needs_podgroup(annotated, NAMES)


async def test_pods_of_one_owner_share_a_group(store: MemoryStore) -> None:
    a = await store.create(pod("web-1", cpu="1", owner=OWNER))
    b = await store.create(pod("web-2", cpu="1", owner=OWNER))
    assert await enrol_pod(store, a) == "podgroup-rs-uid"
    assert await enrol_pod(store, b) == "podgroup-rs-uid"
    groups = (await store.list(k.SCHEDULING_V1BETA1, "PodGroup", "default")).items
    assert [g["metadata"]["name"] for g in groups] == ["podgroup-rs-uid"]


async def test_group_is_collected_with_its_pod(store: MemoryStore) -> None:
    created = await store.create(pod("solo", cpu="1"))
    name = await enrol_pod(store, created)
    await store.delete("v1", "Pod", "solo", "default")
    groups = (await store.list(k.SCHEDULING_V1BETA1, "PodGroup", "default")).items
    assert name not in [g["metadata"]["name"] for g in groups]


async def test_enrol_of_a_vanished_pod(store: MemoryStore) -> None:
    created = await store.create(pod("gone", cpu="1"))
    await store.delete("v1", "Pod", "gone", "default")
    assert await enrol_pod(store, created) is None


def test_unreadable_tier_annotation_names_the_annotation() -> None:
    import pytest

    from stromboli.core.api import constants as k
    from stromboli.core.controller.podgroup import podgroup_for

    pod = {
        "metadata": {
            "name": "p",
            "namespace": "default",
            "uid": "u",
            "annotations": {
                k.NETWORK_TOPOLOGY_MODE_KEY: "hard",
                k.NETWORK_TOPOLOGY_HIGHEST_TIER_KEY: "x",
            },
        },
        "spec": {"containers": [{"name": "c"}]},
    }
    with pytest.raises(ValueError, match=r"metadata\.annotations\[.*highest-tier.*\]: 'x'"):
        podgroup_for(pod)


# -- the enroller's requests -------------------------------------------------------------------


class RecordingStore(MemoryStore):
    """Records writes in order; ``fail_creates`` PodGroup creates are refused."""

    def __init__(self) -> None:
        super().__init__(VirtualClock(100), seed=3)
        self.writes: list[str] = []
        self.fail_creates = 0
        #: Called before a PodGroup create is answered (a watch event arriving meanwhile).
        self.during_create: Callable[[], Awaitable[None]] | None = None

    async def create(self, obj: dict) -> dict:
        if obj["kind"] == "PodGroup" and self.during_create is not None:
            await self.during_create()
        if obj["kind"] == "PodGroup" and self.fail_creates:
            self.fail_creates -= 1
            self.writes.append("create PodGroup (refused)")
            raise InternalError("etcd timed out")
        self.writes.append(f"create {obj['kind']}")
        return await super().create(obj)

    async def patch(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> dict:
        self.writes.append(f"patch {kind}")
        return await super().patch(api_version, kind, *args, **kwargs)


async def test_the_pod_is_annotated_before_its_group_is_made() -> None:
    store = RecordingStore()
    created = await store.create(pod("solo", cpu="1"))
    store.writes.clear()
    assert await enrol_pod(store, created) == f"podgroup-{created['metadata']['uid']}"
    assert store.writes == ["patch Pod", "create PodGroup"]


async def test_a_pod_gone_before_its_patch_gets_no_group() -> None:
    store = RecordingStore()
    created = await store.create(pod("gone", cpu="1"))
    await store.delete("v1", "Pod", "gone", "default")
    store.writes.clear()
    assert await enrol_pod(store, created) is None
    assert store.writes == ["patch Pod"]
    assert (await store.list(k.SCHEDULING_V1BETA1, "PodGroup", "default")).items == []


async def test_the_event_of_the_enrollers_own_patch_costs_no_second_create() -> None:
    store = RecordingStore()
    enroller = PodEnroller(store, NAMES)
    created = await store.create(pod("solo", cpu="1"))
    store.writes.clear()

    async def echo() -> None:  # the watch's event of the patch, while the create is in flight
        enroller.seen(POD, "MODIFIED", await store.get("v1", "Pod", "solo", "default"))

    store.during_create = echo
    enroller.seen(POD, "ADDED", created)
    assert await enroller.enrol_waiting() == 1
    assert await enroller.enrol_waiting() == 0
    assert store.writes == ["patch Pod", "create PodGroup"]


async def test_a_refused_group_is_made_on_the_pods_next_event() -> None:
    store = RecordingStore()
    store.fail_creates = 1
    enroller = PodEnroller(store, NAMES)
    created = await store.create(pod("solo", cpu="1"))
    store.writes.clear()
    enroller.seen(POD, "ADDED", created)
    assert await enroller.enrol_waiting() == 0
    annotated = await store.get("v1", "Pod", "solo", "default")
    name = annotated["metadata"]["annotations"][k.GROUP_NAME_ANNOTATION]
    enroller.seen(POD, "MODIFIED", annotated)
    assert await enroller.enrol_waiting() == 1
    assert store.writes == ["patch Pod", "create PodGroup (refused)", "create PodGroup"]
    assert (await store.get(k.SCHEDULING_V1BETA1, "PodGroup", name, "default"))["spec"]
