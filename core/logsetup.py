"""Logging of the long-running processes, with klog's verbosity levels, in the standard
``logging`` module.

Volcano's components log through klog: errors and warnings always, info lines guarded by a
verbosity ``V(n)`` shown when ``-v`` is at least ``n`` (Volcano's chart runs the scheduler at
``-v=3``, where each binding is a line). Here ``V(n)`` is a ``logging`` level just under
``INFO`` (``INFO - n``), so a logger call reads ``log.log(V(3), ...)`` and ``-v N`` sets the
root threshold to ``V(N)``; ``V(5)`` and beyond are ``DEBUG``, where the modules' own debug
lines live. ``--log-format json`` writes one JSON object per line in the shape Kubernetes
components use (``ts``, ``caller``, ``msg``, ``v``, ``err``), plus ``level``, ``logger`` and
whatever ``extra={"fields": {...}}`` a call passes, for log collectors.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import IO, Any

LOG_FORMATS = ("text", "json")
#: klog levels up to this one get their own ``logging`` level; beyond, ``DEBUG``.
MAX_DISTINCT_V = 4


def V(level: int) -> int:
    """The ``logging`` level of klog's ``V(level)`` info lines."""
    if level < 0:
        return logging.INFO
    if level > MAX_DISTINCT_V:
        return logging.DEBUG
    return logging.INFO - level


def verbosity_of(levelno: int) -> int:
    """The klog verbosity of a record's level (0 for warnings and errors)."""
    if levelno >= logging.INFO:
        return 0
    if levelno <= logging.DEBUG:
        return MAX_DISTINCT_V + 1
    return logging.INFO - levelno


def _letter(levelno: int) -> str:
    if levelno >= logging.ERROR:
        return "E"
    if levelno >= logging.WARNING:
        return "W"
    return "I"


class TextFormatter(logging.Formatter):
    """``2026-12-02 01:56:16,123 I stromboli.core.scheduler: message key=value ...``"""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(letter)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.letter = _letter(record.levelno)
        text = super().format(record)
        extra = getattr(record, "fields", None)
        if isinstance(extra, Mapping) and extra:
            text += "".join(f" {key}={_plain(value)}" for key, value in extra.items())
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per record, as Kubernetes components' ``--logging-format=json``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 6),
            "caller": f"{record.module}.py:{record.lineno}",
            "level": record.levelname.lower() if record.levelno >= logging.WARNING else "info",
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.levelno < logging.WARNING:
            entry["v"] = verbosity_of(record.levelno)
        if record.exc_info:
            entry["err"] = self.formatException(record.exc_info)
        extra = getattr(record, "fields", None)
        if isinstance(extra, Mapping):
            for key, value in extra.items():
                entry.setdefault(str(key), _jsonable(value))
        return json.dumps(entry, default=str, ensure_ascii=False)


def _plain(value: Any) -> str:
    """klog's text form of a value: a bare word, a quoted string, or compact JSON."""
    if isinstance(value, str):
        bare = value and not any(c in value for c in ' "=\n')
        return value if bare else json.dumps(value, ensure_ascii=False)
    return json.dumps(_jsonable(value), default=str, separators=(",", ":"), ensure_ascii=False)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return settings_of(value)
    return str(value)


def settings_of(options: Any) -> dict[str, Any]:
    """A dataclass of options as plain values, for a start line (one level of nesting kept;
    anything else by its ``str``)."""
    return {f.name: _jsonable(getattr(options, f.name)) for f in fields(options)}


def setup_logging(verbosity: int, log_format: str = "text", stream: IO[str] | None = None) -> None:
    """Send every logger's records to ``stream`` (stderr) in ``log_format``, at klog's
    ``-v verbosity``; replaces any handler set before, so calling it again reconfigures."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"--log-format: {log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(V(verbosity))


def log_start(logger: logging.Logger, component: str, settings: Mapping[str, Any]) -> None:
    """The one line a process writes when it starts: what it is and how it is configured."""
    from stromboli.core import __version__

    logger.info(
        "starting %s %s",
        component,
        __version__,
        extra={"fields": {"component": component, "version": __version__, **settings}},
        stacklevel=2,
    )
