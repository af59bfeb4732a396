"""kopf's API client decodes documents deeper than the standard json module allows, once
``install`` ran (the kopf driver runs it); the names it replaces are still where it expects."""

from __future__ import annotations

import inspect

from kopf._cogs.clients import api

from stromboli.core.controller import kopfjson

DEEP = '{"a":' * 3000 + "1" + "}" * 3000


def test_kopf_client_names_replaced_are_still_there() -> None:
    # If kopf renames these, install() would silently patch nothing: fail here instead.
    source = inspect.getsource(api)
    assert "yield json.loads(line.decode('utf-8'))" in source
    params = inspect.signature(api.get).parameters
    assert {"url", "settings", "payload", "headers", "timeout", "logger"} <= set(params)


def test_installed_decoder_reads_deep_watch_lines() -> None:
    kopfjson.install()
    kopfjson.install()  # idempotent
    value = api.json.loads(DEEP)
    depth = 0
    while isinstance(value, dict):
        value, depth = value["a"], depth + 1
    assert depth == 3000
    assert api.json.dumps({"x": 1}) == '{"x": 1}'  # the rest of json untouched
