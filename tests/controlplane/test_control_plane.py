"""The test control plane itself: API server, kwok nodes, pod lifecycle, manifests, RBAC."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from stromboli.core.devcluster import (
    EXIT_CODE_ANNOTATION,
    FAIL_AFTER_ANNOTATION,
    SUCCEED_AFTER_ANNOTATION,
    Binaries,
    BuildError,
    ControlPlane,
    KubeAPIError,
    KubeHTTP,
)
from stromboli.core.devcluster.build import BINARY_NAMES

HACK_GO_MOD = Path(__file__).resolve().parents[2] / "hack" / "go.mod"


def pinned_kubernetes_version() -> str:
    match = re.search(r"^\s*k8s\.io/kubernetes (v\S+)", HACK_GO_MOD.read_text(), re.M)
    assert match, "hack/go.mod must require k8s.io/kubernetes"
    return match.group(1)


def new_namespace(cp: ControlPlane) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    cp.client.post(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def pod(name: str, **annotations: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            # Nobody schedules this: the test binds it itself.
            "schedulerName": "stromboli-test-nobody",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/sleep:1",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


def bind(cp: ControlPlane, namespace: str, name: str, node: str) -> None:
    cp.client.post(
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )


def test_api_server_answers_version(control_plane: ControlPlane) -> None:
    version = control_plane.client.get("/version")
    assert version["gitVersion"] == pinned_kubernetes_version()
    assert control_plane.server_url.startswith("https://127.0.0.1:")
    assert control_plane.client.get("/readyz") == "ok"


def test_kubeconfig_is_usable(control_plane: ControlPlane) -> None:
    import yaml

    doc = yaml.safe_load(control_plane.kubeconfig_path.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == control_plane.server_url
    assert doc["users"][0]["user"]["client-certificate-data"]


def test_kwok_nodes_are_ready(control_plane: ControlPlane) -> None:
    nodes = control_plane.client.get("/api/v1/nodes", labelSelector="type=kwok")["items"]
    assert len(nodes) >= control_plane.initial_nodes
    for node in nodes[: control_plane.initial_nodes]:
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True", node["status"]
        assert conditions["MemoryPressure"] == "False"
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert not node["spec"].get("taints")
        assert node["status"]["allocatable"] == {"cpu": "32", "memory": "256Gi", "pods": "110"}
    # kwok keeps the node leases fresh.
    lease = control_plane.client.get(
        f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{nodes[0]['metadata']['name']}"
    )
    assert lease["spec"]["renewTime"]


def test_add_nodes_with_custom_size(control_plane: ControlPlane) -> None:
    names = control_plane.add_nodes(2, cpu="8", memory="16Gi", pods=20, name_prefix="small-")
    assert len(names) == 2
    for name in names:
        node = control_plane.client.get(f"/api/v1/nodes/{name}")
        assert node["status"]["capacity"] == {"cpu": "8", "memory": "16Gi", "pods": "20"}


def test_bound_pod_becomes_running_and_deletion_completes(control_plane: ControlPlane) -> None:
    cp = control_plane
    ns = new_namespace(cp)
    cp.client.post(f"/api/v1/namespaces/{ns}/pods", pod("p1"))
    bind(cp, ns, "p1", "kwok-node-0")

    running = cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/pods/p1",
        lambda p: p["status"].get("phase") == "Running",
        timeout=60,
        what="pod p1 to be Running",
    )
    assert running["spec"]["nodeName"] == "kwok-node-0"
    assert running["status"]["podIP"].startswith("10.")
    conditions = {c["type"]: c["status"] for c in running["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert conditions["PodScheduled"] == "True"
    assert running["status"]["containerStatuses"][0]["state"]["running"]

    cp.client.delete(f"/api/v1/namespaces/{ns}/pods/p1")
    cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/pods",
        lambda lst: not lst["items"],
        timeout=60,
        what="pod p1 to be gone",
    )


@pytest.mark.parametrize(
    ("annotations", "phase", "exit_code"),
    [
        ({SUCCEED_AFTER_ANNOTATION: "1s"}, "Succeeded", 0),
        ({FAIL_AFTER_ANNOTATION: "500ms", EXIT_CODE_ANNOTATION: "3"}, "Failed", 3),
        ({FAIL_AFTER_ANNOTATION: "0s"}, "Failed", 1),
    ],
)
def test_annotated_pod_finishes(
    control_plane: ControlPlane, annotations: dict, phase: str, exit_code: int
) -> None:
    cp = control_plane
    ns = new_namespace(cp)
    cp.client.post(f"/api/v1/namespaces/{ns}/pods", pod("job", **annotations))
    bind(cp, ns, "job", "kwok-node-1")
    finished = cp.client.wait_for(
        f"/api/v1/namespaces/{ns}/pods/job",
        lambda p: p["status"].get("phase") == phase,
        timeout=60,
        what=f"pod to reach {phase}",
    )
    state = finished["status"]["containerStatuses"][0]["state"]
    assert state["terminated"]["exitCode"] == exit_code


def test_apply_manifests_with_crd(control_plane: ControlPlane) -> None:
    cp = control_plane
    group = f"g{uuid.uuid4().hex[:6]}.stromboli.test"
    manifests = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
---
apiVersion: {group}/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm1
data:
  a: b
"""
    applied = cp.apply_manifests(manifests)
    assert [o["kind"] for o in applied] == ["CustomResourceDefinition", "Widget", "ConfigMap"]
    widget = cp.client.get(f"/apis/{group}/v1/namespaces/default/widgets/w1")
    assert widget["spec"] == {"size": 3}
    # Applying again is an idempotent update.
    again = cp.apply_manifests(manifests.replace("size: 3", "size: 4"))
    assert again[1]["spec"] == {"size": 4}


def test_rbac_applies_to_other_users(control_plane: ControlPlane, tmp_path: Path) -> None:
    cp = control_plane
    assert cp.ca is not None and cp.server_url is not None
    keypair = cp.ca.issue_client("jane", ("developers",)).write(tmp_path, "jane")
    jane = KubeHTTP(
        cp.server_url, ca_file=cp.ca_path, cert_file=keypair.cert_path, key_file=keypair.key_path
    )
    with pytest.raises(KubeAPIError) as err:
        jane.get("/api/v1/nodes")
    assert err.value.status == 403
    path = cp.write_kubeconfig(tmp_path / "jane.kubeconfig", user="jane")
    assert "client-key-data" in path.read_text()


def test_components_are_alive(control_plane: ControlPlane) -> None:
    control_plane.check_alive()
    assert set(control_plane.components) >= {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kwok",
    }


def test_kube_scheduler_side_by_side_and_clean_stop(control_plane: ControlPlane) -> None:
    """A second, private control plane with kube-scheduler: the scheduler binds a pod that
    kwok then runs, and leaving the ``with`` block ends every process group."""
    with ControlPlane(control_plane.binaries, nodes=2, start_scheduler=True) as cp:
        cp.client.post(
            "/api/v1/namespaces/default/pods",
            pod("s1") | {"spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}]}},
        )
        running = cp.client.wait_for(
            "/api/v1/namespaces/default/pods/s1",
            lambda p: p["status"].get("phase") == "Running",
            timeout=60,
            what="kube-scheduler to place s1 and kwok to run it",
        )
        assert running["spec"]["nodeName"].startswith("kwok-node-")
        pids = [c.pid for c in cp.components.values()]
        assert len(pids) == 5  # etcd, kube-apiserver, kube-controller-manager, kwok, scheduler
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert (cp.log_dir / "kube-scheduler.log").stat().st_size > 0
    assert not (cp.run_dir / "etcd").exists()


# --- the build ---------------------------------------------------------------------------------

BUILD_SCRIPT = HACK_GO_MOD.parent / "build-control-plane.sh"


def fake_bin_dir(path: Path, names: tuple[str, ...]) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_text("#!/bin/sh\n")
        (path / name).chmod(0o755)
    return path


def test_a_bin_dir_without_the_controller_manager_is_refused_by_name(tmp_path: Path) -> None:
    before = ("etcd", "kube-apiserver", "kube-scheduler", "kwok")  # a directory made earlier
    old = fake_bin_dir(tmp_path / "bin", before)
    with pytest.raises(BuildError, match=r"lacks executable\(s\): kube-controller-manager;"):
        Binaries.from_dir(old)
    (old / "kube-controller-manager").write_text("")  # there, but not executable
    with pytest.raises(BuildError, match="kube-controller-manager") as err:
        Binaries.from_dir(old)
    assert "STROMBOLI_CONTROLPLANE_BIN" in str(err.value)
    (old / "kube-controller-manager").chmod(0o755)
    found = Binaries.from_dir(old)
    assert found.kube_controller_manager == old / "kube-controller-manager"
    assert found.kwok == old / "kwok" and found.etcd == old / "etcd"


def test_build_script_reuses_a_binary_that_links_the_same_modules(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A cache with another version directory holding the very binaries this build would make
    (and kube-scheduler's binary where kwok's should be): the four are linked in without a
    build, kwok is built, and here ``go build`` is refused, so the script fails naming it."""
    built = control_plane.binaries.bin_dir
    other = tmp_path / "cache" / "controlplane" / "v0.0.0-other" / "bin"
    other.mkdir(parents=True)
    for name in BINARY_NAMES:
        (other / name).symlink_to(built / ("kube-scheduler" if name == "kwok" else name))
    fake_go = tmp_path / "go"
    fake_go.write_text(
        '#!/bin/sh\nif [ "$1" = build ]; then echo "go build refused" >&2; exit 3; fi\n'
        'exec go "$@"\n'
    )
    fake_go.chmod(0o755)
    env = {**os.environ, "STROMBOLI_CACHE": str(tmp_path / "cache"), "GO": str(fake_go)}
    env.pop("STROMBOLI_FORCE", None)
    run = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env, check=False
    )
    assert run.returncode != 0
    assert "go build of sigs.k8s.io/kwok/cmd/kwok failed" in run.stderr
    reused = set(re.findall(r"reused (\S+) from ", run.stderr))
    assert reused == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
    (made,) = [
        d for d in (tmp_path / "cache" / "controlplane").iterdir() if d.name != "v0.0.0-other"
    ]
    assert sorted(p.name for p in (made / "bin").iterdir()) == sorted(reused)
