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

Unknown actions, plugins, switches and argument keys are errors that name the bad key, so a
typo never silently turns a policy off. The parsed types are the framework's
(``framework/options.py``); this module reads files and checks names against the registry.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import yaml

from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.options import KNOWN_SWITCHES, PluginOption, SchedulerConfig
from stromboli.core.scheduler.framework.plugin import ACTIONS, PLUGINS

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


def _check_arguments(owner: str, arguments: dict, known: dict, prefixes: tuple[str, ...]) -> None:
    for key in arguments:
        if key in known or any(str(key).startswith(p) for p in prefixes):
            continue
        hint = ", ".join(sorted(known)) or "none"
        raise ConfigError(f"{owner}: unknown argument {key!r} (known arguments: {hint})")


def parse_config(text: str, source: str = "<string>") -> SchedulerConfig:
    """Parse and validate a configuration document against the registered actions and
    plugins (``scheduler.builtins.register_builtins`` registers Stromboli's own)."""
    if not PLUGINS or not ACTIONS:
        raise ConfigError(
            f"{source}: no scheduler actions or plugins are registered; call "
            "stromboli.core.scheduler.builtins.register_builtins() first"
        )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with 'actions' and 'tiers'")
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(f"{source}: unknown key {key!r} (known: {sorted(TOP_LEVEL_KEYS)})")
    actions_text = data.get("actions")
    if not isinstance(actions_text, str) or not actions_text.strip():
        raise ConfigError(f"{source}: 'actions' must be a comma-separated string of action names")
    actions = [a.strip() for a in actions_text.split(",") if a.strip()]
    for action in actions:
        if action not in ACTIONS:
            known = ", ".join(sorted(ACTIONS))
            raise ConfigError(f"{source}: actions: unknown action {action!r} (known: {known})")
    tiers: list[list[PluginOption]] = []
    for t, tier in enumerate(data.get("tiers") or []):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfigError(f"{source}: tiers[{t}] must be a mapping with a 'plugins' list")
        options: list[PluginOption] = []
        for p, entry in enumerate(tier["plugins"]):
            where = f"{source}: tiers[{t}].plugins[{p}]"
            if not isinstance(entry, dict) or not entry.get("name"):
                raise ConfigError(f"{where}: each plugin needs a 'name'")
            name = entry["name"]
            if name not in PLUGINS:
                raise ConfigError(
                    f"{where}: unknown plugin {name!r} (known: {', '.join(sorted(PLUGINS))})"
                )
            switches: dict[str, bool] = {}
            arguments: dict[str, Any] = {}
            for key, value in entry.items():
                if key == "name":
                    continue
                if key == "arguments":
                    arguments = dict(value or {})
                    continue
                if key not in KNOWN_SWITCHES:
                    raise ConfigError(f"{where} ({name}): unknown key {key!r}")
                if not isinstance(value, bool):
                    raise ConfigError(f"{where} ({name}): {key} must be true or false")
                switches[key] = value
            cls = PLUGINS[name]
            _check_arguments(
                f"{where} ({name})", arguments, cls.known_arguments, cls.argument_prefixes
            )
            options.append(PluginOption(name, Arguments(name, arguments), switches))
        names = {o.name for o in options}
        if "proportion" in names and any(o.name == "drf" and o.hierarchy for o in options):
            raise ConfigError(
                f"{source}: tiers[{t}]: proportion and drf with enableHierarchy cannot share a tier"
            )
        tiers.append(options)
    action_arguments: dict[str, Arguments] = {}
    for c, conf in enumerate(data.get("configurations") or []):
        name = (conf or {}).get("name")
        if name not in ACTIONS:
            raise ConfigError(f"{source}: configurations[{c}]: unknown action {name!r}")
        arguments = dict(conf.get("arguments") or {})
        _check_arguments(
            f"{source}: configurations[{c}] ({name})", arguments, ACTIONS[name].known_arguments, ()
        )
        action_arguments[name] = Arguments(name, arguments)
    return SchedulerConfig(actions, tiers, action_arguments, source)


def default_config() -> SchedulerConfig:
    return parse_config(DEFAULT_CONFIG, "<default>")


def load_config(path: str | Path | None) -> SchedulerConfig:
    if path is None:
        return default_config()
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read scheduler configuration: {err.strerror}") from None
    return parse_config(text, str(path))


class ConfigSource:
    """The active configuration, reloaded when its file changes.

    An invalid new version is logged and the previous configuration stays in force, as in
    Volcano; a broken file at start-up is an error.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self._stamp: tuple[float, int] | None = self._stat()
        self.config = load_config(self.path)
        self.last_error: str = ""

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
                self.config = load_config(self.path)
                self.last_error = ""
                log.info("reloaded scheduler configuration from %s", self.path)
            except ConfigError as err:
                self.last_error = str(err)
                log.error("keeping previous scheduler configuration: %s", err)
        return self.config
