"""Volcano's validating admission rules for vcjobs (its ``/jobs/validate`` webhook, on create
and update).

``validate_job_create`` and ``validate_job_update`` return the reasons to refuse, in Volcano's
words; an empty list admits the job. Volcano's webhook sends them as one message (joined by
``;``, see :func:`admission_message`).

Two layers are checked, as on a real cluster:

* the CRD schema (numbers that must not be negative, task names that must be DNS labels, mount
  paths that must not be empty), in the API server's wording (``spec.minAvailable: Invalid
  value: -1: spec.minAvailable in body should be greater than or equal to 0``). A real API
  server applies the schema before the webhook, so these never show twice; without one (the
  simulator, tests) they stand in for it. ``schema=False`` leaves them out;
* the webhook's own rules: task and job consistency, lifecycle policies, pod templates (the
  subset of Kubernetes' pod validation that matters for vcjobs), partition policies, plugins,
  volumes, the target queue and task dependencies.

Both expect a job the mutating rules (:func:`~stromboli.core.admission.mutate.mutate_job`)
have already defaulted, as the API server runs mutation first.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from stromboli.core.admission import shape
from stromboli.core.admission.jobsize import MAX_JOB_REPLICAS, oversize, oversize_message
from stromboli.core.admission.queue import children_of, queue_not_found, queue_state
from stromboli.core.api import constants as k
from stromboli.core.api.jobflags import MPI_FLAGS, parse_flags
from stromboli.core.api.quantity import QuantityError, parse_quantity
from stromboli.core.cluster.selectors import SelectorError, validate_label_key, validate_label_value

JOB_PLUGIN_NAMES = frozenset(p.value for p in k.JobPlugin)

VALID_EVENTS: tuple[str, ...] = (
    k.Event.ANY,
    k.Event.POD_FAILED,
    k.Event.POD_EVICTED,
    k.Event.POD_PENDING,
    k.Event.UNKNOWN,
    k.Event.TASK_COMPLETED,
    k.Event.TASK_FAILED,
    k.Event.JOB_UPDATED,
)
"""Events a policy may name, in the order messages list them."""

VALID_ACTIONS: tuple[str, ...] = (
    k.Action.ABORT_JOB,
    k.Action.RESTART_JOB,
    k.Action.RESTART_TASK,
    k.Action.RESTART_POD,
    k.Action.RESTART_PARTITION,
    k.Action.TERMINATE_JOB,
    k.Action.COMPLETE_JOB,
    k.Action.RESUME_JOB,
)
"""Actions a policy may take, in the order messages list them."""

NO_TASKS = "No task specified in job spec"
MPI_MASTER_MISSING = "The specified mpi master task was not found"
TIER_CONFLICT = (
    "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
)
MIN_AVAILABLE_OVER_REPLICAS = (
    "job 'minAvailable' should not be greater than total replicas in tasks"
)
NOT_A_DAG = "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG)"
UPDATE_ADDS_TASKS = "job updates may not add or remove tasks"
UPDATE_OTHER_FIELDS = (
    "job updates may not change fields other than `minAvailable`, "
    "`tasks[*].replicas under spec` and `PriorityClassName`"
)
VOLUME_CONFLICT = (
    "conflict: If you want to use an existing PVC, just specify VolumeClaimName."
    "If you want to create a new PVC, you do not need to specify VolumeClaimName"
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


# --- formatting ----------------------------------------------------------------------------------


def go_value(value: Any) -> str:
    """A value as Kubernetes field errors print it: strings quoted, numbers bare."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {go_value(value)}: {detail}"


def go_list(items: Iterable[Any]) -> str:
    """Go's ``%v`` of a slice: ``[a b c]``."""
    return "[" + " ".join(str(i) for i in items) + "]"


def admission_message(errors: Sequence[str]) -> str:
    """The single message Volcano's webhook returns for these errors."""
    return "; ".join(e.strip().rstrip(";") for e in errors)


def qualified_name_problems(name: str) -> list[str]:
    """Kubernetes' ``IsQualifiedName`` (an optional ``prefix/`` then a name part)."""
    prefix, slash, part = name.rpartition("/")
    problems = []
    if slash:
        if not prefix:
            problems.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        elif not _DNS_SUBDOMAIN.match(prefix):
            problems.append("prefix part " + _DNS_SUBDOMAIN_MESSAGE)
    if not part:
        problems.append("name part must be non-empty")
    elif len(part) > 63:
        problems.append("name part must be no more than 63 characters")
    if part and not _QUALIFIED_NAME.match(part):
        problems.append(_QUALIFIED_NAME_MESSAGE)
    return problems


# --- helpers -------------------------------------------------------------------------------------


def _spec(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return job.get("spec") or {}


def _tasks(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(_spec(job).get("tasks") or [])


def _int(value: Any) -> int:
    return int(value or 0)


def _tier_conflict(topology: Mapping[str, Any] | None) -> bool:
    return bool(
        topology
        and topology.get("highestTierAllowed") is not None
        and topology.get("highestTierName")
    )


def _quantity(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


# --- schema (CRD) layer --------------------------------------------------------------------------


def _minimum(path: str, value: Any, low: int) -> list[str]:
    if isinstance(value, int) and not isinstance(value, bool) and value < low:
        return [invalid(path, value, f"{path} in body should be greater than or equal to {low}")]
    return []


def job_schema_errors(job: Mapping[str, Any]) -> list[str]:
    """What the Job CRD's OpenAPI schema refuses, in the API server's wording."""
    spec = _spec(job)
    errors = _minimum("spec.minAvailable", spec.get("minAvailable"), 0)
    errors += _minimum("spec.maxRetry", spec.get("maxRetry"), 0)
    errors += _minimum("spec.ttlSecondsAfterFinished", spec.get("ttlSecondsAfterFinished"), 0)
    errors += _minimum("spec.minSuccess", spec.get("minSuccess"), 1)
    for i, task in enumerate(_tasks(job)):
        path = f"spec.tasks[{i}]"
        errors += _minimum(f"{path}.replicas", task.get("replicas"), 0)
        errors += _minimum(f"{path}.minAvailable", task.get("minAvailable"), 0)
        errors += _minimum(f"{path}.maxRetry", task.get("maxRetry"), 0)
        name = task.get("name") or ""
        if len(name) > 63:
            errors.append(f"{path}.name: Too long: may not be more than 63 bytes")
        elif name and not _DNS_LABEL.match(name):
            errors.append(
                invalid(
                    f"{path}.name",
                    name,
                    f"{path}.name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
                )
            )
    for i, volume in enumerate(spec.get("volumes") or []):
        path = f"spec.volumes[{i}].mountPath"
        if not volume.get("mountPath"):
            errors.append(invalid(path, "", f"{path} in body should be at least 1 chars long"))
    return errors


# --- policies ------------------------------------------------------------------------------------


def _valid_lists() -> str:
    return f"valid events are {go_list(VALID_EVENTS)}, valid actions are {go_list(VALID_ACTIONS)}"


def validate_policies(policies: Sequence[Mapping[str, Any]] | None, path: str) -> list[str]:
    """Volcano's lifecycle-policy rules; the first problem stops the check, except that
    ``*`` next to other events is always reported."""
    errors: list[str] = []
    events_seen: set[str] = set()
    exit_codes: set[int] = set()
    for policy in policies or []:
        events = list(dict.fromkeys([*(policy.get("events") or []), *[policy.get("event") or ""]]))
        events = [e for e in events if e]
        exit_code = policy.get("exitCode")
        if events and exit_code is not None:
            errors.append("must not specify event and exitCode simultaneously")
            break
        if not events and exit_code is None:
            errors.append("either event and exitCode should be specified")
            break
        if events:
            problem = None
            for event in events:
                if event not in VALID_EVENTS:
                    problem = invalid(path, event, "invalid policy event")
                elif policy.get("action") not in VALID_ACTIONS:
                    problem = invalid(path, policy.get("action") or "", "invalid policy action")
                elif event in events_seen:
                    problem = f"duplicate event {event} across different policy"
                else:
                    events_seen.add(event)
                    continue
                break
            if problem:
                errors.append(problem)
                break
        elif exit_code is not None:  # always so here: no events and no exitCode stopped above
            if int(exit_code) == 0:
                errors.append("0 is not a valid error code")
                break
            if int(exit_code) in exit_codes:
                errors.append(f"duplicate exitCode {exit_code}")
                break
            exit_codes.add(int(exit_code))
    if k.Event.ANY in events_seen and len(events_seen) > 1:
        errors.append("if there's * here, no other policy should be here")
    return [f"{e}; {_valid_lists()}" for e in errors]


# --- pod templates -------------------------------------------------------------------------------


def _resource_problems(path: str, resources: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    parsed: dict[str, dict[str, Fraction]] = {}
    for kind in ("limits", "requests"):
        parsed[kind] = {}
        for name, value in (resources.get(kind) or {}).items():
            where = f"{path}.resources.{kind}[{name}]"
            amount = _quantity(value)
            if amount is None:
                problems.append(
                    invalid(
                        where,
                        str(value),
                        "quantities must match the regular expression "
                        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    )
                )
            elif amount < 0:
                problems.append(invalid(where, str(value), "must be greater than or equal to 0"))
            else:
                parsed[kind][name] = amount
    for name, request in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None and request > limit:
            value = (resources.get("requests") or {})[name]
            problems.append(
                invalid(
                    f"{path}.resources.requests",
                    str(value),
                    f"must be less than or equal to {name} limit of "
                    f"{(resources.get('limits') or {})[name]}",
                )
            )
    return problems


def pod_template_problems(template: Mapping[str, Any]) -> list[str]:
    """The parts of Kubernetes' PodTemplate validation a vcjob task most often trips over:
    labels, containers (names, images, ports, resources, mounts), volumes and the restart
    and DNS policies, with the API server's paths (``template.spec.containers[0].image``)."""
    problems: list[str] = []
    meta = template.get("metadata") or {}
    for key, value in (meta.get("labels") or {}).items():
        try:
            validate_label_key(str(key))
            validate_label_value(str(value))
        except SelectorError as error:
            problems.append(invalid("template.metadata.labels", str(value), str(error)))
    spec = template.get("spec") or {}
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or []):
        path = f"template.spec.volumes[{i}].name"
        name = volume.get("name") or ""
        if not name:
            problems.append(f"{path}: Required value")
        elif len(name) > 63 or not _DNS_LABEL.match(name):
            problems.append(invalid(path, name, _DNS_LABEL_MESSAGE))
        elif name in volumes:
            problems.append(f'{path}: Duplicate value: "{name}"')
        volumes.add(name)
    if not spec.get("containers"):
        problems.append("template.spec.containers: Required value")
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            path = f"template.spec.{group}[{i}]"
            name = container.get("name") or ""
            if not name:
                problems.append(f"{path}.name: Required value")
            elif len(name) > 63 or not _DNS_LABEL.match(name):
                problems.append(invalid(f"{path}.name", name, _DNS_LABEL_MESSAGE))
            elif name in names:
                problems.append(f'{path}.name: Duplicate value: "{name}"')
            names.add(name)
            if not container.get("image"):
                problems.append(f"{path}.image: Required value")
            for j, port in enumerate(container.get("ports") or []):
                number = port.get("containerPort")
                if not isinstance(number, int) or not 0 < number <= 65535:
                    problems.append(
                        invalid(
                            f"{path}.ports[{j}].containerPort",
                            number if number is not None else 0,
                            "must be between 1 and 65535, inclusive",
                        )
                    )
            problems += _resource_problems(path, container.get("resources") or {})
            for j, mount in enumerate(container.get("volumeMounts") or []):
                if mount.get("name") not in volumes:
                    problems.append(
                        f'{path}.volumeMounts[{j}].name: Not found: "{mount.get("name") or ""}"'
                    )
    restart = spec.get("restartPolicy") or "Always"
    if restart not in _RESTART_POLICIES:
        problems.append(
            f'template.spec.restartPolicy: Unsupported value: "{restart}": supported values: '
            + ", ".join(f'"{p}"' for p in _RESTART_POLICIES)
        )
    dns = spec.get("dnsPolicy") or "ClusterFirst"
    if dns not in _DNS_POLICIES:
        problems.append(
            f'template.spec.dnsPolicy: Unsupported value: "{dns}": supported values: '
            + ", ".join(f'"{p}"' for p in _DNS_POLICIES)
        )
    return problems


def _cpu_is_integer(container: Mapping[str, Any]) -> bool:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or resources.get("limits") or {}
    cpu = _quantity(requests.get("cpu", 0))
    return cpu is not None and cpu >= 1 and cpu.denominator == 1


def validate_task_template(task: Mapping[str, Any], index: int) -> str:
    """``spec.task[i]. <errors>`` for a bad template, or the NUMA-policy cpu check."""
    problems = pod_template_problems(task.get("template") or {})
    if problems:
        return (f"spec.task[{index}]." + "".join(f"{p}. " for p in problems)).rstrip()
    policy = task.get("topologyPolicy") or k.NumaTopologyPolicy.NONE
    if policy != k.NumaTopologyPolicy.NONE:
        spec = (task.get("template") or {}).get("spec") or {}
        every = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
        for j, container in enumerate(every):
            if not _cpu_is_integer(container):
                return f"the cpu request isn't an integer in spec.task[{index}] container[{j}]."
    return ""


# --- partitions, volumes, dependencies -----------------------------------------------------------


def validate_partition_policy(task: Mapping[str, Any], job_name: str) -> str:
    policy = task.get("partitionPolicy")
    if not policy:
        return ""
    where = f"in task: {task.get('name', '')}, job: {job_name}"
    total = _int(policy.get("totalPartitions"))
    size = _int(policy.get("partitionSize"))
    min_partitions = _int(policy.get("minPartitions"))
    message = ""
    if total <= 0:
        message = f"'TotalPartitions' must be greater than 0 {where}"
    elif size <= 0:
        message = f"'PartitionSize' must be greater than 0 {where}"
    elif _int(task.get("replicas")) != total * size:
        message = f"'Replicas' are not equal to TotalPartitions*PartitionSize {where}"
    elif (
        task.get("minAvailable") is not None
        and min_partitions > 0
        and min_partitions * size != _int(task.get("minAvailable"))
    ):
        message = f"'MinAvailable' is not equal to MinPartitions*PartitionSize {where}"
    if _tier_conflict(policy.get("networkTopology")):
        message += TIER_CONFLICT
    return message


def validate_volumes(volumes: Sequence[Mapping[str, Any]] | None) -> str:
    """The first problem with the job's volumes, or ``""``."""
    mount_paths: set[str] = set()
    for volume in volumes or []:
        mount_path = volume.get("mountPath") or ""
        if not mount_path:
            return "mountPath is required"
        if mount_path in mount_paths:
            return f"duplicated mountPath: {mount_path}"
        claim_name = volume.get("volumeClaimName") or ""
        if not volume.get("volumeClaim") and not claim_name:
            return "either VolumeClaim or VolumeClaimName must be specified"
        if claim_name:
            if volume.get("volumeClaim"):
                return VOLUME_CONFLICT
            problems = []
            if len(claim_name) > 253:
                problems.append("must be no more than 253 characters")
            if not _DNS_SUBDOMAIN.match(claim_name):
                problems.append(_DNS_SUBDOMAIN_MESSAGE)
            if problems:
                return f"invalid VolumeClaimName {claim_name} : {go_list(problems)}"
        mount_paths.add(mount_path)
    return ""


def tasks_form_dag(tasks: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``dependsOn`` between tasks has no cycle (Kahn's algorithm)."""
    names = [str(t.get("name", "")) for t in tasks]
    in_degree = dict.fromkeys(names, 0)
    edges: dict[str, set[str]] = {}
    for task in tasks:
        for dependency in (task.get("dependsOn") or {}).get("name") or []:
            if task.get("name") not in edges.setdefault(dependency, set()):
                edges[dependency].add(str(task.get("name")))
                in_degree[str(task.get("name"))] += 1
    ready = [n for n, d in in_degree.items() if d == 0]
    done = 0
    while ready:
        node = ready.pop()
        done += 1
        for nxt in edges.get(node, ()):
            in_degree[nxt] -= 1
            if in_degree[nxt] == 0:
                ready.append(nxt)
    return done == len(names)


# --- create and update ---------------------------------------------------------------------------


def _mpi_master(job: Mapping[str, Any]) -> str:
    """The master task the ``mpi`` plugin's ``--master`` names (default ``master``)."""
    arguments = _spec(job)["plugins"]["mpi"]
    options, _ = parse_flags(arguments if isinstance(arguments, list) else [], MPI_FLAGS)
    return str(options["master"])


def validate_job_create(
    job: Mapping[str, Any],
    queues: Mapping[str, Mapping[str, Any]],
    *,
    schema: bool = True,
    max_replicas: int = MAX_JOB_REPLICAS,
) -> list[str]:
    """Reasons Volcano's webhook would refuse to create ``job``; ``queues`` are the cluster's
    queues by name. See the module docstring. Beyond Volcano, a job whose tasks ask for more
    than ``max_replicas`` pods in all is refused (see ``jobsize``)."""
    malformed = shape.problems(job, shape.JOB)
    if malformed:
        return malformed
    spec = _spec(job)
    tasks = _tasks(job)
    job_name = str((job.get("metadata") or {}).get("name") or "")
    errors = job_schema_errors(job) if schema else []
    if not tasks:
        return [*errors, NO_TASKS]
    if "mpi" in (spec.get("plugins") or {}):
        master = _mpi_master(job)
        if not any(t.get("name") == master for t in tasks):
            return [*errors, MPI_MASTER_MISSING]

    if _tier_conflict(spec.get("networkTopology")):
        errors.append(TIER_CONFLICT)
    names: set[str] = set()
    total_replicas = 0
    for index, task in enumerate(tasks):
        name = str(task.get("name") or "")
        replicas = _int(task.get("replicas"))
        if task.get("minAvailable") is not None and _int(task["minAvailable"]) > replicas:
            errors.append(
                f"'minAvailable' is greater than 'replicas' in task: {name}, job: {job_name}"
            )
        total_replicas += replicas
        if name in names:
            errors.append(f"duplicated task name {name}")
            break
        names.add(name)
        errors += validate_policies(task.get("policies"), "spec.tasks.policies")
        pod = f"{job_name}-{name}-{index}"
        problems = qualified_name_problems(pod)
        if problems:
            errors.append(f"create pod with name {pod} validate failed {go_list(problems)}")
        for message in (
            validate_task_template(task, index),
            validate_partition_policy(task, job_name),
        ):
            if message:
                errors.append(message)

    problems = qualified_name_problems(job_name)
    if problems:
        errors.append(f"create job with name {job_name} validate failed {go_list(problems)}")
    if total_replicas < _int(spec.get("minAvailable")):
        errors.append(MIN_AVAILABLE_OVER_REPLICAS)
    too_many = oversize((_int(t.get("replicas")) for t in tasks), max_replicas)
    if too_many is not None:
        errors.append(oversize_message(too_many))
    errors += validate_policies(spec.get("policies"), "spec.policies")
    for plugin in spec.get("plugins") or {}:
        if plugin not in JOB_PLUGIN_NAMES:
            errors.append(f"unable to find job plugin: {plugin}")
    volume_problem = validate_volumes(spec.get("volumes"))
    if volume_problem:
        errors.append(volume_problem)

    queue_name = str(spec.get("queue") or k.DEFAULT_QUEUE)
    queue = queues.get(queue_name)
    if queue is None:
        errors.append(f"unable to find job queue: {queue_not_found(queue_name)}")
    else:
        state = queue_state(queue)
        if state != k.QueueState.OPEN:
            errors.append(
                "can only submit job to queue with state `Open`, "
                f"queue `{queue_name}` status is `{state}`"
            )
        if queue_name == k.ROOT_QUEUE:
            errors.append("can not submit job to root queue")
        else:
            children = children_of(queue_name, queues)
            if children:
                errors.append(
                    f"can only submit job to leaf queue, queue `{queue_name}` has "
                    f"{len(children)} child queues"
                )

    if any(t.get("dependsOn") for t in tasks) and not tasks_form_dag(tasks):
        errors.append(NOT_A_DAG)
    return errors


def _normalized(value: Any, key: str = "") -> Any:
    """A spec in a form where equal meaning compares equal: unset, empty and zero fields
    dropped, quantities as numbers (Go's semantic equality on decoded structs)."""
    if isinstance(value, Mapping):
        out = {}
        for name, item in value.items():
            if key in ("requests", "limits", "capability"):
                amount = _quantity(item)
                out[name] = amount if amount is not None else item
                continue
            item = _normalized(item, name)
            if item in (None, "", 0, False, {}, []) and not isinstance(item, Fraction):
                continue
            out[name] = item
        return out
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def validate_job_update(
    old: Mapping[str, Any], new: Mapping[str, Any], *, max_replicas: int = MAX_JOB_REPLICAS
) -> list[str]:
    """Why Volcano refuses to change ``old`` into ``new`` (at most one reason): only
    ``minAvailable``, ``priorityClassName`` and per-task ``replicas``/``minAvailable`` may
    change, within the same consistency rules as on create (the replica bound included)."""
    malformed = shape.problems(new, shape.JOB)
    if malformed:
        return malformed
    malformed = shape.problems(old, shape.JOB)
    if malformed:
        return [f"the stored job is malformed: {p}" for p in malformed]
    job_name = str((new.get("metadata") or {}).get("name") or "")
    new_spec = copy.deepcopy(dict(_spec(new)))
    old_spec = copy.deepcopy(dict(_spec(old)))
    total = 0
    for task in new_spec.get("tasks") or []:
        name = task.get("name", "")
        replicas = _int(task.get("replicas"))
        if replicas < 0:
            return [f"'replicas' must be >= 0 in task: {name}"]
        if task.get("minAvailable") is not None:
            if _int(task["minAvailable"]) < 0:
                return [f"'minAvailable' must be >= 0 in task: {name}"]
            if _int(task["minAvailable"]) > replicas:
                return [f"'minAvailable' must be <= 'replicas' in task: {name}"]
        message = validate_partition_policy(task, job_name)
        if message:
            return [message]
        total += replicas
    too_many = oversize(
        (_int(t.get("replicas")) for t in new_spec.get("tasks") or []), max_replicas
    )
    if too_many is not None:
        return [oversize_message(too_many)]
    min_available = _int(new_spec.get("minAvailable"))
    if min_available > total:
        return ["job 'minAvailable' must not be greater than total replicas"]
    if min_available < 0:
        return ["job 'minAvailable' must be >= 0"]
    if _tier_conflict(new_spec.get("networkTopology")):
        return [TIER_CONFLICT]
    old_tasks = old_spec.get("tasks") or []
    new_tasks = new_spec.get("tasks") or []
    if len(old_tasks) != len(new_tasks):
        return [UPDATE_ADDS_TASKS]

    for field in ("minAvailable", "priorityClassName"):
        new_spec.pop(field, None)
        old_spec.pop(field, None)
    for old_task, new_task in zip(old_tasks, new_tasks, strict=True):
        for field in ("replicas", "minAvailable"):
            new_task.pop(field, None)
            old_task.pop(field, None)
    for spec in (new_spec, old_spec):
        for volume in spec.get("volumes") or []:
            if volume.get("volumeClaim"):
                volume.pop("volumeClaimName", None)
    if _normalized(new_spec) != _normalized(old_spec):
        return [UPDATE_OTHER_FIELDS]
    return []
