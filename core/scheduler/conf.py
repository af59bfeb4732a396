"""The scheduler configuration file, in Volcano's format.

```yaml
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: gang
    enablePreemptable: false
    arguments: {...}
configurations:
- name: allocate
  arguments: {...}
```

What Volcano refuses is refused here too, naming the bad key: an unknown action, a switch
that is not true or false, ``proportion`` beside hierarchical ``drf``. What Volcano skips (a
plugin it has no builder for) or ignores (an argument, switch or key nothing reads) is skipped
here as well, so a Volcano file loads unchanged, but never silently: each skipped name is a
:class:`Skipped` entry that the scheduler logs as an error, posts as a Warning event and
exports as a metric. ``strict=True`` (``--strict-config``) refuses such a file instead, so a
typo cannot turn a policy off unnoticed. The parsed types are the framework's
(``framework/options.py``); this module reads files and checks names against the registry.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stromboli.core.api.yamlbounds import MAX_FILE_BYTES, YamlBoundsError, load_documents
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.options import KNOWN_SWITCHES, PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.plugin import ACTIONS, PLUGINS
from stromboli.core.scheduler.volcanoconf import is_volcano_argument, is_volcano_plugin

log = logging.getLogger(__name__)

DEFAULT_CONFIG = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""

TOP_LEVEL_KEYS = {"actions", "tiers", "configurations", "metrics"}


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the bad key."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A name of the configuration that has no effect here.

    ``owner`` is the plugin or action it belongs to ("" for a top-level key), ``key`` the
    argument, switch or key ("" when the whole plugin is skipped); ``volcano`` tells a Volcano
    feature Stromboli lacks from a name neither knows. ``message`` is the whole sentence.
    """

    owner: str
    key: str
    volcano: bool
    message: str


@dataclass(slots=True)
class _Reader:
    source: str
    skipped: list[Skipped]

    def skip(self, where: str, owner: str, key: str, volcano: bool, what: str) -> None:
        self.skipped.append(Skipped(owner, key, volcano, f"{self.source}: {where}: {what}"))

    def arguments(
        self, where: str, owner: str, value: Any, known: dict, prefixes: tuple[str, ...]
    ) -> dict[str, Any]:
        """The arguments this plugin or action reads; the others are skipped."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"{self.source}: {where}: arguments must be a mapping")
        kept: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key)
            if name in known or any(name.startswith(p) for p in prefixes):
                kept[name] = item
            elif is_volcano_argument(owner, name):
                self.skip(
                    where,
                    owner,
                    name,
                    True,
                    f"argument {name!r} of Volcano's {owner} is not implemented by Stromboli; "
                    "skipped",
                )
            else:
                hint = ", ".join(sorted(known)) or "none"
                self.skip(
                    where,
                    owner,
                    name,
                    False,
                    f"unknown argument {name!r}, not Volcano's either (a typo?); skipped "
                    f"(known arguments: {hint})",
                )
        return kept


def read_config(text: str, source: str = "<string>") -> tuple[SchedulerConfig, list[Skipped]]:
    """Parse a configuration document against the registered actions and plugins
    (``scheduler.builtins.register_builtins`` registers Stromboli's own): the configuration
    with what Volcano would skip or ignore left out, and those left-out names."""
    if not PLUGINS or not ACTIONS:
        raise ConfigError(
            f"{source}: no scheduler actions or plugins are registered; call "
            "stromboli.core.scheduler.builtins.register_builtins() first"
        )
    try:
        documents = load_documents(text)
    except YamlBoundsError as err:
        raise ConfigError(f"{source}: {err}") from None
    data = documents[0] if documents else None  # Volcano reads the first document only
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'actions' and 'tiers'")
    reader = _Reader(source, [])
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            reader.skip(
                "top level",
                "",
                str(key),
                False,
                f"unknown key {key!r} (known: {', '.join(sorted(TOP_LEVEL_KEYS))}); skipped",
            )
    actions_text = data.get("actions")
    if not isinstance(actions_text, str) or not actions_text.strip():
        raise ConfigError(f"{source}: 'actions' must be a comma-separated string of action names")
    actions = [a.strip() for a in actions_text.split(",") if a.strip()]
    for action in actions:
        if action not in ACTIONS:
            known = ", ".join(sorted(ACTIONS))
            raise ConfigError(f"{source}: actions: unknown action {action!r} (known: {known})")
    raw_tiers = data.get("tiers") or []
    if not isinstance(raw_tiers, list):
        raise ConfigError(f"{source}: 'tiers' must be a list of mappings with a 'plugins' list")
    tiers = [_read_tier(reader, t, tier) for t, tier in enumerate(raw_tiers)]
    action_arguments: dict[str, Arguments] = {}
    raw_confs = data.get("configurations") or []
    if not isinstance(raw_confs, list):
        raise ConfigError(f"{source}: 'configurations' must be a list of mappings")
    for c, conf in enumerate(raw_confs):
        where = f"configurations[{c}]"
        if not isinstance(conf, dict):
            raise ConfigError(f"{source}: {where} must be a mapping with a 'name'")
        name = conf.get("name")
        if not isinstance(name, str) or name not in ACTIONS:
            reader.skip(
                where,
                str(name or ""),
                "",
                False,
                f"unknown action {name!r}; its arguments are skipped",
            )
            continue
        arguments = reader.arguments(
            f"{where} ({name})", name, conf.get("arguments"), ACTIONS[name].known_arguments, ()
        )
        action_arguments[name] = Arguments(name, arguments)
    return SchedulerConfig(actions, tiers, action_arguments, source), reader.skipped


def _read_tier(reader: _Reader, t: int, tier: Any) -> list[PluginOption]:
    source = reader.source
    if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
        raise ConfigError(f"{source}: tiers[{t}] must be a mapping with a 'plugins' list")
    options: list[PluginOption] = []
    for p, entry in enumerate(tier["plugins"]):
        where = f"tiers[{t}].plugins[{p}]"
        if not isinstance(entry, dict) or not entry.get("name"):
            raise ConfigError(f"{source}: {where}: each plugin needs a 'name'")
        name = str(entry["name"])
        if name not in PLUGINS:
            if is_volcano_plugin(name):
                what = f"Volcano's plugin {name!r} is not implemented by Stromboli; skipped"
            else:
                known = ", ".join(sorted(PLUGINS))
                what = f"unknown plugin {name!r}, not Volcano's either (a typo?); skipped "
                what += f"(known: {known})"
            reader.skip(where, name, "", is_volcano_plugin(name), what)
            continue
        switches: dict[str, bool] = {}
        arguments: dict[str, Any] = {}
        for key, value in entry.items():
            if key == "name":
                continue
            if key == "arguments":
                cls = PLUGINS[name]
                arguments = reader.arguments(
                    f"{where} ({name})", name, value, cls.known_arguments, cls.argument_prefixes
                )
                continue
            if key not in KNOWN_SWITCHES:
                reader.skip(
                    f"{where} ({name})", name, str(key), False, f"unknown key {key!r}; skipped"
                )
                continue
            if not isinstance(value, bool):
                raise ConfigError(f"{source}: {where} ({name}): {key} must be true or false")
            switches[key] = value
        options.append(PluginOption(name, Arguments(name, arguments), switches))
    names = {o.name for o in options}
    if "proportion" in names and any(o.name == "drf" and o.hierarchy for o in options):
        raise ConfigError(
            f"{source}: tiers[{t}]: proportion and drf with enableHierarchy cannot share a tier"
        )
    return options


def parse_config(text: str, source: str = "<string>", *, strict: bool = True) -> SchedulerConfig:
    """Parse and validate a configuration document. ``strict`` (the default here, for
    callers that check a file) refuses a name that would be skipped; the scheduler process
    reads leniently, as Volcano, unless started with ``--strict-config``."""
    config, skipped = read_config(text, source)
    if strict and skipped:
        raise ConfigError("\n".join(s.message.replace("; skipped", "") for s in skipped))
    return config


def default_config() -> SchedulerConfig:
    return parse_config(DEFAULT_CONFIG, "<default>")


def _read_file(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                f"{path}: scheduler configuration of {size:,} bytes is over the "
                f"{MAX_FILE_BYTES:,}-byte limit"
            )
        return path.read_text()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read scheduler configuration: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: scheduler configuration is not UTF-8 text: {err}") from None


def load_config(path: str | Path | None, *, strict: bool = True) -> SchedulerConfig:
    if path is None:
        return default_config()
    path = Path(path)
    return parse_config(_read_file(path), str(path), strict=strict)


class ConfigSource:
    """The active configuration, reloaded when its file changes.

    An invalid new version is logged and the previous configuration stays in force, as in
    Volcano; a broken file at start-up is an error. Names Volcano would skip are skipped
    (``strict=False``, the process default) and listed in ``skipped``, each logged as an error
    whenever a version is loaded; ``generation`` counts the versions loaded, so the scheduler
    knows when to report them again. ``strict=True`` refuses such a version instead.
    """

    def __init__(self, path: str | Path | None = None, *, strict: bool = False) -> None:
        self.path = Path(path) if path else None
        self.strict = strict
        self._stamp: tuple[float, int] | None = self._stat()
        self.skipped: list[Skipped] = []
        self.generation = 0
        self.config = self._load()
        self.last_error: str = ""

    def _load(self) -> SchedulerConfig:
        skipped: list[Skipped] = []
        if self.path is None:
            config = default_config()
        else:
            text = _read_file(self.path)
            if self.strict:
                config = parse_config(text, str(self.path))
            else:
                config, skipped = read_config(text, str(self.path))
        self.skipped = skipped
        self.generation += 1
        for entry in skipped:
            log.error("%s", entry.message)
        return config

    def _stat(self) -> tuple[float, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    def current(self) -> SchedulerConfig:
        stamp = self._stat()
        if stamp is not None and stamp != self._stamp:
            self._stamp = stamp
            try:
                self.config = self._load()
                self.last_error = ""
                log.info("reloaded scheduler configuration from %s", self.path)
            except ConfigError as err:
                self.last_error = str(err)
                log.error("keeping previous scheduler configuration: %s", err)
        return self.config
