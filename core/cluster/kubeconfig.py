"""Where the API server is and who we are to it: kubeconfig files and in-cluster config.

:class:`KubeConfig` is what the Kubernetes store's aiohttp transport needs: one server URL, how
to trust it (CA bundle, ``insecure-skip-tls-verify``, ``tls-server-name``) and one credential
(client certificate, bearer token, token file, basic auth, an ``exec`` plugin or an
``auth-provider``). The files are read with the ``kubernetes`` package's own kubeconfig code
(``kubernetes.config``: merging, contexts, paths relative to each file, ``exec`` settings,
auth providers, in-cluster config), so what ``kubectl`` accepts is accepted here; the requests
themselves go through our aiohttp client, which is several times faster than the package's.

:meth:`KubeConfig.load` finds the configuration the way ``kubectl`` does: an explicit path,
else ``$KUBECONFIG`` (a ``:``-separated list, merged with the first definition of each name and
the first ``current-context`` winning), else ``~/.kube/config``, else the pod's service account.

Credentials that expire are renewed: an ``exec`` plugin runs again when its
``expirationTimestamp`` nears or when the API server answers 401 (see
:mod:`~stromboli.core.cluster.execcredential`); an auth provider's token is refreshed by the
package's own hook; a token file is re-read once a minute.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Self

import yaml

from stromboli.core.cluster.execcredential import (
    Credential,
    ExecCredentialError,
    ExecCredentialSource,
    ExecPlugin,
    cluster_info,
)

SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG: Final = Path("~/.kube/config")
TOKEN_REREAD_SECONDS: Final = 60.0
"""Projected service-account tokens rotate (hourly by default); re-reading the file once a
minute keeps a long-running scheduler authenticated without watching the file."""
AUTH_PROVIDERS: Final = ("gcp", "azure", "oidc")
"""The ``auth-provider`` names the ``kubernetes`` package can run (kubectl itself has replaced
them with ``exec`` plugins)."""


class KubeConfigError(ValueError):
    """The configuration cannot be used; the message says which file and field, and why."""


class AuthProviderToken:
    """An ``auth-provider`` (gcp, azure, oidc) token, kept fresh by the ``kubernetes``
    package's refresh hook, consulted at most once a minute and after a 401."""

    def __init__(self, configuration: Any, where: str) -> None:
        self._configuration = configuration
        self._where = where
        self._lock = threading.Lock()
        self._checked_at: float | None = None

    def header(self, monotonic: Callable[[], float] = time.monotonic) -> str:
        now = monotonic()
        with self._lock:
            if self._checked_at is None or now - self._checked_at >= TOKEN_REREAD_SECONDS:
                self._run_hook()
                self._checked_at = now
            value = self._configuration.api_key.get("authorization")
        if not value:
            raise KubeConfigError(f"{self._where}: the auth-provider gave no token")
        return str(value)

    def refresh(self) -> None:
        with self._lock:
            self._run_hook()

    def _run_hook(self) -> None:
        hook = self._configuration.refresh_api_key_hook
        if hook is None:
            return
        try:
            hook(self._configuration)
        except Exception as err:
            # The package's providers fail in many ways (network, missing libraries, expired
            # refresh tokens); each becomes one error naming the user.
            raise KubeConfigError(
                f"{self._where}: refreshing the auth-provider token failed: {err}"
            ) from None


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
    exec_credential: ExecCredentialSource | None = None
    """The user's ``exec`` plugin, run when its credential is missing or expiring."""
    auth_provider: AuthProviderToken | None = None
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
    def in_cluster(cls, sa_dir: Path | None = None) -> Self:
        """The pod's service account, as the kubelet mounts it in ``sa_dir`` (default
        :data:`SERVICE_ACCOUNT_DIR`), read by the ``kubernetes`` package's in-cluster loader;
        the token file is then re-read once a minute."""
        from kubernetes.client import Configuration
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.config.incluster_config import InClusterConfigLoader

        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise KubeConfigError(
                "not running in a pod: $KUBERNETES_SERVICE_HOST is not set (use a kubeconfig)"
            )
        sa_dir = sa_dir or SERVICE_ACCOUNT_DIR
        token_file, ca_file, ns_file = sa_dir / "token", sa_dir / "ca.crt", sa_dir / "namespace"
        if not token_file.is_file():
            raise KubeConfigError(
                f"in-cluster config: {token_file} is missing; is automountServiceAccountToken off?"
            )
        environ = {"KUBERNETES_SERVICE_PORT": "443", **os.environ}
        configuration = Configuration()
        try:
            InClusterConfigLoader(
                token_filename=str(token_file),
                cert_filename=str(ca_file),
                try_refresh_token=False,
                environ=environ,
            ).load_and_set(configuration)
        except ConfigException as err:
            raise KubeConfigError(f"in-cluster config ({sa_dir}): {err}") from None
        return cls(
            server=str(configuration.host),
            ca_data=ca_file.read_bytes(),
            token_file=token_file,
            namespace=ns_file.read_text().strip() if ns_file.is_file() else "default",
            source="in-cluster service account",
        )

    @classmethod
    def from_files(cls, files: list[Path], context: str | None = None) -> Self:
        """Merge kubeconfig ``files`` (first definition of each name wins) and resolve
        ``context`` (default: the first ``current-context`` set)."""
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

        where = ", ".join(str(p) for p in files)
        # Checked first so that an unreadable file is named (the package would fail on it
        # with an AttributeError); empty files count as empty configurations, as for kubectl.
        docs = [(path, _read_yaml(path)) for path in files]
        used = [str(path) for path, doc in docs if doc]
        if not used:
            raise KubeConfigError(f"{where}: no clusters, users or contexts defined")
        try:
            merger = KubeConfigMerger(os.pathsep.join(used))
        except ConfigException as err:
            raise KubeConfigError(f"{where}: {err}") from None
        current = context or next(
            (doc["current-context"] for _, doc in docs if doc.get("current-context")), None
        )
        if not current:
            raise KubeConfigError(f"{where}: no current-context set and no context given")
        merged = merger.config
        try:
            ctx_node = merged["contexts"].get_with_name(current, safe=True)
        except ConfigException as err:
            raise KubeConfigError(f"{where}: {err}") from None
        if ctx_node is None:
            raise KubeConfigError(f"{where}: context {current!r} is not defined")
        ctx = ctx_node.value.get("context") or {}
        if not isinstance(ctx, Mapping):
            raise KubeConfigError(f"{where}: context {current!r} must be a mapping")
        cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
        cluster_node = _entry(merged, "clusters", cluster_name, where)
        if cluster_node is None:
            raise KubeConfigError(
                f"{where}: context {current!r} names unknown cluster {cluster_name!r}"
            )
        cluster = _body(cluster_node, "cluster", f"{where}: cluster {cluster_name!r}")
        cluster_where = f"{cluster_node.path}: cluster {cluster_name!r}"
        server = cluster.get("server")
        if not server:
            raise KubeConfigError(f"{cluster_where} has no server")
        cluster_dir = Path(cluster_node.path).resolve().parent
        config = cls(
            server=str(server).rstrip("/"),
            ca_data=_data_or_file(cluster, "certificate-authority", cluster_dir, cluster_where),
            insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify")),
            tls_server_name=cluster.get("tls-server-name") or None,
            namespace=ctx.get("namespace") or "default",
            source=f"{where} (context {current})",
        )
        if user_name:
            user_node = _entry(merged, "users", user_name, where)
            if user_node is None:
                raise KubeConfigError(
                    f"{where}: context {current!r} names unknown user {user_name!r}"
                )
            user_where = f"{user_node.path}: user {user_name!r}"
            user = _body(user_node, "user", user_where)
            user_dir = Path(user_node.path).resolve().parent
            config._set_user(user, user_dir, user_where, cluster)
            if user.get("auth-provider"):
                try:
                    loader = KubeConfigLoader(
                        config_dict=merged, active_context=current, config_base_path=None
                    )
                except (ConfigException, TypeError, AttributeError, KeyError) as err:
                    raise KubeConfigError(f"{where}: {err}") from None
                config._set_auth_provider(loader, user, user_where)
        return config

    def _set_user(
        self, user: Mapping[str, Any], base: Path, where: str, cluster: Mapping[str, Any]
    ) -> None:
        self.cert_data = _data_or_file(user, "client-certificate", base, where)
        self.key_data = _data_or_file(user, "client-key", base, where)
        if (self.cert_data is None) != (self.key_data is None):
            raise KubeConfigError(f"{where} has a client certificate or key without the other")
        token = user.get("token")
        if token is not None and not isinstance(token, str):
            raise KubeConfigError(f"{where}: token must be a string")
        self.token = token or None
        token_file = _string(user, "tokenFile", where)
        if token_file and not self.token:
            self.token_file = _resolve(base, token_file)
            if not _is_file(self.token_file):
                raise KubeConfigError(f"{where}: tokenFile {self.token_file} does not exist")
        self.username = _string(user, "username", where)
        self.password = _string(user, "password", where)
        exec_section = user.get("exec")
        if exec_section:
            ca = self.ca_data
            try:
                plugin = ExecPlugin.from_kubeconfig(
                    exec_section, base, where, cluster_info(cluster, ca)
                )
            except ExecCredentialError as err:
                raise KubeConfigError(str(err)) from None
            self.exec_credential = ExecCredentialSource(plugin)

    def _set_auth_provider(self, loader: Any, user: Mapping[str, Any], where: str) -> None:
        from kubernetes.client import Configuration

        provider = user["auth-provider"]
        name = provider.get("name") if isinstance(provider, Mapping) else None
        if name not in AUTH_PROVIDERS:
            raise KubeConfigError(
                f"{where}: auth-provider.name {name!r} is not one the kubernetes package "
                f"supports ({', '.join(AUTH_PROVIDERS)}); use an exec credential plugin"
            )
        configuration = Configuration()
        try:
            loader.load_and_set(configuration)
        except Exception as err:
            # Each provider has its own failures (network, libraries, expired refresh tokens).
            raise KubeConfigError(f"{where}: auth-provider {name!r} failed: {err}") from None
        if not configuration.api_key.get("authorization"):
            raise KubeConfigError(
                f"{where}: auth-provider {name!r} gave no token (is its config complete?)"
            )
        self.auth_provider = AuthProviderToken(configuration, where)

    def with_server(self, server: str) -> KubeConfig:
        """A copy talking to ``server`` instead (``--master``), with the same credentials;
        a bare ``host:port`` means HTTPS, as client-go reads it."""
        if not server:
            raise KubeConfigError("the server URL is empty")
        if "://" not in server:
            server = f"https://{server}"
        return replace(self, server=server, source=f"{self.source} (server {server})")

    # --- use ---------------------------------------------------------------------------------

    def client_certificate(self) -> tuple[bytes, bytes] | None:
        """The client certificate and key to present: the kubeconfig's, else the exec
        plugin's (running it if needed)."""
        if self.cert_data is not None and self.key_data is not None:
            return self.cert_data, self.key_data
        if self.exec_credential is not None:
            credential = self._exec_credential()
            if credential.cert_data is not None and credential.key_data is not None:
                return credential.cert_data, credential.key_data
        return None

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
        pair = self.client_certificate()
        if pair is not None:
            _load_cert_chain(ctx, *pair)
        return ctx

    def auth_headers(self, monotonic: Callable[[], float] = time.monotonic) -> dict[str, str]:
        """``Authorization`` for the next request: a token (re-read from its file once a
        minute, or the exec plugin's or auth provider's current one), basic auth, or nothing
        when the client certificate does the work."""
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
        if self.exec_credential is not None:
            credential = self._exec_credential()
            if credential.token:
                return {"Authorization": f"Bearer {credential.token}"}
            return {}
        if self.auth_provider is not None:
            header = self.auth_provider.header(monotonic)
            kind, _, value = header.partition(" ")
            return {"Authorization": f"{kind.capitalize()} {value}" if value else header}
        if self.username is not None and self.password is not None:
            basic = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            return {"Authorization": f"Basic {basic}"}
        return {}

    @property
    def renewable(self) -> bool:
        """Whether a 401 may be cured by fetching a new credential."""
        return self.exec_credential is not None or self.auth_provider is not None

    def credential_stale(self) -> bool:
        """Whether using the credential now would first run the exec plugin (so an event
        loop can run it in a thread instead)."""
        return self.exec_credential is not None and self.exec_credential.stale()

    def prepare_credential(self) -> None:
        """Fetch the credential now if it is missing or expiring (blocking: runs the plugin)."""
        if self.exec_credential is not None:
            self._exec_credential()

    def renew_credential(self, rejected: Credential | None = None) -> None:
        """The API server refused the current credential: fetch a new one (blocking)."""
        try:
            if self.exec_credential is not None:
                self.exec_credential.refresh(rejected)
            elif self.auth_provider is not None:
                self.auth_provider.refresh()
        except ExecCredentialError as err:
            raise KubeConfigError(str(err)) from None

    def current_exec_credential(self) -> Credential | None:
        """The exec plugin's credential in use (``None`` without a plugin), for
        :meth:`renew_credential` to tell a stale refusal from a fresh one."""
        return self._exec_credential() if self.exec_credential is not None else None

    def credential_expiry(self) -> float | None:
        """Unix time the credential in use expires (exec plugins that say so), else ``None``."""
        credential = self.current_exec_credential()
        return credential.expires_at if credential is not None else None

    def _exec_credential(self) -> Credential:
        assert self.exec_credential is not None
        try:
            return self.exec_credential.get()
        except ExecCredentialError as err:
            raise KubeConfigError(str(err)) from None


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
    for section in ("clusters", "users", "contexts"):
        entries = doc.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise KubeConfigError(f"kubeconfig {path}: {section} must be a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise KubeConfigError(
                    f"kubeconfig {path}: {section}[{i}] needs a name (every entry of "
                    f"{section} is a mapping with a name)"
                )
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        raise KubeConfigError(f"kubeconfig {path}: current-context must be a string")
    return doc


def _entry(merged: Any, section: str, name: Any, where: str) -> Any:
    """The merged ``section`` entry called ``name`` (a ``ConfigNode`` that remembers its file)."""
    from kubernetes.config.config_exception import ConfigException

    if not isinstance(name, str) or not name:
        return None
    try:
        return merged[section].get_with_name(name, safe=True)
    except ConfigException as err:
        raise KubeConfigError(f"{where}: {err}") from None
    except (TypeError, AttributeError):
        raise KubeConfigError(f"{where}: every entry of {section} must be a mapping") from None


def _body(node: Any, key: str, where: str) -> Mapping[str, Any]:
    body = node.value.get(key) or {}
    if not isinstance(body, Mapping):
        raise KubeConfigError(f"{where}: {key} must be a mapping")
    return body


def _string(section: Mapping[str, Any], key: str, where: str) -> str | None:
    value = section.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise KubeConfigError(f"{where}: {key} must be a string")
    return value


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long, or not valid for the file system
        return False


def _resolve(base: Path, value: str) -> Path:
    """Relative paths in a kubeconfig are relative to the file, as kubectl reads them."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _data_or_file(section: Mapping[str, Any], key: str, base: Path, where: str) -> bytes | None:
    """``KEY-data`` (base64) or the file ``KEY`` names, read through the ``kubernetes``
    package's ``FileOrData`` (data wins, paths relative to the kubeconfig), without the
    temporary files its ``as_file`` would write (they would hold private keys)."""
    from kubernetes.config.kube_config import FileOrData

    data = section.get(f"{key}-data")
    if data:
        if not isinstance(data, str):
            raise KubeConfigError(f"{where}: {key}-data must be a base64 string")
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise KubeConfigError(f"{where}: {key}-data is not valid base64") from None
    if _string(section, key, where) is None:
        return None
    try:
        encoded = FileOrData(dict(section), key, file_base_path=str(base)).as_data()
    except OSError as err:
        raise KubeConfigError(f"{where}: cannot read {key} ({err})") from None
    except UnicodeDecodeError:
        raise KubeConfigError(f"{where}: {key} {section[key]!r} is not a PEM text file") from None
    return base64.b64decode(encoded) if encoded else None


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
