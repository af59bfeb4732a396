"""Derive ``philly_vc_day.csv`` from the job table of the Microsoft Philly trace.

Source: ``simulator/traces/philly.csv`` of the Pollux artifact (github.com/petuum/adaptdl,
branch ``osdi21-artifact``, commit c793c7089bd307462686339d29707925c461f9a9,
blob 6f73f02fb0c3eca7ea40f7031ce45a715463900e): one row per
Philly job (``timestamp`` of submission, ``duration`` in seconds, ``num_gpus``, ``gpu_time``,
``cluster`` = the virtual cluster), extracted from msr-fiddle/philly-traces (ATC'19).

The slice: the jobs submitted on one day to three virtual clusters (by default 2017-11-11,
the day with the most multi-GPU jobs, and the three VCs with the most of them that day),
submit times counted from that midnight, runtimes capped at ``--max-duration`` (some jobs
ran for days) and GPUs capped at 64. Each GPU becomes a one-GPU pod of a gang.

Get the source and run:
    git --git-dir=<adaptdl clone>/.git show osdi21-artifact:simulator/traces/philly.csv > philly.csv
    python benchmarks/traces/derive_philly_vc_day.py philly.csv \
        > ../shared/traces/philly/philly_vc_day.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import datetime

SOURCE = (
    "github.com/petuum/adaptdl@c793c7089bd307462686339d29707925c461f9a9 "
    "(branch osdi21-artifact) simulator/traces/philly.csv, "
    "from github.com/msr-fiddle/philly-traces"
)


def derive(rows: list[dict], day: str, vcs: list[str], max_duration: float) -> list[dict]:
    midnight = datetime.fromisoformat(day)
    out = []
    for row in rows:
        if not row["timestamp"].startswith(day) or row["cluster"] not in vcs:
            continue
        submit = (datetime.fromisoformat(row["timestamp"]) - midnight).total_seconds()
        out.append(
            {
                "queue": f"vc-{row['cluster']}",
                "submit_s": int(submit),
                "gpus": min(64, int(float(row["num_gpus"]))),
                "duration_s": int(max(1.0, min(max_duration, float(row["duration"])))),
            }
        )
    out.sort(key=lambda r: (r["submit_s"], r["queue"]))
    for i, row in enumerate(out):
        row["job"] = f"philly-{i:04d}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the Pollux artifact's simulator/traces/philly.csv")
    parser.add_argument("--day", default="2017-11-11")
    parser.add_argument("--vcs", default="6c71a0,11cb48,103959")
    parser.add_argument("--max-duration", type=float, default=6 * 3600.0)
    args = parser.parse_args()
    with open(args.source, newline="") as handle:
        rows = list(csv.DictReader(handle))
    jobs = derive(rows, args.day, args.vcs.split(","), args.max_duration)
    out = sys.stdout
    out.write(f"# source: {SOURCE}\n")
    out.write(
        f"# derivation: benchmarks/traces/derive_philly_vc_day.py --day {args.day} "
        f"--vcs {args.vcs} --max-duration {args.max_duration:g}; submit_s from that "
        "midnight, duration_s capped, gpus capped at 64\n"
    )
    writer = csv.DictWriter(out, ["job", "queue", "submit_s", "gpus", "duration_s"])
    writer.writeheader()
    writer.writerows(jobs)


if __name__ == "__main__":
    main()
