"""`stromboli explain` on simulated input: per-node, per-plugin verdicts for one pod."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from stromboli.core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def explain(*args: str) -> str:
    result = CliRunner().invoke(main, ["explain", *args], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_pending_pod_lists_each_node_and_the_plugin_that_rejects_it() -> None:
    out = explain("lost", "--simulate", str(EXAMPLES / "affinity-and-taints.yaml"))
    assert "0 of 3 nodes can take the pod now" in out
    for node in ("node-cpu-0", "node-cpu-1", "node-gpu-0"):
        assert node in out
    assert "predicates" in out and "node affinity/selector" in out
    assert "0/3 nodes are unavailable" in out


def test_resource_shortage_is_reported_with_amounts(tmp_path: Path) -> None:
    source = tmp_path / "input.yaml"
    source.write_text(
        """apiVersion: v1
kind: Node
metadata: {name: small}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: hungry}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
"""
    )
    out = explain("hungry", "--simulate", str(source))
    assert "Insufficient cpu (asks 3 cpu, free 2 cpu)" in out


def test_feasible_nodes_are_ranked_with_plugin_scores() -> None:
    out = explain(
        "web-0",
        "--simulate",
        str(EXAMPLES / "binpack-vs-spread.yaml"),
        "--scheduler-conf",
        str(EXAMPLES / "binpack-conf.yaml"),
    )
    assert "3 of 3 nodes can take the pod now" in out
    assert "binpack" in out and "nodeorder" in out
    # web-0 runs on node-0 with its two siblings: binpack ranks that node first.
    rows = [line for line in out.splitlines() if line.startswith("│ node-")]
    assert rows[0].startswith("│ node-0")


def test_unknown_pod_is_a_clear_error() -> None:
    result = CliRunner().invoke(
        main, ["explain", "ghost", "--simulate", str(EXAMPLES / "gang-waits.yaml")]
    )
    assert result.exit_code != 0
    assert "default/ghost" in result.output
