"""Job-plugin arguments, parsed the way Volcano's plugins read them (part of the vcjob API:
the controller's plugins and the admission rules read them alike).

A job names its plugins with command-line style arguments, ``plugins: {pytorch: ["--port=5000"]}``,
which Volcano hands to Go's ``flag`` package. The rules below are that package's, so a job that
works on Volcano means the same thing here:

* ``-name`` and ``--name`` are the same flag; ``--name=value`` or ``--name value``;
* a boolean flag is set by ``--name`` alone and takes its value only as ``--name=false``
  (``1 t T TRUE true True`` / ``0 f F FALSE false False``);
* integers accept a sign and ``0x``/``0o``/``0b``/leading-``0`` octal prefixes;
* parsing stops at the first argument that is not a flag, or after ``--``;
* on the first bad argument parsing stops: the flags read so far keep their values and the rest
  keep their defaults. Volcano logs the problem and carries on, and so do the plugins here;
  the message is kept on the plugin for whoever wants to report it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT = re.compile(r"^[+-]?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|0[0-7]*|[1-9][0-9]*)$")


@dataclass(frozen=True, slots=True)
class Flag:
    """One plugin argument: its name (without dashes), default and meaning."""

    name: str
    default: str | int | bool
    help: str = ""

    @property
    def kind(self) -> type:
        return type(self.default)


class FlagError(ValueError):
    """An argument the plugin cannot read (unknown flag, missing or malformed value)."""


def parse_bool(text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{text!r} is not a boolean")


def parse_int(text: str) -> int:
    if not _INT.match(text):
        raise ValueError(f"{text!r} is not an integer")
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-").replace("_", "")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return sign * int(digits, 8)
    return sign * int(digits, 0)


def _convert(flag: Flag, value: str) -> Any:
    if flag.kind is bool:
        return parse_bool(value)
    if flag.kind is int:
        return parse_int(value)
    return value


def parse_flags(
    arguments: Sequence[str], flags: Sequence[Flag]
) -> tuple[dict[str, Any], FlagError | None]:
    """Values of ``flags`` given ``arguments`` (defaults for those not given), and the error
    that stopped parsing early, if any (see the module docstring)."""
    known = {f.name: f for f in flags}
    values: dict[str, Any] = {f.name: f.default for f in flags}
    args = [str(a) for a in arguments]
    i = 0
    while i < len(args):
        arg = args[i]
        if len(arg) < 2 or arg[0] != "-":
            break
        dashes = 2 if arg[1] == "-" else 1
        if arg == "--":
            break
        body = arg[dashes:]
        if not body or body[0] in "-=":
            return values, FlagError(f"bad flag syntax: {arg}")
        i += 1
        name, has_value, value = body.partition("=")
        flag = known.get(name)
        if flag is None:
            if name in ("h", "help"):
                return values, FlagError("help requested")
            return values, FlagError(f"flag provided but not defined: -{name}")
        if flag.kind is bool and not has_value:
            values[name] = True
            continue
        if not has_value:
            if i >= len(args):
                return values, FlagError(f"flag needs an argument: -{name}")
            value = args[i]
            i += 1
        try:
            values[name] = _convert(flag, value)
        except ValueError:
            return values, FlagError(f'invalid value "{value}" for flag -{name}: parse error')
    return values, None


#: The ``mpi`` plugin's flags: the controller's plugin uses them, and the admission rule that
#: requires the master task reads ``--master`` with the same parser.
MPI_FLAGS: tuple[Flag, ...] = (
    Flag("master", "master", "name of the master task"),
    Flag("worker", "worker", "name of the worker task"),
    Flag("port", 22, "port opened on every container (ssh)"),
)
