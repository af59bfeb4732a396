"""Start time of the test control plane with and without kube-controller-manager, and how long
its garbage collector and namespace controller take.

    .venv/bin/python benchmarks/controlplane_bench.py [--runs 3] [--pods 50]

Prints, per configuration, the median and spread of ``ControlPlane.start()`` (3 kwok nodes,
as the pytest fixture), then with the controller manager: seconds from deleting an owner
ConfigMap to the last of its ``--pods`` pods (bound to kwok nodes, Running) being gone, and
from deleting a namespace holding as many pods to the namespace being gone.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from stromboli.core.devcluster import ControlPlane, KubeAPIError, build_control_plane
from stromboli.core.devcluster.build import Binaries


def timed_start(binaries: Binaries, *, controller_manager: bool) -> tuple[float, ControlPlane]:
    cp = ControlPlane(binaries, nodes=3, start_controller_manager=controller_manager)
    began = time.monotonic()
    cp.start()
    return time.monotonic() - began, cp


def until(check: Callable[[], bool], timeout: float = 300.0) -> float:
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"not reached in {timeout}s")
        time.sleep(0.05)
    return time.monotonic() - began


def make_pods(cp: ControlPlane, ns: str, count: int, owner: dict | None) -> None:
    for i in range(count):
        meta: dict = {"name": f"p{i}"}
        if owner:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                }
            ]
        cp.client.post(
            f"/api/v1/namespaces/{ns}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": {
                    "nodeName": f"kwok-node-{i % 3}",
                    "containers": [{"name": "c", "image": "registry.invalid/x:1"}],
                },
            },
        )
    pods = f"/api/v1/namespaces/{ns}/pods"
    until(
        lambda: (
            sum(p["status"].get("phase") == "Running" for p in cp.client.get(pods)["items"])
            == count
        )
    )


def missing(cp: ControlPlane, path: str) -> bool:
    try:
        cp.client.get(path)
    except KubeAPIError as err:
        if err.status == 404:
            return True
        raise
    return False


def namespace(cp: ControlPlane, name: str) -> str:
    cp.client.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pods", type=int, default=50)
    args = parser.parse_args()
    binaries = build_control_plane()

    for with_kcm in (False, True):
        times = []
        for _ in range(args.runs):
            seconds, cp = timed_start(binaries, controller_manager=with_kcm)
            times.append(seconds)
            cp.stop()
        label = "with kube-controller-manager" if with_kcm else "without kube-controller-manager"
        print(
            f"start {label}: median {statistics.median(times):.2f}s "
            f"(min {min(times):.2f}s, max {max(times):.2f}s, {args.runs} runs)"
        )

    _, cp = timed_start(binaries, controller_manager=True)
    try:
        ns = namespace(cp, "gc")
        owner = cp.client.post(
            f"/api/v1/namespaces/{ns}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}},
        )
        make_pods(cp, ns, args.pods, owner)
        cp.client.delete(f"/api/v1/namespaces/{ns}/configmaps/owner")
        gc = until(lambda: not cp.client.get(f"/api/v1/namespaces/{ns}/pods")["items"])
        print(f"garbage collection of {args.pods} running pods after their owner: {gc:.2f}s")

        ns = namespace(cp, "doomed")
        make_pods(cp, ns, args.pods, None)
        cp.client.delete(f"/api/v1/namespaces/{ns}")
        gone = until(lambda: missing(cp, f"/api/v1/namespaces/{ns}"))
        print(f"deletion of a namespace with {args.pods} running pods: {gone:.2f}s")
    finally:
        cp.stop()


if __name__ == "__main__":
    main()
