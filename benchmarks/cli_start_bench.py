"""How long the ``stromboli`` command takes to start, per sub-command.

    .venv/bin/python benchmarks/cli_start_bench.py [--runs 7]

Each figure is the wall time of a fresh process (the installed ``stromboli`` script next to this
interpreter), median and min over ``--runs``: ``--version``, ``--help``, every sub-command's
``--help`` (its own start: the command module and what it imports, before any cluster is
reached), and ``job list`` against an address nothing listens on (start, kubeconfig, store
built, first request refused). The issue's targets are 0.3 s for ``--version``/``--help`` and
0.5 s for a command's own start.
"""

from __future__ import annotations

import argparse
import os
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


def stromboli() -> str:
    script = Path(sys.executable).with_name("stromboli")
    if not script.exists():
        raise SystemExit(f"{script} not found: install the project (pip install -e .) first")
    return str(script)


def timed(argv: list[str], runs: int) -> tuple[float, float, int]:
    times = []
    code = 0
    env = dict(os.environ, COLUMNS="120")
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env, check=False)
        times.append(time.perf_counter() - began)
        code = done.returncode
    return statistics.median(times), min(times), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    exe = stromboli()
    cases: list[tuple[str, list[str]]] = [
        ("python -c pass (interpreter alone)", [sys.executable, "-c", "pass"]),
        ("stromboli --version", [exe, "--version"]),
        ("stromboli --help", [exe, "--help"]),
    ]
    cases += [(f"stromboli {c} --help", [exe, c, "--help"]) for c in COMMANDS]
    cases.append(
        (f"stromboli job list -s {UNREACHABLE}", [exe, "job", "list", "-s", UNREACHABLE])
    )
    print(f"{'command':<48} {'median s':>9} {'min s':>7}  exit")
    for label, argv in cases:
        median, best, code = timed(argv, args.runs)
        print(f"{label:<48} {median:>9.3f} {best:>7.3f}  {code}")


if __name__ == "__main__":
    main()
