"""A detached local cluster for people trying Stromboli: the engine of ``stromboli dev-cluster``.

``up`` starts a *daemon* — this module run as ``python -m stromboli.core.devcluster.daemon`` in
its own session, detached from the terminal — which owns a :class:`ControlPlane` (etcd,
kube-apiserver, kube-controller-manager, kwok, optionally kube-scheduler), installs our CRDs,
creates the kwok nodes, writes the admin kubeconfig and then watches the components until it is
told to stop. The command that started it returns as soon as the daemon reports ready.

Everything lives in one state directory (default ``~/.cache/stromboli/dev-cluster``, or
``$STROMBOLI_CACHE/dev-cluster``):

* ``state.json`` — what the daemon reports: its pid, the phase (``starting``, ``running``,
  ``restarting``, ``failed``), the server URL, the kubeconfig path, every component's pid and
  binary, and how often each was restarted;
* ``daemon.lock`` — held (``flock``) by the daemon for as long as it lives, so liveness does
  not depend on a pid that the kernel may have handed to someone else;
* ``ops.lock`` — serialises ``up`` and ``down``;
* ``daemon.log`` and ``run/`` (certificates, component logs, etcd data).

A component that dies (kube-apiserver killed, kube-controller-manager or kwok crashed) is
started again in place, on the same ports and with the same etcd data, so the cluster and
everything stored in it survive; while that happens the phase is ``restarting``. Only a
component that keeps dying (:data:`RESTART_LIMIT` times within :data:`RESTART_WINDOW` seconds)
or cannot be started again fails the cluster.

Why no process is left behind: the daemon stops its components on SIGTERM; if the daemon is
killed outright, Linux kills the components too (they are started with a parent-death
signal); and ``down`` kills any recorded component that still runs the recorded binary.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stromboli.core.api.crds import build_crds

from .build import build_control_plane
from .client import KubeHTTP
from .controlplane import ADMIN_USER, ControlPlane, node_is_ready

STATE_DIR_ENV = "STROMBOLI_DEV_CLUSTER_DIR"
CACHE_ENV = "STROMBOLI_CACHE"
STATE_FILE = "state.json"

STARTING = "starting"
RUNNING = "running"
RESTARTING = "restarting"
FAILED = "failed"

RESTART_LIMIT = 5
"""Restarts of one component within :data:`RESTART_WINDOW` seconds that mean it crash-loops."""
RESTART_WINDOW = 120.0
WATCH_INTERVAL = 1.0
"""Seconds between the daemon's looks at its components."""


class DevClusterError(RuntimeError):
    """The dev cluster could not be started, reached or stopped; the message says why."""


def default_state_dir() -> Path:
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache" / "stromboli")
    return Path(cache).expanduser() / "dev-cluster"


@dataclass(frozen=True)
class Paths:
    """The files of one dev cluster's state directory."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / STATE_FILE

    @property
    def daemon_lock(self) -> Path:
        return self.root / "daemon.lock"

    @property
    def ops_lock(self) -> Path:
        return self.root / "ops.lock"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def default_kubeconfig(self) -> Path:
        return self.root / "kubeconfig"


# -- state file ---------------------------------------------------------------------------------


def read_state(paths: Paths) -> dict[str, Any] | None:
    try:
        text = paths.state.read_text()
    except FileNotFoundError:
        return None
    try:
        state = json.loads(text)
    except ValueError:
        return None  # half-written by a daemon that died mid-write: treat as absent
    return state if isinstance(state, dict) else None


def write_state(paths: Paths, state: dict[str, Any]) -> None:
    """Atomically replace the state file (readers never see half a document)."""
    paths.root.mkdir(parents=True, exist_ok=True)
    tmp = paths.state.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, paths.state)


def remove_state(paths: Paths) -> None:
    paths.state.unlink(missing_ok=True)
    paths.state.with_suffix(".tmp").unlink(missing_ok=True)


# -- processes ----------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    # The state letter follows the parenthesised command name, which may contain spaces.
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def pid_runs(pid: int, executable: str) -> bool:
    """Whether ``pid`` is alive and was started from ``executable`` (guards against reuse)."""
    if not pid_alive(pid):
        return False
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
    except OSError:
        return False
    return argv0 == executable


def daemon_alive(paths: Paths) -> bool:
    """Whether some daemon holds this state directory's lock."""
    if not paths.daemon_lock.exists():
        return False
    fd = os.open(paths.daemon_lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def ops_lock(paths: Paths) -> Iterator[None]:
    """Serialise ``up`` and ``down`` on one state directory."""
    paths.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.ops_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def kubeconfig_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


# -- the daemon ---------------------------------------------------------------------------------


class CrashLoopError(RuntimeError):
    """A component died too often to be worth starting again."""


class RestartBudget:
    """How often each component may be restarted: :data:`RESTART_LIMIT` times in any
    :data:`RESTART_WINDOW` seconds; one more is a crash loop, and the cluster fails."""

    def __init__(
        self,
        limit: int = RESTART_LIMIT,
        window: float = RESTART_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        self.times: dict[str, list[float]] = {}
        self.total: dict[str, int] = {}

    def spend(self, name: str) -> None:
        """Count a restart of ``name``; raises :class:`CrashLoopError` past the budget."""
        now = self.clock()
        recent = [t for t in self.times.get(name, ()) if now - t < self.window]
        if len(recent) >= self.limit:
            raise CrashLoopError(
                f"{name} died {len(recent) + 1} times within {self.window:.0f}s; not starting "
                "it again (see its log under run/logs/)"
            )
        self.times[name] = [*recent, now]
        self.total[name] = self.total.get(name, 0) + 1


class _Shutdown(BaseException):
    """Raised from the SIGTERM/SIGINT handler to unwind whatever the daemon is doing."""


def _on_signal(signum: int, _frame: object) -> None:
    # Further signals must not interrupt the cleanup this one starts.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise _Shutdown(signal.Signals(signum).name)


def serve(args: argparse.Namespace) -> int:
    """Run the cluster until SIGTERM; the state file says how far it got."""
    paths = Paths(Path(args.state_dir))
    paths.root.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(paths.daemon_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"another dev-cluster daemon already owns {paths.root}", file=sys.stderr)
        return 2

    kubeconfig = Path(args.kubeconfig).resolve()
    state: dict[str, Any] = {
        "pid": os.getpid(),
        "phase": STARTING,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "nodes": args.nodes,
        "kubeconfig": str(kubeconfig),
        "run_dir": str(paths.run_dir),
        "log": str(paths.log),
        "kube_scheduler": args.scheduler,
        "components": {},
    }
    write_state(paths, state)
    # A daemon that was killed outright never removed its etcd data: start from nothing.
    # Component logs of earlier runs go too, so they do not grow without end.
    shutil.rmtree(paths.run_dir / "etcd", ignore_errors=True)
    shutil.rmtree(paths.run_dir / "logs", ignore_errors=True)

    def record_components() -> None:
        state["components"] = {
            name: {"pid": comp.pid, "argv0": comp.argv[0]}
            for name, comp in cp.components.items()
            if comp.pid is not None
        }
        write_state(paths, state)

    cp = ControlPlane(
        args.bin_dir,
        run_dir=paths.run_dir,
        nodes=0,
        node_cpu=args.node_cpu,
        node_memory=args.node_memory,
        start_scheduler=args.scheduler,
    )
    rc = 0
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    try:
        cp.start()
        state["server"] = cp.server_url
        state["kube_version"] = cp.kube_version
        record_components()
        cp.apply_manifests(build_crds())
        cp.add_nodes(args.nodes)
        cp.write_kubeconfig(kubeconfig, keypair=cp.admin, user=ADMIN_USER)
        state["kubeconfig_sha256"] = kubeconfig_digest(kubeconfig)
        state["phase"] = RUNNING
        record_components()
        print(f"dev cluster running at {cp.server_url}", flush=True)
        budget = RestartBudget()
        while True:
            time.sleep(WATCH_INTERVAL)
            dead = cp.dead_components()
            if dead:
                _restart(cp, dead, budget, state, record_components)
    except _Shutdown as why:
        print(f"stopping on {why}", flush=True)
    except Exception as err:  # report any failure through the state file, then clean up
        print(f"dev cluster failed: {err}", file=sys.stderr, flush=True)
        state["phase"] = FAILED
        state["error"] = f"{type(err).__name__}: {err}"
        rc = 1
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        cp.stop()
        if rc:
            state["components"] = {}
            write_state(paths, state)  # kept so that `up`/`status` can say what went wrong
        else:
            remove_state(paths)
        os.close(lock_fd)
    return rc


def _restart(
    cp: ControlPlane,
    dead: list[str],
    budget: RestartBudget,
    state: dict[str, Any],
    record_components: Callable[[], None],
) -> None:
    """Start the dead components again, in start order, reporting ``restarting`` meanwhile."""
    for name in dead:
        budget.spend(name)
    exits = {name: cp.components[name].proc for name in dead}
    codes = {name: proc.returncode if proc else None for name, proc in exits.items()}
    print(f"{', '.join(f'{n} (exit {c})' for n, c in codes.items())} died; restarting", flush=True)
    state["phase"] = RESTARTING
    state["restarting"] = dead
    record_components()
    for name in dead:
        cp.restart(name)
        print(f"{name} restarted", flush=True)
    state["phase"] = RUNNING
    state.pop("restarting", None)
    state["restarts"] = dict(budget.total)
    record_components()


# -- what the CLI calls -------------------------------------------------------------------------


@dataclass(frozen=True)
class UpResult:
    kubeconfig: Path
    server: str
    already_running: bool


def _log_tail(paths: Paths, lines: int = 30) -> str:
    try:
        return "\n".join(paths.log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no daemon log>"


def up(
    paths: Paths,
    *,
    nodes: int,
    kubeconfig: Path | None,
    kube_scheduler: bool,
    node_cpu: str = "32",
    node_memory: str = "256Gi",
    timeout: float = 300.0,
    echo_build: bool = True,
) -> UpResult:
    """Start the daemon (unless one runs) and wait until the cluster is ready."""
    with ops_lock(paths):
        state = read_state(paths)
        if daemon_alive(paths) and state and state.get("phase") == RESTARTING:
            state = _wait_restarted(paths, timeout)
        if daemon_alive(paths) and state and state.get("phase") == RUNNING:
            return UpResult(Path(state["kubeconfig"]), state.get("server", ""), True)
        if daemon_alive(paths):
            raise DevClusterError(
                f"a dev-cluster daemon (pid {state and state.get('pid')}) owns {paths.root} but "
                "is not ready; run `stromboli dev-cluster down` first"
            )
        if state is not None:
            _reap_leftovers(state)  # a daemon that died: make sure nothing of it remains
            remove_state(paths)

        binaries = build_control_plane(echo=echo_build)
        target = (kubeconfig or paths.default_kubeconfig).expanduser().resolve()
        argv = [
            sys.executable,
            "-m",
            "stromboli.core.devcluster.daemon",
            f"--state-dir={paths.root}",
            f"--bin-dir={binaries.bin_dir}",
            f"--nodes={nodes}",
            f"--node-cpu={node_cpu}",
            f"--node-memory={node_memory}",
            f"--kubeconfig={target}",
        ]
        if kube_scheduler:
            argv.append("--scheduler")
        paths.root.mkdir(parents=True, exist_ok=True)
        with open(paths.log, "wb") as log:  # one log per `up`
            log.write(f"\n=== {time.strftime('%F %T')} {' '.join(argv)}\n".encode())
            log.flush()
            daemon = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # no terminal signals; survives this command
                cwd=paths.root,
            )

        deadline = time.monotonic() + timeout
        while True:
            state = read_state(paths)
            if state and state.get("pid") == daemon.pid:
                if state.get("phase") == RUNNING:
                    # Nothing waits for the daemon: it is adopted by init when we exit.
                    daemon.returncode = 0
                    return UpResult(Path(state["kubeconfig"]), state["server"], False)
                if state.get("phase") == FAILED:
                    daemon.wait(60)
                    remove_state(paths)
                    raise DevClusterError(
                        f"the dev cluster failed to start: {state.get('error')}\n"
                        f"daemon log ({paths.log}):\n{_log_tail(paths)}"
                    )
            if daemon.poll() is not None:
                remove_state(paths)
                raise DevClusterError(
                    f"the dev-cluster daemon exited with status {daemon.returncode} before it "
                    f"was ready; daemon log ({paths.log}):\n{_log_tail(paths)}"
                )
            if time.monotonic() >= deadline:
                _stop_daemon(daemon.pid, read_state(paths) or {}, timeout=30)
                daemon.wait(10)
                remove_state(paths)
                raise DevClusterError(
                    f"the dev cluster was not ready after {timeout:.0f}s and was stopped; "
                    f"daemon log ({paths.log}):\n{_log_tail(paths)}"
                )
            time.sleep(0.2)


def _wait_restarted(paths: Paths, timeout: float) -> dict[str, Any] | None:
    """The state once a running daemon has finished restarting components (or given up)."""
    deadline = time.monotonic() + timeout
    while True:
        state = read_state(paths)
        if not state or state.get("phase") != RESTARTING or not daemon_alive(paths):
            return state
        if time.monotonic() >= deadline:
            raise DevClusterError(
                f"the dev cluster was still restarting {', '.join(state.get('restarting') or ())} "
                f"after {timeout:.0f}s; see {paths.log}"
            )
        time.sleep(0.2)


def _reap_leftovers(state: dict[str, Any]) -> list[str]:
    """Kill recorded components that still run their recorded binary; returns their names."""
    killed = []
    for name, comp in (state.get("components") or {}).items():
        pid, argv0 = comp.get("pid"), comp.get("argv0")
        if isinstance(pid, int) and isinstance(argv0, str) and pid_runs(pid, argv0):
            _kill_group(pid, signal.SIGKILL)
            _wait_gone(pid, 10)
            killed.append(name)
    return killed


def _stop_daemon(pid: int, state: dict[str, Any], timeout: float) -> None:
    if pid_alive(pid):
        _kill_group(pid, signal.SIGTERM)
        if not _wait_gone(pid, timeout):
            _kill_group(pid, signal.SIGKILL)
            _wait_gone(pid, 10)
    _reap_leftovers(state)


def down(paths: Paths, *, timeout: float = 60.0) -> str:
    """Stop the daemon and everything it started; returns what was done, for the user."""
    with ops_lock(paths):
        state = read_state(paths)
        alive = daemon_alive(paths)
        if state is None and not alive:
            return f"no dev cluster is running (state directory {paths.root})"
        pid = (state or {}).get("pid")
        if alive and not isinstance(pid, int):
            raise DevClusterError(
                f"a dev-cluster daemon holds {paths.daemon_lock} but {paths.state} does not "
                "name it; find it with `fuser` and stop it by hand"
            )
        if isinstance(pid, int) and alive:
            _stop_daemon(pid, state or {}, timeout)
            if daemon_alive(paths):
                raise DevClusterError(f"the dev-cluster daemon (pid {pid}) did not stop")
            message = f"dev cluster stopped (daemon pid {pid})"
        else:
            leftovers = _reap_leftovers(state or {})
            message = "removed the state of a dev cluster that was no longer running"
            if leftovers:
                message += f" (killed leftover {', '.join(leftovers)})"
        shutil.rmtree(paths.run_dir / "etcd", ignore_errors=True)
        kubeconfig = Path((state or {}).get("kubeconfig") or paths.default_kubeconfig)
        digest = (state or {}).get("kubeconfig_sha256")
        if digest and kubeconfig_digest(kubeconfig) == digest:
            kubeconfig.unlink()  # ours and unchanged: it points at a server that is gone
        remove_state(paths)
        return message


@dataclass(frozen=True)
class Status:
    running: bool
    message: str
    server: str | None = None
    kubeconfig: Path | None = None
    nodes: int | None = None
    ready_nodes: int | None = None
    restarts: dict[str, int] = dataclasses.field(default_factory=dict)
    """Times each component was started again after it died."""


def status(paths: Paths, *, timeout: float = 5.0) -> Status:
    """Whether the cluster runs and answers, with its server, kubeconfig and node count."""
    state = read_state(paths)
    if not daemon_alive(paths):
        if state and state.get("phase") == FAILED:
            reason = str(state.get("error") or "unknown error").splitlines()[0]
            return Status(False, f"not running: it failed ({reason}; see {paths.log})")
        if state:
            return Status(False, "not running (stale state: run `stromboli dev-cluster down`)")
        return Status(False, "not running")
    restarts = dict((state or {}).get("restarts") or {})
    if state and state.get("phase") == RESTARTING:
        names = ", ".join(state.get("restarting") or ()) or "components"
        return Status(
            False,
            f"restarting {names} (daemon pid {state.get('pid')}); the cluster's data is kept",
            state.get("server"),
            Path(state["kubeconfig"]),
            restarts=restarts,
        )
    if not state or state.get("phase") != RUNNING:
        return Status(False, f"starting (daemon pid {state and state.get('pid')})")
    kubeconfig = Path(state["kubeconfig"])
    try:
        with tempfile.TemporaryDirectory(prefix="stromboli-dev-cluster-") as pem_dir:
            client = client_from_kubeconfig(kubeconfig, Path(pem_dir), timeout=timeout)
            try:
                nodes = client.get("/api/v1/nodes").get("items") or []
            finally:
                client.close()
    except Exception as err:  # the daemon lives but the server does not answer: say so
        return Status(
            False,
            f"the daemon (pid {state['pid']}) runs but the API server does not answer: {err}",
            state.get("server"),
            kubeconfig,
            restarts=restarts,
        )
    return Status(
        True,
        "running",
        state.get("server"),
        kubeconfig,
        len(nodes),
        sum(1 for node in nodes if node_is_ready(node)),
        restarts,
    )


def client_from_kubeconfig(path: Path, pem_dir: Path, *, timeout: float = 30.0) -> KubeHTTP:
    """A :class:`KubeHTTP` for the current context of a kubeconfig with embedded
    certificates (what the dev cluster writes). The PEM files it needs are written into
    ``pem_dir``, which must outlive the client."""

    doc = yaml.safe_load(path.read_text())
    current = doc.get("current-context")
    context = next(c["context"] for c in doc["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    files = {}
    for key, field in (
        ("ca", cluster["certificate-authority-data"]),
        ("cert", user["client-certificate-data"]),
        ("key", user["client-key-data"]),
    ):
        target = pem_dir / f"{key}.pem"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(base64.b64decode(field))
        files[key] = target
    return KubeHTTP(
        cluster["server"],
        ca_file=files["ca"],
        cert_file=files["cert"],
        key_file=files["key"],
        timeout=timeout,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stromboli.core.devcluster.daemon",
        description="The process behind `stromboli dev-cluster up`; not meant to be run by hand.",
    )
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--node-cpu", default="32")
    parser.add_argument("--node-memory", default="256Gi")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler", action="store_true")
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
