"""Built-in actions and plugins: registered by the entry points, one line each, nothing by
import alone."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import stromboli.core.scheduler.actions as actions_package
import stromboli.core.scheduler.plugins as plugins_package
from stromboli.core.scheduler.builtins import BUILTIN_ACTIONS, BUILTIN_PLUGINS, register_builtins
from stromboli.core.scheduler.framework.plugin import (
    ACTIONS,
    PLUGINS,
    Plugin,
    RegistryError,
    register_plugin,
)


def modules(package: object) -> set[str]:
    return {
        f"{package.__name__}.{info.name}"  # type: ignore[attr-defined]
        for info in pkgutil.iter_modules(package.__path__)  # type: ignore[attr-defined]
    }


def fresh_python(code: str) -> str:
    """Run ``code`` in a new interpreter (no test-wide registration) and return its output."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_every_plugin_module_has_its_registration_line() -> None:
    assert {cls.__module__ for cls in BUILTIN_PLUGINS} == modules(plugins_package)


def test_every_action_module_has_its_registration_line() -> None:
    assert {cls.__module__ for cls in BUILTIN_ACTIONS} == modules(actions_package)


def test_names_are_unique_and_registered() -> None:
    register_builtins()
    for classes, registry in ((BUILTIN_PLUGINS, PLUGINS), (BUILTIN_ACTIONS, ACTIONS)):
        names = [cls.name for cls in classes]
        assert len(set(names)) == len(names)
        assert all(registry[cls.name] is cls for cls in classes)


def test_registering_again_changes_nothing() -> None:
    before = dict(PLUGINS), dict(ACTIONS)
    register_builtins()
    assert (dict(PLUGINS), dict(ACTIONS)) == before


def test_a_second_class_under_a_taken_name_is_refused() -> None:
    impostor = type("Gang2", (Plugin,), {"name": "gang"})
    with pytest.raises(RegistryError, match=r"'gang' is already registered"):
        register_plugin(impostor)
    assert PLUGINS["gang"] is not impostor


def test_a_plugin_without_a_name_is_refused() -> None:
    with pytest.raises(RegistryError, match="has no name"):
        register_plugin(type("Nameless", (Plugin,), {}))


def test_importing_a_plugin_registers_nothing() -> None:
    out = fresh_python(
        "import stromboli.core.scheduler.plugins.gang, stromboli.core.scheduler.actions.allocate\n"
        "from stromboli.core.scheduler.framework.plugin import PLUGINS, ACTIONS\n"
        "print(len(PLUGINS), len(ACTIONS))"
    )
    assert out == "0 0"


def test_parsing_before_registration_says_what_to_do() -> None:
    out = fresh_python(
        "from stromboli.core.scheduler.conf import ConfigError, default_config\n"
        "try:\n"
        "    default_config()\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
    )
    assert "register_builtins()" in out


def test_the_simulator_registers_the_builtins() -> None:
    out = fresh_python(
        "from stromboli.core.simulate.engine import Simulation\n"
        "Simulation([])\n"
        "from stromboli.core.scheduler.framework.plugin import PLUGINS\n"
        "print('gang' in PLUGINS)"
    )
    assert out == "True"
