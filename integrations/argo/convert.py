"""Argo Workflows (``argoproj.io/v1alpha1`` Workflow) as gangs; Argo has no PodGroup of its own.

Two scopes, chosen per workflow by the annotation ``stromboli.dev/gang-scope``:

- ``workflow`` (default): one PodGroup ``argo-<workflow>-pg`` for all the workflow's pods,
  ``minMember`` 1 (steps run one after another; a larger gang would never fill), no
  minResources. It puts the workflow in one queue and accounts it as one job.
- ``step-group``: one PodGroup per fan-out — a parallel step group (``steps[i]``) or a DAG task
  expanded by ``withItems``/``withSequence``/``withParam`` — named
  ``argo-<workflow>-<hash of the group's node name>-pg``, so a group's pods start together or
  not at all. ``minMember`` counts the pods certain to start: steps whose template makes a
  pod (container, script, containerSet), times their static fan-out, leaving out steps with a
  ``when`` and ``withParam`` expansions (unknown until run time; counting them could make a gang
  that never fills), capped by the template's and the workflow's ``parallelism``; at least 1.
  ``minResources`` = Σ those pods' container requests. Groups are found from the pods'
  ``workflows.argoproj.io/node-name`` annotation, which spells the path from the entry point
  (``wf[1].train(0:a)``): ``convert`` makes the groups of the pod nodes in ``status.nodes``,
  ``podgroup_for_pod`` the group of one pod being admitted.

``queue``: the workflow's ``scheduling.volcano.sh/queue-name`` annotation, else label, else
``spec.podMetadata`` annotation (Volcano ignores the workflow-level keys: volcano #1840);
``priorityClassName`` = ``spec.podPriorityClassName``; network topology from Volcano's
``volcano.sh/network-topology-*`` annotations on the workflow. Pods get ``schedulerName:
volcano`` where none is set, ``scheduling.k8s.io/group-name``, ``volcano.sh/task-spec`` = the
template name that made them, and the queue annotation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from stromboli.core.api import constants as k
from stromboli.integrations.common import (
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    Meta,
    PodMutation,
    Resources,
    add_count,
    annotations_of,
    bounded_name,
    integer,
    labels_of,
    mapping,
    mutation,
    object_name,
    owner_reference,
    pod_resources,
    podgroup,
    read_meta,
    sequence,
    settle,
    short_hash,
    string,
    volcano_network_topology,
)

API_VERSION = "argoproj.io/v1alpha1"
FRAMEWORK = "argo-workflows"
SCOPE_ANNOTATION = "stromboli.dev/gang-scope"
WORKFLOW_SCOPE = "workflow"
STEP_GROUP_SCOPE = "step-group"
WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
NODE_NAME_ANNOTATION = "workflows.argoproj.io/node-name"
POD_TEMPLATE_KINDS = ("container", "script", "containerSet")
MAX_NODE_NAME = 4096
_IDENT = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)


# --- Node names --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "group" ([i]), "step" (.name), "item" ((i:value)), "retry" ((i))
    value: str
    end: int  # offset just past the token in the node name


def parse_node_name(workflow: str, node: str) -> list[Token] | None:
    """The path of a node name below the workflow, or None when it is not one of its nodes."""
    if len(node) > MAX_NODE_NAME or not node.startswith(workflow):
        return None
    tokens, i = [], len(workflow)
    while i < len(node):
        char = node[i]
        if char == "[":
            end = node.find("]", i)
            if end < 0 or not node[i + 1 : end].isdigit():
                return None
            tokens.append(Token("group", node[i + 1 : end], end + 1))
            i = end + 1
        elif char == ".":
            match = _IDENT.match(node, i + 1)
            if match is None:
                return None
            tokens.append(Token("step", match.group(), match.end()))
            i = match.end()
        elif char == "(":
            end, depth = i, 0
            for end in range(i, len(node)):
                depth += {"(": 1, ")": -1}.get(node[end], 0)
                if depth == 0:
                    break
            if depth:
                return None
            inner = node[i + 1 : end]
            index, colon, _ = inner.partition(":")
            if not index.isdigit():
                return None
            tokens.append(Token("item" if colon else "retry", index, end + 1))
            i = end + 1
        else:
            return None
    return tokens


# --- Templates ---------------------------------------------------------------------------------


class Templates:
    """A workflow's templates by name; a step's template is looked up, never recursed into."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.by_name: dict[str, Mapping[str, Any]] = {}
        for i, template in enumerate(sequence(spec.get("templates"), "spec.templates")):
            template = mapping(template, f"spec.templates[{i}]")
            name = string(template.get("name"), f"spec.templates[{i}].name")
            if name and name not in self.by_name:
                self.by_name[name] = template
        self.entrypoint = string(spec.get("entrypoint"), "spec.entrypoint")
        self.on_exit = string(spec.get("onExit"), "spec.onExit")

    def of_step(self, step: Mapping[str, Any]) -> Mapping[str, Any] | None:
        if isinstance(step.get("inline"), Mapping):
            return step["inline"]
        name = step.get("template")
        return self.by_name.get(name) if isinstance(name, str) else None


def steps_of(template: Mapping[str, Any] | None, index: int) -> Sequence[Mapping[str, Any]]:
    groups = template.get("steps") if template else None
    if not isinstance(groups, list) or not 0 <= index < len(groups):
        return ()
    group = groups[index]
    return [s for s in group if isinstance(s, Mapping)] if isinstance(group, list) else ()


def tasks_of(template: Mapping[str, Any] | None) -> Sequence[Mapping[str, Any]]:
    dag = template.get("dag") if template else None
    tasks = dag.get("tasks") if isinstance(dag, Mapping) else None
    return [t for t in tasks if isinstance(t, Mapping)] if isinstance(tasks, list) else ()


def makes_pod(template: Mapping[str, Any] | None) -> TypeGuard[Mapping[str, Any]]:
    if not template:
        return False
    return any(template.get(kind) for kind in POD_TEMPLATE_KINDS)


def fan_out(step: Mapping[str, Any], field: str) -> int:
    """Pods a step certainly makes: its static expansion, 0 when unknown or conditional."""
    if step.get("when") or step.get("withParam") is not None:
        return 0
    if step.get("withItems") is not None:
        return len(sequence(step.get("withItems"), f"{field}.withItems"))
    sequence_spec = step.get("withSequence")
    if sequence_spec is not None:
        spec = mapping(sequence_spec, f"{field}.withSequence")
        if spec.get("count") is not None:
            return _int_text(spec.get("count"), f"{field}.withSequence.count")
        start = _int_text(spec.get("start", 0), f"{field}.withSequence.start")
        end = _int_text(spec.get("end", 0), f"{field}.withSequence.end")
        return abs(end - start) + 1
    return 1


def _int_text(value: Any, field: str) -> int:
    """Argo writes these as int-or-string; an expression (``{{...}}``) is unknown: 0."""
    if isinstance(value, str):
        if not value.strip().isascii() or not value.strip().isdigit() or len(value) > 9:
            return 0
        value = int(value)
    return integer(value, field, 0)


def template_resources(template: Mapping[str, Any], field: str) -> Resources:
    if template.get("containerSet"):
        cset = mapping(template.get("containerSet"), f"{field}.containerSet")
        return pod_resources(cset, f"{field}.containerSet", fallback="per-resource")
    kind = "container" if template.get("container") else "script"
    spec = {"containers": [mapping(template.get(kind), f"{field}.{kind}")]}
    return pod_resources(spec, field, fallback="per-resource")


# --- Groups ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepGroup:
    """The fan-out a pod belongs to: its node-name prefix and the pods certain to start."""

    key: str
    min_member: int
    resources: Resources


def resolve(
    workflow: str, node: str, templates: Templates, parallelism: int | None
) -> tuple[str | None, StepGroup]:
    """(template that makes the pod, its step group) for a pod's node name.

    Walks the node path from the entry point one token at a time; where the path leaves what
    the spec says (a templateRef, a renamed template), the pod forms a group of one.
    """
    tokens = parse_node_name(workflow, node) or []
    template: Mapping[str, Any] | None = None
    if tokens and tokens[0] == Token("step", "onExit", tokens[0].end):
        template, tokens = templates.by_name.get(templates.on_exit or ""), tokens[1:]
    else:
        template = templates.by_name.get(templates.entrypoint or "")
    group = StepGroup(node, 1, Resources())
    pending_steps: Sequence[Mapping[str, Any]] = ()
    for position, token in enumerate(tokens):
        if token.kind == "group":
            pending_steps = steps_of(template, int(token.value))
            key = node[: token.end]
            group = _group(key, pending_steps, templates, template, parallelism)
        elif token.kind == "step":
            in_steps = position > 0 and tokens[position - 1].kind == "group"
            candidates = pending_steps if in_steps else tasks_of(template)
            step = next((s for s in candidates if s.get("name") == token.value), None)
            if not in_steps and step is not None:  # a DAG task: its own fan-out
                group = _group(node[: token.end], [step], templates, template, parallelism)
            template = templates.of_step(step) if step is not None else None
            pending_steps = ()
        # items and retries stay in the template and group reached so far
    name = template.get("name") if template else None
    return (name if isinstance(name, str) else None), group


def _group(
    key: str,
    steps: Sequence[Mapping[str, Any]],
    templates: Templates,
    parent: Mapping[str, Any] | None,
    parallelism: int | None,
) -> StepGroup:
    pods, resources = 0, Resources()
    for i, step in enumerate(steps):
        template = templates.of_step(step)
        if not makes_pod(template):
            continue
        count = fan_out(step, f"step {step.get('name')!r}")
        if count:
            pods = add_count(pods, count, f"step {step.get('name')!r}")
            field = f"template {template.get('name')!r}" if template else f"step {i}"
            resources.add(template_resources(template, field), count, field)
    limits = [p for p in (parallelism, _parallelism(parent)) if p]
    if limits and pods > min(limits):
        # Only so many run at once: the gang is that many, and so is its reservation.
        scale = min(limits)
        resources = Resources({n: a * scale / pods for n, a in resources.amounts.items()})
        pods = scale
    return StepGroup(key, max(pods, 1), resources)


def _parallelism(template: Mapping[str, Any] | None) -> int | None:
    value = template.get("parallelism") if template else None
    return _int_text(value, "parallelism") or None if value is not None else None


# --- The adapter -------------------------------------------------------------------------------


class WorkflowAdapter(BaseAdapter):
    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        wf = _Workflow(obj)
        if wf.scope == WORKFLOW_SCOPE:
            podgroup = wf.podgroup(wf.workflow_group_name(), 1, Resources())
            return settle([podgroup], [wf.mutation(wf.workflow_group_name(), "main")], context)
        groups: dict[str, dict[str, Any]] = {}
        mutations: list[PodMutation] = []
        status = mapping(obj.get("status"), "status")
        nodes = mapping(status.get("nodes"), "status.nodes")
        for node_id, node in nodes.items():
            node = mapping(node, f"status.nodes.{node_id}")
            if node.get("type") != "Pod" or not isinstance(node.get("name"), str):
                continue
            template, group = wf.resolve(node["name"])
            name = wf.step_group_name(group.key)
            if name not in groups:
                groups[name] = wf.podgroup(name, group.min_member, group.resources)
            mutations.append(wf.mutation(name, template or "main"))
        return settle(groups.values(), mutations, context)

    def podgroup_for_pod(
        self, pod: Mapping[str, Any], workflow: Mapping[str, Any], context: Context | None = None
    ) -> Conversion:
        """The one group (and mutation) of a pod being admitted, from its node name."""
        try:
            wf = _Workflow(workflow)
            node = annotations_of(pod).get(NODE_NAME_ANNOTATION)
            if wf.scope == WORKFLOW_SCOPE or not isinstance(node, str):
                template = wf.template_of(node) if isinstance(node, str) else None
                name = wf.workflow_group_name()
                group = wf.podgroup(name, 1, Resources())
            else:
                template, step_group = wf.resolve(node)
                name = wf.step_group_name(step_group.key)
                group = wf.podgroup(name, step_group.min_member, step_group.resources)
            change = wf.mutation(name, template or "main")
            return settle([group], [change], context or Context())
        except ConversionError as exc:
            raise exc.about(f"Workflow {object_name(workflow)}") from None

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        try:
            conversion = self.podgroup_for_pod(pod, owner)
        except ConversionError:
            return None
        return conversion.mutations[0].group_name


class _Workflow:
    """A workflow's parts the conversion reads, checked once."""

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.meta: Meta = read_meta(obj)
        spec = mapping(obj.get("spec"), "spec")
        if not spec.get("templates"):
            # A workflow run from a WorkflowTemplate keeps the resolved spec in its status.
            status = mapping(obj.get("status"), "status")
            stored = status.get("storedWorkflowTemplateSpec")
            if stored is not None:
                spec = {**mapping(stored, "status.storedWorkflowTemplateSpec"), **spec}
        self.spec = spec
        self.templates = Templates(spec)
        self.scope = self.meta.annotations.get(SCOPE_ANNOTATION, WORKFLOW_SCOPE)
        if self.scope not in (WORKFLOW_SCOPE, STEP_GROUP_SCOPE):
            raise ConversionError(
                f"metadata.annotations[{SCOPE_ANNOTATION}]",
                f"{self.scope[:40]!r} must be {WORKFLOW_SCOPE} or {STEP_GROUP_SCOPE}",
            )
        parallelism = spec.get("parallelism")
        self.parallelism = integer(parallelism, "spec.parallelism", 0) or None
        pod_meta = mapping(spec.get("podMetadata"), "spec.podMetadata")
        pod_annotations = mapping(pod_meta.get("annotations"), "spec.podMetadata.annotations")
        queue = (
            self.meta.annotations.get(k.QUEUE_NAME_ANNOTATION_KEY)
            or self.meta.labels.get(k.QUEUE_NAME_ANNOTATION_KEY)
            or pod_annotations.get(k.QUEUE_NAME_ANNOTATION_KEY)
        )
        self.queue = queue if isinstance(queue, str) and queue else None
        self.priority = string(spec.get("podPriorityClassName"), "spec.podPriorityClassName")
        self.topology = volcano_network_topology(self.meta)

    def workflow_group_name(self) -> str:
        return bounded_name("argo-", self.meta.name, "-pg")

    def step_group_name(self, key: str) -> str:
        return bounded_name("argo-", self.meta.name, f"-{short_hash(key)}-pg")

    def resolve(self, node: str) -> tuple[str | None, StepGroup]:
        return resolve(self.meta.name, node, self.templates, self.parallelism)

    def template_of(self, node: str) -> str | None:
        return self.resolve(node)[0]

    def podgroup(self, name: str, min_member: int, resources: Resources) -> dict[str, Any]:
        return podgroup(
            name=name,
            namespace=self.meta.namespace,
            owner=owner_reference(self.meta),
            adapter=FRAMEWORK,
            min_member=min_member,
            queue=self.queue,
            priority_class=self.priority,
            min_resources=resources,
            topology=self.topology,
        )

    def mutation(self, name: str, role: str) -> PodMutation:
        extra = {k.QUEUE_NAME_ANNOTATION_KEY: self.queue} if self.queue else {}
        return mutation(
            role, name, {WORKFLOW_LABEL: self.meta.name}, "spec.templates", annotations=extra
        )


def workflow_of(pod: Mapping[str, Any]) -> str | None:
    """The workflow a pod belongs to, by the label Argo puts on every step pod."""
    name = labels_of(pod).get(WORKFLOW_LABEL)
    return name if isinstance(name, str) and name else None
