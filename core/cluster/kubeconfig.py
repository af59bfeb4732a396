"""Where the API server is and who we are to it: kubeconfig files and in-cluster config.

:class:`KubeConfig` is the small part of a kubeconfig the Kubernetes store needs: one server URL,
how to trust it (CA bundle or ``insecure-skip-tls-verify``) and one credential (client
certificate, bearer token, token file or basic auth). :meth:`KubeConfig.load` finds it the way
``kubectl`` does: an explicit path, else ``$KUBECONFIG`` (a ``:``-separated list, merged with the
first file winning), else ``~/.kube/config``, else the pod's service account.

Credential plugins (``exec``, ``auth-provider``) are refused with a message rather than half
supported: a scheduler that silently runs without credentials fails much later and less clearly.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Self

import yaml

SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG: Final = Path("~/.kube/config")
TOKEN_REREAD_SECONDS: Final = 60.0
"""Projected service-account tokens rotate (hourly by default); re-reading the file once a
minute keeps a long-running scheduler authenticated without watching the file."""


class KubeConfigError(ValueError):
    """The configuration cannot be used; the message says which file and field, and why."""


@dataclass(slots=True)
class KubeConfig:
    """Connection settings for one API server (see the module docstring)."""

    server: str
    ca_data: bytes | None = None
    """PEM bundle to trust; ``None`` means the system trust store."""
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: Path | None = None
    username: str | None = None
    password: str | None = None
    namespace: str = "default"
    source: str = ""
    """Where this came from (a file and context, or ``in-cluster``), for messages."""
    _token_cache: tuple[float, str] | None = field(default=None, repr=False)

    # --- loading ----------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, context: str | None = None) -> Self:
        """Find the configuration as ``kubectl`` does (see the module docstring)."""
        if path is not None:
            return cls.from_files([Path(path)], context)
        env = os.environ.get("KUBECONFIG", "")
        files = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
        if files:
            existing = [p for p in files if p.is_file()]
            if not existing:
                raise KubeConfigError(
                    f"$KUBECONFIG names {env!r} but none of those files exists; "
                    "fix the variable or unset it"
                )
            return cls.from_files(existing, context)
        default = DEFAULT_KUBECONFIG.expanduser()
        if default.is_file():
            return cls.from_files([default], context)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls.in_cluster()
        raise KubeConfigError(
            "no Kubernetes configuration found: pass --kubeconfig, set $KUBECONFIG, create "
            f"{DEFAULT_KUBECONFIG}, or run in a pod with a service account"
        )

    @classmethod
    def in_cluster(cls, sa_dir: Path = SERVICE_ACCOUNT_DIR) -> Self:
        """The pod's service account, as the kubelet mounts it."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise KubeConfigError(
                "not running in a pod: $KUBERNETES_SERVICE_HOST is not set (use a kubeconfig)"
            )
        token_file = sa_dir / "token"
        if not token_file.is_file():
            raise KubeConfigError(
                f"in-cluster config: {token_file} is missing; is automountServiceAccountToken off?"
            )
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # IPv6 literal
        ca_file = sa_dir / "ca.crt"
        ns_file = sa_dir / "namespace"
        return cls(
            server=f"https://{host}:{port}",
            ca_data=ca_file.read_bytes() if ca_file.is_file() else None,
            token_file=token_file,
            namespace=ns_file.read_text().strip() if ns_file.is_file() else "default",
            source="in-cluster service account",
        )

    @classmethod
    def from_files(cls, files: list[Path], context: str | None = None) -> Self:
        """Merge kubeconfig ``files`` (first definition of each name wins) and resolve
        ``context`` (default: the first ``current-context`` set)."""
        clusters: dict[str, tuple[Mapping[str, Any], Path]] = {}
        users: dict[str, tuple[Mapping[str, Any], Path]] = {}
        contexts: dict[str, Mapping[str, Any]] = {}
        current = context
        for path in files:
            doc = _read_yaml(path)
            for name, body in _named(doc, "clusters", "cluster", path):
                clusters.setdefault(name, (body, path.parent))
            for name, body in _named(doc, "users", "user", path):
                users.setdefault(name, (body, path.parent))
            for name, body in _named(doc, "contexts", "context", path):
                contexts.setdefault(name, body)
            if not current:
                current = doc.get("current-context") or None
        where = ", ".join(str(p) for p in files)
        if not current:
            raise KubeConfigError(f"{where}: no current-context set and no context given")
        ctx = contexts.get(current)
        if ctx is None:
            raise KubeConfigError(f"{where}: context {current!r} is not defined")
        cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
        if cluster_name not in clusters:
            raise KubeConfigError(f"{where}: context {current!r} names unknown cluster")
        cluster, cluster_dir = clusters[cluster_name]
        server = cluster.get("server")
        if not server:
            raise KubeConfigError(f"{where}: cluster {cluster_name!r} has no server")
        config = cls(
            server=str(server),
            ca_data=_data_or_file(cluster, "certificate-authority", cluster_dir),
            insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
            tls_server_name=cluster.get("tls-server-name"),
            namespace=ctx.get("namespace") or "default",
            source=f"{where} (context {current})",
        )
        if user_name:
            if user_name not in users:
                raise KubeConfigError(f"{where}: context {current!r} names unknown user")
            user, user_dir = users[user_name]
            config._set_user(user, user_dir, f"{where}: user {user_name!r}")
        return config

    def _set_user(self, user: Mapping[str, Any], base: Path, where: str) -> None:
        for plugin in ("exec", "auth-provider"):
            if user.get(plugin):
                raise KubeConfigError(
                    f"{where} uses an {plugin} credential plugin, which stromboli does not run; "
                    "use a client certificate or a (service-account) token instead"
                )
        self.cert_data = _data_or_file(user, "client-certificate", base)
        self.key_data = _data_or_file(user, "client-key", base)
        if (self.cert_data is None) != (self.key_data is None):
            raise KubeConfigError(f"{where} has a client certificate or key without the other")
        self.token = user.get("token") or None
        token_file = user.get("tokenFile")
        self.token_file = _resolve(base, token_file) if token_file else None
        self.username = user.get("username") or None
        self.password = user.get("password") or None

    def with_server(self, server: str) -> KubeConfig:
        """A copy talking to ``server`` instead (``--master``), with the same credentials;
        a bare ``host:port`` means HTTPS, as client-go reads it."""
        if not server:
            raise KubeConfigError("the server URL is empty")
        if "://" not in server:
            server = f"https://{server}"
        return replace(self, server=server, source=f"{self.source} (server {server})")

    # --- use ---------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The client TLS context (``False`` for plain-HTTP servers, which tests never use)."""
        if self.server.startswith("http://"):
            return False
        ctx = ssl.create_default_context(
            cadata=self.ca_data.decode() if self.ca_data is not None else None
        )
        if self.ca_data is None:
            ctx.load_default_certs()
        if self.insecure_skip_tls_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_data is not None and self.key_data is not None:
            _load_cert_chain(ctx, self.cert_data, self.key_data)
        return ctx

    def auth_headers(self, monotonic: Callable[[], float] = time.monotonic) -> dict[str, str]:
        """``Authorization`` for the next request: a token (re-read from its file once a
        minute), basic auth, or nothing when the client certificate does the work."""
        token = self.token
        if self.token_file is not None:
            now = monotonic()
            cached = self._token_cache
            if cached is None or now - cached[0] >= TOKEN_REREAD_SECONDS:
                try:
                    cached = (now, self.token_file.read_text().strip())
                except OSError as err:
                    if cached is None:
                        raise KubeConfigError(f"cannot read token file: {err}") from None
                    # Keep the previous token: a rotation in progress must not log us out.
                self._token_cache = cached
            token = cached[1]
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.username is not None and self.password is not None:
            basic = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            return {"Authorization": f"Basic {basic}"}
        return {}


def _read_yaml(path: Path) -> Mapping[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {err}") from None
    except yaml.YAMLError as err:
        raise KubeConfigError(f"kubeconfig {path} is not valid YAML: {err}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeConfigError(f"kubeconfig {path} must be a mapping, got {type(doc).__name__}")
    return doc


def _named(
    doc: Mapping[str, Any], section: str, body_key: str, path: Path
) -> list[tuple[str, Mapping[str, Any]]]:
    out = []
    for entry in doc.get(section) or ():
        if not isinstance(entry, dict) or "name" not in entry:
            raise KubeConfigError(f"kubeconfig {path}: every entry of {section} needs a name")
        out.append((str(entry["name"]), entry.get(body_key) or {}))
    return out


def _resolve(base: Path, value: str) -> Path:
    """Relative paths in a kubeconfig are relative to the file, as kubectl reads them."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _data_or_file(section: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            raise KubeConfigError(f"{key}-data is not valid base64") from None
    file = section.get(key)
    if file:
        path = _resolve(base, str(file))
        try:
            return path.read_bytes()
        except OSError as err:
            raise KubeConfigError(f"cannot read {key} {path}: {err}") from None
    return None


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """``ssl`` only loads a certificate chain from files: write both to a private temporary
    directory, load them, and remove them at once."""
    with tempfile.TemporaryDirectory(prefix="stromboli-tls-") as tmp:
        cert_path, key_path = Path(tmp, "client.crt"), Path(tmp, "client.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        try:
            ctx.load_cert_chain(str(cert_path), str(key_path))
        except ssl.SSLError as err:
            raise KubeConfigError(f"the client certificate or key is not usable: {err}") from None
