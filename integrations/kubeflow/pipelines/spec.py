"""The vcjob a pipeline step submits, built from the step's arguments or from a YAML template.

Everything here is pure: the arguments are checked and turned into one
``batch.volcano.sh/v1alpha1`` Job before the cluster is touched, so that a wrong argument fails
the step at once, naming the parameter, and nothing is left half-created. The finished job is
read back with the controller's own parser (:func:`parse_job`), so what the controller would
refuse is refused here first, with the same field path.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from stromboli.core.api import constants as k
from stromboli.core.api.quantity import QuantityError, parse_quantity
from stromboli.core.controller.job.spec import JobSpecError, parse_job
from stromboli.integrations.kubeflow.pipelines.errors import ParameterError

#: The container every task's pods run (``kubectl logs POD -c main``).
CONTAINER = "main"
#: Task name when the arguments describe a single task.
DEFAULT_TASK = "worker"
#: Template text beyond this is refused (a vcjob is a few KiB; a pipeline parameter is not a
#: place for megabytes).
MAX_TEMPLATE_BYTES = 1 << 20
#: Nodes (mappings, lists, scalars) and nesting depth a template may have after YAML aliases
#: are followed: an alias bomb stays small as text but not as a tree.
MAX_TEMPLATE_NODES = 100_000
MAX_TEMPLATE_DEPTH = 64

TASK_KEYS = frozenset(
    {"name", "replicas", "image", "command", "args", "resources", "env", "minAvailable", "policies"}
)
_PLACEHOLDER = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WHOLE_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_TASK_CONFIG_KEYS = {
    "affinity": "affinity",
    "tolerations": "tolerations",
    "node_selector": "nodeSelector",
    "nodeSelector": "nodeSelector",
    "volumes": "volumes",
}


@dataclass(frozen=True, slots=True)
class JobRequest:
    """The component's arguments that shape the vcjob (see the component's docstring)."""

    namespace: str
    name: str = ""
    image: str = ""
    command: Sequence[str] = ()
    args: Sequence[str] = ()
    replicas: int = 1
    tasks: Sequence[Any] = ()
    queue: str = ""
    resources: Mapping[str, Any] = field(default_factory=dict)
    min_available: int = 0
    plugins: Mapping[str, Any] = field(default_factory=dict)
    template: str = ""
    template_values: Mapping[str, Any] = field(default_factory=dict)
    pod_annotations: Mapping[str, Any] = field(default_factory=dict)
    scheduler_name: str = k.DEFAULT_SCHEDULER_NAME
    ttl_seconds_after_finished: int = -1
    #: ``dsl.TaskConfig`` fields (``resources``, ``env``, ``tolerations``, ``node_selector``,
    #: ``affinity``, ``volumes``, ``volume_mounts``), set on tasks that do not set their own.
    task_config: Mapping[str, Any] = field(default_factory=dict)


def build_job(request: JobRequest) -> dict[str, Any]:
    """The vcjob to create for ``request``, checked; raises :class:`ParameterError`."""
    if request.template.strip():
        job = render_template(request.template, request.template_values)
        _refuse_with_template(request)
    else:
        if request.template_values:
            raise ParameterError("template_values", "given without a template")
        job = _job_from_arguments(request)
    return finish_job(job, request)


# --- from arguments -------------------------------------------------------------------------------


def _job_from_arguments(request: JobRequest) -> dict[str, Any]:
    entries = _list("tasks", request.tasks)
    if not entries:
        entries = [{"name": DEFAULT_TASK, "replicas": request.replicas}]
    elif request.replicas != 1:
        raise ParameterError("replicas", "set each task's replicas in tasks instead")
    tasks = [_task(i, entry, request) for i, entry in enumerate(entries)]
    spec: dict[str, Any] = {"tasks": tasks}
    if request.min_available:
        spec["minAvailable"] = _count("min_available", request.min_available)
    if request.plugins:
        spec["plugins"] = _plugins(request.plugins)
    return {"apiVersion": k.BATCH_V1ALPHA1, "kind": "Job", "metadata": {}, "spec": spec}


def _task(index: int, entry: Any, request: JobRequest) -> dict[str, Any]:
    where = f"tasks[{index}]"
    if not isinstance(entry, Mapping):
        raise ParameterError(
            where,
            f"expected a mapping such as {{'name': 'worker', "
            f"'replicas': 2}}, got {type(entry).__name__}",
        )
    unknown = sorted(str(key) for key in entry if key not in TASK_KEYS)
    if unknown:
        raise ParameterError(
            f"{where}.{unknown[0]}", f"unknown key; a task takes {', '.join(sorted(TASK_KEYS))}"
        )
    name = entry.get("name", DEFAULT_TASK if index == 0 else f"task{index}")
    if not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.fullmatch(name):
        raise ParameterError(
            f"{where}.name", f"{name!r} is not a DNS label (lower-case letters, digits, '-')"
        )
    image = entry.get("image", request.image)
    if not isinstance(image, str) or not image.strip():
        raise ParameterError(
            "image" if "image" not in entry else f"{where}.image",
            "required: the container image the job's pods run",
        )
    container: dict[str, Any] = {"name": CONTAINER, "image": image}
    command = _strings(
        f"{where}.command" if "command" in entry else "command",
        entry.get("command", request.command),
    )
    args = _strings(f"{where}.args" if "args" in entry else "args", entry.get("args", request.args))
    if command:
        container["command"] = command
    if args:
        container["args"] = args
    resources_where = f"{where}.resources" if "resources" in entry else "resources"
    resources = _resources(resources_where, entry.get("resources", request.resources))
    if resources:
        container["resources"] = resources
    if "env" in entry:
        container["env"] = _env(f"{where}.env", entry["env"])
    task: dict[str, Any] = {
        "name": name,
        "replicas": _count(f"{where}.replicas", entry.get("replicas", 1)),
        "template": {
            "spec": {"restartPolicy": "Never", "containers": [container]},
        },
    }
    if "minAvailable" in entry:
        task["minAvailable"] = _count(f"{where}.minAvailable", entry["minAvailable"])
    if "policies" in entry:
        task["policies"] = _list(f"{where}.policies", entry["policies"])
    return task


def _refuse_with_template(request: JobRequest) -> None:
    """Arguments that a template replaces would be silently ignored: refuse them instead."""
    given = {
        "image": bool(request.image),
        "command": bool(request.command),
        "args": bool(request.args),
        "tasks": bool(request.tasks),
        "resources": bool(request.resources),
        "min_available": bool(request.min_available),
        "plugins": bool(request.plugins),
        "replicas": request.replicas != 1,
    }
    clash = [name for name, set_ in given.items() if set_]
    if clash:
        raise ParameterError(
            clash[0], "cannot be combined with template (put it in the template instead)"
        )


# --- from a template --------------------------------------------------------------------------


def render_template(text: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The vcjob in ``text`` (YAML or JSON) with its ``${name}`` placeholders filled in.

    Placeholders are filled inside the parsed document, never in the text, so a value cannot
    add YAML structure. A string that is exactly one placeholder takes the value as it is (a
    number stays a number); inside a longer string the value is written as text. ``$$`` is a
    literal ``$`` (so ``$${HOME}`` reaches the pod as ``${HOME}``); a ``$`` not followed by
    ``{`` is left alone.
    """
    if not isinstance(text, str):
        raise ParameterError("template", f"expected YAML text, got {type(text).__name__}")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TEMPLATE_BYTES:
        raise ParameterError("template", f"longer than {MAX_TEMPLATE_BYTES} bytes")
    if not isinstance(values, Mapping):
        raise ParameterError("template_values", f"expected a mapping, got {type(values).__name__}")
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise ParameterError("template", f"not valid YAML: {_one_line(error)}") from None
    if len(documents) != 1:
        raise ParameterError("template", f"expected one YAML document, found {len(documents)}")
    (job,) = documents
    _check_size(job)
    if not isinstance(job, dict):
        raise ParameterError("template", f"expected a vcjob mapping, got {type(job).__name__}")
    api_version, kind = job.get("apiVersion"), job.get("kind")
    if (api_version, kind) != (k.BATCH_V1ALPHA1, "Job"):
        raise ParameterError(
            "template",
            f"is a {kind or '<no kind>'} ({api_version or '<no apiVersion>'}), not a Volcano "
            f"Job: set apiVersion: {k.BATCH_V1ALPHA1} and kind: Job",
        )
    used: set[str] = set()
    filled = _fill(job, values, used, "")
    unused = sorted(set(map(str, values)) - used)
    if unused:
        raise ParameterError(
            f"template_values.{unused[0]}", "no ${" + unused[0] + "} placeholder in the template"
        )
    return filled


def _check_size(document: Any) -> None:
    """Refuse documents too deep or, aliases followed, too big (counted without recursion)."""
    stack: list[tuple[Any, int]] = [(document, 0)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_TEMPLATE_NODES:
            raise ParameterError("template", f"more than {MAX_TEMPLATE_NODES} values")
        if depth > MAX_TEMPLATE_DEPTH:
            raise ParameterError("template", f"nested deeper than {MAX_TEMPLATE_DEPTH} levels")
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise ParameterError("template", f"key {key!r} is not a string")
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)


def _fill(node: Any, values: Mapping[str, Any], used: set[str], path: str) -> Any:
    if isinstance(node, dict):
        return {
            key: _fill(value, values, used, f"{path}.{key}" if path else key)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_fill(item, values, used, f"{path}[{i}]") for i, item in enumerate(node)]
    if not isinstance(node, str) or "$" not in node:
        return copy.copy(node)
    whole = _WHOLE_PLACEHOLDER.fullmatch(node)
    if whole:
        return whole_numbers(copy.deepcopy(_value(whole.group(1), values, used, path)))

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        value = _value(match.group(1), values, used, path)
        if isinstance(value, (dict, list)):
            raise ParameterError(
                f"template_values.{match.group(1)}",
                f"a {type(value).__name__} cannot go inside the text at {path}",
            )
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(whole_numbers(value))

    return _PLACEHOLDER.sub(one, node)


def whole_numbers(value: Any) -> Any:
    """kfp passes dict parameters as protobuf Structs, whose numbers are all floats: 3 arrives
    as 3.0, which a vcjob's integer fields refuse. Integral floats become ints again."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def _value(name: str, values: Mapping[str, Any], used: set[str], path: str) -> Any:
    if name not in values:
        raise ParameterError("template_values", f"no value for ${{{name}}} (used at {path})")
    used.add(name)
    return values[name]


# --- both ------------------------------------------------------------------------------------


def finish_job(job: dict[str, Any], request: JobRequest) -> dict[str, Any]:
    """Name, namespace, queue, scheduler and the pod-level settings; then the controller's check.

    Queue and scheduler are filled as Volcano's webhook would (the step must work where no
    webhook runs): a template's own values are kept unless the ``queue`` argument is given.
    """
    job = copy.deepcopy(job)
    meta = job.get("metadata")
    if meta is None:
        meta = job["metadata"] = {}
    if not isinstance(meta, dict):
        raise ParameterError("template", "metadata must be a mapping")
    meta["namespace"] = _name("namespace", request.namespace)
    if request.name:
        meta.pop("generateName", None)
        meta["name"] = _name("name", request.name)
    elif not meta.get("name") and not meta.get("generateName"):
        meta["generateName"] = "kfp-vcjob-"
    spec = job.get("spec")
    if not isinstance(spec, dict):
        raise ParameterError("template", "spec must be a mapping with tasks")
    if request.queue:
        spec["queue"] = _name("queue", request.queue)
    spec.setdefault("queue", k.DEFAULT_QUEUE)
    if not spec.get("schedulerName"):
        spec["schedulerName"] = _name("scheduler_name", request.scheduler_name)
    if request.ttl_seconds_after_finished >= 0:
        spec["ttlSecondsAfterFinished"] = _count(
            "ttl_seconds_after_finished", request.ttl_seconds_after_finished
        )
    annotations = _annotations(request.pod_annotations)
    task_config = _task_config(request.task_config)
    for task in spec.get("tasks") or ():
        if isinstance(task, dict):
            _pod_settings(task, annotations, task_config)
    probe = {**job, "metadata": {**meta, "name": meta.get("name") or "probe"}}
    try:
        parse_job(probe)
    except JobSpecError as error:
        origin = "template" if request.template.strip() else "tasks"
        raise ParameterError(origin, f"{error.field}: {error.message}") from None
    return job


def _pod_settings(
    task: dict[str, Any], annotations: dict[str, str], task_config: dict[str, Any]
) -> None:
    template = task.setdefault("template", {})
    if not isinstance(template, dict):
        return  # parse_job names the field
    if annotations:
        meta = template.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta["annotations"] = {**annotations, **(meta.get("annotations") or {})}
    pod = template.get("spec")
    if not task_config or not isinstance(pod, dict):
        return
    for key in ("affinity", "tolerations", "nodeSelector", "volumes"):
        if key in task_config and not pod.get(key):
            pod[key] = copy.deepcopy(task_config[key])
    for container in pod.get("containers") or ():
        if not isinstance(container, dict):
            continue
        if "resources" in task_config and not container.get("resources"):
            container["resources"] = copy.deepcopy(task_config["resources"])
        if "env" in task_config:
            own = {e.get("name") for e in container.get("env") or () if isinstance(e, dict)}
            extra = [e for e in task_config["env"] if e.get("name") not in own]
            container["env"] = [*(container.get("env") or ()), *copy.deepcopy(extra)]
        if "volumeMounts" in task_config and not container.get("volumeMounts"):
            container["volumeMounts"] = copy.deepcopy(task_config["volumeMounts"])


def _task_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``dsl.TaskConfig`` fields in pod-spec spelling, empty ones left out."""
    if not isinstance(config, Mapping):
        raise ParameterError("task_config", f"expected a mapping, got {type(config).__name__}")
    out: dict[str, Any] = {}
    for key, value in config.items():
        if value in (None, {}, []):
            continue
        if key in _TASK_CONFIG_KEYS:
            out[_TASK_CONFIG_KEYS[key]] = value
        elif key in ("volume_mounts", "volumeMounts"):
            out["volumeMounts"] = _list(f"task_config.{key}", value)
        elif key == "resources":
            out["resources"] = _resources("task_config.resources", value)
        elif key == "env":
            out["env"] = _env("task_config.env", value)
        else:
            raise ParameterError(f"task_config.{key}", "not a TaskConfig field")
    return out


# --- argument checks -------------------------------------------------------------------------


def _name(parameter: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 253:
        raise ParameterError(parameter, f"expected a Kubernetes name, got {value!r}")
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", value):
        raise ParameterError(
            parameter, f"{value!r} is not a valid name (lower-case letters, digits, '-', '.')"
        )
    return value


def _count(parameter: str, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON parameters may arrive as 2.0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
        raise ParameterError(
            parameter, f"expected a whole number from 0 to 2147483647, got {value!r}"
        )
    return value


def _list(parameter: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ParameterError(parameter, f"expected a list, got {type(value).__name__}")
    return list(value)


def _strings(parameter: str, value: Any) -> list[str]:
    items = _list(parameter, value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ParameterError(f"{parameter}[{i}]", f"expected a string, got {item!r}")
    return items


def _quantity(parameter: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ParameterError(
            parameter, f"expected a quantity such as '500m' or '2Gi', got {value!r}"
        )
    text = str(value)
    try:
        amount = parse_quantity(text, parameter)
    except QuantityError as error:
        raise ParameterError(parameter, str(error).removeprefix(f"{parameter}: ")) from None
    if amount < 0:
        raise ParameterError(parameter, f"must not be negative, got {text!r}")
    return text


def _resources(parameter: str, value: Any) -> dict[str, Any]:
    """``{"requests": {...}, "limits": {...}}``, or a flat ``{"cpu": "1", ...}`` that is taken
    as both requests and limits (what a GPU needs, and what a data scientist means)."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise ParameterError(parameter, f"expected a mapping, got {type(value).__name__}")
    if set(value) <= {"requests", "limits"}:
        out: dict[str, Any] = {}
        for part, amounts in value.items():
            if not isinstance(amounts, Mapping):
                raise ParameterError(f"{parameter}.{part}", "expected a mapping of quantities")
            out[part] = {
                str(name): _quantity(f"{parameter}.{part}.{name}", amount)
                for name, amount in amounts.items()
            }
        return out
    flat = {str(name): _quantity(f"{parameter}.{name}", amount) for name, amount in value.items()}
    return {"requests": dict(flat), "limits": dict(flat)}


def _env(parameter: str, value: Any) -> list[dict[str, Any]]:
    """``{"NAME": "value"}`` or a list of EnvVar mappings."""
    if isinstance(value, Mapping):
        return [{"name": str(name), "value": str(v)} for name, v in value.items()]
    items = _list(parameter, value)
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ParameterError(f"{parameter}[{i}]", "expected {'name': ..., 'value': ...}")
    return [dict(item) for item in items]


def _plugins(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, Mapping):
        raise ParameterError(
            "plugins",
            f"expected a mapping such as {{'svc': [], 'env': []}}, got {type(value).__name__}",
        )
    return {str(name): _strings(f"plugins.{name}", args) for name, args in value.items()}


def _annotations(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ParameterError("pod_annotations", f"expected a mapping, got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ParameterError("pod_annotations", f"key {key!r} is not a string")
        if isinstance(item, (Mapping, list)):
            raise ParameterError(f"pod_annotations.{key}", "expected a string value")
        out[key] = "true" if item is True else "false" if item is False else str(item)
    return out


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())
