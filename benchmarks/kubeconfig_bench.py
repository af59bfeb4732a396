"""What reading a kubeconfig costs, now that the ``kubernetes`` package reads it.

    .venv/bin/python benchmarks/kubeconfig_bench.py [--runs 5]

Figures, each the median over ``--runs`` fresh processes (so imports are cold, as for a CLI
call): the first ``KubeConfig.load`` of a token kubeconfig (the ``kubernetes`` package is
imported then: it imports its whole generated client), a second load in the same process, and
the first ``auth_headers()`` of a kubeconfig whose ``exec`` plugin is a small Python script
(one plugin run: a process start).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

PROBE = """
import json, sys, time
t0 = time.perf_counter()
from stromboli.core.cluster.kubeconfig import KubeConfig
t1 = time.perf_counter()
KubeConfig.load(sys.argv[1])
t2 = time.perf_counter()
KubeConfig.load(sys.argv[1])
t3 = time.perf_counter()
exec_config = KubeConfig.load(sys.argv[2])
t4 = time.perf_counter()
exec_config.auth_headers()
t5 = time.perf_counter()
print(json.dumps({"import module": t1 - t0, "first load": t2 - t1, "second load": t3 - t2,
                  "exec plugin run": t5 - t4}))
"""


def kubeconfig(path: Path, user: dict) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        plugin = root / "plugin.py"
        plugin.write_text(
            f"#!{sys.executable}\nimport json\n"
            "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
            "'kind': 'ExecCredential', 'status': {'token': 't'}}))\n"
        )
        plugin.chmod(0o755)
        token = kubeconfig(root / "token", {"token": "t"})
        exec_cfg = kubeconfig(
            root / "exec",
            {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}},
        )
        samples: dict[str, list[float]] = {}
        for _ in range(args.runs):
            out = subprocess.run(
                [sys.executable, "-c", PROBE, str(token), str(exec_cfg)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for key, value in json.loads(out).items():
                samples.setdefault(key, []).append(value)
    print(f"{'step':<18} {'median s':>9} {'min s':>7}")
    for key, values in samples.items():
        print(f"{key:<18} {statistics.median(values):>9.3f} {min(values):>7.3f}")


if __name__ == "__main__":
    main()
