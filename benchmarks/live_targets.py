"""Issue 14's targets, judged from one live_bench run: each stromboli case against the
kube-scheduler case of the same mode, so that both saw the same machine at the same hour.

- plain pods (``plain``, ``plain-memory``): pods/s at least 1.0× kube-scheduler's, p50 within
  2× of kube-scheduler's, scheduler CPU per bound pod at most kube-scheduler's;
- gangs: pods/s at least 1.0× kube-scheduler's plain-pod rate, scheduler CPU per pod at most
  kube-scheduler's.

Cases that did not run are left out; a run without the ``kube`` case judges nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Result(Protocol):
    case: str
    mode: str
    pods_per_s: float
    p50_s: float
    cpu_ms_per_pod: dict[str, float]


@dataclass(frozen=True, slots=True)
class Verdict:
    case: str
    mode: str
    target: str
    ours: float
    kube: float
    ratio: float
    met: bool


PLAIN_CASES = ("plain", "plain-memory")
GANG_CASES = ("gangs",)


def _ratio(ours: float, kube: float) -> float:
    return ours / kube if kube > 0 else float("inf")


def verdicts(results: list[Result]) -> list[Verdict]:
    """Every target that the run's cases let us judge, in the order the cases ran."""
    kube = {r.mode: r for r in results if r.case == "kube"}
    found: list[Verdict] = []
    for r in results:
        base = kube.get(r.mode)
        if base is None or r.case not in PLAIN_CASES + GANG_CASES:
            continue
        rate = _ratio(r.pods_per_s, base.pods_per_s)
        found.append(
            Verdict(
                r.case, r.mode, "pods/s ≥ 1.0×", r.pods_per_s, base.pods_per_s, rate, rate >= 1.0
            )
        )
        if r.case in PLAIN_CASES:
            p50 = _ratio(r.p50_s, base.p50_s)
            found.append(Verdict(r.case, r.mode, "p50 ≤ 2×", r.p50_s, base.p50_s, p50, p50 <= 2.0))
        cpu_ours = r.cpu_ms_per_pod.get("scheduler", 0.0)
        cpu_kube = base.cpu_ms_per_pod.get("scheduler", 0.0)
        cpu = _ratio(cpu_ours, cpu_kube)
        found.append(
            Verdict(r.case, r.mode, "sched CPU/pod ≤ 1.0×", cpu_ours, cpu_kube, cpu, cpu <= 1.0)
        )
    return found


def print_verdicts(results: list[Result]) -> None:
    found = verdicts(results)
    if not found:
        return
    print("\ntargets (against kube-scheduler in the same mode, same run):")
    print(f"  {'case':<14} {'mode':<8} {'target':<22} {'ours':>9} {'kube':>9} {'ratio':>7}")
    for v in found:
        print(
            f"  {v.case:<14} {v.mode:<8} {v.target:<22} {v.ours:9.2f} {v.kube:9.2f} "
            f"{v.ratio:6.2f}× {'met' if v.met else 'NOT MET'}"
        )
