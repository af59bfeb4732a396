"""``python -m stromboli.core.devcluster [--nodes N] [--scheduler]``: build (cached), start a
control plane, print how to reach it, and run until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .controlplane import ControlPlane


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stromboli.core.devcluster")
    parser.add_argument("--nodes", type=int, default=4, help="kwok nodes to create")
    parser.add_argument("--cpu", default="32")
    parser.add_argument("--memory", default="256Gi")
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--scheduler", action="store_true", help="also run kube-scheduler")
    parser.add_argument("--run-dir", help="where logs, certs and the kubeconfig go")
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    cp = ControlPlane(
        run_dir=args.run_dir,
        nodes=args.nodes,
        node_cpu=args.cpu,
        node_memory=args.memory,
        node_pods=args.pods,
        start_scheduler=args.scheduler,
    )
    with cp:
        print(f"server:     {cp.server_url} ({cp.kube_version})")
        print(f"kubeconfig: {cp.kubeconfig_path}")
        print(f"logs:       {cp.log_dir}")
        print(f"export KUBECONFIG={cp.kubeconfig_path}", flush=True)
        try:
            while not stop.wait(1.0):
                cp.check_alive()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
