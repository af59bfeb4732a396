"""``volcano_job``: a Kubeflow Pipelines v2 component that runs a vcjob and waits for it.

kfp v2 has no ResourceOp, so the step is a lightweight Python component that talks to the
Kubernetes API itself (:mod:`.step`). It runs in the Stromboli image by default, which has
this package, kfp and the ``kubernetes`` client installed, so nothing is pip-installed when
the step starts; :func:`make_volcano_job` builds the same component on another image.

kfp reads the signature to make the component's interface, so its annotations use
``typing`` names kfp understands (``Optional[List[str]]``), not ``list[str] | None``.
"""

# ruff: noqa: UP006, UP035, UP045  (kfp parses these annotations; it refuses PEP 604 unions)

from typing import Dict, List, NamedTuple, Optional

from kfp import dsl
from kfp.dsl.python_component import PythonComponent

#: The image of ``deploy/Dockerfile``: Stromboli, kfp and the kubernetes client.
STROMBOLI_IMAGE = "stromboli:0.1.0"

#: The step's own task settings (``.set_cpu_request(...)``, ``kubernetes.add_toleration``...)
#: go to the vcjob's pods, not to the step's pod, which only waits.
TASK_CONFIG_PASSTHROUGHS = [
    dsl.TaskConfigField.RESOURCES,
    dsl.TaskConfigField.ENV,
    dsl.TaskConfigField.KUBERNETES_TOLERATIONS,
    dsl.TaskConfigField.KUBERNETES_NODE_SELECTOR,
    dsl.TaskConfigField.KUBERNETES_AFFINITY,
    dsl.TaskConfigField.KUBERNETES_VOLUMES,
]


# The outputs are kfp's functional NamedTuple, which type checkers refuse as an annotation (hence
# the one ``type: ignore``): only this function's source reaches the step's pod, so a class
# defined beside it would be an unknown name there, and kfp's executor in the pod reads the
# outputs from this very annotation. (A comment here, above the def, stays out of that source.)
def volcano_job(
    status: dsl.Output[dsl.Artifact],
    task_config: dsl.TaskConfig,
    image: str = "",
    command: Optional[List[str]] = None,
    args: Optional[List[str]] = None,
    replicas: int = 1,
    tasks: Optional[List[Dict]] = None,
    queue: str = "",
    resources: Optional[Dict] = None,
    min_available: int = 0,
    plugins: Optional[Dict] = None,
    template: str = "",
    template_values: Optional[Dict] = None,
    pod_annotations: Optional[Dict] = None,
    name: str = "",
    namespace: str = "",
    scheduler_name: str = "volcano",
    ttl_seconds_after_finished: int = -1,
    timeout_seconds: int = 0,
    poll_seconds: float = 2.0,
    kubeconfig: str = "",
) -> NamedTuple("Outputs", [("job_name", str), ("phase", str)]):  # type: ignore[valid-type]
    """Runs a Volcano Job (vcjob) on the cluster as one gang and waits until it finishes.

    Describe the job with image, command, replicas (one task) or tasks (several), or give a
    whole vcjob as template. The step logs each phase and why the job waits, fails with the
    job's message if it fails, and deletes the job if the run is cancelled or times out.

    Args:
        status: The vcjob's final status (JSON), with phase, job and queue in its metadata.
        task_config: Filled by Kubeflow Pipelines from the step's own settings (CPU, memory,
            GPU, env, tolerations, node selector, affinity, volumes); applied to the job's
            pods where the job does not set them.
        image: Container image of the job's pods.
        command: Command of the pods' container (the image's entrypoint if empty).
        args: Arguments of the pods' container.
        replicas: Number of pods when the job has one task.
        tasks: Several tasks, each a dict with name, replicas and optionally image, command,
            args, resources, env, minAvailable, policies.
        queue: Queue to run in (default: the template's, else 'default'); it must exist.
        resources: Per pod, e.g. {'cpu': '2', 'memory': '4Gi', 'nvidia.com/gpu': 1}
            (requests and limits) or {'requests': {...}, 'limits': {...}}.
        min_available: Pods that must be placed together before any starts (default: all).
        plugins: Job plugins, e.g. {'svc': [], 'env': [], 'ssh': []}.
        template: A whole vcjob in YAML, with ${name} placeholders.
        template_values: Values of the template's placeholders.
        pod_annotations: Annotations for every pod of the job.
        name: Name of the vcjob (default: generated, kfp-vcjob-xxxxx).
        namespace: Namespace of the vcjob (default: the step's own).
        scheduler_name: Scheduler of the job's pods (Stromboli answers to 'volcano').
        ttl_seconds_after_finished: Delete the finished job after this many seconds (-1: keep).
        timeout_seconds: Give up and delete the job after this many seconds (0: no limit).
        poll_seconds: Seconds between two looks at the job.
        kubeconfig: Path of a kubeconfig file (default: the step's service account).

    Returns:
        job_name: The vcjob's name.
        phase: Its final phase (Completed).
    """
    from stromboli.integrations.kubeflow.pipelines.step import run_step

    return run_step(
        status=status,
        task_config=task_config,
        image=image,
        command=command,
        args=args,
        replicas=replicas,
        tasks=tasks,
        queue=queue,
        resources=resources,
        min_available=min_available,
        plugins=plugins,
        template=template,
        template_values=template_values,
        pod_annotations=pod_annotations,
        name=name,
        namespace=namespace,
        scheduler_name=scheduler_name,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        timeout_seconds=timeout_seconds,
        poll_seconds=poll_seconds,
        kubeconfig=kubeconfig,
    )


def make_volcano_job(
    base_image: str = STROMBOLI_IMAGE,
    packages_to_install: Optional[List[str]] = None,
    pip_index_urls: Optional[List[str]] = None,
) -> PythonComponent:
    """The ``volcano_job`` component on ``base_image``.

    The image must provide ``stromboli`` (with kfp and kubernetes), or name it in
    ``packages_to_install`` so that the step installs it when it starts.
    """
    return dsl.component(
        volcano_job,
        base_image=base_image,
        packages_to_install=packages_to_install,
        pip_index_urls=pip_index_urls,
        install_kfp_package=False,  # the image (or stromboli from packages_to_install) has it
        task_config_passthroughs=TASK_CONFIG_PASSTHROUGHS,
    )
