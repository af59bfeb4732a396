"""``stromboli job``: vcctl's job commands (run, list, view, suspend, resume, delete).

Flags, short flags and defaults are vcctl's; ``suspend`` and ``resume`` do what vcctl does,
create a ``bus.volcano.sh/v1alpha1`` Command (``AbortJob`` / ``ResumeJob``) owned by the job
for the job controller to carry out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import click

from stromboli.core.api import constants as k
from stromboli.core.api.quantity import QuantityError, parse_quantity
from stromboli.core.api.yamlbounds import MAX_FILE_BYTES, YamlBoundsError, load_documents
from stromboli.core.cli.vcctl.common import (
    CommandDecorator,
    VcctlError,
    age,
    by_namespace_and_name,
    checked,
    connection_options,
    controller_reference,
    echo,
    fit,
    meta,
    name_of,
    namespace_of,
    output_option,
    run,
    terminal_width,
)
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore

JOB = (k.BATCH_V1ALPHA1, "Job")
QUEUE = (k.SCHEDULING_V1BETA1, "Queue")
COMMAND = (k.BUS_V1ALPHA1, "Command")
EVENT = (k.CORE_V1, "Event")
DEFAULT_RESOURCES = "cpu=1000m,memory=100Mi"
RUN_LABEL = "job.volcano.sh"
"""Label vcctl puts on the pods of jobs it runs (value: the job name)."""
LIST_COLUMNS = (
    "Name",
    "Creation",
    "Phase",
    "JobType",
    "Replicas",
    "Min",
    "Pending",
    "Running",
    "Succeeded",
    "Failed",
    "Unknown",
    "RetryCount",
)
_LIST_WIDTHS = (15, 12, 12, 12, 6, 10, 10, 12, 10, 12, 10)


@click.group("job")
def job() -> None:
    """Run, list, view, suspend, resume and delete vcjobs (vcctl job)."""


def namespace_option(help_text: str = "Namespace of the job.") -> CommandDecorator:
    return click.option("-n", "--namespace", default="default", show_default=True, help=help_text)


def name_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("-N", "--name", default="", help="Name of the job.")(command)


# --- run -----------------------------------------------------------------------------------------


def parse_resources(text: str) -> dict[str, str] | None:
    """``cpu=1000m,memory=100Mi`` as a resource list; empty text gives none."""
    if not text:
        return None
    resources = {}
    for statement in text.split(","):
        parts = statement.split("=")
        if len(parts) != 2:
            raise VcctlError(f"invalid argument syntax {statement}, expected <resource>=<value>")
        try:
            parse_quantity(parts[1])
        except QuantityError as error:
            raise VcctlError(str(error)) from None
        resources[parts[0]] = parts[1]
    return resources


def build_job(
    name: str,
    namespace: str,
    image: str,
    min_available: int,
    replicas: int,
    requests: dict[str, str] | None,
    limits: dict[str, str] | None,
    scheduler: str,
) -> dict[str, Any]:
    """The one-task job ``job run`` submits when no file is given."""
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "minAvailable": min_available,
            "schedulerName": scheduler,
            "tasks": [
                {
                    "replicas": replicas,
                    "template": {
                        "metadata": {"name": name, "labels": {RUN_LABEL: name}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": name,
                                    "image": image,
                                    "imagePullPolicy": "IfNotPresent",
                                    "resources": resources,
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def read_job_file(path: str, namespace: str) -> list[dict[str, Any]]:
    """Every document of ``path``, in order, as ``kubectl create -f`` takes them.

    A document without ``apiVersion`` and ``kind`` is a vcjob (vcctl reads the file as one);
    namespaced objects get ``namespace`` unless they name the same one already.
    """
    from stromboli.core.api.registry import kind_info  # lazily: pydantic models, CLI start-up

    if ".yaml" not in path and ".yml" not in path:
        raise VcctlError("only support yaml file")
    documents = read_bounded_documents(path)
    if not documents:
        raise VcctlError(f"failed to unmarshal file, err: {path} is empty")
    for number, obj in enumerate(documents, start=1):
        obj.setdefault("apiVersion", k.BATCH_V1ALPHA1)
        obj.setdefault("kind", "Job")
        metadata = obj.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise VcctlError(f"{path} document {number}: metadata: expected a mapping")
        info = kind_info(str(obj["apiVersion"]), str(obj["kind"]))
        if info is not None and not info.namespaced:
            continue
        if metadata.get("namespace") and metadata["namespace"] != namespace:
            raise VcctlError(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        metadata["namespace"] = namespace
    return documents


def read_bounded_documents(path: str) -> list[dict[str, Any]]:
    """The non-empty documents of ``path``, read within the project's YAML bounds (a deep or
    alias-bomb document is refused, naming the line, instead of exhausting the CLI)."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise VcctlError(f"failed to read file, err: {error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise VcctlError(f"failed to read file, err: {path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        documents = [d for d in load_documents(data.decode("utf-8")) if d]
    except (YamlBoundsError, UnicodeDecodeError) as error:
        raise VcctlError(f"failed to unmarshal file, err: {error}") from None
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if isinstance(document, dict) and document.get("kind") == "List":
            items = document.get("items") or []
            if not isinstance(items, list):
                raise VcctlError(f"{path} document {number}: List: items: expected a list")
            members = items
        else:
            members = [document]
        for member in members:
            if not isinstance(member, dict):
                raise VcctlError(
                    f"failed to unmarshal file, err: {path} document {number} is not an object"
                )
            objects.append(member)
    return objects


def job_queue(obj: Mapping[str, Any]) -> str | None:
    """The queue a vcjob goes to (``default`` when unset, as the webhook defaults it); None for
    any other kind."""
    if (obj.get("apiVersion"), obj.get("kind")) != JOB:
        return None
    spec = obj.get("spec")
    queue = spec.get("queue") if isinstance(spec, dict) else None
    return str(queue or k.DEFAULT_QUEUE)


def created_line(obj: Mapping[str, Any]) -> str:
    """What ``job run`` prints for an object it created: vcctl's line for a vcjob, kubectl's
    ``<resource>/<name> created`` for anything else."""
    from stromboli.core.api.registry import kind_info

    if (obj.get("apiVersion"), obj.get("kind")) == JOB:
        return f"run job {name_of(obj)} successfully"
    info = kind_info(str(obj.get("apiVersion")), str(obj.get("kind")))
    resource = str(obj.get("kind", "")).lower()
    if info is not None:
        resource = f"{info.plural}.{info.group}" if info.group else info.plural
    return f"{resource}/{name_of(obj)} created"


async def create_all(store: ClusterStore, objects: list[dict[str, Any]]) -> list[str]:
    """Create ``objects`` in order, each on its own as ``kubectl create -f`` does; returns the
    failures (the object and why). A vcjob whose queue exists neither in the cluster nor earlier
    in the file is refused before it is sent, so that a cluster without Volcano's webhook does
    not take a job no scheduler will ever look at."""
    from stromboli.core.admission.queue import queue_not_found

    queues: dict[str, bool] = {}
    failures: list[str] = []
    for obj in objects:
        label = f"{obj.get('kind')} {_object_key(obj)}"
        queue = job_queue(obj)
        if queue is not None and not await _queue_exists(store, queue, queues):
            failures.append(f"{label}: unable to find job queue: {queue_not_found(queue)}")
            continue
        try:
            created = await store.create(obj)
        except ApiError as error:
            failures.append(f"{label}: {error}")
            continue
        if (created.get("apiVersion"), created.get("kind")) == QUEUE:
            queues[name_of(created)] = True
        click.echo(created_line(created))
    return failures


def _object_key(obj: Mapping[str, Any]) -> str:
    namespace = namespace_of(obj)
    return f"{namespace}/{name_of(obj)}" if namespace else name_of(obj)


async def _queue_exists(store: ClusterStore, name: str, known: dict[str, bool]) -> bool:
    if name not in known:
        try:
            await store.get(*QUEUE, name)
            known[name] = True
        except NotFoundError:
            known[name] = False
    return known[name]


@job.command("run")
@connection_options
@click.option("-i", "--image", default="busybox", show_default=True, help="Container image.")
@namespace_option()
@name_option
@click.option("-m", "--min", "min_available", default=1, show_default=True,
              help="Minimum number of pods that must run together (minAvailable).")  # fmt: skip
@click.option("-r", "--replicas", default=1, show_default=True, help="Number of pods.")
@click.option("-R", "--requests", default=DEFAULT_RESOURCES, show_default=True,
              help="Resource requests of each pod, as name=quantity pairs.")  # fmt: skip
@click.option("-L", "--limits", default=DEFAULT_RESOURCES, show_default=True,
              help="Resource limits of each pod, as name=quantity pairs.")  # fmt: skip
@click.option("-S", "--scheduler", default=k.DEFAULT_SCHEDULER_NAME, show_default=True,
              help="Scheduler of the job.")  # fmt: skip
@click.option("-f", "--filename", default="",
              help="YAML file to submit instead: every document is created, in order "
              "(Queues, vcjobs, ...), as kubectl create -f does.")  # fmt: skip
@checked
def run_job(
    master: str,
    kubeconfig: str,
    image: str,
    namespace: str,
    name: str,
    min_available: int,
    replicas: int,
    requests: str,
    limits: str,
    scheduler: str,
    filename: str,
) -> None:
    """Run a job with one task, built from the flags (or submit one from a file)."""
    if not name and not filename:
        raise VcctlError("job name cannot be left blank")
    request_list = parse_resources(requests)
    limit_list = parse_resources(limits)
    if filename:
        objects = read_job_file(filename, namespace)

        async def create_file(store: ClusterStore) -> None:
            failures = await create_all(store, objects)
            if failures:
                raise VcctlError("; ".join(failures))

        run(kubeconfig, master, create_file)
        return
    obj = build_job(
        name, namespace, image, min_available, replicas, request_list, limit_list, scheduler
    )

    async def action(store: ClusterStore) -> None:
        created = await store.create(obj)
        click.echo(f"run job {name_of(created)} successfully")

    run(kubeconfig, master, action)


# --- list ----------------------------------------------------------------------------------------


def job_replicas(obj: Mapping[str, Any]) -> int:
    return sum(int(t.get("replicas") or 0) for t in (obj.get("spec") or {}).get("tasks") or [])


#: Columns a narrow terminal loses first (Name, Phase, Replicas and Running stay).
NARROW_DROP = ("Unknown", "RetryCount", "JobType", "Creation", "Succeeded", "Failed", "Min")


def format_jobs(
    jobs: list[dict], all_namespaces: bool = False, wide: bool = False, width: int | None = None
) -> str:
    """vcctl's job table (columns fixed-width, the name column sized to the longest name);
    ``wide`` adds the queue; narrowed to ``width`` if it does not fit (see ``common.fit``)."""
    name_width = max([len("Name"), *(len(name_of(j)) for j in jobs)]) + 3
    ns_width = max([len("Namespace"), *(len(namespace_of(j)) for j in jobs)]) + 3
    widths = (name_width, *_LIST_WIDTHS)

    def line(cells: list[str]) -> str:
        start = 1 if all_namespaces else 0
        text = f"{cells[0]:<{ns_width}}" if all_namespaces else ""
        fixed = cells[start : start + len(widths)]
        text += "".join(f"{c:<{w}}" for c, w in zip(fixed, widths, strict=True))
        extra = cells[start + len(widths) :]
        return (
            text + "".join(f"   {c:<{w}}" for c, w in zip(extra, extra_widths, strict=True)) + "\n"
        )

    header = (["Namespace"] if all_namespaces else []) + list(LIST_COLUMNS)
    rows = [header + (["Queue"] if wide else [])]
    for obj in jobs:
        status = obj.get("status") or {}
        labels = meta(obj).get("labels") or {}
        cells = [
            name_of(obj),
            str(meta(obj).get("creationTimestamp") or "")[:10],
            (status.get("state") or {}).get("phase") or "",
            labels.get(k.JOB_TYPE_KEY) or k.DEFAULT_JOB_TYPE,
            job_replicas(obj),
            int(status.get("minAvailable") or 0),
            int(status.get("pending") or 0),
            int(status.get("running") or 0),
            int(status.get("succeeded") or 0),
            int(status.get("failed") or 0),
            int(status.get("unknown") or 0),
            int(status.get("retryCount") or 0),
        ]
        row = ([namespace_of(obj)] if all_namespaces else []) + [str(c) for c in cells]
        if wide:
            row.append(str((obj.get("spec") or {}).get("queue") or k.DEFAULT_QUEUE))
        rows.append(row)
    first_extra = len(rows[0]) - (1 if wide else 0)
    extra_widths = [max(len(row[i]) for row in rows) for i in range(first_extra, len(rows[0]))]
    full = "".join(line(row).rstrip() + "\n" if wide else line(row) for row in rows)
    return full if wide else fit(rows, full, width, NARROW_DROP)


@job.command("list")
@connection_options
@click.option("-q", "--queue", default="", help="Only jobs in this queue.")
@namespace_option()
@click.option("-S", "--scheduler", default="", help="Only jobs of this scheduler.")
@click.option("--all-namespaces", is_flag=True, help="List jobs of every namespace.")
@click.option("--selector", default="", help="Only jobs whose name contains this text.")
@output_option
def list_jobs(
    master: str,
    kubeconfig: str,
    queue: str,
    namespace: str,
    scheduler: str,
    all_namespaces: bool,
    selector: str,
    output: str | None,
) -> None:
    """List jobs with their phase and pod counts."""

    async def action(store: ClusterStore) -> None:
        listed = await store.list(*JOB, namespace=None if all_namespaces else namespace)
        jobs = [
            j
            for j in by_namespace_and_name(listed.items)
            if (not queue or (j.get("spec") or {}).get("queue") == queue)
            and (not scheduler or (j.get("spec") or {}).get("schedulerName") == scheduler)
            and (not selector or selector in name_of(j))
        ]
        if not jobs:
            click.echo("No resources found")
            return
        echo(format_jobs(jobs, all_namespaces, output == "wide", terminal_width()))

    run(kubeconfig, master, action)


# --- view ----------------------------------------------------------------------------------------


def _labels(values: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(values), separators=(",", ":")) if values else "<none>"


def format_job(obj: Mapping[str, Any]) -> str:
    """A job in detail: metadata, spec (plugins, tasks and their containers), status."""
    md = meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    lines = [
        f"Name:        {name_of(obj)}",
        f"Namespace:   {namespace_of(obj)}",
        f"Labels:      {_labels(md.get('labels'))}",
        f"Annotations: {_labels(md.get('annotations'))}",
        f"API Version: {obj.get('apiVersion', '')}",
        f"Kind:        {obj.get('kind', '')}",
        "Metadata:",
        f"  Creation Timestamp: {md.get('creationTimestamp', '')}",
        f"  Generation:         {md.get('generation', 0)}",
        f"  Resource Version:   {md.get('resourceVersion', '')}",
        f"  UID:                {md.get('uid', '')}",
        "Spec:",
        f"  Queue:          {spec.get('queue', '')}",
        f"  Scheduler Name: {spec.get('schedulerName', '')}",
        f"  Min Available:  {spec.get('minAvailable', 0)}",
        f"  Max Retry:      {spec.get('maxRetry', 0)}",
    ]
    plugins = spec.get("plugins") or {}
    if plugins:
        lines.append("  Plugins:")
        lines += [f"    {name}: {' '.join(args or [])}".rstrip() for name, args in plugins.items()]
    lines.append("  Tasks:")
    for task in spec.get("tasks") or []:
        pod_spec = (task.get("template") or {}).get("spec") or {}
        lines += [
            f"    Name:           {task.get('name', '')}",
            f"    Replicas:       {task.get('replicas', 0)}",
            f"    Min Available:  {task.get('minAvailable', task.get('replicas', 0))}",
            f"    Restart Policy: {pod_spec.get('restartPolicy', '')}",
            "    Containers:",
        ]
        for container in pod_spec.get("containers") or []:
            resources = container.get("resources") or {}
            lines += [
                f"      Name:     {container.get('name', '')}",
                f"      Image:    {container.get('image', '')}",
            ]
            if container.get("command"):
                lines.append(f"      Command:  {' '.join(container['command'])}")
            for kind in ("requests", "limits"):
                if resources.get(kind):
                    pairs = ",".join(f"{n}={v}" for n, v in resources[kind].items())
                    lines.append(f"      {kind.capitalize() + ':':<9} {pairs}")
    lines += ["Status:", "  State:"]
    lines.append(f"    Phase: {(status.get('state') or {}).get('phase', '')}")
    for field, label in (
        ("minAvailable", "Min Available"),
        ("pending", "Pending"),
        ("running", "Running"),
        ("succeeded", "Succeeded"),
        ("failed", "Failed"),
        ("terminating", "Terminating"),
        ("unknown", "Unknown"),
        ("retryCount", "Retry Count"),
        ("version", "Version"),
    ):
        if status.get(field):
            lines.append(f"  {label + ':':<14} {status[field]}")
    controlled = status.get("controlledResources") or {}
    if controlled:
        lines.append("  Controlled Resources:")
        lines += [f"    {key}: {value}" for key, value in controlled.items()]
    conditions = status.get("conditions") or []
    if conditions:
        lines.append("  Conditions:")
        lines += [
            f"    {c.get('status', ''):<12} {c.get('lastTransitionTime', '')}" for c in conditions
        ]
    return "\n".join(lines) + "\n"


def format_events(events: list[dict]) -> str:
    if not events:
        return "Events: <none>\n"
    rows = [("Type", "Reason", "Age", "From", "Message")]
    for event in events:
        source = event.get("source") or {}
        origin = ", ".join(x for x in (source.get("component"), source.get("host")) if x)
        count = int(event.get("count") or 1)
        last = event.get("lastTimestamp") or event.get("eventTime")
        first = event.get("firstTimestamp") or last
        when = age(last) if count <= 1 else f"{age(last)} (x{count} over {age(first)})"
        rows.append(
            (
                event.get("type", ""),
                event.get("reason", ""),
                when,
                origin,
                str(event.get("message", "")).strip(),
            )
        )
    widths = [max(len(str(r[i])) for r in rows) + 2 for i in range(4)]
    out = "Events:\n"
    for row in rows:
        out += "  " + "".join(f"{c!s:<{w}}" for c, w in zip(row[:4], widths, strict=True))
        out += f"{row[4]}\n"
    return out


@job.command("view")
@connection_options
@namespace_option()
@name_option
@checked
def view_job(master: str, kubeconfig: str, namespace: str, name: str) -> None:
    """Show a job in detail, with its events."""
    if not name:
        raise VcctlError(
            "job name (specified by --name or -N) is mandatory to view a particular job"
        )

    async def action(store: ClusterStore) -> None:
        obj = await store.get(*JOB, name, namespace)
        events = await store.list(*EVENT, namespace=namespace)
        mine = [e for e in events.items if name_of(e).startswith(f"{name}.")]
        echo(format_job(obj) + format_events(mine))

    run(kubeconfig, master, action)


# --- suspend, resume, delete ---------------------------------------------------------------------


def command_for(target: Mapping[str, Any], action: str, namespace: str) -> dict[str, Any]:
    """A bus Command asking the target's controller to run ``action`` on it."""
    reference = controller_reference(target)
    return {
        "apiVersion": k.BUS_V1ALPHA1,
        "kind": "Command",
        "metadata": {
            "generateName": f"{name_of(target)}-{action.lower()}-",
            "namespace": namespace,
            "ownerReferences": [reference],
        },
        "target": dict(reference),
        "action": action,
    }


async def issue_job_command(store: ClusterStore, namespace: str, name: str, action: str) -> dict:
    target = await store.get(*JOB, name, namespace)
    target.setdefault("apiVersion", k.BATCH_V1ALPHA1)
    target.setdefault("kind", "Job")
    return await store.create(command_for(target, action, namespace))


def _job_command(action: str, verb: str) -> Callable[[str, str, str, str], None]:
    def command(master: str, kubeconfig: str, namespace: str, name: str) -> None:
        if not name:
            raise VcctlError(f"job name is mandatory to {verb} a particular job")

        async def act(store: ClusterStore) -> None:
            command = await issue_job_command(store, namespace, name, action)
            click.echo(
                f"{verb} job {name} successfully: Command {name_of(command)} ({action}) created "
                "for the job controller"
            )

        run(kubeconfig, master, act)

    return command


@job.command("suspend")
@connection_options
@namespace_option()
@name_option
@checked
def suspend_job(master: str, kubeconfig: str, namespace: str, name: str) -> None:
    """Abort a job: its pods are killed, the job stays (AbortJob command)."""
    _job_command(k.Action.ABORT_JOB, "suspend")(master, kubeconfig, namespace, name)


@job.command("resume")
@connection_options
@namespace_option()
@name_option
@checked
def resume_job(master: str, kubeconfig: str, namespace: str, name: str) -> None:
    """Resume an aborted job (ResumeJob command)."""
    _job_command(k.Action.RESUME_JOB, "resume")(master, kubeconfig, namespace, name)


@job.command("delete")
@connection_options
@namespace_option()
@name_option
@checked
def delete_job(master: str, kubeconfig: str, namespace: str, name: str) -> None:
    """Delete a job (its pods and PodGroup go with it)."""
    if not name:
        raise VcctlError("job name is mandatory to delete a particular job")

    async def action(store: ClusterStore) -> None:
        await store.delete(*JOB, name, namespace)
        click.echo(f"delete job {name} successfully")

    run(kubeconfig, master, action)
