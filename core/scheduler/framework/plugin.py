"""Plugin and action base classes and their registries.

As in Volcano's framework, a plugin is instantiated fresh for every session and registers
callbacks on named extension points in ``on_session_open``; an action is a long-lived object
whose ``execute`` runs once per session. A new policy is one new module that registers itself
here with ``@register_plugin`` or ``@register_action``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from stromboli.core.scheduler.framework.arguments import Arguments

if TYPE_CHECKING:
    from stromboli.core.scheduler.framework.session import Session


class Plugin:
    """Base class of scheduler plugins."""

    #: Registered name, as written in the configuration file.
    name: ClassVar[str] = ""
    #: Argument keys this plugin understands, with their defaults (for validation and docs).
    known_arguments: ClassVar[dict[str, object]] = {}
    #: Argument key prefixes accepted with any suffix (such as ``binpack.resources.``).
    argument_prefixes: ClassVar[tuple[str, ...]] = ()

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


PLUGINS: dict[str, type[Plugin]] = {}
ACTIONS: dict[str, type[Action]] = {}


def register_plugin(cls: type[Plugin]) -> type[Plugin]:
    PLUGINS[cls.name] = cls
    return cls


def register_action(cls: type[Action]) -> type[Action]:
    ACTIONS[cls.name] = cls
    return cls


def load_builtins() -> None:
    """Import the built-in actions and plugins so that they register themselves."""
    from stromboli.core.scheduler import actions, plugins  # noqa: F401
