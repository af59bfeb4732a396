"""Real framework operators on the test control plane.

:func:`operator_build` builds an operator from its pinned Go module on first use (cached in
``~/.cache/stromboli/operators``; see :mod:`stromboli.core.devcluster.operators`), so a session
that runs no operator test builds none. :class:`OperatorProcess` runs the binary against the
``control_plane`` fixture's API server with the admin kubeconfig, every port it opens on
127.0.0.1 where the operator lets us choose the address. :class:`Pool` is a set of kwok nodes
tainted for one test module, so that gang fits are exact whatever other modules left on the
shared cluster's nodes.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api.quantity import parse_quantity
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeAPIError, KubeHTTP
from stromboli.core.devcluster.controlplane import free_port
from stromboli.core.devcluster.operators import OperatorBuild, OperatorBuildError, build_operator

POOL_KEY = "stromboli.dev/test-pool"
GROUP = "scheduling.k8s.io/group-name"
TASK = "volcano.sh/task-spec"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
STROMBOLI = Path(sys.executable).with_name("stromboli")
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
WEBHOOK_USER = "system:serviceaccount:volcano-system:stromboli-webhook"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:volcano-system")
ENROL_WEBHOOK = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
    "volcano-admission-service-pods-mutate"
)
TRAINING_VWC = "validator.training-operator.kubeflow.org"
#: Where the training-operator and Trainer read their webhook certificate (pkg/cert, fixed).
TRAINING_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")


def operator_build(name: str, log_dir: Path) -> OperatorBuild:
    """Build (or find cached) operator ``name``; the test errors, never skips, if it cannot."""
    log = log_dir / f"build-{name}.log"
    try:
        return build_operator(name, log_path=log)
    except OperatorBuildError as err:
        pytest.fail(f"building operator {name} failed ({log}): {err}", pytrace=False)


CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def install_crds(cp: ControlPlane, build: OperatorBuild) -> None:
    """Apply the operator's own CRDs (from its module) and wait until they are served.

    The session's control plane is shared: another test may have installed a stand-in CRD of
    the same name with versions the real one lacks (``framework_crds.py`` serves MPIJob
    v2beta1, the training-operator v1.8.1 ships MPIJob v1), which the API server refuses to
    drop; such a CRD is deleted and the real one applied in its place."""
    for _ in range(8):
        try:
            cp.apply_manifests(build.crds)
            return
        except KubeAPIError as err:
            if err.status != 422 or b"storedVersions" not in err.body:
                raise
            name = err.path.rsplit("/", 1)[-1]
            cp.client.delete(f"{CRDS_PATH}/{name}")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    cp.client.get(f"{CRDS_PATH}/{name}")
                except KubeAPIError as gone:
                    if gone.status == 404:
                        break
                    raise
                time.sleep(0.2)
    cp.apply_manifests(build.crds)


class OperatorProcess:
    """One operator binary as a subprocess, its output appended to ``log``."""

    def __init__(
        self,
        build: OperatorBuild,
        cp: ControlPlane,
        log: Path,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.build = build
        self.log = log
        self.argv = [*prefix, str(build.binary), *args]
        self.env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig_path), **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # its own group: a wrapper's children stop with it
            )
        return self

    def stop(self) -> None:
        """SIGTERM to the operator's whole process group, SIGKILL after 30 s: behind a
        wrapper (the Argo jail) the operator is a grandchild, and one that outlives a killed
        wrapper would retry against a stopped API server for good."""
        if self.process is None:
            return
        group = self.process.pid  # the session leader's pid is its group's id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)  # whatever of the group is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def check_alive(self) -> None:
        assert self.process is not None and self.process.poll() is None, (
            f"{self.build.operator.name} exited ({self.process and self.process.returncode}):\n"
            f"{self.tail()}"
        )


@dataclass(frozen=True)
class RotatedCerts:
    """Where an operator using cert-controller's rotator keeps its webhook certificate."""

    #: The namespace it believes it runs in (None: a fresh one, passed in ``namespace_env``).
    home: str | None
    secret: str
    webhook_configuration: str
    namespace_env: str | None = None


TRAINING_CERTS = RotatedCerts(
    None, "training-operator-webhook-cert", TRAINING_VWC, "MY_POD_NAMESPACE"
)
#: Trainer reads its namespace from the pod's ServiceAccount mount, else kubeflow-system.
TRAINER_CERTS = RotatedCerts(
    "kubeflow-system", "kubeflow-trainer-webhook-cert", "validator.trainer.kubeflow.org"
)


def start_rotated_operator(
    cp: ControlPlane, build: OperatorBuild, log_dir: Path, certs: RotatedCerts, args: Sequence[str]
) -> tuple[OperatorProcess, Callable[[], None]]:
    """An operator whose webhooks use cert-controller's rotator (the training-operator,
    Trainer) running, and what stops it and removes what it needed.

    The rotator needs its Secret and a ValidatingWebhookConfiguration to exist (made here, the
    configuration with no webhooks, so the API server never calls the operator) and, before
    any controller starts, the certificate in a fixed folder, which a kubelet would mount from
    the Secret: :func:`_mount_webhook_certs` plays that part. The webhook server's address
    cannot be chosen, only its port (pass a free one); metrics and probes go on 127.0.0.1.
    """
    client = cp.client
    home = make_namespace(client, certs.home or f"kubeflow-{free_port()}")
    client.post(
        f"/api/v1/namespaces/{home}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": certs.secret}},
    )
    vwc = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": certs.webhook_configuration},
        "webhooks": [],
    }
    cp.apply_manifests(vwc)
    shutil.rmtree(TRAINING_CERT_DIR, ignore_errors=True)  # a former run's certificate
    env = {certs.namespace_env: home} if certs.namespace_env else {}
    log = log_dir / f"{build.operator.name}.log"
    operator = OperatorProcess(build, cp, log, args, env).start()
    configurations = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"

    def stop() -> None:
        operator.stop()
        client.delete(f"/api/v1/namespaces/{home}")
        client.delete(f"{configurations}/{certs.webhook_configuration}")

    try:
        _mount_webhook_certs(client, f"/api/v1/namespaces/{home}/secrets/{certs.secret}", operator)
    except BaseException:
        stop()
        raise
    return operator, stop


def start_training_operator(
    cp: ControlPlane, build: OperatorBuild, log_dir: Path, *flags: str
) -> tuple[OperatorProcess, Callable[[], None]]:
    """The training-operator (PyTorchJobs only) with ``flags`` (:func:`start_rotated_operator`)."""
    args = [
        *flags,
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
        f"--webhook-server-port={free_port()}",
        "--enable-scheme=pytorchjob",
    ]
    return start_rotated_operator(cp, build, log_dir, TRAINING_CERTS, args)


def _mount_webhook_certs(client: KubeHTTP, path: str, operator: OperatorProcess) -> None:
    data = wait_until(
        "cert-controller filling the webhook Secret",
        lambda: (client.get(path).get("data") or {}).get("tls.key") and client.get(path)["data"],
        alive=[operator.check_alive],
        logs=operator.tail,
    )
    TRAINING_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for name in ("tls.key", "tls.crt"):  # the key first: the rotator waits for tls.crt
        (TRAINING_CERT_DIR / name).write_bytes(base64.b64decode(data[name]))


def start_enrol_webhook(cp: ControlPlane, run_dir: Path, namespace: str) -> subprocess.Popen[bytes]:
    """``stromboli webhook-manager`` serving ``/pods/mutate`` on 127.0.0.1 as deploy/webhook.yaml's
    ServiceAccount, once it mutates a dry-run pod of the enrolled ``namespace``; delete
    :data:`ENROL_WEBHOOK` after stopping it."""
    cp.apply_manifests(DEPLOY / "namespace.yaml")
    cp.apply_manifests(DEPLOY / "webhook.yaml")
    kubeconfig = cp.write_kubeconfig(
        run_dir / "webhook.kubeconfig", user=WEBHOOK_USER, groups=SA_GROUPS
    )
    port = free_port()
    log = run_dir / "webhook-manager.log"
    process = subprocess.Popen(
        [
            str(STROMBOLI),
            "webhook-manager",
            f"--kubeconfig={kubeconfig}",
            "--listen-address=127.0.0.1",
            f"--port={port}",
            f"--webhook-url=https://127.0.0.1:{port}",
            "--enabled-admission=/pods/mutate",
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "probe-", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    deadline = time.monotonic() + 60
    while True:
        made = cp.client.post(f"/api/v1/namespaces/{namespace}/pods", probe, dryRun="All")
        if made["spec"].get("schedulerName") == "volcano":
            return process
        assert process.poll() is None, f"webhook-manager exited:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"never mutated:\n{log.read_text()}"
        time.sleep(0.2)


class Pool:
    """kwok nodes labelled and tainted ``stromboli.dev/test-pool=<name>``: only pods that
    tolerate the taint land there, and pods that select the label land nowhere else."""

    def __init__(self, cp: ControlPlane, name: str, cpu: str, memory: str = "16Gi") -> None:
        self.cp = cp
        self.name = f"{name}-{uuid.uuid4().hex[:5]}"
        self.cpu = cpu
        self.memory = memory
        self.nodes: list[str] = []

    def add(self, count: int) -> list[str]:
        names = self.cp.add_nodes(
            count,
            cpu=self.cpu,
            memory=self.memory,
            pods=110,
            name_prefix=f"{self.name}-",
            labels={POOL_KEY: self.name},
            taints=[{"key": POOL_KEY, "value": self.name, "effect": "NoSchedule"}],
        )
        self.nodes += names
        return names

    def pod_spec(self) -> dict[str, Any]:
        """The nodeSelector and toleration that put a pod on this pool and nowhere else."""
        return {
            "nodeSelector": {POOL_KEY: self.name},
            "tolerations": [{"key": POOL_KEY, "operator": "Equal", "value": self.name}],
        }

    def remove(self) -> None:
        for node in self.nodes:
            self.cp.client.delete(f"/api/v1/nodes/{node}")


def make_namespace(client: KubeHTTP, name: str, labels: Mapping[str, str] | None = None) -> str:
    client.post(
        "/api/v1/namespaces",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}},
        },
    )
    try:  # pods need their namespace's default ServiceAccount; don't wait for a controller
        client.post(
            f"/api/v1/namespaces/{name}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
    except KubeAPIError as err:
        if err.status != 409:
            raise
    return name


def wait_until(
    what: str,
    probe: Callable[[], Any],
    *,
    timeout: float = 90.0,
    alive: Sequence[Callable[[], None]] = (),
    logs: Callable[[], str] = lambda: "",
) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` and the last
    value seen (and ``logs()``) when ``timeout`` passes or a process in ``alive`` died."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if last:
            return last
        for check in alive:
            check()
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not reached in {timeout}s; last seen {last!r}\n{logs()}")
        time.sleep(0.25)


def pods(client: KubeHTTP, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
    query = {"labelSelector": selector} if selector else {}
    items: list[dict[str, Any]] = client.get(f"/api/v1/namespaces/{namespace}/pods", **query)[
        "items"
    ]
    return items


def podgroups(client: KubeHTTP, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(PODGROUPS.format(ns=namespace))["items"]
    return items


def bound(items: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in items if p["spec"].get("nodeName"))


def amounts(resources: dict[str, Any] | None) -> dict[str, Fraction]:
    """Resource lists compared by value (``3`` and ``3000m`` are one amount)."""
    return {name: parse_quantity(q) for name, q in (resources or {}).items()}


def assert_same_gang(theirs: dict[str, Any], ours: dict[str, Any] | None) -> None:
    """The operator's PodGroup and our conversion agree on every field Volcano schedules by."""
    assert ours is not None, "our conversion made no PodGroup of that name"
    assert theirs["metadata"]["name"] == ours["metadata"]["name"]
    for key in ("minMember", "queue", "priorityClassName", "networkTopology"):
        assert theirs["spec"].get(key) == ours["spec"].get(key), key
    assert amounts(theirs["spec"].get("minResources")) == amounts(ours["spec"].get("minResources"))
    (their_owner,) = theirs["metadata"]["ownerReferences"]
    (our_owner,) = ours["metadata"]["ownerReferences"]
    for key in ("apiVersion", "kind", "name", "uid", "controller"):
        assert their_owner.get(key) == our_owner.get(key), key
