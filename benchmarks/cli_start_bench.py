"""How long the ``stromboli`` command takes to start, per sub-command.

    .venv/bin/python benchmarks/cli_start_bench.py [--runs 7] [--tree DIR ...]

Each figure is the wall time (and the CPU time, less sensitive to a busy machine) of a fresh
process running the ``stromboli`` entry point (what the installed script does), median and
min over ``--runs``: ``--version``, ``--help``, every sub-command's ``--help`` (its own start:
the command module and what it imports, before any cluster is reached), and ``job list``
against an address nothing listens on (start, kubeconfig, store built, first request
refused). The issue's targets are 0.3 s for ``--version``/``--help`` and 0.5 s for a
command's own start. With several ``--tree`` (checkouts, e.g. ``git archive`` of an older
commit), the trees take turns run by run, so a busy machine slows them alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = [
    "crds",
    "dev-cluster",
    "simulate",
    "explain",
    "scheduler",
    "controller",
    "webhook-manager",
    "job",
    "queue",
    "jobflow",
    "jobtemplate",
    "spark-conf",
]

UNREACHABLE = "https://127.0.0.1:9"
REPO = Path(__file__).resolve().parent.parent
LAUNCH = "import sys; sys.argv[0] = 'stromboli'; from stromboli.core.cli import main; main()"


def run_once(tree: Path | None, argv: list[str]) -> tuple[float, float, int]:
    env = dict(os.environ, COLUMNS="120")
    command = [sys.executable, *argv]
    if tree is not None:
        env["PYTHONPATH"] = str(tree / "src")
        command = [sys.executable, "-c", LAUNCH, *argv]
    cpu_before = _children_cpu()
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - began
    return wall, _children_cpu() - cpu_before, done.returncode


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--tree", action="append", type=Path, help="checkout to measure (default: this one)"
    )
    args = parser.parse_args()
    trees: list[Path] = args.tree or [REPO]
    cases: list[tuple[str, list[str]]] = [
        ("--version", ["--version"]),
        ("--help", ["--help"]),
    ]
    cases += [(f"{c} --help", [c, "--help"]) for c in COMMANDS]
    cases.append((f"job list -s {UNREACHABLE}", ["job", "list", "-s", UNREACHABLE]))
    baseline = [run_once(None, ["-c", "pass"]) for _ in range(args.runs)]
    print(
        f"python -c pass (the interpreter alone): {statistics.median(b[0] for b in baseline):.3f}"
        f" s wall, {statistics.median(b[1] for b in baseline):.3f} s cpu"
    )
    header = "".join(f"  {'wall s':>7} {'min s':>6} {'cpu s':>6} exit [{t.name}]" for t in trees)
    print(f"{'stromboli ...':<38}{header}")
    for label, argv in cases:
        walls: dict[Path, list[float]] = {t: [] for t in trees}
        cpus: dict[Path, list[float]] = {t: [] for t in trees}
        codes: dict[Path, int] = {}
        for _ in range(args.runs):
            for tree in trees:
                wall, cpu, codes[tree] = run_once(tree, argv)
                walls[tree].append(wall)
                cpus[tree].append(cpu)
        cells = "".join(
            f"  {statistics.median(walls[t]):>7.3f} {min(walls[t]):>6.3f}"
            f" {statistics.median(cpus[t]):>6.3f} {codes[t]:>4}" + " " * (len(t.name) + 3)
            for t in trees
        )
        print(f"{label:<38}{cells}")


if __name__ == "__main__":
    main()
