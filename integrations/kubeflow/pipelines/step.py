"""The body of the ``volcano_job`` component: its arguments in, the job's status out.

The kfp function (:mod:`.component`) only imports this and passes its arguments on, so the
logic is ordinary, tested Python and the component's source in the compiled pipeline stays a
few lines. Messages go to stdout, which kfp shows as the step's log.
"""

from __future__ import annotations

import json
import sys
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from stromboli.integrations.kubeflow.pipelines import progress
from stromboli.integrations.kubeflow.pipelines.cluster import Cluster
from stromboli.integrations.kubeflow.pipelines.errors import Cancelled, JobFailed, ParameterError
from stromboli.integrations.kubeflow.pipelines.runner import Follow, run
from stromboli.integrations.kubeflow.pipelines.spec import JobRequest, whole_numbers

Outputs = namedtuple("Outputs", ["job_name", "phase"])
#: Exit status of a step stopped by a signal, as a shell reports it (128 + signal number).
SIGNAL_EXIT = {"SIGTERM": 143, "SIGINT": 130}


class StatusArtifact(Protocol):
    """What the step uses of ``dsl.Output[dsl.Artifact]``."""

    path: str
    metadata: dict[str, Any]


def say(line: str) -> None:
    print(f"[stromboli] {line}", flush=True)


def task_config_fields(task_config: Any) -> dict[str, Any]:
    """``dsl.TaskConfig`` (a dataclass) or a mapping, as a plain mapping of its set fields."""
    if task_config is None:
        return {}
    if isinstance(task_config, Mapping):
        return dict(task_config)
    fields = getattr(task_config, "__dataclass_fields__", None)
    if fields is None:
        raise ParameterError(
            "task_config", f"expected dsl.TaskConfig, got {type(task_config).__name__}"
        )
    return {name: getattr(task_config, name) for name in fields}


def write_status(artifact: StatusArtifact | None, job: Mapping[str, Any]) -> None:
    """The job's final status as JSON in the artifact, phase and name in its metadata."""
    if artifact is None:
        return
    document = progress.final_status(job)
    path = Path(artifact.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    meta = document["metadata"]
    artifact.metadata.update(
        {
            "job": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "queue": document["spec"].get("queue", ""),
            "phase": progress.phase_of(job),
            "retryCount": int((job.get("status") or {}).get("retryCount") or 0),
        }
    )


def run_step(
    *,
    status: StatusArtifact | None,
    task_config: Any = None,
    image: str = "",
    command: list[str] | None = None,
    args: list[str] | None = None,
    replicas: int = 1,
    tasks: list[Any] | None = None,
    queue: str = "",
    resources: dict[str, Any] | None = None,
    min_available: int = 0,
    plugins: dict[str, Any] | None = None,
    template: str = "",
    template_values: dict[str, Any] | None = None,
    pod_annotations: dict[str, Any] | None = None,
    name: str = "",
    namespace: str = "",
    scheduler_name: str = "volcano",
    ttl_seconds_after_finished: int = -1,
    timeout_seconds: float = 0,
    poll_seconds: float = 2.0,
    kubeconfig: str = "",
) -> Outputs:
    """Run the vcjob the arguments describe and return (job name, final phase).

    A step whose job fails raises :class:`JobFailed` (the task fails with the job's message);
    one stopped by SIGTERM exits with status 143 after deleting its job.
    """
    settings = Follow(poll_seconds=float(poll_seconds), timeout_seconds=float(timeout_seconds))
    cluster = Cluster.connect(kubeconfig)
    try:
        request = JobRequest(
            namespace=namespace or cluster.default_namespace,
            name=name,
            image=image,
            command=command or (),
            args=args or (),
            replicas=replicas,
            tasks=whole_numbers(tasks or []),
            queue=queue,
            resources=whole_numbers(resources or {}),
            min_available=min_available,
            plugins=plugins or {},
            template=template,
            template_values=template_values or {},
            pod_annotations=whole_numbers(pod_annotations or {}),
            scheduler_name=scheduler_name,
            ttl_seconds_after_finished=ttl_seconds_after_finished,
            task_config=whole_numbers(task_config_fields(task_config)),
        )
        try:
            job = run(cluster, request, settings, say, lambda j: write_status(status, j))
        except ParameterError as error:
            say(f"not started: {error}")
            raise
        except JobFailed as error:
            say(f"failed: {error}")
            raise
        except Cancelled as error:
            say(f"stopped: {error}")
            sys.stdout.flush()
            raise SystemExit(SIGNAL_EXIT.get(error.signal_name, 1)) from None
        say(f"vcjob {progress.job_key(job)} Completed")
        return Outputs(job["metadata"]["name"], progress.phase_of(job))
    finally:
        cluster.close()
