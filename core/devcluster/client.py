"""A small synchronous Kubernetes HTTP client for tests: plain JSON over TLS, no models.

It speaks to one API server with a client certificate, keeps one connection alive per thread,
and knows just enough discovery to turn ``apiVersion``/``kind`` into a URL, which is what
:meth:`KubeHTTP.apply` (server-side apply) and :func:`load_manifests` need.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

FIELD_MANAGER = "stromboli-devcluster"

Obj = dict[str, Any]


class KubeAPIError(RuntimeError):
    """A non-2xx answer from the API server."""

    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.body = body
        try:
            self.status_obj: Obj | None = json.loads(body)
        except ValueError:
            self.status_obj = None
        reason = ""
        if isinstance(self.status_obj, dict):
            reason = self.status_obj.get("message") or self.status_obj.get("reason") or ""
        if not reason:
            reason = body[:500].decode("utf-8", "replace")
        super().__init__(f"{method} {path} -> HTTP {status}: {reason}")

    @property
    def reason(self) -> str:
        if isinstance(self.status_obj, dict):
            return str(self.status_obj.get("reason", ""))
        return ""


@dataclass(frozen=True)
class ResourceInfo:
    """Where a kind lives in the API."""

    group_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{urllib.parse.quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{urllib.parse.quote(name, safe='')}"
        return base


class KubeHTTP:
    """Synchronous JSON client for one API server, authenticated with a client certificate."""

    def __init__(
        self,
        server_url: str,
        *,
        ca_file: str | Path,
        cert_file: str | Path,
        key_file: str | Path,
        timeout: float = 30.0,
    ) -> None:
        parsed = urllib.parse.urlsplit(server_url)
        if parsed.scheme != "https" or not parsed.hostname:
            raise ValueError(f"expected an https:// server URL, got {server_url!r}")
        self.server_url = server_url.rstrip("/")
        self._host = parsed.hostname
        self._port = parsed.port or 443
        self.timeout = timeout
        self.ca_file = Path(ca_file)
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self._local = threading.local()
        self._discovery: dict[str, dict[str, ResourceInfo]] = {}
        self._discovery_lock = threading.Lock()

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context that trusts the cluster CA and presents the client cert
        (also usable with aiohttp: ``aiohttp.TCPConnector(ssl=kube.ssl_context())``)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        return ctx

    # -- raw requests ---------------------------------------------------------------------

    def _connection(self, fresh: bool = False) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None or fresh:
            if conn is not None:
                conn.close()
            ctx = getattr(self._local, "ctx", None)
            if ctx is None:
                ctx = self._local.ctx = self.ssl_context()
            conn = http.client.HTTPSConnection(
                self._host, self._port, context=ctx, timeout=self.timeout
            )
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request_raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> tuple[int, bytes]:
        """One request; returns (status, body) without raising on HTTP errors."""
        if params:
            query = urllib.parse.urlencode(
                {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()}
            )
            path = f"{path}{'&' if '?' in path else '?'}{query}"
        headers = {"Accept": accept, "User-Agent": "stromboli-devcluster"}
        if body is not None:
            headers["Content-Type"] = content_type
        for attempt in range(2):
            conn = self._connection(fresh=attempt > 0)
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.close()
                return resp.status, data
            except (http.client.HTTPException, ConnectionError, ssl.SSLError, OSError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        """A JSON request; raises :class:`KubeAPIError` on non-2xx; returns parsed JSON
        (or the text for non-JSON answers such as ``/readyz``)."""
        raw = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        status, data = self.request_raw(method, path, raw, params=params, content_type=content_type)
        if not 200 <= status < 300:
            raise KubeAPIError(method, path, status, data)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data.decode("utf-8", "replace")

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any, **params: Any) -> Any:
        return self.request("POST", path, body, params=params or None)

    def put(self, path: str, body: Any, **params: Any) -> Any:
        return self.request("PUT", path, body, params=params or None)

    def patch(self, path: str, body: Any, *, patch_type: str = "merge", **params: Any) -> Any:
        """``patch_type``: merge, strategic, json or apply."""
        content_type = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
            "apply": "application/apply-patch+yaml",
        }[patch_type]
        return self.request("PATCH", path, body, params=params or None, content_type=content_type)

    def delete(self, path: str, *, missing_ok: bool = True, **params: Any) -> Any:
        try:
            return self.request("DELETE", path, params=params or None)
        except KubeAPIError as err:
            if missing_ok and err.status == 404:
                return None
            raise

    # -- discovery ------------------------------------------------------------------------

    def _load_group_version(self, group_version: str) -> dict[str, ResourceInfo]:
        path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        try:
            doc = self.get(path)
        except KubeAPIError as err:
            if err.status == 404:
                return {}
            raise
        kinds: dict[str, ResourceInfo] = {}
        for res in doc.get("resources") or []:
            if "/" in res["name"]:  # subresource
                continue
            kinds[res["kind"]] = ResourceInfo(
                group_version, res["kind"], res["name"], bool(res.get("namespaced"))
            )
        return kinds

    def resource_for(self, api_version: str, kind: str, *, wait: float = 0.0) -> ResourceInfo:
        """Map ``apiVersion``/``kind`` to its resource, re-reading discovery (for up to
        ``wait`` seconds) when the kind is not known yet, e.g. right after its CRD."""
        deadline = time.monotonic() + wait
        while True:
            with self._discovery_lock:
                info = self._discovery.get(api_version, {}).get(kind)
            if info is not None:
                return info
            kinds = self._load_group_version(api_version)
            with self._discovery_lock:
                self._discovery[api_version] = kinds
            if kind in kinds:
                return kinds[kind]
            if time.monotonic() >= deadline:
                raise LookupError(f"the API server does not serve {kind} in {api_version}")
            time.sleep(0.2)

    def forget_discovery(self) -> None:
        with self._discovery_lock:
            self._discovery.clear()

    def path_for(self, obj: Mapping[str, Any], *, wait: float = 0.0) -> str:
        info = self.resource_for(obj["apiVersion"], obj["kind"], wait=wait)
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or ("default" if info.namespaced else None)
        return info.path(namespace, meta.get("name"))

    # -- object helpers -------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], *, wait_discovery: float = 30.0) -> Obj:
        """Server-side apply (create or update) one object; returns the stored object."""
        if not (obj.get("metadata") or {}).get("name"):
            raise ValueError(f"apply needs metadata.name: {obj.get('kind')} {obj!r:.200}")
        path = self.path_for(obj, wait=wait_discovery)
        return self.patch(
            path,
            json.dumps(obj).encode(),
            patch_type="apply",
            fieldManager=FIELD_MANAGER,
            force=True,
        )

    def create(self, obj: Mapping[str, Any], *, wait_discovery: float = 0.0) -> Obj:
        info = self.resource_for(obj["apiVersion"], obj["kind"], wait=wait_discovery)
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or ("default" if info.namespaced else None)
        return self.post(info.path(namespace), obj)

    def wait_for(
        self,
        path: str,
        predicate: Callable[[Obj], bool],
        *,
        timeout: float = 30.0,
        interval: float = 0.2,
        what: str | None = None,
    ) -> Obj:
        """Poll ``GET path`` until ``predicate(obj)`` holds; returns the object."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = self.get(path)
                if predicate(last):
                    return last
            except KubeAPIError as err:
                if err.status != 404:
                    raise
                last = err
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"timed out after {timeout}s waiting for {what or path}; last: {last!r:.2000}"
                )
            time.sleep(interval)

    def wait_crd_established(self, name: str, timeout: float = 60.0) -> Obj:
        return self.wait_for(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
            lambda crd: any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in ((crd.get("status") or {}).get("conditions") or [])
            ),
            timeout=timeout,
            what=f"CRD {name} to be Established",
        )

    def apply_manifests(
        self, sources: ManifestSource | Iterable[ManifestSource], *, wait_crds: bool = True
    ) -> list[Obj]:
        """Apply every object in ``sources`` (see :func:`load_manifests`) in order; CRDs are
        waited for (Established) before later objects, so a CRD and its CRs can share a file."""
        applied = []
        for obj in load_manifests(sources):
            result = self.apply(obj)
            applied.append(result)
            if wait_crds and obj.get("kind") == "CustomResourceDefinition":
                self.wait_crd_established(obj["metadata"]["name"])
                self.forget_discovery()
        return applied


ManifestSource = str | Path | Mapping[str, Any]


def _docs_from_text(text: str) -> Iterator[Obj]:
    for doc in yaml.safe_load_all(text):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ValueError(f"a manifest document must be a mapping, got {type(doc).__name__}")
        yield doc


def _expand(obj: Obj) -> Iterator[Obj]:
    kind = obj.get("kind", "")
    if kind == "List" or (kind.endswith("List") and isinstance(obj.get("items"), list)):
        for item in obj.get("items") or []:
            yield from _expand(item)
    else:
        if "apiVersion" not in obj or "kind" not in obj:
            raise ValueError(f"manifest object without apiVersion/kind: {obj!r:.200}")
        yield obj


def load_manifests(sources: ManifestSource | Iterable[ManifestSource]) -> list[Obj]:
    """Objects from YAML/JSON text, files, directories (``*.yaml``, ``*.yml``, ``*.json``,
    sorted by name) or already-parsed mappings; ``List`` kinds are flattened."""
    if isinstance(sources, str | Path | Mapping):
        sources = [sources]
    out: list[Obj] = []
    for src in sources:
        if isinstance(src, Mapping):
            docs: Iterable[Obj] = [dict(src)]
        elif isinstance(src, Path) or ("\n" not in src and Path(src).exists()):
            path = Path(src)
            if path.is_dir():
                files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
                docs = [d for f in files for d in _docs_from_text(f.read_text())]
            else:
                docs = list(_docs_from_text(path.read_text()))
        else:
            if "\n" not in src and ":" not in src:
                raise FileNotFoundError(f"manifest path does not exist: {src}")
            docs = list(_docs_from_text(src))
        for doc in docs:
            out.extend(_expand(doc))
    return out
