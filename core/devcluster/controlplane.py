"""A real, throw-away Kubernetes control plane on loopback ports, for tests and benchmarks.

    with ControlPlane(nodes=4) as cp:
        cp.client.get("/version")
        cp.apply_manifests("examples/queue.yaml")
        print(cp.kubeconfig_path)

What runs (each in its own process group, logs under ``<run_dir>/logs/``):

* etcd (``--unsafe-no-fsync``, data in ``<run_dir>/etcd``, removed on stop);
* kube-apiserver on ``https://127.0.0.1:<port>`` with a generated CA, client-certificate
  authentication and ``--authorization-mode=RBAC`` (the admin identity is in
  ``system:masters``, so it is allowed everything; other identities made with
  :meth:`ControlPlane.write_kubeconfig` get real RBAC checks);
* kube-controller-manager (``start_controller_manager=True``, the default), so that the
  cluster behaves like a real one: garbage collection through ownerReferences (deleting a
  vcjob removes its pods and PodGroup), namespace deletion, Deployments, ReplicaSets,
  StatefulSets, batch Jobs and CronJobs, disruption budgets' status, ResourceQuota usage,
  the ``default`` ServiceAccount and ``kube-root-ca.crt`` of every namespace, and
  service-account token Secrets. Each controller uses its own ServiceAccount's credentials
  (``--use-service-account-credentials``), as on a kubeadm cluster. See
  :attr:`ControlPlane.CONTROLLERS` for the one controller left out;
* kwok, managing nodes annotated ``kwok.x-k8s.io/node: fake`` with the stages in
  :mod:`stromboli.core.devcluster.stages` (nodes turn Ready, bound pods turn Running);
* optionally kube-scheduler (``start_scheduler=True`` or :meth:`start_scheduler`), for
  side-by-side benchmarks.

Admission plugins that would hold pods or nodes up with no controller to release them are
disabled (see :attr:`ControlPlane.DISABLED_ADMISSION`).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from stromboli.core.pki import CertificateAuthority, KeyPair, write_service_account_keys

from .build import Binaries, build_control_plane
from .client import KubeAPIError, KubeHTTP, ManifestSource, Obj
from .stages import KWOK_STAGES_YAML

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_LABEL = ("type", "kwok")
ADMIN_USER = "stromboli-admin"
ADMIN_GROUPS = ("system:masters",)
#: The identity kube-controller-manager starts as (bound by the API server's bootstrap RBAC);
#: its controllers then act as ServiceAccounts in kube-system.
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
SERVICE_CIDR = "172.20.0.0/16"
SERVICE_IP = "172.20.0.1"


class ControlPlaneError(RuntimeError):
    """A component failed to start or died."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError as err:
        return f"<cannot read {path}: {err}>"
    return "\n".join(data.splitlines()[-lines:])


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Ask Linux to SIGKILL the child if the (thread that started the) parent dies.

    SIGKILL rather than SIGTERM: kube-apiserver's graceful shutdown can hang when etcd goes
    away at the same moment, and nothing of a dead test run is worth keeping."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Component:
    """One control-plane process, in its own process group, logging to a file."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str]):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            banner = f"\n=== {time.strftime('%H:%M:%S')} starting: {' '.join(self.argv)}\n"
            log.write(banner.encode())
            log.flush()
            # PDEATHSIG fires when the *thread* that forked exits, so only use it from the
            # main thread; stop()/atexit cover the other cases.
            in_main = threading.current_thread() is threading.main_thread()
            preexec = _die_with_parent if in_main else None
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                preexec_fn=preexec,
            )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ControlPlaneError(
                f"{self.name} exited with status {self.proc.returncode}; last log lines "
                f"({self.log_path}):\n{_tail(self.log_path, 40)}"
            )

    def stop(self, timeout: float = 15.0) -> None:
        proc = self.proc
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the child leads its own group
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                proc.wait(10)
        # Anything the component forked into its group goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        self.proc = None

    def tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)


_live: weakref.WeakSet[ControlPlane] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # pragma: no cover - interpreter shutdown
    for cp in list(_live):
        with contextlib.suppress(Exception):
            cp.stop()


class ControlPlane:
    """etcd + kube-apiserver + kwok (+ kube-scheduler) on free loopback ports."""

    #: Admission plugins turned on explicitly (on top of kube-apiserver's defaults).
    ENABLED_ADMISSION = (
        "NamespaceLifecycle",
        "LimitRanger",
        "Priority",
        "DefaultTolerationSeconds",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionWebhook",
        "ResourceQuota",
    )
    #: Default plugins left off. ServiceAccount refuses a pod until the serviceaccount
    #: controller has made its namespace's ``default`` SA, which races every test that makes
    #: a namespace and then a pod (and it adds token volumes to every pod spec);
    #: TaintNodesByCondition taints new nodes not-ready until the node-lifecycle controller,
    #: which does not run here (see :attr:`CONTROLLERS`), lifts it.
    DISABLED_ADMISSION = ("ServiceAccount", "TaintNodesByCondition")
    #: kube-controller-manager's ``--controllers``: everything on by default except the
    #: node-lifecycle controller. kwok keeps node Leases fresh, but on a loaded machine a
    #: renewal that lags past the grace period would get a node tainted ``unreachable``
    #: (NoExecute) and its pods evicted, and nodes that tests create for kwok to ignore
    #: would be tainted too; node health is kwok's business here.
    CONTROLLERS = ("*", "-node-lifecycle-controller")

    def __init__(
        self,
        binaries: Binaries | str | Path | None = None,
        *,
        run_dir: str | Path | None = None,
        nodes: int = 0,
        node_cpu: str | int = "32",
        node_memory: str = "256Gi",
        node_pods: int = 110,
        start_scheduler: bool = False,
        start_controller_manager: bool = True,
        controller_manager_args: Sequence[str] = (),
        authorization_mode: str = "RBAC",
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: str | None = None,
        apiserver_args: Sequence[str] = (),
        kwok_args: Sequence[str] = (),
        startup_timeout: float = 180.0,
        keep_etcd_data: bool = False,
    ) -> None:
        if isinstance(binaries, str | Path):
            binaries = Binaries.from_dir(binaries)
        self._binaries = binaries
        self._own_run_dir = run_dir is None
        self.run_dir = Path(run_dir) if run_dir else Path(tempfile.mkdtemp(prefix="stromboli-cp-"))
        self.log_dir = self.run_dir / "logs"
        self.pki_dir = self.run_dir / "pki"
        self.initial_nodes = nodes
        self.node_defaults: dict[str, str | int] = {
            "cpu": str(node_cpu),
            "memory": node_memory,
            "pods": node_pods,
        }
        self.want_scheduler = start_scheduler
        self.want_controller_manager = start_controller_manager
        self.controller_manager_args = list(controller_manager_args)
        self.authorization_mode = authorization_mode
        self.feature_gates = dict(feature_gates or {})
        self.runtime_config = runtime_config
        self.apiserver_args = list(apiserver_args)
        self.kwok_args = list(kwok_args)
        self.startup_timeout = startup_timeout
        self.keep_etcd_data = keep_etcd_data

        self.components: dict[str, Component] = {}
        #: Each started component's readiness check (on its ports), for :meth:`restart`.
        self._probes: dict[str, Any] = {}
        self.ca: CertificateAuthority | None = None
        self.admin: KeyPair | None = None
        self.ca_path: Path | None = None
        self.etcd_url: str | None = None
        self.server_url: str | None = None
        self.kubeconfig_path: Path = self.run_dir / "admin.kubeconfig"
        self.kwok_url: str | None = None
        self.scheduler_url: str | None = None
        self.controller_manager_url: str | None = None
        self._client: KubeHTTP | None = None
        self._node_seq = 0
        self._lock = threading.RLock()
        self.kube_version: str | None = None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            self._binaries = build_control_plane(log_path=self.log_dir / "build.log")
        return self._binaries

    @property
    def client(self) -> KubeHTTP:
        if self._client is None:
            raise ControlPlaneError("the control plane is not started")
        return self._client

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        with self._lock:
            if self.components:
                raise ControlPlaneError("already started")
            self.log_dir.mkdir(parents=True, exist_ok=True)
            _live.add(self)
            try:
                self.binaries  # noqa: B018 - build before anything listens
                self._write_pki()
                self._start_etcd()
                self._start_apiserver()
                if self.want_controller_manager:
                    self._start_controller_manager()
                self._start_kwok()
                if self.want_scheduler:
                    self.start_scheduler()
                if self.initial_nodes:
                    self.add_nodes(self.initial_nodes)
            except BaseException:
                self.stop()
                raise
        return self

    def stop(self) -> None:
        """Stop every component (newest first) and remove the etcd data; logs, certificates
        and kubeconfig stay in :attr:`run_dir`."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            for name in reversed(list(self.components)):
                self.components[name].stop()
            self.components.clear()
            self._probes.clear()
            if not self.keep_etcd_data:
                shutil.rmtree(self.run_dir / "etcd", ignore_errors=True)
            _live.discard(self)

    def check_alive(self) -> None:
        """Raise :class:`ControlPlaneError` if any component has died."""
        for comp in self.components.values():
            comp.check_alive()

    def dead_components(self) -> list[str]:
        """Names of the components that have exited, in the order they were started (the
        order to start them again in: etcd before kube-apiserver before kwok)."""
        return [name for name, comp in self.components.items() if not comp.alive()]

    def restart(self, name: str, timeout: float | None = None) -> None:
        """Start component ``name`` again with its arguments (same ports, same data; etcd
        keeps its data directory) and wait until it is ready. A live one is stopped first.
        Raises :class:`ControlPlaneError` if it does not come back."""
        with self._lock:
            comp = self.components.get(name)
            if comp is None:
                raise ControlPlaneError(f"no component {name!r}; started: {list(self.components)}")
            comp.stop()  # reaps a dead one, and anything left in its process group
            comp.start()
            self._wait(f"{name} (restarted)", comp, self._probes[name], timeout)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` of every component's log, for failure reports."""
        parts = []
        for path in sorted(self.log_dir.glob("*.log")):
            parts.append(f"----- {path} (last {lines} lines) -----\n{_tail(path, lines)}")
        return "\n".join(parts)

    # -- setup steps ----------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        # ETCD_* variables configure etcd and KUBECONFIG would point kwok elsewhere.
        return {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "ETCD"))}

    def _write_pki(self) -> None:
        self.ca = CertificateAuthority()
        self.ca_path = self.ca.write(self.pki_dir).cert_path
        self.ca.issue_serving(
            "kube-apiserver",
            [
                "127.0.0.1",
                "localhost",
                SERVICE_IP,
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        ).write(self.pki_dir, "apiserver")
        self.admin = self.ca.issue_client(ADMIN_USER, ADMIN_GROUPS).write(self.pki_dir, "admin")
        write_service_account_keys(self.pki_dir)

    def _wait(self, what: str, comp: Component, probe, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        last: object = None
        while True:
            comp.check_alive()
            try:
                if probe():
                    return
            except Exception as err:  # any failure means "not yet"
                last = err
            if time.monotonic() >= deadline:
                raise ControlPlaneError(
                    f"{what} not ready after {timeout or self.startup_timeout:.0f}s "
                    f"(last error: {last!r}); log tail:\n{comp.tail(60)}"
                )
            time.sleep(0.25)

    def _launch(self, name: str, argv: Sequence[str]) -> Component:
        comp = Component(name, argv, self.log_dir / f"{name}.log", self._env())
        self.components[name] = comp
        comp.start()
        return comp

    def _start_with_ports(self, name: str, build_argv, probe_factory, nports: int) -> None:
        """Start a component on fresh ports, retrying if a port was taken in the meantime."""
        for attempt in range(3):
            ports = [free_port() for _ in range(nports)]
            comp = self._launch(name, build_argv(*ports))
            probe = probe_factory(*ports)
            try:
                self._wait(name, comp, probe)
                self._probes[name] = probe
                return
            except ControlPlaneError:
                if attempt < 2 and "address already in use" in comp.tail(80):
                    comp.stop()
                    continue
                raise

    def _start_etcd(self) -> None:
        data_dir = self.run_dir / "etcd"

        def argv(client: int, peer: int) -> list[str]:
            self.etcd_url = f"http://127.0.0.1:{client}"
            return [
                str(self.binaries.etcd),
                "--name=stromboli",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=stromboli=http://127.0.0.1:{peer}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ]

        def probe(client: int, peer: int):
            def check() -> bool:
                with urllib.request.urlopen(f"http://127.0.0.1:{client}/health", timeout=2) as r:
                    return json.loads(r.read()).get("health") == "true"

            return check

        self._start_with_ports("etcd", argv, probe, 2)

    def _start_apiserver(self) -> None:
        pki = self.pki_dir
        gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))

        def argv(port: int) -> list[str]:
            self.server_url = f"https://127.0.0.1:{port}"
            args = [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--authorization-mode={self.authorization_mode}",
                "--enable-admission-plugins=" + ",".join(self.ENABLED_ADMISSION),
                "--disable-admission-plugins=" + ",".join(self.DISABLED_ADMISSION),
                # The default "lease" reconciler would try to publish 127.0.0.1 as the
                # endpoint of the `kubernetes` Service, which validation rejects (loopback).
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--event-ttl=1h",
            ]
            if gates:
                args.append(f"--feature-gates={gates}")
            if self.runtime_config:
                args.append(f"--runtime-config={self.runtime_config}")
            return args + self.apiserver_args

        def probe(port: int):
            client = KubeHTTP(
                f"https://127.0.0.1:{port}",
                ca_file=pki / "ca.crt",
                cert_file=pki / "admin.crt",
                key_file=pki / "admin.key",
                timeout=5,
            )

            def check() -> bool:
                status, body = client.request_raw("GET", "/readyz")
                return status == 200 and body.strip() == b"ok"

            return check

        self._start_with_ports("kube-apiserver", argv, probe, 1)
        assert self.server_url is not None and self.admin is not None
        self._client = KubeHTTP(
            self.server_url,
            ca_file=pki / "ca.crt",
            cert_file=self.admin.cert_path,  # type: ignore[arg-type]
            key_file=self.admin.key_path,  # type: ignore[arg-type]
        )
        self.kube_version = self._client.get("/version").get("gitVersion")
        self.write_kubeconfig(self.kubeconfig_path, keypair=self.admin, user=ADMIN_USER)

    def _start_kwok(self) -> None:
        config = self.run_dir / "kwok.yaml"
        config.write_text(KWOK_STAGES_YAML)

        def argv(port: int) -> list[str]:
            self.kwok_url = f"http://127.0.0.1:{port}"
            return [
                str(self.binaries.kwok),
                f"--kubeconfig={self.kubeconfig_path}",
                f"--config={config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--node-lease-duration-seconds=40",
                "--cidr=10.255.0.0/16",
                "--node-ip=100.127.255.254",
                f"--server-address=127.0.0.1:{port}",
                *self.kwok_args,
            ]

        def probe(port: int):
            def check() -> bool:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    return r.status == 200

            return check

        self._start_with_ports("kwok", argv, probe, 1)

    def _start_controller_manager(self) -> None:
        pki = self.pki_dir
        assert self.ca is not None
        kubeconfig = self.write_kubeconfig(
            self.run_dir / "kube-controller-manager.kubeconfig", user=CONTROLLER_MANAGER_USER
        )
        gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))

        def argv(port: int) -> list[str]:
            self.controller_manager_url = f"https://127.0.0.1:{port}"
            args = [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                # As for kube-scheduler: no delegated authn/authz, health open on loopback.
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.run_dir / 'kube-controller-manager-certs'}",
                "--controllers=" + ",".join(self.CONTROLLERS),
                "--use-service-account-credentials=true",
                # The API server verifies tokens with sa.pub; legacy token Secrets are
                # signed with its private half and carry the cluster CA.
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                # Its default is under /usr/libexec, which it would create.
                f"--flex-volume-plugin-dir={self.run_dir / 'flexvolume'}",
                # Loopback and a test's bursts: the default 20 QPS would make deleting a
                # namespace of a few hundred pods take many seconds.
                "--kube-api-qps=200",
                "--kube-api-burst=400",
            ]
            if gates:
                args.append(f"--feature-gates={gates}")
            return args + self.controller_manager_args

        def probe(port: int):
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE

            def check() -> bool:
                url = f"https://127.0.0.1:{port}/healthz"
                with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
                    if r.status != 200:
                        return False
                # Controllers are running once the serviceaccount controller has done its
                # first namespace (kept across a restart: etcd keeps it).
                self.client.get("/api/v1/namespaces/default/serviceaccounts/default")
                return True

            return check

        self._start_with_ports("kube-controller-manager", argv, probe, 1)

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        """Crash kube-apiserver (SIGKILL: connections just break) and start it again on the
        same port; returns once it is ready. For tests of recovery."""
        component = self.components["kube-apiserver"]
        if component.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(component.pid, signal.SIGKILL)
        self.restart("kube-apiserver", timeout)

    def start_scheduler(self, extra_args: Sequence[str] = ()) -> None:
        """Start the upstream kube-scheduler (``default-scheduler``) against this cluster."""
        with self._lock:
            if "kube-scheduler" in self.components:
                return

            def argv(port: int) -> list[str]:
                self.scheduler_url = f"https://127.0.0.1:{port}"
                return [
                    str(self.binaries.kube_scheduler),
                    f"--kubeconfig={self.kubeconfig_path}",
                    # No delegated authn/authz (the API server has no request-header CA);
                    # health and metrics are served to anyone on loopback instead.
                    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={self.run_dir / 'kube-scheduler-certs'}",
                    *extra_args,
                ]

            def probe(port: int):
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE

                def check() -> bool:
                    url = f"https://127.0.0.1:{port}/readyz"
                    with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
                        return r.status == 200

                return check

            self._start_with_ports("kube-scheduler", argv, probe, 1)

    def stop_scheduler(self) -> None:
        with self._lock:
            comp = self.components.pop("kube-scheduler", None)
            if comp:
                comp.stop()

    # -- kubeconfigs ------------------------------------------------------------------------

    def write_kubeconfig(
        self,
        path: str | Path,
        *,
        user: str,
        groups: Iterable[str] = (),
        keypair: KeyPair | None = None,
    ) -> Path:
        """Write a self-contained kubeconfig for ``user`` (a fresh client certificate in
        ``groups`` unless ``keypair`` is given). Non-admin users are subject to RBAC."""
        if self.ca is None or self.server_url is None:
            raise ControlPlaneError("the control plane is not started")
        if keypair is None:
            keypair = self.ca.issue_client(user, tuple(groups))

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "stromboli-dev",
                    "cluster": {
                        "server": self.server_url,
                        "certificate-authority-data": b64(self.ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate-data": b64(keypair.cert_pem),
                        "client-key-data": b64(keypair.key_pem),
                    },
                }
            ],
            "contexts": [
                {"name": "stromboli-dev", "context": {"cluster": "stromboli-dev", "user": user}}
            ],
            "current-context": "stromboli-dev",
            "preferences": {},
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(doc, fh, sort_keys=False)
        return path

    # -- nodes and manifests --------------------------------------------------------------

    def node_manifest(
        self,
        name: str,
        index: int,
        *,
        cpu: str,
        memory: str,
        pods: int,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        extra_resources: Mapping[str, str] | None = None,
    ) -> Obj:
        """The Node object :meth:`add_nodes` creates (pod CIDR 10.<a>.<b>.0/24, internal IP
        100.64.0.0/10, both derived from ``index``)."""
        ip = index + 1
        node_ip = f"100.{64 + (ip >> 16) % 64}.{(ip >> 8) & 255}.{ip & 255}"
        pod_cidr = f"10.{(index >> 8) % 255}.{index & 255}.0/24"
        resources = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods)}
        resources.update({k: str(v) for k, v in (extra_resources or {}).items()})
        version = self.kube_version or "v0.0.0"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {
                    KWOK_NODE_ANNOTATION: "fake",
                    "node.alpha.kubernetes.io/ttl": "0",
                    **(annotations or {}),
                },
                "labels": {
                    KWOK_NODE_LABEL[0]: KWOK_NODE_LABEL[1],
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    **(labels or {}),
                },
            },
            "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr], "taints": list(taints)},
            "status": {
                "capacity": resources,
                "allocatable": dict(resources),
                "addresses": [
                    {"type": "InternalIP", "address": node_ip},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": version,
                    "kubeProxyVersion": version,
                    "containerRuntimeVersion": "kwok",
                    "kernelVersion": "kwok",
                    "osImage": "kwok",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
            },
        }

    def add_nodes(
        self,
        n: int,
        cpu: str | int | None = None,
        memory: str | None = None,
        pods: int | None = None,
        *,
        name_prefix: str = "kwok-node-",
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        extra_resources: Mapping[str, str] | None = None,
        wait_ready: bool = True,
        timeout: float = 120.0,
    ) -> list[str]:
        """Create ``n`` kwok nodes (taint-free unless ``taints``) and, by default, wait until
        kwok reports them Ready. Returns their names."""
        cpu = str(cpu if cpu is not None else self.node_defaults["cpu"])
        memory = memory or str(self.node_defaults["memory"])
        pods = int(pods if pods is not None else self.node_defaults["pods"])
        names = []
        for _ in range(n):
            with self._lock:
                index = self._node_seq
                self._node_seq += 1
            name = f"{name_prefix}{index}"
            node = self.node_manifest(
                name,
                index,
                cpu=cpu,
                memory=memory,
                pods=pods,
                labels=labels,
                annotations=annotations,
                taints=taints,
                extra_resources=extra_resources,
            )
            self.client.post("/api/v1/nodes", node)
            names.append(name)
        if wait_ready:
            self.wait_nodes_ready(names, timeout=timeout)
        return names

    def wait_nodes_ready(self, names: Iterable[str], timeout: float = 120.0) -> None:
        pending = set(names)
        deadline = time.monotonic() + timeout
        while pending:
            self.check_alive()
            nodes = self.client.get("/api/v1/nodes", labelSelector="=".join(KWOK_NODE_LABEL))
            for node in nodes.get("items") or []:
                if node["metadata"]["name"] in pending and node_is_ready(node):
                    pending.discard(node["metadata"]["name"])
            if not pending:
                return
            if time.monotonic() >= deadline:
                raise ControlPlaneError(
                    f"{len(pending)} node(s) not Ready after {timeout}s, e.g. "
                    f"{sorted(pending)[:5]}; kwok log tail:\n{self.components['kwok'].tail(40)}"
                )
            time.sleep(0.25)

    def apply_manifests(
        self, sources: ManifestSource | Iterable[ManifestSource], *, wait_crds: bool = True
    ) -> list[Obj]:
        """Server-side apply YAML text, files, directories or dicts; see
        :meth:`KubeHTTP.apply_manifests`."""
        return self.client.apply_manifests(sources, wait_crds=wait_crds)


def node_is_ready(node: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in ((node.get("status") or {}).get("conditions") or [])
    )


__all__ = [
    "ADMIN_GROUPS",
    "ADMIN_USER",
    "KWOK_NODE_ANNOTATION",
    "ControlPlane",
    "ControlPlaneError",
    "KubeAPIError",
    "free_port",
    "node_is_ready",
]
