"""Argo Workflows: a gang per workflow, or per fan-out step group."""
