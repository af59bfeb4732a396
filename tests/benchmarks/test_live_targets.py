"""live_bench's target verdicts: each case is judged against kube-scheduler in its own mode,
with the issue's bounds (1.0× rate, 2× p50, 1.0× scheduler CPU) at their edges."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from live_targets import verdicts  # noqa: E402


@dataclass
class Run:
    case: str
    mode: str
    pods_per_s: float
    p50_s: float
    cpu_ms_per_pod: dict[str, float] = field(default_factory=dict)


def sched(ms: float) -> dict[str, float]:
    return {"scheduler": ms, "kube-apiserver": 99.0}


def by_target(found: list) -> dict[tuple[str, str, str], bool]:
    return {(v.case, v.mode, v.target): v.met for v in found}


def test_each_case_is_judged_against_kube_in_its_own_mode() -> None:
    found = verdicts(
        [
            Run("kube", "live", 200.0, 3.0, sched(3.0)),
            Run("kube", "backlog", 300.0, 10.0, sched(2.0)),
            Run("plain-memory", "live", 199.0, 6.0, sched(3.0)),
            Run("plain-memory", "backlog", 300.0, 20.1, sched(2.1)),
        ]
    )
    met = by_target(found)
    assert met[("plain-memory", "live", "pods/s ≥ 1.0×")] is False  # 199 < 200
    assert met[("plain-memory", "live", "p50 ≤ 2×")] is True  # exactly 2×
    assert met[("plain-memory", "live", "sched CPU/pod ≤ 1.0×")] is True  # equal
    assert met[("plain-memory", "backlog", "pods/s ≥ 1.0×")] is True  # equal
    assert met[("plain-memory", "backlog", "p50 ≤ 2×")] is False  # 20.1 > 2 × 10
    assert met[("plain-memory", "backlog", "sched CPU/pod ≤ 1.0×")] is False  # 2.1 > 2.0


def test_gangs_have_no_latency_target_and_need_kube_in_the_run() -> None:
    found = verdicts(
        [Run("kube", "live", 200.0, 3.0, sched(3.0)), Run("gangs", "live", 210.0, 9.0, sched(1.0))]
    )
    assert by_target(found) == {
        ("gangs", "live", "pods/s ≥ 1.0×"): True,
        ("gangs", "live", "sched CPU/pod ≤ 1.0×"): True,
    }
    assert verdicts([Run("gangs", "live", 210.0, 9.0, sched(1.0))]) == []
    # vcjobs and kube itself are not judged.
    assert verdicts([Run("kube", "live", 1, 1, sched(1)), Run("vcjobs", "live", 1, 1)]) == []
