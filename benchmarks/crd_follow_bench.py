"""What the controller's watch of CustomResourceDefinitions costs it, in process.

The controller follows framework CRDs installed while it runs by watching every CRD of the
cluster (integrations/crds.py, integrations/live.py). Real operators' CRDs are large (KubeRay's
RayJob CRD is 1.3 MB of YAML: the whole pod template schema, several times), and a cluster may
hold hundreds of CRDs. This replays the real CRDs the operator builds fetched (or the YAML files
given) as the API server's JSON, ``--crds`` of them in all (copies renamed), through what
the controller does with the initial list (integrations/crdwatch.py), and measures:

- CPU and wall seconds to decode and read every CRD, per CRD;
- peak memory of the list taken in pages of :data:`~stromboli.integrations.crdwatch.PAGE`
  (each CRD read, then dropped: the controller's way) against one response kept whole (a
  generic informer's way: it also keeps every CRD afterwards).

Run: .venv/bin/python benchmarks/crd_follow_bench.py [--crds 200] [YAML ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import yaml

from stromboli.integrations.crds import read_crd
from stromboli.integrations.crdwatch import PAGE

OPERATORS = Path.home() / ".cache" / "stromboli" / "operators"


def load(paths: list[Path]) -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found: list[dict[str, Any]] = []
    for path in paths:
        for doc in yaml.load_all(path.read_text(), Loader=loader):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                doc.setdefault("status", {})["conditions"] = [
                    {"type": "Established", "status": "True"}
                ]
                found.append(doc)
    return found


def replicas(crds: list[dict[str, Any]], total: int) -> list[bytes]:
    """``total`` CRDs as JSON bytes: the real ones, then renamed copies (other groups)."""
    out: list[bytes] = []
    for n in range(total):
        crd = copy.deepcopy(crds[n % len(crds)])
        if n >= len(crds):
            crd["spec"]["group"] = f"copy{n}.example.com"
            crd["metadata"]["name"] = f"{crd['spec']['names']['plural']}.copy{n}.example.com"
        out.append(json.dumps(crd).encode())
    return out


def peak(bodies: list[bytes], page: int) -> tuple[float, float]:
    """(peak, held after) MiB while the list is decoded ``page`` CRDs at a time and read;
    ``page=0``: one response, every CRD kept (an informer's cache)."""
    tracemalloc.start()
    kept: list[Any] = []
    step = page or len(bodies)
    for first in range(0, len(bodies), step):
        # One response body as the server sends it, then decoded whole.
        body = b'{"items":[' + b",".join(bodies[first : first + step]) + b"]}"
        items = json.loads(body)["items"]
        del body
        for crd in items:
            read_crd(crd)
        if not page:
            kept.extend(items)
        del items
    held, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept
    return top / 2**20, held / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crds", type=int, default=200)
    parser.add_argument("yaml", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.yaml or sorted(OPERATORS.glob("*/crds/*.yaml"))
    crds = load(paths)
    if not crds:
        raise SystemExit(f"no CRDs found in {paths or OPERATORS}: build an operator or pass YAML")
    bodies = replicas(crds, args.crds)
    megabytes = sum(len(b) for b in bodies) / 2**20
    cpu, wall = time.process_time(), time.perf_counter()
    framework = sum(read_crd(json.loads(body)) is not None for body in bodies)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"CRDs: {len(bodies)} ({len(crds)} real, from {len(paths)} files), {framework} framework")
    print(f"initial list: {megabytes:.1f} MiB of JSON")
    print(
        f"decode+read: CPU {cpu:.2f}s, wall {wall:.2f}s; "
        f"{cpu / len(bodies) * 1000:.1f} ms CPU per CRD event"
    )
    paged, after = peak(bodies, PAGE)
    whole, kept = peak(bodies, 0)
    print(f"pages of {PAGE}, read and dropped: peak {paged:.1f} MiB, held after {after:.2f} MiB")
    print(f"one response, all kept (an informer): peak {whole:.1f} MiB, held after {kept:.1f} MiB")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
