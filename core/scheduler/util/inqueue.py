"""What an admitted (Inqueue) job holds of its queue's or the cluster's room, as the
admission plugins (overcommit, proportion, capacity) count it, and how they word a refusal."""

from __future__ import annotations

from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.api.resource import CPU, EPSILON, MEMORY, PODS, Resource


def without_gated(job: JobInfo, reserved: Resource) -> Resource:
    """``reserved`` less what the job's scheduling-gated pods request (never below zero):
    gated pods cannot run yet, so an admitted job does not hold room for them and other
    jobs may be admitted meanwhile (Volcano e2e "Scheduling gated task will not consume
    inqueue resources")."""
    gated = Resource()
    for task in job.tasks.values():
        if task.gated:
            gated.add(task.resreq)
    if gated.is_empty():
        return reserved
    return Resource({name: max(v - gated.get(name), 0.0) for name, v in reserved.amounts.items()})


def _volcano_order(name: str) -> tuple[int, str]:
    return ({CPU: 0, MEMORY: 1}.get(name, 2), name)


def short_resources(wanted: Resource, room: Resource, request: Resource) -> list[str]:
    """Names of the resources ``request`` asks for (``pods`` aside) on which ``wanted`` would
    pass ``room``: cpu, then memory, then the others by name."""
    return sorted(
        (
            name
            for name, v in request.amounts.items()
            if v > EPSILON and name != PODS and wanted.get(name) > room.get(name) + EPSILON
        ),
        key=_volcano_order,
    )


def format_resource_names(prefix: str, verb: str, names: list[str]) -> str:
    """An enqueue refusal as Volcano words it: ``queue resource quota insufficient:
    insufficient cpu, insufficient memory`` (the prefix alone when no name is known)."""
    if not names:
        return prefix
    ordered = sorted(names, key=_volcano_order)
    return f"{prefix}: " + ", ".join(f"{verb} {name}" for name in ordered)
