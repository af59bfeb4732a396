"""The ``binpack`` plugin: Volcano's weighted fill ratio."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from stromboli.core.scheduler.api.build import node_info_from, task_info_from
from stromboli.core.scheduler.api.node import NodeTable
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.options import PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.framework.snapshot import Snapshot
from stromboli.core.scheduler.plugins.binpack import BinpackPlugin, resource_weights

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 0) -> dict:
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    if gpus:
        allocatable[GPU] = str(gpus)
    return {"metadata": {"name": name}, "spec": {}, "status": {"allocatable": allocatable}}


def pod(name: str, on: str = "", **requests: str) -> dict:
    requests = {"cpu": "1", "memory": "1Gi", **requests}
    if "gpu" in requests:
        requests[GPU] = requests.pop("gpu")
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if on:
        body["nodeName"] = on
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": body,
        "status": {"phase": "Running" if on else "Pending"},
    }


def scores(nodes: list[dict], placed: list[dict], task: dict, **arguments: Any) -> list[float]:
    table = NodeTable()
    for raw in nodes:
        table.add_node(node_info_from(raw))
    for raw in placed:
        placed_task = task_info_from(raw, "placed")
        table.add_task(placed_task.node_name, placed_task)
    option = PluginOption("binpack", Arguments("binpack", arguments))
    ssn = Session(
        Snapshot({}, {}, table),
        SchedulerConfig([], [[option]], {}),
        datetime(2024, 1, 1, tzinfo=UTC),
    )
    ssn.open()
    return ssn.node_scores(task_info_from(task, "job"), np.arange(len(table))).tolist()


BUSY = pod("load", on="busy", cpu="2", memory="4Gi")


def test_prefers_the_fuller_node() -> None:
    result = scores([node("empty"), node("busy")], [BUSY], pod("p"))
    # empty: (1/4 + 1/8) / 2 × 100; busy: (3/4 + 5/8) / 2 × 100.
    assert result == pytest.approx([18.75, 68.75])


def test_overflowing_node_scores_zero() -> None:
    result = scores([node("empty"), node("busy")], [BUSY], pod("p", cpu="3"))
    assert result == pytest.approx([(0.75 + 0.125) / 2 * 100, 0.0])


def test_plugin_weight_multiplies() -> None:
    result = scores([node("empty"), node("busy")], [BUSY], pod("p"), **{"binpack.weight": 10})
    assert result == pytest.approx([187.5, 687.5])


def test_resource_weights_shift_the_balance() -> None:
    result = scores(
        [node("empty"), node("busy")],
        [BUSY],
        pod("p"),
        **{"binpack.cpu": 3, "binpack.memory": 1},
    )
    assert result == pytest.approx([(3 * 0.25 + 0.125) / 4 * 100, (3 * 0.75 + 0.625) / 4 * 100])


def test_listed_extended_resource_counts_with_its_weight() -> None:
    arguments = {"binpack.resources": f"{GPU}, example.com/fpga", f"binpack.resources.{GPU}": 2}
    placed = [pod("load", on="busy", cpu="2", memory="4Gi", gpu="2")]
    nodes = [node("empty", gpus=4), node("busy", gpus=4), node("cpu-only")]
    result = scores(nodes, placed, pod("p", gpu="1"), **arguments)
    assert result == pytest.approx(
        [
            (0.25 + 0.125 + 2 * 0.25) / 4 * 100,
            (0.75 + 0.625 + 2 * 0.75) / 4 * 100,
            # The node lacks the GPU: its weight counts, its share does not.
            (0.25 + 0.125) / 4 * 100,
        ]
    )


def test_unlisted_extended_resource_is_ignored() -> None:
    result = scores([node("empty", gpus=4)], [], pod("p", gpu="4"))
    assert result == pytest.approx([18.75])


def test_only_requested_resources_count() -> None:
    task = pod("p")
    task["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "2"}
    assert scores([node("empty")], [], task) == pytest.approx([50.0])


def test_weight_zero_registers_nothing() -> None:
    assert scores([node("a")], [], pod("p"), **{"binpack.weight": 0}) == [0.0]


def test_weights_parse_like_volcano() -> None:
    arguments = Arguments(
        "binpack",
        {"binpack.cpu": -2, "binpack.resources": "a/b,, c/d ", "binpack.resources.c/d": "5"},
    )
    assert resource_weights(arguments) == {"cpu": 1, "memory": 1, "a/b": 1, "c/d": 5}


def test_accepts_prefixed_resource_arguments() -> None:
    assert BinpackPlugin.argument_prefixes == ("binpack.resources.",)
    assert set(BinpackPlugin.known_arguments) == {
        "binpack.weight",
        "binpack.cpu",
        "binpack.memory",
        "binpack.resources",
    }
