"""Framework CRDs installed and deleted while ``stromboli controller`` runs, on a real API
server (a control plane of this module's own: it installs and deletes CRDs cluster-wide).

The controller runs as deploy/rbac.yaml's ServiceAccount (so the grant to watch CRDs is the
one shipped) with no framework CRD installed. Then: the PyTorchJob CRD is installed and a
PyTorchJob made in an enrolled namespace gets its PodGroup, from the same process; the CRD is
deleted and the controller drops the kind and keeps running; a PyTorchJob CRD stored in a
version the adapters do not read is logged and skipped.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeAPIError
from stromboli.integrations.crdwatch import CrdWatch
from stromboli.integrations.kinds import FRAMEWORK_KINDS
from tests.controlplane.conftest import own_control_plane
from tests.integrations.kit import obj, template

from .framework_crds import CRDS, crd_for, install_framework_crds
from .jobs_live import DRIVER_ENV, Process
from .operators import make_namespace, wait_until

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:volcano-system")
CONTROLLER_USER = "system:serviceaccount:volcano-system:stromboli-controller"
NS = f"crds-{uuid.uuid4().hex[:6]}"
PYTORCH = ("kubeflow.org/v1", "PyTorchJob")
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
PYTORCH_CRD = "pytorchjobs.kubeflow.org"
JOBS = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs"
GROUPS = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{NS}/podgroups"


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """This module's own control plane (it installs and deletes framework CRDs)."""
    yield from own_control_plane(tmp_path_factory)


@pytest.fixture(scope="module")
def controller(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Process]:
    cp = control_plane
    cp.apply_manifests(build_crds())
    for manifest in ("namespace.yaml", "rbac.yaml"):
        cp.apply_manifests(DEPLOY / manifest)
    installed = [i for i in FRAMEWORK_KINDS if _crd_exists(cp, f"{i.plural}.{i.group}")]
    assert installed == [], "a fresh control plane has no framework CRD"
    make_namespace(cp.client, NS, {"stromboli.dev/enroll": "true"})
    run_dir = tmp_path_factory.mktemp("frameworks-crds")
    driver = os.environ.get(DRIVER_ENV)  # both drivers must pass, as for the vcjob tests
    process = Process(
        cp,
        run_dir / "controller.log",
        "controller",
        "--leader-elect=false",
        "--listen-address=",
        *([f"--driver={driver}"] if driver else []),
    )
    config = cp.write_kubeconfig(
        run_dir / "controller.kubeconfig", user=CONTROLLER_USER, groups=SA_GROUPS
    )
    process.argv = [
        f"--kubeconfig={config}" if a.startswith("--kubeconfig=") else a for a in process.argv
    ]
    process.start()
    try:
        said = "framework adapters on for: none"
        wait_until(
            "the controller started",
            lambda: said in process.tail(100_000),
            timeout=60,
            alive=[process.check_alive],
            logs=process.tail,
        )
        yield process
    finally:
        process.stop()
        cp.client.delete(f"{CRDS}/{PYTORCH_CRD}")
        cp.client.delete(f"/api/v1/namespaces/{NS}")


def _crd_exists(cp: ControlPlane, name: str) -> bool:
    try:
        cp.client.get(f"{CRDS}/{name}")
        return True
    except KubeAPIError as err:
        assert err.status == 404, err
        return False


def pytorchjob(name: str) -> dict[str, Any]:
    spec = {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template()},
            "Worker": {"replicas": 2, "template": template(cpu="1")},
        }
    }
    made = obj(*PYTORCH, name, spec)
    made["metadata"] = {"name": name, "namespace": NS}
    return made


def group(cp: ControlPlane, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = cp.client.get(f"{GROUPS}/{name}")
        return found
    except KubeAPIError as err:
        if err.status == 404:
            return None
        raise


def delete_crd(cp: ControlPlane, name: str) -> None:
    cp.client.delete(f"{CRDS}/{name}")
    wait_until(f"CRD {name} gone", lambda: not _crd_exists(cp, name), timeout=60)
    cp.client.forget_discovery()


def test_a_crd_installed_while_running_is_followed_then_dropped_when_deleted(
    control_plane: ControlPlane, controller: Process
) -> None:
    cp = control_plane
    pid = controller.process.pid if controller.process else None
    lines = [line for line in controller.tail(100_000).splitlines() if "not installed" in line]
    assert len(lines) == 1 and "PyTorchJob" in lines[0], lines

    install_framework_crds(cp.client, [PYTORCH])
    on = "framework adapter on for PyTorchJob (kubeflow.org/v1): its CRD pytorchjobs.kubeflow.org"
    wait_until(
        "PyTorchJob followed",
        lambda: on in controller.tail(100_000),
        timeout=60,
        alive=[controller.check_alive],
        logs=controller.tail,
    )
    job = cp.client.post(JOBS, pytorchjob("train"))
    made = wait_until(
        "the PyTorchJob's PodGroup",
        lambda: group(cp, "train"),
        timeout=60,
        alive=[controller.check_alive],
        logs=controller.tail,
    )
    assert made["spec"]["minMember"] == 3
    [owner] = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("PyTorchJob", job["metadata"]["uid"])

    # Deleting the CRD deletes its objects (and the garbage collector their PodGroups); the
    # controller stops that watch and goes on.
    delete_crd(cp, PYTORCH_CRD)
    off = "framework adapter off for PyTorchJob (kubeflow.org/v1): its CRD pytorchjobs"
    wait_until(
        "PyTorchJob dropped",
        lambda: off in controller.tail(100_000),
        timeout=60,
        alive=[controller.check_alive],
        logs=controller.tail,
    )
    time.sleep(3)  # a failing watch would be retried (and logged) within this
    controller.check_alive()
    assert controller.process is not None and controller.process.pid == pid
    log = controller.tail(200_000)
    for refusal in ("forbidden", "cannot be watched", "Traceback"):
        assert refusal not in log, log


def test_a_crd_stored_in_a_version_we_do_not_read_is_logged_and_skipped(
    control_plane: ControlPlane, controller: Process
) -> None:
    cp = control_plane
    if _crd_exists(cp, PYTORCH_CRD):
        delete_crd(cp, PYTORCH_CRD)
    [info] = [i for i in FRAMEWORK_KINDS if (i.api_version, i.kind) == PYTORCH]
    crd = crd_for([info])
    v2 = {**crd["spec"]["versions"][0], "name": "v2", "storage": True}
    crd["spec"]["versions"] = [{**crd["spec"]["versions"][0], "storage": False}, v2]
    cp.client.post(CRDS, crd)
    cp.client.wait_crd_established(PYTORCH_CRD)
    cp.client.forget_discovery()
    said = (
        "CRD pytorchjobs.kubeflow.org stores PyTorchJob as kubeflow.org/v2, a version the "
        "adapters do not read (they read kubeflow.org/v1): PyTorchJob is not followed"
    )
    wait_until(
        "the unknown storage version logged",
        lambda: said in controller.tail(100_000),
        timeout=60,
        alive=[controller.check_alive],
        logs=controller.tail,
    )
    cp.client.post(JOBS, pytorchjob("skipped"))
    time.sleep(3)
    assert group(cp, "skipped") is None
    assert controller.tail(200_000).count(said) == 1
    controller.check_alive()
    delete_crd(cp, PYTORCH_CRD)


async def test_the_crd_list_comes_in_pages_and_names_every_framework_crd(
    control_plane: ControlPlane, controller: Process
) -> None:
    """The controller lists CRDs a page at a time (real operators' CRDs are MBs each); with
    pages of 2, every CRD of the server is still seen once and the framework ones handed on."""
    cp = control_plane
    install_framework_crds(cp.client, [LWS])
    total = len(cp.client.get(CRDS)["items"])
    assert total > 4  # Volcano's CRDs and LeaderWorkerSet's: several pages
    handed: list[tuple[str, str]] = []
    store = KubeStore(KubeConfig.load(str(cp.kubeconfig_path)))
    try:
        watch = CrdWatch(store, lambda t, crd: handed.append((t, crd["metadata"]["name"])), page=2)
        seen: set[str] = set()
        await watch._pages(seen)
    finally:
        await store.close()
    assert len(seen) == total and watch.lists == 1
    assert handed == [("ADDED", "leaderworkersets.leaderworkerset.x-k8s.io")]
    delete_crd(cp, "leaderworkersets.leaderworkerset.x-k8s.io")
    controller.check_alive()
