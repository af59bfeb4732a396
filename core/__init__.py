"""Stromboli core: the Volcano-compatible API, the cluster store, the scheduler and the simulator."""

__version__ = "0.1.0"
