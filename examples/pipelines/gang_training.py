"""A Kubeflow pipeline whose training step is a Volcano gang: all workers start together.

    python examples/pipelines/gang_training.py       # writes gang_training.yaml beside it

Upload ``gang_training.yaml`` in the Kubeflow Pipelines UI (or ``kfp run submit``). The three
steps:

1. ``prepare``: an ordinary step, its pod put in the run's queue with ``use_queue``;
2. ``train``: the ``volcano_job`` component: a vcjob of ``workers`` pods that Stromboli
   places as one gang in ``queue``; the step follows it and fails if it fails;
3. ``report``: reads the job's final status (the ``status`` artifact) and prints it.

The same pipeline runs on a laptop with kfp's local runner against any cluster (see
docs/integrations/kfp.md, "Trying it locally").
"""

# No `from __future__ import annotations`: kfp reads the annotations as types, not strings.

from pathlib import Path

from kfp import compiler, dsl, kubernetes

from stromboli.integrations.kubeflow.pipelines import STROMBOLI_IMAGE, use_queue, volcano_job

#: Queue of the pipeline's own small steps.
STEP_QUEUE = "default"
#: The training script every worker runs (the env plugin gives each its task index).
TRAIN = (
    "import os; "
    "print('worker', os.environ.get('VC_TASK_INDEX'), 'of', os.environ.get('VC_WORKER_NUM'))"
)


@dsl.component(base_image=STROMBOLI_IMAGE, install_kfp_package=False)
def prepare(workers: int) -> str:
    """Pretends to shard a data set for ``workers`` workers."""
    shards = ",".join(f"shard-{i}" for i in range(workers))
    print("prepared", shards)
    return shards


@dsl.component(base_image=STROMBOLI_IMAGE, install_kfp_package=False)
def report(status: dsl.Input[dsl.Artifact]) -> str:
    """Prints how the training job ended; returns its phase."""
    import json

    with open(status.path) as f:
        job = json.load(f)
    state = job["status"].get("state", {})
    print("vcjob", job["metadata"]["name"], "ended", state.get("phase"))
    print("pods succeeded:", job["status"].get("succeeded", 0))
    return str(state.get("phase"))


@dsl.pipeline(
    name="stromboli-gang-training",
    description="Shard the data, train on a gang of workers (a Volcano Job), report.",
)
def gang_training(
    queue: str = "default",
    workers: int = 2,
    image: str = "python:3.11-slim",
    pod_annotations: dict = {},  # noqa: B006 (a pipeline parameter's default, never mutated)
    namespace: str = "",
    kubeconfig: str = "",
) -> str:
    shards = prepare(workers=workers)
    # Step pods get their queue when the pipeline is compiled (kfp-kubernetes cannot take a
    # run parameter there); the vcjob's queue is the run's ``queue`` parameter.
    use_queue(shards, STEP_QUEUE)

    train = volcano_job(
        image=image,
        command=["python", "-c", TRAIN],
        replicas=workers,
        queue=queue,
        resources={"cpu": "500m", "memory": "512Mi"},
        plugins={"env": [], "svc": []},
        pod_annotations=pod_annotations,
        namespace=namespace,
        kubeconfig=kubeconfig,
        timeout_seconds=3600,
    ).after(shards)
    train.set_display_name("train (Volcano gang)")
    # The step's own pod is cancelled with the run or after its deadline; either way the
    # component deletes its vcjob on the way out.
    kubernetes.set_timeout(train, 4 * 3600)

    return report(status=train.outputs["status"]).output


if __name__ == "__main__":
    out = Path(__file__).with_suffix(".yaml")
    compiler.Compiler().compile(gang_training, str(out))
    print("wrote", out)
