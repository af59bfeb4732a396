"""Stromboli core: the Volcano-compatible API, cluster store, scheduler and simulator."""

__version__ = "0.1.0"
