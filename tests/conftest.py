"""Test-wide set-up: the scheduler's built-in actions and plugins are registered, as every
entry point does, since tests build schedulers and parse configurations directly."""

from stromboli.core.scheduler.builtins import register_builtins

register_builtins()
