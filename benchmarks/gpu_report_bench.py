"""What the simulator's GPU figures cost: a simulation of openb's 1213 GPU nodes with pods
arriving one a second and running a while, with and without GPU sampling, and the per-node
map and JSON document at the end.

Reads ``../shared/traces/openb/`` (``--traces``), the same files as ``fragmentation_bench``:
its nodes (vGPU registrations) and the first ``--pods`` pods of ``--trace``, each a bare pod
(its own PodGroup), arriving at ``i`` seconds and running ``--runtime`` seconds, so cards are
taken and given back all along. The scheduler configuration is deviceshare (vGPUs) with the
fragmentation plugin. Prints wall and process CPU seconds of each run (CPU is the figure to
compare on a loaded machine), the samples taken, the cost per sample, and the load average.

Run: .venv/bin/python benchmarks/gpu_report_bench.py [--pods 2000] [--trace default]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fragmentation_bench import (
    NODE_FILE,
    TRACES,
    WORKLOADS,
    TracePod,
    node_object,
    read_nodes,
    read_pods,
)

from stromboli.core.simulate import engine, timeline
from stromboli.core.simulate.engine import Simulation, SimulationResult
from stromboli.core.simulate.gpu_figures import gpu_document
from stromboli.core.simulate.loader import SimObject

CONFIG = """actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - name: predicates
  - name: proportion
  - name: deviceshare
    arguments: {deviceshare.VGPUEnable: true}
  - name: fragmentation
"""


def pod_object(position: int, pod: TracePod, runtime: int) -> dict:
    """A bare pod of the trace; device amounts in limits, as users write them."""
    limits = {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    if pod.num_gpu == 1 and pod.gpu_milli < 1000:
        share = str(max(1, pod.gpu_milli // 10))
        limits |= {
            "volcano.sh/vgpu-number": "1",
            "volcano.sh/vgpu-memory-percentage": share,
            "volcano.sh/vgpu-cores": share,
        }
    elif pod.num_gpu:
        limits |= {
            "volcano.sh/vgpu-number": str(pod.num_gpu),
            "volcano.sh/vgpu-memory-percentage": "100",
            "volcano.sh/vgpu-cores": "100",
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{position:06d}",
            "namespace": "default",
            "annotations": {"sim.stromboli.dev/runtime": f"{runtime}s"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "image": "trace", "resources": {"limits": limits}}],
        },
    }


def objects(traces: Path, trace: str, count: int, runtime: int) -> list[SimObject]:
    nodes = read_nodes(traces / NODE_FILE)
    pods = read_pods(traces / f"{WORKLOADS[trace]}.csv")[:count]
    out = [SimObject(node_object(n), 0.0, "openb") for n in nodes]
    out += [SimObject(pod_object(i, p, runtime), float(i), "openb") for i, p in enumerate(pods)]
    return out


def run(items: list[SimObject], conf: Path, gpus: bool) -> tuple[SimulationResult, float, float]:
    def plain(now: float, scheduler: object) -> timeline.Sample:
        return timeline.sample(now, scheduler, gpus=False)  # type: ignore[arg-type]

    patch = (
        mock.patch.object(engine, "sample", plain)
        if not gpus
        else mock.patch.object(engine, "sample", timeline.sample)
    )
    with patch:
        wall, cpu = time.perf_counter(), time.process_time()
        result = asyncio.run(Simulation(list(items), conf).run())
        return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--trace", choices=sorted(WORKLOADS), default="default")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--runtime", type=int, default=600)
    args = parser.parse_args(argv)
    if not (args.traces / NODE_FILE).is_file():
        print(f"no openb traces under {args.traces}", file=sys.stderr)
        return 1
    items = objects(args.traces, args.trace, args.pods, args.runtime)
    with tempfile.TemporaryDirectory() as folder:
        conf = Path(folder) / "conf.yaml"
        conf.write_text(CONFIG)
        _, wall_off, cpu_off = run(items, conf, gpus=False)
        result, wall_on, cpu_on = run(items, conf, gpus=True)
    samples = len(result.timeline)
    wall, cpu = time.perf_counter(), time.process_time()
    document = gpu_document(result)
    wall_doc, cpu_doc = time.perf_counter() - wall, time.process_time() - cpu
    assert document is not None
    end = result.timeline[-1].gpu
    print(f"openb {args.trace}: 1213 nodes, {args.pods} pods, runtime {args.runtime}s")
    print(f"  samples (cycles): {samples}; pods bound: {result.pods_bound}")
    print(f"  without GPU sampling: wall {wall_off:.2f}s, cpu {cpu_off:.2f}s")
    print(f"  with GPU sampling:    wall {wall_on:.2f}s, cpu {cpu_on:.2f}s")
    extra = cpu_on - cpu_off
    print(f"  sampling cost: cpu {extra:+.2f}s ({extra / max(samples, 1) * 1e3:+.2f} ms/sample)")
    print(f"  map + JSON document at the end: wall {wall_doc:.2f}s, cpu {cpu_doc:.2f}s")
    if end is not None:
        print(
            f"  end: {end.gpus:.0f} cards, allocated {end.allocated:.1f}, "
            f"fragmented {end.fragmented:.1f} of {end.free:.1f} free ({end.fragmentation:.1%})"
        )
    print(f"  load average: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
