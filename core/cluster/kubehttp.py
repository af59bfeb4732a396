"""HTTP to one API server: one aiohttp session, the client rate limit, retries, error mapping.

Bodies go out and come back as bytes through orjson; nothing here builds model objects. Every
failure leaves this module as an :class:`~stromboli.core.cluster.errors.ApiError` subclass, the
API server's ``Status`` turned back into the error the memory store would have raised, so code
above the store handles a conflict or an unreachable server without knowing about HTTP.

Retries are deliberately few: a connection that could not be opened (nothing was sent) is
retried for any method, a dropped connection only for ``GET``, and a throttled request (429 or
503 with ``Retry-After``, the API server's priority-and-fairness answer) after the wait the server
asks for. Everything else is the caller's decision (a conflict means re-read, not repeat).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

import aiohttp
import orjson

from stromboli.core.cluster import jsondecode
from stromboli.core.cluster.errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    GoneError,
    InternalError,
    InvalidError,
    NotFoundError,
    TooManyRequestsError,
    TypedApiError,
    UnsupportedMediaTypeError,
)
from stromboli.core.cluster.kubeconfig import KubeConfig, KubeConfigError
from stromboli.core.cluster.ratelimit import TokenBucket

log = logging.getLogger(__name__)

JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
DUMPS_OPTIONS: Final = orjson.OPT_UTC_Z | orjson.OPT_NAIVE_UTC
"""Datetimes serialize as RFC 3339 in UTC, as the memory store writes them."""

RETRIES: Final = 3
MAX_RETRY_AFTER: Final = 10.0
CONNECT_TIMEOUT: Final = 10.0


class UnreachableError(ApiError):
    """503: the API server could not be reached (or did not answer in time)."""

    default_code = 503
    default_reason = "ServiceUnavailable"

    def __init__(self, message: str) -> None:
        super().__init__(None, None, message)


_BY_CODE: Final[dict[int, type[TypedApiError]]] = {
    400: BadRequestError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    415: UnsupportedMediaTypeError,
    422: InvalidError,
    429: TooManyRequestsError,
    500: InternalError,
}


def error_from_status(status: Mapping[str, Any], http_code: int | None = None) -> ApiError:
    """The error for a ``v1 Status`` body; a reason the error table does not know falls back to
    the code's class (a 409 ``AlreadyExists`` is matched exactly, any other 409 is a conflict)."""
    body = dict(status)
    if http_code is not None and not body.get("code"):
        body["code"] = http_code
    error = ApiError.from_status(body)
    if type(error) is ApiError:
        cls = _BY_CODE.get(error.code)
        if cls is not None and cls is not AlreadyExistsError:
            return cls(error.message or error.reason, details=error.details)
    return error


def error_from_response(code: int, body: bytes, http_reason: str | None) -> ApiError:
    """The error for a non-2xx answer, whether or not its body is a ``Status``."""
    try:
        status = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        return error_from_status(status, code)
    text = body[:500].decode("utf-8", "replace").strip()
    return error_from_status(
        {"code": code, "reason": http_reason or "", "message": text or http_reason or ""}, code
    )


def _unauthorized(err: KubeConfigError) -> ApiError:
    """A credential that could not be fetched, as the 401 the server would have answered."""
    return error_from_status({"code": 401, "reason": "Unauthorized", "message": str(err)}, 401)


class KubeTransport:
    """Requests to ``config.server``; create it anywhere, use it inside one event loop."""

    def __init__(
        self,
        config: KubeConfig,
        *,
        qps: float,
        burst: int,
        user_agent: str,
        request_timeout: float,
        max_connections: int,
        monotonic: Callable[[], float],
    ) -> None:
        self.config = config
        self.base_url = config.server.rstrip("/")
        self.limiter = TokenBucket(qps, burst, monotonic)
        self.user_agent = user_agent
        self._monotonic = monotonic
        self._timeout = aiohttp.ClientTimeout(total=request_timeout, connect=CONNECT_TIMEOUT)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._retired: list[aiohttp.ClientSession] = []
        self._ssl = config.ssl_context()
        self._client_certificate = config.client_certificate()
        # A certificate issued for a name other than the URL's host (tls-server-name).
        self._extra: dict[str, Any] = (
            {"server_hostname": config.tls_server_name} if config.tls_server_name else {}
        )

    @property
    def session(self) -> aiohttp.ClientSession:
        """The shared session, opened on first use (it belongs to the running loop)."""
        session = self._session
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(
                ssl=self._ssl,
                limit=self._max_connections,
            )
            session = self._session = aiohttp.ClientSession(connector=connector)
        return session

    async def _credential_ready(self) -> None:
        """Run an expiring exec plugin in a thread, not on the event loop; a new client
        certificate from it means a new TLS context (requests in flight finish on the old)."""
        if self.config.credential_stale():
            try:
                await asyncio.to_thread(self.config.prepare_credential)
            except KubeConfigError as err:
                raise _unauthorized(err) from None
            self._follow_certificate()

    async def _renew_credential(self) -> None:
        """The API server answered 401: fetch a new credential once, in a thread."""
        try:
            rejected = self.config.current_exec_credential()
            await asyncio.to_thread(self.config.renew_credential, rejected)
        except KubeConfigError as err:
            raise _unauthorized(err) from None
        self._follow_certificate()

    def _follow_certificate(self) -> None:
        pair = self.config.client_certificate()
        if pair != self._client_certificate:
            self._client_certificate = pair
            self._ssl = self.config.ssl_context()
            if self._session is not None:
                self._retired.append(self._session)
                self._session = None

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self.user_agent}
        headers.update(self.config.auth_headers(self._monotonic))
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry_throttled: bool = True,
    ) -> Any:
        """One API call; the decoded JSON answer (``None`` if empty) or an ``ApiError``."""
        url = self.base_url + path
        data = None if body is None else orjson.dumps(body, option=DUMPS_OPTIONS)
        await self._credential_ready()
        headers = self.headers(content_type if data is not None else None)
        attempt = 0
        renewed = False
        while True:
            await self.limiter.acquire()
            try:
                async with self.session.request(
                    method,
                    url,
                    params=params,
                    data=data,
                    headers=headers,
                    timeout=self._timeout,
                    **self._extra,
                ) as resp:
                    raw = await resp.read()
                    code = resp.status
                    retry_after = resp.headers.get("Retry-After")
                    http_reason = resp.reason
            except aiohttp.ClientConnectorError as err:
                # Nothing reached the server: safe to try again whatever the method.
                if attempt < RETRIES:
                    attempt += 1
                    await asyncio.sleep(0.2 * 2**attempt)
                    continue
                raise UnreachableError(f"cannot connect to {self.base_url}: {err}") from None
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as err:
                if method == "GET" and attempt < RETRIES:
                    attempt += 1
                    await asyncio.sleep(0.2 * 2**attempt)
                    continue
                raise UnreachableError(
                    f"{method} {path}: the connection to {self.base_url} broke ({err!r}); "
                    "the request may or may not have been applied"
                ) from None
            except TimeoutError:
                raise UnreachableError(
                    f"{method} {path}: no answer from {self.base_url} within {self._timeout.total}s"
                ) from None
            except aiohttp.ClientError as err:
                raise UnreachableError(
                    f"{method} {path}: the answer from {self.base_url} was cut short ({err!r})"
                ) from None
            if 200 <= code < 300:
                if not raw:
                    return None
                try:
                    return jsondecode.loads(raw)
                except ValueError:
                    raise InternalError(
                        f"{method} {path}: the API server answered {code} with a body that is "
                        f"not JSON: {raw[:200]!r}"
                    ) from None
            if code == 401 and self.config.renewable and not renewed:
                # An exec plugin's or auth provider's credential the server no longer takes
                # (revoked, or expired without saying when): fetch a new one and try once more.
                renewed = True
                log.info("%s %s: 401 Unauthorized; renewing the credential", method, path)
                await self._renew_credential()
                headers = self.headers(content_type if data is not None else None)
                continue
            if retry_throttled and retry_after and code in (429, 503) and attempt < RETRIES:
                attempt += 1
                try:
                    wait = min(max(float(retry_after), 0.0), MAX_RETRY_AFTER)
                except ValueError:
                    wait = 1.0
                log.debug("%s %s throttled (%s); retrying in %.1fs", method, path, code, wait)
                await asyncio.sleep(wait)
                continue
            raise error_from_response(code, raw, http_reason)

    @asynccontextmanager
    async def stream(
        self, path: str, params: Mapping[str, str], read_timeout: float
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """A long-running ``GET`` (a watch); a non-200 answer raises its ``ApiError``.

        Connection failures surface as aiohttp's own exceptions: the watch loop retries them
        itself, with its own backoff, from the last version it saw.
        """
        await self._credential_ready()
        await self.limiter.acquire()
        timeout = aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT, sock_read=read_timeout)
        async with self.session.get(
            self.base_url + path,
            params=params,
            headers=self.headers(),
            timeout=timeout,
            **self._extra,
        ) as resp:
            if resp.status != 200:
                raw = await resp.read()
                if resp.status == 401 and self.config.renewable:
                    # The watch loop retries; it will then use a fresh credential.
                    await self._renew_credential()
                raise error_from_response(resp.status, raw, resp.reason)
            yield resp

    async def close(self) -> None:
        for session in (*self._retired, self._session):
            if session is not None and not session.closed:
                await session.close()
        self._retired.clear()
        self._session = None
