"""``stromboli queue``: vcctl's queue commands against a memory store (reference §8)."""

from __future__ import annotations

import pytest

from stromboli.core.cli.vcctl.queue import format_queues, podgroup_counts

from .conftest import Cluster

QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")
COMMAND = ("bus.volcano.sh/v1alpha1", "Command")


def queue(name: str, weight: int = 1, parent: str | None = None, state: str = "Open") -> dict:
    spec: dict = {"weight": weight}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": state},
    }


def podgroup(name: str, queue_name: str, phase: str, namespace: str = "default") -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": 1, "queue": queue_name},
        "status": {"phase": phase},
    }


def add_queue(cluster: Cluster, q: dict) -> dict:
    created = cluster.create(q)
    created["status"] = q["status"]
    return cluster.call("update_status", created)


@pytest.mark.parametrize(
    "args",
    [
        ["queue", "--help"],
        ["queue", "create", "--help"],
        ["queue", "list", "--help"],
        ["queue", "get", "--help"],
        ["queue", "operate", "--help"],
        ["queue", "delete", "--help"],
    ],
)
def test_help(cluster: Cluster, args: list[str]) -> None:
    result = cluster.cli(*args)
    assert result.exit_code == 0 and "Usage:" in result.output


def test_create_help_defaults(cluster: Cluster) -> None:
    output = cluster.cli("queue", "create", "--help").output
    assert "-n, --name" in output and "[default: test]" in output
    assert "-w, --weight" in output and "-S, --state" in output and "[default: Open]" in output


# --- create --------------------------------------------------------------------------------------


def test_create_defaults(cluster: Cluster) -> None:
    assert cluster.cli("queue", "create").exit_code == 0
    (q,) = cluster.items(*QUEUE)
    assert q["metadata"]["name"] == "test"
    assert q["spec"]["weight"] == 1


def test_create_with_flags(cluster: Cluster) -> None:
    cluster.cli("queue", "create", "-n", "q1", "-w", "5", "-S", "Closed")
    (q,) = cluster.items(*QUEUE)
    assert (q["metadata"]["name"], q["spec"]["weight"]) == ("q1", 5)
    assert q["status"]["state"] == "Closed"


def test_create_duplicate(cluster: Cluster) -> None:
    cluster.cli("queue", "create", "-n", "q1")
    result = cluster.cli("queue", "create", "-n", "q1")
    assert result.exit_code == 255
    assert result.output.startswith("Failed to queue create: ")


# --- list / get ----------------------------------------------------------------------------------


def test_list_empty(cluster: Cluster) -> None:
    assert cluster.cli("queue", "list").output == "No resources found\n"


def test_list_counts_podgroups(cluster: Cluster) -> None:
    add_queue(cluster, queue("default"))
    add_queue(cluster, queue("q1", weight=3, parent="root", state="Closed"))
    for i, (q, phase) in enumerate(
        [
            ("q1", "Running"),
            ("q1", "Running"),
            ("q1", "Pending"),
            ("q1", "Inqueue"),
            ("default", "Completed"),
            ("default", "Unknown"),
            ("nowhere", "Running"),
        ]
    ):
        cluster.create(podgroup(f"pg{i}", q, phase, namespace=f"ns{i % 2}"))
    lines = cluster.cli("queue", "list").output.splitlines()
    assert lines[0].split() == [
        "Name",
        "Weight",
        "State",
        "Parent",
        "Inqueue",
        "Pending",
        "Running",
        "Unknown",
        "Completed",
    ]
    assert lines[1].split() == ["default", "1", "Open", "0", "0", "0", "1", "1"]
    assert lines[2].split() == ["q1", "3", "Closed", "root", "1", "1", "2", "0", "0"]


def test_list_column_widths(cluster: Cluster) -> None:
    add_queue(cluster, queue("q1"))
    header, row = cluster.cli("queue", "list").output.splitlines()
    assert header.index("Weight") == 25
    assert header.index("State") == 33
    assert row.index(" 1 ") == 24


def test_get(cluster: Cluster) -> None:
    add_queue(cluster, queue("q1", weight=2))
    cluster.create(podgroup("a", "q1", "Running"))
    lines = cluster.cli("queue", "get", "-n", "q1").output.splitlines()
    assert lines[1].split() == ["q1", "2", "Open", "0", "0", "1", "0", "0"]


def test_get_requires_name(cluster: Cluster) -> None:
    result = cluster.cli("queue", "get")
    assert result.output == (
        "Failed to queue get: name is mandatory to get the particular queue details\n"
    )


def test_get_missing(cluster: Cluster) -> None:
    result = cluster.cli("queue", "get", "-n", "ghost")
    assert result.exit_code == 255
    assert 'queues.scheduling.volcano.sh "ghost" not found' in result.output


def test_podgroup_counts_and_format() -> None:
    counts = podgroup_counts([podgroup("a", "q", "Running"), podgroup("b", "q", "")])
    assert counts["q"]["Running"] == 1
    text = format_queues([queue("q")], counts)
    assert text.splitlines()[1].split() == ["q", "1", "Open", "0", "0", "1", "0", "0"]


# --- operate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("verb", "action"), [("open", "OpenQueue"), ("close", "CloseQueue")])
def test_operate_open_close_creates_command(cluster: Cluster, verb: str, action: str) -> None:
    q = add_queue(cluster, queue("q1"))
    result = cluster.cli("queue", "operate", "-n", "q1", "-a", verb)
    assert result.exit_code == 0, result.output
    (command,) = cluster.items(*COMMAND, "default")
    assert command["action"] == action
    assert command["metadata"]["generateName"] == f"q1-{action.lower()}-"
    reference = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": "q1",
        "uid": q["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert command["target"] == reference
    assert command["metadata"]["ownerReferences"] == [reference]


def test_operate_update_weight(cluster: Cluster) -> None:
    add_queue(cluster, queue("q1"))
    assert cluster.cli("queue", "operate", "-n", "q1", "-a", "update", "-w", "7").exit_code == 0
    (q,) = cluster.items(*QUEUE)
    assert q["spec"]["weight"] == 7
    assert cluster.items(*COMMAND) == []


def test_operate_update_needs_weight(cluster: Cluster) -> None:
    result = cluster.cli("queue", "operate", "-n", "q1", "-a", "update")
    assert result.output == (
        "Failed to queue operate: when update queue q1, weight must be specified, the value must "
        "be greater than 0\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-a", "open"], "queue name must be specified"),
        (["-n", "q1"], "action can not be null"),
        (["-n", "q1", "-a", "pause"], "action pause invalid, valid actions are open, close and "
         "update"),
    ],
)  # fmt: skip
def test_operate_errors(cluster: Cluster, args: list[str], message: str) -> None:
    result = cluster.cli("queue", "operate", *args)
    assert result.exit_code == 255
    assert result.output == f"Failed to queue operate: {message}\n"


def test_operate_missing_queue(cluster: Cluster) -> None:
    result = cluster.cli("queue", "operate", "-n", "ghost", "-a", "close")
    assert result.exit_code == 255
    assert cluster.items(*COMMAND) == []


# --- delete --------------------------------------------------------------------------------------


def test_delete(cluster: Cluster) -> None:
    add_queue(cluster, queue("q1"))
    assert cluster.cli("queue", "delete", "-n", "q1").exit_code == 0
    assert cluster.items(*QUEUE) == []


def test_delete_requires_name(cluster: Cluster) -> None:
    assert cluster.cli("queue", "delete").output == (
        "Failed to queue delete: queue name must be specified\n"
    )
