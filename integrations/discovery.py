"""Which framework CRDs the cluster serves, asked once when the controller starts.

A framework whose CRD is not installed is skipped with one info line: watching a kind the API
server does not serve only fails. A CRD installed later is picked up while the controller runs,
by its watch of CustomResourceDefinitions (:meth:`.live.FrameworkController.follow_crds`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from stromboli.core.api.registry import KindInfo
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.kube import KubeStore
from stromboli.core.cluster.store import ClusterStore
from stromboli.integrations.kinds import FRAMEWORK_KINDS

log = logging.getLogger(__name__)


async def served(
    store: ClusterStore, kinds: Iterable[KindInfo] = FRAMEWORK_KINDS
) -> list[KindInfo]:
    """The kinds among ``kinds`` that the store serves. A Kubernetes store asks the API
    server's discovery (one request per API group version); another store is listed."""
    found: list[KindInfo] = []
    missing: list[str] = []
    for info in kinds:
        try:
            if isinstance(store, KubeStore):
                await store.resources.resolve(info.api_version, info.kind)
            else:
                await store.list(info.api_version, info.kind)
        except NotFoundError:
            missing.append(f"{info.kind} ({info.api_version})")
            continue
        except ApiError as err:  # discovery itself refused: skip the kind, say why
            log.warning("cannot tell whether %s is served: %s", info.kind, err)
            missing.append(f"{info.kind} ({info.api_version})")
            continue
        found.append(info)
    if missing:
        log.info(
            "framework CRDs not installed, their adapters start once they are: %s",
            ", ".join(missing),
        )
    return found
