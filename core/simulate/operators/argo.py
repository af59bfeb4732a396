"""Argo Workflows' controller, emulated: a workflow's pods step by step.

``workflow/controller/operator.go`` walks the entry template: a ``steps`` template runs its
groups one after another, the steps of a group at once (``withItems``/``withSequence``
expanded, ``(i:value)`` in the node name); a ``dag`` template runs each task once its
``dependencies`` have succeeded; a container or script template is one pod. Each pod is
``<workflow>-<template>-<hash of its node name>`` (POD_NAMES v2, the hash ours), labelled
``workflows.argoproj.io/workflow``, annotated with its ``workflows.argoproj.io/node-name``,
owned by the Workflow. Steps with ``when`` or ``withParam`` depend on run-time values and are
skipped. The gang of each pod is the adapter's (``WorkflowAdapter.podgroup_for_pod``, whichever
``stromboli.dev/gang-scope``); a step group's PodGroup is made with its first pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from stromboli.core.simulate.operators.pods import owned_pod, phase_of
from stromboli.integrations.argo.convert import (
    NODE_NAME_ANNOTATION,
    WORKFLOW_LABEL,
    Templates,
    WorkflowAdapter,
    makes_pod,
    tasks_of,
)
from stromboli.integrations.common import Conversion, apply_mutation, mapping, read_meta, short_hash

Obj = Mapping[str, Any]
ADAPTER = WorkflowAdapter()
MAX_DEPTH = 8


class _Walk:
    def __init__(self, obj: Obj, pods: Sequence[Obj]) -> None:
        self.templates = Templates(mapping(obj.get("spec"), "spec"))
        self.phases: dict[str, str] = {}
        for pod in pods:
            node = ((pod.get("metadata") or {}).get("annotations") or {}).get(NODE_NAME_ANNOTATION)
            if isinstance(node, str):
                self.phases[node] = phase_of(pod)
        self.due: list[tuple[str, Mapping[str, Any]]] = []

    def run(self, template: Mapping[str, Any] | None, node: str, depth: int = 0) -> bool:
        """Schedule what is due under ``node``; returns whether it has all succeeded."""
        if template is None or depth > MAX_DEPTH:
            return True
        if makes_pod(template):
            phase = self.phases.get(node)
            if phase is None:
                self.due.append((node, template))
            return phase == "Succeeded"
        groups = template.get("steps")
        if isinstance(groups, list):
            for i, group in enumerate(groups):
                done = True
                for step in group if isinstance(group, list) else ():
                    if isinstance(step, Mapping):
                        done = self._step(step, f"{node}[{i}]", depth) and done
                if not done:
                    return False
            return True
        tasks = tasks_of(template)
        if tasks:
            finished: set[str] = set()
            progress = True
            while progress:  # tasks whose dependencies are done, until nothing changes
                progress = False
                for task in tasks:
                    name = str(task.get("name"))
                    deps = task.get("dependencies") or ()
                    if name in finished or not all(d in finished for d in deps):
                        continue
                    if self._step(task, node, depth, dag=True):
                        finished.add(name)
                        progress = True
            return len(finished) == len(tasks)
        return True

    def _step(self, step: Mapping[str, Any], prefix: str, depth: int, dag: bool = False) -> bool:
        name = str(step.get("name"))
        if step.get("when") or step.get("withParam") is not None:
            return True
        items = step.get("withItems")
        expansions = (
            [f"({i}:{v})" for i, v in enumerate(items)] if isinstance(items, list) else [""]
        )
        template = self.templates.of_step(step)
        done = True
        for suffix in expansions:
            done = self.run(template, f"{prefix}.{name}{suffix}", depth + 1) and done
        return done


def argo_workflow(
    obj: Obj,
    pods: Sequence[Obj],
    group: Obj | None,
    conversion: Conversion,
    related: Sequence[Obj] = (),
) -> Iterator[dict[str, Any]]:
    """The pods due now, and the step-group PodGroups they need first."""
    meta = read_meta(obj)
    walk = _Walk(obj, pods)
    entry = walk.templates.by_name.get(walk.templates.entrypoint or "")
    walk.run(entry, meta.name)
    for node, template in walk.due:
        template_name = str(template.get("name") or "pod")
        container = dict(mapping(template.get(_kind(template)), "container"))
        container.setdefault("name", "main")
        pod_template = {
            "metadata": dict(mapping(template.get("metadata"), "metadata")),
            "spec": {"restartPolicy": "Never", "containers": [container]},
        }
        name = f"{meta.name}-{template_name}-{short_hash(node)}"[:253]
        pod = owned_pod(obj, name, pod_template, {WORKFLOW_LABEL: meta.name}, None)
        pod["metadata"]["annotations"][NODE_NAME_ANNOTATION] = node
        gang = ADAPTER.podgroup_for_pod(pod, obj)
        yield from (dict(g) for g in gang.podgroups)
        yield apply_mutation(pod, gang.mutations[0])


def _kind(template: Mapping[str, Any]) -> str:
    return "container" if template.get("container") else "script"
