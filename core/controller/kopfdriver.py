"""The kopf operator behind ``stromboli controller --driver kopf``: kopf owns the watch streams,
our controllers keep their caches and reconcile loops.

kopf event handlers, one per watched kind, hand every event to the *fed* informers of the
controllers (:meth:`~stromboli.core.informer.Informer.feed`); the controllers never notice
whether events came from kopf or from their own watches, which is why the simulator, stepping
the same classes on the memory store, sees vcjobs behave as a live cluster does.

kopf delivers a listing as events of type ``None`` and never says that an object vanished while
its watch was down (an API server restart ends in 410 Gone and a fresh listing). So the driver
lists every kind itself: once before kopf starts (which also fills the caches before any
controller acts), again whenever kopf begins a listing after that (debounced), and every
``resync_seconds`` as a safety net; a full listing lets the informers synthesise the missed
deletions (:meth:`~stromboli.core.informer.Informer.resync`).

kopf is used as a watcher only: standalone (no peering objects; leader election stays our
Lease), cluster-wide, event handlers alone (no finalizers), progress and diff-base storage that
write nothing (no annotations on our objects), no Kubernetes Events posted by kopf, and its
logs at WARNING unless the process logs DEBUG.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import signal
from collections.abc import Callable, Sequence
from typing import Any, Final

import kopf

from stromboli.core.cluster.errors import GoneError
from stromboli.core.cluster.jsondecode import copy_json
from stromboli.core.cluster.kube import KubeStore
from stromboli.core.cluster.kubeconfig import TOKEN_REREAD_SECONDS, KubeConfig
from stromboli.core.controller.kopfjson import install as install_deep_json
from stromboli.core.informer import Informer, Kind

log = logging.getLogger(__name__)

RESYNC_SECONDS: Final = 300.0
"""Full listings as a safety net; the ones that matter follow kopf's own relistings."""
RELIST_DEBOUNCE_SECONDS: Final = 1.0
"""After kopf starts listing a kind, wait this long (its listing goes on) before ours."""
WATCH_SERVER_TIMEOUT: Final = 300
"""Seconds one watch request lasts on the server (as :data:`~.kube.WATCH_TIMEOUT`)."""
OWN_WATCH_KINDS: Final = frozenset(
    {
        ("v1", "Pod"),
        ("scheduling.volcano.sh/v1beta1", "PodGroup"),
        ("batch.volcano.sh/v1alpha1", "Job"),
    }
)
"""Kinds the driver lists and watches itself, one plain stream each, instead of through kopf:
the kinds a cluster holds by the thousand. kopf gives every object its own worker task and
batching window; on a restart over 10,000 pods and 5,000 vcjobs with their PodGroups that was
minutes of CPU, and a new vcjob's admitted PodGroup waited behind it for its pods."""
STOP_SECONDS: Final = 10.0
RESTART_MAX_SECONDS: Final = 30.0


class _NoProgressStorage(kopf.ProgressStorage):
    """Keeps no handler progress: event handlers need none, and nothing lands on objects."""

    def fetch(self, **_: Any) -> None:
        return None

    def store(self, **_: Any) -> None:
        pass

    def purge(self, **_: Any) -> None:
        pass

    def touch(self, **_: Any) -> None:
        pass

    def clear(self, *, essence: Any) -> Any:
        return essence  # only ever our empty essence (below): nothing to copy


class _NoDiffBaseStorage(kopf.DiffBaseStorage):
    """Keeps no last-handled state (that is kopf's annotation on every object), and builds
    an empty essence: only change handlers compare essences, and kopf's own build deep-copies
    every object on every event (most of kopf's cost here)."""

    def build(self, **_: Any) -> Any:
        return {}

    def fetch(self, **_: Any) -> None:
        return None

    def store(self, **_: Any) -> None:
        pass


def kopf_settings() -> kopf.OperatorSettings:
    """kopf configured as a watcher only (see the module docstring)."""
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.posting.level = logging.ERROR
    settings.scanning.disabled = True  # our kinds are known; no CRD/namespace watching
    settings.peering.standalone = True
    settings.peering.clusterwide = True
    settings.persistence.progress_storage = _NoProgressStorage()
    settings.persistence.diffbase_storage = _NoDiffBaseStorage()
    settings.watching.server_timeout = WATCH_SERVER_TIMEOUT
    settings.watching.client_timeout = WATCH_SERVER_TIMEOUT + 30
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 1.0
    settings.networking.request_timeout = 60
    return settings


def connection_info(config: KubeConfig) -> kopf.ConnectionInfo:
    """The same server and credential as our own store, for kopf's login."""
    scheme = token = None
    expiration = None
    auth = config.auth_headers().get("Authorization", "")
    if auth.startswith("Bearer "):
        scheme, token = "Bearer", auth.removeprefix("Bearer ")
        if config.token_file is not None:
            # A projected token rotates: make kopf log in again (re-reading the file) in time.
            expiration = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
                seconds=TOKEN_REREAD_SECONDS * 10
            )
    return kopf.ConnectionInfo(
        server=config.server,
        ca_data=config.ca_data,
        insecure=config.insecure_skip_tls_verify or None,
        username=None if token else config.username,
        password=None if token else config.password,
        scheme=scheme,
        token=token,
        certificate_data=config.cert_data,
        private_key_data=config.key_data,
        default_namespace=config.namespace,
        expiration=expiration,
    )


class KopfDriver:
    """Feeds ``informers`` (switched to fed mode here) from one kopf operator."""

    def __init__(
        self,
        store: KubeStore,
        informers: Sequence[Informer],
        *,
        resync_seconds: float = RESYNC_SECONDS,
        on_signal: Callable[[], None] | None = None,
    ) -> None:
        install_deep_json()  # kopf must read what the API server stores, however deep
        self.store = store
        self.informers = list(informers)
        self.resync_seconds = resync_seconds
        #: The process's own SIGTERM/SIGINT handler, given back once kopf has taken them.
        self.on_signal = on_signal
        self.routes: dict[Kind, list[Informer]] = {}
        for informer in self.informers:
            self._route(informer)
        self.events = 0
        self.resyncs = 0
        self._relist_due: dict[Kind, asyncio.TimerHandle] = {}
        self._resync_lock = asyncio.Lock()
        self._primed = False
        #: resourceVersion of each kind's latest listing: where its own watch starts.
        self._listed_at: dict[Kind, str] = {}

    def _route(self, informer: Informer) -> None:
        informer.fed = True
        for kind in informer.kinds:
            self.routes.setdefault(kind, []).append(informer)

    def attach(self, informer: Informer) -> None:
        """Feed one more informer, whose kinds were known only after discovery; before
        :meth:`run` (kopf's handlers are registered when it starts)."""
        self.informers.append(informer)
        self._route(informer)

    @property
    def kinds(self) -> list[Kind]:
        return list(self.routes)

    # --- kopf → informers ---------------------------------------------------------------------

    def deliver(self, kind: Kind, raw_type: str | None, obj: dict[str, Any]) -> None:
        """One kopf event; type ``None`` (a listing) counts as ``ADDED``."""
        self.events += 1
        obj.setdefault("apiVersion", kind[0])
        obj.setdefault("kind", kind[1])
        (obj.get("metadata") or {}).pop("managedFields", None)
        if raw_type is None and self._primed:
            self._relist_soon(kind)
        event_type = raw_type or "ADDED"
        for n, informer in enumerate(self.routes.get(kind, ())):
            # Each controller owns its cache: only the first gets kopf's dict itself.
            informer.feed(kind, event_type, obj if n == 0 else copy_json(obj))

    def _relist_soon(self, kind: Kind) -> None:
        if kind in self._relist_due:
            return
        loop = asyncio.get_running_loop()
        self._relist_due[kind] = loop.call_later(
            RELIST_DEBOUNCE_SECONDS, lambda: loop.create_task(self._relisted(kind))
        )

    async def _relisted(self, kind: Kind) -> None:
        try:
            await self.resync(kind)
        except Exception:  # the periodic resync tries again
            log.exception("listing %s after kopf relisted it failed", kind[1])
        finally:
            self._relist_due.pop(kind, None)

    # --- our own listings ---------------------------------------------------------------------

    async def resync(self, kind: Kind) -> int:
        """List ``kind`` and fold it into every informer; returns the deletions synthesised."""
        async with self._resync_lock:
            informers = self.routes[kind]
            before = [informer.snapshot(kind) for informer in informers]
            # The first listing may come from the API server's watch cache (one response, no
            # paging); a later one must be a consistent read, not older than what is held.
            listed = await self.store.list(*kind, cached=kind not in self._listed_at)
            self._listed_at[kind] = listed.resource_version
            self.resyncs += 1
            vanished = 0
            for n, (informer, known) in enumerate(zip(informers, before, strict=True)):
                items = listed.items if n == 0 else copy_json(listed.items)
                vanished += informer.resync(kind, items, known)
            if vanished:
                log.info("%d %s objects vanished while unwatched", vanished, kind[1])
            return vanished

    async def prime(self) -> None:
        """The first listing of every kind, before kopf starts and controllers act."""
        for kind in self.kinds:
            await self.resync(kind)
        self._primed = True

    async def _watch(self, kind: Kind) -> None:
        """Follow ``kind`` from its latest listing, as kopf would, one plain stream for all
        objects; after 410 Gone, list again (synthesising missed deletions) and go on."""
        while True:
            stream = self.store.watch(*kind, resource_version=self._listed_at[kind])
            try:
                async for event in stream:
                    if event.type != "BOOKMARK":
                        self.deliver(kind, event.type, event.object)
            except GoneError:
                log.info("watch of %s expired; listing again", kind[1])
            finally:
                await stream.aclose()
            await self.resync(kind)

    async def _resync_forever(self) -> None:
        while True:
            await asyncio.sleep(self.resync_seconds)
            for kind in self.kinds:
                try:
                    await self.resync(kind)
                except Exception:
                    log.exception("periodic listing of %s failed", kind[1])

    # --- kopf ---------------------------------------------------------------------------------

    async def registry(self) -> kopf.OperatorRegistry:
        """Login and one event handler per kind, in a registry of our own (not kopf's
        global one, so importing this module registers nothing)."""
        registry = kopf.OperatorRegistry()
        config = self.store.config

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_info(config)

        for kind in self.kinds:
            if kind in OWN_WATCH_KINDS:
                continue
            resource = await self.store.resources.resolve(*kind)
            group, _, version = kind[0].rpartition("/")

            def handler(kind: Kind) -> Any:
                async def on_event(event: dict[str, Any], **_: Any) -> None:
                    self.deliver(kind, event.get("type"), event["object"])

                return on_event

            kopf.on.event(
                group=group,
                version=version,
                plural=resource.plural,
                id=f"feed-{resource.resource}",
                registry=registry,
            )(handler(kind))
        return registry

    async def run(self) -> None:
        """List, then run kopf until cancelled or until kopf stops on a signal. A first
        listing that fails (a CRD not installed, no API server) fails the process, as the
        native informers do; later, kopf gives up on an API server that stays unreachable past
        its retries, and is then started again after a fresh listing, as watches keep retrying."""
        if not log.isEnabledFor(logging.DEBUG):
            logging.getLogger("kopf").setLevel(logging.WARNING)
        failures = 0
        ran = False
        while True:
            try:
                await self.prime()
                registry = await self.registry()
                ran = True
                await self._run_operator(registry)
                return  # kopf stopped on SIGTERM/SIGINT
            except Exception as err:
                if not ran:
                    raise
                failures += 1
                delay = min(2.0**failures, RESTART_MAX_SECONDS)
                log.error("kopf operator stopped (%s); starting it again in %.0fs", err, delay)
                await asyncio.sleep(delay)

    async def _give_signals_back(self, ready: asyncio.Event) -> None:
        """kopf takes SIGTERM/SIGINT over as it starts; once it is up, they go back to the
        process. A signal that reaches kopf stops it in its own way: every task begun after it
        (our controllers' workers among them) cancelled mid-write, and a SIGKILL scheduled;
        stopped through its stop flag instead, after our workers, it ends quietly."""
        await ready.wait()
        if self.on_signal is None:
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.on_signal)

    async def _run_operator(self, registry: kopf.OperatorRegistry) -> None:
        stop_flag = asyncio.Event()
        ready = asyncio.Event()
        operator = asyncio.create_task(
            kopf.operator(
                registry=registry,
                settings=kopf_settings(),
                standalone=True,
                clusterwide=True,
                stop_flag=stop_flag,
                ready_flag=ready,
            ),
            name="kopf operator",
        )
        signals = asyncio.create_task(self._give_signals_back(ready), name="kopf signals")
        resyncing = asyncio.create_task(self._resync_forever(), name="kopf driver resync")
        watching = {
            asyncio.create_task(self._watch(kind), name=f"kopf driver watch {kind[1]}")
            for kind in self.kinds
            if kind in OWN_WATCH_KINDS
        }
        try:
            done, _ = await asyncio.wait(
                {operator, resyncing, *watching}, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                task.result()
        finally:
            stop_flag.set()
            signals.cancel()
            resyncing.cancel()
            for watch in watching:
                watch.cancel()
            for timer in self._relist_due.values():
                timer.cancel()
            self._relist_due.clear()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(operator, STOP_SECONDS)
            await asyncio.gather(signals, resyncing, *watching, return_exceptions=True)
