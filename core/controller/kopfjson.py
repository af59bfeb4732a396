"""Deeply nested objects for kopf: its API client reads answers with the standard ``json``
module, which stops at about 1,000 levels, while kube-apiserver stores custom resources nested
up to 10,000 levels in their free-form parts (a vcjob's pod template). One such vcjob made
every kopf listing of Jobs fail, and with it the whole operator, again at every restart.
``install`` gives kopf's listings and watch streams the decoder of ``core/cluster/jsondecode``
(orjson, with a stack-keeping fallback for deep documents); the object then reaches the
controllers, which set it aside alone if they cannot handle it.

This reaches into two names of kopf's private client module (``get`` and its ``json``), pinned
with kopf's version in ``pyproject.toml``; ``tests/controller/test_kopfjson.py`` fails if a
kopf upgrade moves them.
"""

from __future__ import annotations

import json
import types
from typing import Any

from stromboli.core.cluster import jsondecode

_INSTALLED = "_stromboli_deep_json"


def install() -> None:
    """Make kopf's GETs and watch lines decode deep JSON; idempotent."""
    from kopf._cogs.clients import api

    if getattr(api, _INSTALLED, False):
        return
    shim = types.ModuleType("json")
    shim.__dict__.update(json.__dict__, loads=jsondecode.loads)
    api.json = shim

    async def get(
        url: str,
        *,
        settings: Any,
        payload: object | None = None,
        headers: dict[str, str] | None = None,
        timeout: Any = None,
        logger: Any,
    ) -> Any:
        response = await api.request(
            method="get",
            url=url,
            payload=payload,
            headers=headers,
            timeout=timeout,
            settings=settings,
            logger=logger,
        )
        async with response:
            return jsondecode.loads(await response.read())

    api.get = get
    setattr(api, _INSTALLED, True)
