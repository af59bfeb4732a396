"""Pod and PodGroup admission rules (reference §6 Pod CREATE / PodGroup CREATE; §9 admission)."""

from __future__ import annotations

import pytest

from stromboli.core.admission.pod import validate_pod_create
from stromboli.core.admission.podgroup import validate_podgroup_create

MIN = "volcano.sh/jdb-min-available"
MAX = "volcano.sh/jdb-max-unavailable"


def pod(annotations: dict | None = None, scheduler: str | None = "volcano") -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "nginx"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "annotations": annotations or {}},
        "spec": spec,
    }


# --- pod -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "5", "+3", "1%", "50%", "99%"])
@pytest.mark.parametrize("key", [MIN, MAX])
def test_valid_int_and_percentage(key: str, value: str) -> None:
    assert validate_pod_create(pod({key: value})) == []


@pytest.mark.parametrize("value", ["0", "-1"])
def test_non_positive_integer(value: str) -> None:
    assert validate_pod_create(pod({MIN: value})) == [
        f'invalid value <"{value}"> for {MIN}, it must be a positive integer'
    ]


@pytest.mark.parametrize("value", ["0%", "100%", "-5%"])
def test_percentage_out_of_range(value: str) -> None:
    assert validate_pod_create(pod({MAX: value})) == [
        f'invalid value <"{value}"> for {MAX}, it must be a valid percentage which between 1% ~ 99%'
    ]


def test_non_numeric() -> None:
    assert validate_pod_create(pod({MIN: "abc"})) == [
        f'invalid value strconv.Atoi: parsing "abc": invalid syntax for {MIN}'
    ]


def test_both_annotations() -> None:
    assert validate_pod_create(pod({MIN: "1", MAX: "1"})) == [
        "not allow configure multiple annotations "
        "<[volcano.sh/jdb-min-available volcano.sh/jdb-max-unavailable]> at same time"
    ]


def test_invalid_value_reported_before_both_set() -> None:
    errors = validate_pod_create(pod({MIN: "0", MAX: "1"}))
    assert errors[0].endswith("it must be a positive integer")


def test_no_annotations() -> None:
    assert validate_pod_create(pod()) == []


@pytest.mark.parametrize("scheduler", ["default-scheduler", None])
def test_other_schedulers_bypass(scheduler: str | None) -> None:
    assert validate_pod_create(pod({MIN: "0"}, scheduler)) == []


def test_custom_scheduler_names() -> None:
    assert validate_pod_create(pod({MIN: "0"}, "mine"), {"mine"}) != []
    assert validate_pod_create(pod({MIN: "0"}), {"mine"}) == []


# --- podgroup ------------------------------------------------------------------------------------


def podgroup(queue: str | None = None, **spec: object) -> dict:
    body: dict = {"minMember": 1, **spec}
    if queue is not None:
        body["queue"] = queue
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": body,
    }


QUEUES = {
    "default": {"metadata": {"name": "default"}, "status": {"state": "Open"}},
    "closed": {"metadata": {"name": "closed"}, "status": {"state": "Closed"}},
}


def test_open_queue_ok() -> None:
    assert validate_podgroup_create(podgroup("default"), QUEUES) == []


def test_no_queue_ok() -> None:
    assert validate_podgroup_create(podgroup(), QUEUES) == []


def test_missing_queue() -> None:
    assert validate_podgroup_create(podgroup("nope"), QUEUES) == [
        'unable to find queue: queue.scheduling.volcano.sh "nope" not found'
    ]


def test_closed_queue() -> None:
    assert validate_podgroup_create(podgroup("closed"), QUEUES) == [
        "can only submit PodGroup to queue with state `Open`, queue `closed` status is `Closed`."
    ]


def test_tier_conflict() -> None:
    topology = {"highestTierAllowed": 1, "highestTierName": "rack"}
    assert validate_podgroup_create(podgroup(networkTopology=topology), QUEUES) == [
        "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
        "simultaneously."
    ]


def test_subgroup_tier_conflict() -> None:
    policies = [
        {"name": "ok", "networkTopology": {"highestTierAllowed": 1}},
        {"name": "bad", "networkTopology": {"highestTierAllowed": 1, "highestTierName": "r"}},
    ]
    (error,) = validate_podgroup_create(podgroup(subGroupPolicy=policies), QUEUES)
    assert error.startswith("in subGroupPolicy 'bad': must not specify 'highestTierAllowed'")
