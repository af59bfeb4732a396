"""Scheduling quality: the same GPU traces replayed under four scheduler configurations.

Configurations (``configs/``):
- ``volcano-default``: Volcano's default configuration (the simulator's default);
- ``stromboli-guarded``: ours with preempt and reclaim on and the ``reservation`` starvation
  guard;
- ``reservation-only``: Volcano's default plus the starvation guard alone, no evictions;
- ``fifo-greedy``: no gang and no queues, pods placed one by one in arrival order, as
  kube-scheduler would place them (the scheduler with ``predicates`` and ``nodeorder`` only).

Traces: a fixed-seed synthetic one (``quality_trace.synthetic_trace``) and a slice of a public
GPU cluster trace (read from ``../shared/traces/philly/``, never copied here; format and
derivation in ``traces/``). For each trace a table: utilisation, mean / p95 wait per size
class, Jain's index over time of queue held/deserved share, partially placed gangs, wasted
pod-seconds, evictions and jobs finished. The figures come from the pods' timelines
(``quality_metrics``).

Results and the figures' definitions: benchmarks/README.md. About two minutes on 2 cores.

Run: .venv/bin/python benchmarks/quality_bench.py [--jobs N] [--seed S]
     [--trace-csv PATH --trace-nodes N] [--max-time SECONDS]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from quality_metrics import (
    SIZE_CLASSES,
    PodSpan,
    fairness_over_time,
    gang_health,
    job_waits,
    percentile,
    size_class,
    utilisation,
)
from quality_trace import GPU, Trace, csv_trace, documents, synthetic_trace

from stromboli.core.api import constants as k
from stromboli.core.clock import parse_time
from stromboli.core.informer import Informer
from stromboli.core.runtime import tune_gc
from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load

HERE = Path(__file__).resolve().parent
CONFIGS = {
    "volcano-default": HERE / "configs" / "volcano-default.yaml",
    "stromboli-guarded": HERE / "configs" / "stromboli-guarded.yaml",
    "reservation-only": HERE / "configs" / "reservation-only.yaml",
    "fifo-greedy": HERE / "configs" / "fifo-greedy.yaml",
}
#: The public trace slice lives beside the project, never in it (see traces/README.md).
PHILLY_SLICE = HERE.parent.parent / "shared" / "traces" / "philly" / "philly_vc_day.csv"
PHILLY_NODES = 6
EPOCH = parse_time("1970-01-01T00:00:00Z")


def _seconds(text: str) -> float:
    return (parse_time(text) - EPOCH).total_seconds()


class PodRecorder:
    """Watches pods and keeps each one's runs: start, and finish or eviction."""

    def __init__(self, sim: Simulation) -> None:
        self.clock = sim.clock
        self.informer = Informer(sim.store, [("v1", "Pod")], self._seen)
        self.open: dict[str, tuple[str, str, float, int]] = {}  # uid -> job, pod, start, gpus
        self.spans: list[PodSpan] = []
        #: Per job, the pods that succeeded, and when the last of them ended.
        self.succeeded: dict[str, set[str]] = {}
        self.last_end: dict[str, float] = {}
        #: Runs cut short by an eviction (the pod deleted while running), and their seconds.
        self.evicted = 0
        self.evicted_pod_seconds = 0.0

    def _seen(self, _kind: tuple[str, str], event: str, pod: dict) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        uid = meta["uid"]
        job = (meta.get("annotations") or {}).get(k.JOB_NAME_KEY) or meta["name"]
        phase = status.get("phase")
        started = status.get("startTime") and phase in ("Running", "Succeeded", "Failed")
        if uid not in self.open and event != "DELETED" and started:
            gpus = sum(
                int((c.get("resources") or {}).get("requests", {}).get(GPU, 0))
                for c in (pod.get("spec") or {}).get("containers") or ()
            )
            self.open[uid] = (job, meta["name"], _seconds(status["startTime"]), gpus)
        if uid not in self.open:
            return
        if event == "DELETED" or phase in ("Succeeded", "Failed"):
            job, name, start, gpus = self.open.pop(uid)
            end = self.clock.seconds
            if phase in ("Succeeded", "Failed"):
                terminated = ((status.get("containerStatuses") or [{}])[0].get("state") or {}).get(
                    "terminated"
                ) or {}
                if terminated.get("finishedAt"):
                    end = _seconds(terminated["finishedAt"])
            self.spans.append(PodSpan(job, name, start, end, gpus))
            if event == "DELETED" and phase not in ("Succeeded", "Failed"):
                self.evicted += 1
                self.evicted_pod_seconds += end - start
            if phase == "Succeeded" and event != "DELETED":
                self.succeeded.setdefault(job, set()).add(name)
                self.last_end[job] = max(self.last_end.get(job, 0.0), end)

    def close(self) -> list[PodSpan]:
        """All runs, those still going left open."""
        still = [PodSpan(j, n, s, None, g) for j, n, s, g in self.open.values()]
        return self.spans + still


class RecordedSimulation(Simulation):
    """The simulator, with a pod recorder fed between its steps."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.recorder = PodRecorder(self)

    async def _step_controllers(self) -> int:
        if not self.recorder.informer.streams:
            await self.recorder.informer.start()
        changed = await super()._step_controllers()
        await self.recorder.informer.pump()
        return changed


@dataclass(slots=True)
class Outcome:
    config: str
    utilisation: float
    #: Per size class: (mean wait, p95 wait, jobs) in seconds.
    waits: dict[str, tuple[float, float, int]]
    fairness: float
    partial_gangs: int
    wasted_pod_seconds: float
    finished: int
    jobs: int
    #: Pod runs cut short by preempt or reclaim, and the pod-seconds of work they lost.
    evicted: int
    evicted_pod_seconds: float
    makespan: float
    wall_seconds: float
    spans: list[PodSpan] = field(default_factory=list, repr=False)


def measure(config: str, trace: Trace, result_end: float, recorder: PodRecorder) -> Outcome:
    spans = recorder.close()
    horizon = max(result_end, 1.0)
    finished = {
        j.name: recorder.last_end[j.name]
        for j in trace.jobs
        if len(recorder.succeeded.get(j.name, ())) >= j.pods
    }
    waits = job_waits(trace.jobs, spans, horizon)
    by_class: dict[str, tuple[float, float, int]] = {}
    for label, _, _ in SIZE_CLASSES:
        values = [waits[j.name][0] for j in trace.jobs if size_class(j.pods) == label]
        if values:
            by_class[label] = (sum(values) / len(values), percentile(values, 95), len(values))
    partial, wasted = gang_health(trace.jobs, spans, horizon)
    fairness = fairness_over_time(
        trace.jobs,
        spans,
        finished,
        {q.name: q.weight for q in trace.queues},
        {q.name: q.capability_gpus for q in trace.queues},
        trace.gpus,
        horizon,
        step=max(60.0, horizon / 400),
    )
    return Outcome(
        config,
        utilisation(spans, trace.gpus, horizon),
        by_class,
        fairness,
        partial,
        wasted,
        len(finished),
        len(trace.jobs),
        recorder.evicted,
        recorder.evicted_pod_seconds,
        horizon,
        0.0,
        spans,
    )


async def replay(trace: Trace, config: str, conf_path: Path, max_time: float) -> Outcome:
    """Replay ``trace`` under one scheduler configuration and measure it."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{trace.name}.yaml"
        with path.open("w") as out:
            yaml.dump_all(
                documents(trace), out, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)
            )
        objects = load([path])
    sim = RecordedSimulation(objects, conf_path, max_time=max_time)
    result = await sim.run()
    outcome = measure(config, trace, result.end_time, sim.recorder)
    outcome.wall_seconds = time.perf_counter() - started
    return outcome


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    if seconds >= 60:
        return f"{seconds / 60:.0f}m"
    return f"{seconds:.0f}s"


def table(trace: Trace, outcomes: list[Outcome]) -> str:
    """A Markdown table, one row per configuration."""
    head = ["config", "util"]
    head += [f"wait {label} mean/p95" for label, _, _ in SIZE_CLASSES]
    head += ["Jain", "partial gangs", "wasted pod-s", "evicted (lost pod-s)", "finished"]
    head += ["makespan", "wall"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for o in outcomes:
        cells = [o.config, f"{o.utilisation:.0%}"]
        for label, _, _ in SIZE_CLASSES:
            if label in o.waits:
                mean, p95, _ = o.waits[label]
                cells.append(f"{_duration(mean)} / {_duration(p95)}")
            else:
                cells.append("-")
        cells += [
            f"{o.fairness:.2f}",
            str(o.partial_gangs),
            f"{o.wasted_pod_seconds:,.0f}",
            f"{o.evicted} ({o.evicted_pod_seconds:,.0f})",
            f"{o.finished}/{o.jobs}",
            _duration(o.makespan),
            f"{o.wall_seconds:.0f}s",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def describe(trace: Trace) -> str:
    counts = {label: 0 for label, _, _ in SIZE_CLASSES}
    for job in trace.jobs:
        counts[size_class(job.pods)] += 1
    queues = ", ".join(
        f"{q.name} (weight {q.weight}"
        + (f", capability {q.capability_gpus} GPUs)" if q.capability_gpus else ")")
        for q in trace.queues
    )
    mix = ", ".join(f"{n}×{label}" for label, n in counts.items())
    pods = sum(j.pods for j in trace.jobs)
    return (
        f"trace {trace.name} ({trace.source}): {len(trace.jobs)} jobs, {pods} pods ({mix} pods);"
        f" {trace.nodes} nodes × 8 GPUs; queues {queues}"
    )


async def run_all(trace: Trace, configs: dict[str, Path], max_time: float) -> list[Outcome]:
    outcomes = []
    for name, path in configs.items():
        outcomes.append(await replay(trace, name, path, max_time))
        print(f"  {trace.name} / {name}: {outcomes[-1].wall_seconds:.0f}s", file=sys.stderr)
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200, help="jobs of the synthetic trace")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--trace",
        "--trace-csv",
        dest="trace_csv",
        type=Path,
        default=PHILLY_SLICE,
        help="a trace CSV in the format of traces/README.md (default: the Philly day slice "
        "in ../shared/traces/philly/)",
    )
    parser.add_argument("--trace-nodes", type=int, default=PHILLY_NODES)
    parser.add_argument("--max-time", type=float, default=7 * 24 * 3600.0)
    args = parser.parse_args()
    tune_gc()
    print(f"machine: {os.cpu_count()} cpus; python {sys.version.split()[0]}")
    traces = [synthetic_trace(args.jobs, args.seed)]
    if args.trace_csv.exists():
        traces.append(csv_trace(args.trace_csv, args.trace_nodes))
    else:
        print(f"(no {args.trace_csv}: public trace skipped)")
    for trace in traces:
        print()
        print(describe(trace))
        print(table(trace, asyncio.run(run_all(trace, CONFIGS, args.max_time))))


if __name__ == "__main__":
    main()
