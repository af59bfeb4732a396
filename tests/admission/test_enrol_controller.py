"""The controller's half of enrolment: a pod the webhook named ``podgroup-<uid>`` at CREATE
gets that group made, sized by the owner's ``group-min-member``, and no patch."""

from __future__ import annotations

import pytest

from stromboli.core.clock import SystemClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.enrol import PodEnroller
from stromboli.core.controller.podgroup import enrol_pod, min_member_of, needs_podgroup

GROUP = "scheduling.k8s.io/group-name"
MIN = "scheduling.volcano.sh/group-min-member"
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}


def pod(name: str = "p", **annotations: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "annotations": annotations,
            "ownerReferences": [{**RS, "controller": True}],
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def test_the_webhooks_fallback_name_still_needs_its_group_another_name_does_not() -> None:
    assert needs_podgroup(pod(**{GROUP: "podgroup-rs-uid"}), {"volcano"})
    assert not needs_podgroup(pod(**{GROUP: "train"}), {"volcano"})
    assert not needs_podgroup(pod(**{GROUP: "podgroup-other"}), {"volcano"})


@pytest.mark.parametrize(
    ("value", "count"), [("3", 3), (" 2 ", 2), ("0", 1), ("-4", 1), ("x", 1), ("9" * 12, 1)]
)
def test_min_member_comes_from_the_pod_when_it_is_a_count(value: str, count: int) -> None:
    assert min_member_of(pod(**{MIN: value})) == count


async def test_the_group_is_made_with_the_min_member_and_the_pod_is_not_patched() -> None:
    store = MemoryStore(SystemClock())
    created = await store.create(pod(**{GROUP: "podgroup-rs-uid", MIN: "3"}))
    version = created["metadata"]["resourceVersion"]
    assert await enrol_pod(store, created) == "podgroup-rs-uid"
    group = await store.get("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroup-rs-uid", "team")
    assert group["spec"]["minMember"] == 3
    # Volcano's quota usage of minMember pods.
    assert group["spec"]["minResources"] == {
        "count/pods": "3",
        "cpu": "3",
        "pods": "3",
        "requests.cpu": "3",
    }
    assert (await store.get("v1", "Pod", "p", "team"))["metadata"]["resourceVersion"] == version


def test_later_events_of_a_pod_whose_group_exists_are_not_queued() -> None:
    enroller = PodEnroller(MemoryStore(SystemClock()), {"volcano"})
    named = pod(**{GROUP: "podgroup-rs-uid"})
    named["metadata"]["uid"] = "pod-uid"
    enroller._known[("team", "podgroup-rs-uid")] = None
    enroller.seen(("v1", "Pod"), "MODIFIED", named)
    assert enroller._waiting == {}
    enroller.seen(("v1", "Pod"), "ADDED", named)  # a new pod checks again
    assert list(enroller._waiting) == ["pod-uid"]
