"""Plugin and action base classes and their registries.

As in Volcano's framework, a plugin is instantiated fresh for every session and registers
callbacks on named extension points (``framework/points.py``) in ``on_session_open``; an action
is a long-lived object whose ``execute`` runs once per session. The framework knows no action or
plugin by name: ``scheduler/builtins.py`` registers Stromboli's own, and the entry points call
it, so a new policy is one new module plus one line there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from stromboli.core.scheduler.framework.arguments import Arguments

if TYPE_CHECKING:
    from stromboli.core.scheduler.framework.options import PluginOption
    from stromboli.core.scheduler.framework.session import Session


class Plugin:
    """Base class of scheduler plugins."""

    #: Registered name, as written in the configuration file.
    name: ClassVar[str] = ""
    #: Argument keys this plugin understands, with their defaults (for validation and docs).
    known_arguments: ClassVar[dict[str, object]] = {}
    #: Argument key prefixes accepted with any suffix (such as ``binpack.resources.``).
    argument_prefixes: ClassVar[tuple[str, ...]] = ()
    #: The tier entry (name, arguments, switches) the session built this plugin from; None for
    #: a plugin made outside a session.
    option: PluginOption | None = None

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def on_session_open(self, ssn: Session) -> None:
        """Register callbacks on the session."""

    def on_session_close(self, ssn: Session) -> None:
        """Write back whatever the plugin keeps for the next cycle."""


class Action:
    """Base class of scheduler actions."""

    name: ClassVar[str] = ""
    known_arguments: ClassVar[dict[str, object]] = {}

    def execute(self, ssn: Session) -> None:
        raise NotImplementedError


#: Registered plugins and actions by configuration name.
PLUGINS: dict[str, type[Plugin]] = {}
ACTIONS: dict[str, type[Action]] = {}


class RegistryError(ValueError):
    """Two different classes registered under one name."""


def _register(registry: dict, kind: str, cls: type) -> type:
    name = getattr(cls, "name", "")
    if not name:
        raise RegistryError(f"{kind} class {cls.__qualname__} has no name")
    known = registry.get(name)
    if known is not None and known is not cls:
        raise RegistryError(
            f"{kind} {name!r} is already registered as {known.__module__}.{known.__qualname__}; "
            f"{cls.__module__}.{cls.__qualname__} needs another name"
        )
    registry[name] = cls
    return cls


def register_plugin(cls: type[Plugin]) -> type[Plugin]:
    """Make ``cls`` available to configuration files under ``cls.name``."""
    return _register(PLUGINS, "plugin", cls)


def register_action(cls: type[Action]) -> type[Action]:
    """Make ``cls`` available to configuration files under ``cls.name``."""
    return _register(ACTIONS, "action", cls)
