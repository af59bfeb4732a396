"""``exec`` credential plugins: the program a kubeconfig names prints an ``ExecCredential``.

This is how EKS (``aws eks get-token``), GKE (``gke-gcloud-auth-plugin``), AKS (``kubelogin``)
and OIDC helpers hand out credentials. The plugin's settings (command, args, env) are read by
the ``kubernetes`` package's ``ExecProvider``; running it is ours, because a scheduler must not
hang on a plugin that never answers (the package waits forever), must say which kubeconfig
user's plugin failed and why (the package logs and carries on without credentials), and must
run it again when the credential expires or the API server stops accepting it.

Protocol (``client.authentication.k8s.io/v1`` and ``v1beta1``): the plugin gets
``KUBERNETES_EXEC_INFO`` (an ``ExecCredential`` with ``spec.interactive`` and, when the
kubeconfig sets ``provideClusterInfo``, ``spec.cluster``) and prints an ``ExecCredential`` whose
``status`` has a ``token`` or ``clientCertificateData`` with ``clientKeyData`` (PEM), and
optionally ``expirationTimestamp`` (RFC 3339).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

API_VERSIONS: Final = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES: Final = ("Never", "IfAvailable", "Always")
PLUGIN_TIMEOUT: Final = 60.0
"""Seconds a plugin may take; one that fetches a token over the network takes a second or two."""
MAX_OUTPUT: Final = 1 << 20
EXEC_EXTENSION: Final = "client.authentication.k8s.io/exec"
"""The cluster extension whose value a plugin gets as ``spec.cluster.config``."""
EXPIRY_SKEW: Final = 10.0
"""A credential this close to its expiry is renewed before use, so no request races it."""


class ExecCredentialError(ValueError):
    """The plugin could not be run or printed something unusable; the message names the
    kubeconfig user and the field."""


@dataclass(frozen=True, slots=True)
class Credential:
    """What one run of the plugin gave."""

    token: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    expires_at: float | None = None
    """Unix time; ``None`` means until the API server refuses it."""


def parse_timestamp(value: Any, where: str) -> float:
    """RFC 3339 (``2026-01-02T03:04:05Z``, fractions and offsets allowed) as Unix time."""
    if not isinstance(value, str) or not value:
        raise ExecCredentialError(f"{where}: status.expirationTimestamp must be an RFC 3339 time")
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise ExecCredentialError(
            f"{where}: status.expirationTimestamp {value!r} is not an RFC 3339 time"
        ) from None
    if parsed.tzinfo is None:
        raise ExecCredentialError(
            f"{where}: status.expirationTimestamp {value!r} has no time zone (add Z)"
        )
    return parsed.timestamp()


def parse_exec_credential(output: bytes | str, api_version: str, where: str) -> Credential:
    """The credential in a plugin's standard output (see the module docstring)."""
    try:
        doc = json.loads(output)
    except ValueError as err:
        raise ExecCredentialError(f"{where}: the plugin's output is not JSON ({err})") from None
    if not isinstance(doc, dict):
        raise ExecCredentialError(f"{where}: the plugin's output must be an ExecCredential object")
    if doc.get("kind") != "ExecCredential":
        raise ExecCredentialError(
            f"{where}: the plugin printed kind {doc.get('kind')!r}, not ExecCredential"
        )
    if doc.get("apiVersion") != api_version:
        raise ExecCredentialError(
            f"{where}: the plugin answered apiVersion {doc.get('apiVersion')!r} but the "
            f"kubeconfig asks for {api_version!r}"
        )
    status = doc.get("status")
    if not isinstance(status, dict):
        raise ExecCredentialError(f"{where}: the plugin's ExecCredential has no status")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    for field, value in (("token", token), ("clientCertificateData", cert), ("clientKeyData", key)):
        if value is not None and not isinstance(value, str):
            raise ExecCredentialError(f"{where}: status.{field} must be a string")
    if bool(cert) != bool(key):
        missing = "clientKeyData" if cert else "clientCertificateData"
        raise ExecCredentialError(f"{where}: status.{missing} is missing (both or neither)")
    if not token and not cert:
        raise ExecCredentialError(
            f"{where}: status has neither token nor clientCertificateData/clientKeyData"
        )
    expiry = status.get("expirationTimestamp")
    return Credential(
        token=token,
        cert_data=cert.encode() if cert else None,
        key_data=key.encode() if key else None,
        expires_at=parse_timestamp(expiry, where) if expiry is not None else None,
    )


@dataclass(frozen=True, slots=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` section, resolved."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    """Only the variables the kubeconfig adds; the rest is this process's environment."""
    api_version: str
    install_hint: str | None = None
    cluster_info: Mapping[str, Any] | None = None
    """``spec.cluster`` for the plugin, when the kubeconfig sets ``provideClusterInfo``."""
    where: str = "exec plugin"

    @classmethod
    def from_kubeconfig(
        cls,
        section: Mapping[str, Any],
        base: Path,
        where: str,
        cluster: Mapping[str, Any] | None = None,
    ) -> ExecPlugin:
        """Read ``section`` (the ``users[].user.exec`` mapping of a kubeconfig loaded from a
        file in ``base``) through the ``kubernetes`` package's ``ExecProvider``."""
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.config.exec_provider import ExecProvider
        from kubernetes.config.kube_config import ConfigNode

        where = f"{where}: exec"
        if not isinstance(section, Mapping):
            raise ExecCredentialError(f"{where} must be a mapping")
        api_version = section.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise ExecCredentialError(
                f"{where}.apiVersion is {api_version!r}; use one of {', '.join(API_VERSIONS)}"
            )
        mode = section.get("interactiveMode")
        if mode is not None and mode not in INTERACTIVE_MODES:
            raise ExecCredentialError(
                f"{where}.interactiveMode is {mode!r}; use one of {', '.join(INTERACTIVE_MODES)}"
            )
        if mode == "Always":
            raise ExecCredentialError(
                f"{where}.interactiveMode is Always, but stromboli runs plugins without a "
                "terminal; log in first (so the plugin can answer without asking) or use Never"
            )
        if not isinstance(section.get("args") or [], list):
            raise ExecCredentialError(f"{where}.args must be a list of strings")
        for i, item in enumerate(section.get("env") or []):
            if not isinstance(item, Mapping) or "name" not in item or "value" not in item:
                raise ExecCredentialError(f"{where}.env[{i}] needs a name and a value")
        try:
            provider = ExecProvider(ConfigNode("exec", dict(section)), str(base))
        except (ConfigException, TypeError, KeyError) as err:
            raise ExecCredentialError(f"{where}: {err}") from None
        argv = [str(arg) for arg in provider.args]
        command = Path(argv[0]).expanduser()
        if os.sep in argv[0] and not command.is_absolute():
            command = base / command  # relative to the kubeconfig, as kubectl resolves it
        argv[0] = str(command) if os.sep in argv[0] else argv[0]
        added = {k: str(v) for k, v in provider.env.items() if os.environ.get(k) != v}
        return cls(
            argv=tuple(argv),
            env=added,
            api_version=str(api_version),
            install_hint=section.get("installHint") or None,
            cluster_info=cluster if section.get("provideClusterInfo") else None,
            where=where,
        )

    def exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster_info is not None:
            spec["cluster"] = dict(self.cluster_info)
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})

    def run(self, timeout: float = PLUGIN_TIMEOUT) -> Credential:
        """Run the plugin once and read its credential."""
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": self.exec_info()}
        try:
            proc = subprocess.run(
                self.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError:
            hint = f" ({self.install_hint.strip()})" if self.install_hint else ""
            raise ExecCredentialError(
                f"{self.where}.command {self.argv[0]!r} was not found{hint}"
            ) from None
        except PermissionError:
            raise ExecCredentialError(
                f"{self.where}.command {self.argv[0]!r} is not executable"
            ) from None
        except subprocess.TimeoutExpired:
            raise ExecCredentialError(
                f"{self.where}.command {self.argv[0]!r} did not answer within {timeout:g}s"
            ) from None
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()[-2000:]
            raise ExecCredentialError(
                f"{self.where}.command {self.argv[0]!r} exited with status {proc.returncode}"
                + (f": {err}" if err else "")
            )
        if len(proc.stdout) > MAX_OUTPUT:
            raise ExecCredentialError(
                f"{self.where}.command {self.argv[0]!r} printed more than {MAX_OUTPUT} bytes"
            )
        return parse_exec_credential(proc.stdout, self.api_version, self.where)


class ExecCredentialSource:
    """The plugin's current credential: kept until it nears its expiry or the API server
    refuses it, then fetched again (one run at a time, whichever thread asks)."""

    def __init__(
        self,
        plugin: ExecPlugin,
        wall_clock: Callable[[], float] = time.time,
        runner: Callable[[ExecPlugin], Credential] | None = None,
    ) -> None:
        self.plugin = plugin
        self._clock = wall_clock
        self._runner = runner or (lambda p: p.run())
        self._lock = threading.Lock()
        self._current: Credential | None = None
        self.runs = 0

    def stale(self) -> bool:
        """Whether the next use must run the plugin first."""
        current = self._current
        if current is None:
            return True
        return current.expires_at is not None and current.expires_at - EXPIRY_SKEW <= self._clock()

    def get(self) -> Credential:
        """The credential to use now (runs the plugin when there is none or it is expiring)."""
        with self._lock:
            if self.stale():
                self._fetch()
            assert self._current is not None
            return self._current

    def refresh(self, rejected: Credential | None = None) -> Credential:
        """Run the plugin again because the API server refused ``rejected`` (another caller may
        already have replaced it: then that newer credential is returned without a run)."""
        with self._lock:
            if self._current is None or rejected is None or self._current is rejected:
                self._fetch()
            assert self._current is not None
            return self._current

    def _fetch(self) -> None:
        self._current = self._runner(self.plugin)
        self.runs += 1


def cluster_info(cluster: Mapping[str, Any], ca_data: bytes | None) -> dict[str, Any]:
    """``spec.cluster`` as a plugin receives it (``provideClusterInfo``)."""
    info: dict[str, Any] = {"server": cluster.get("server")}
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key) is not None:
            info[key] = cluster[key]
    if ca_data is not None:
        info["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, Mapping) and extension.get("name") == EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info
