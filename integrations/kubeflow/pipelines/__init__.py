"""Kubeflow Pipelines v2 with Stromboli: run a vcjob as a pipeline step, and put the pipeline's
own step pods into a queue and a gang.

- :data:`volcano_job`: the component (on the Stromboli image); :func:`make_volcano_job`
  builds it on another image.
- :func:`use_queue`: queue and gang annotations for a step's pod (kfp-kubernetes).

The component's logic lives in plain modules (:mod:`.spec` builds and checks the vcjob,
:mod:`.runner` submits and follows it, :mod:`.progress` words what it sees), so that it is
tested without kfp; the component itself is a thin function kfp compiles into the pipeline.
"""

from stromboli.integrations.kubeflow.pipelines.component import (
    STROMBOLI_IMAGE,
    make_volcano_job,
)
from stromboli.integrations.kubeflow.pipelines.errors import JobFailed, ParameterError
from stromboli.integrations.kubeflow.pipelines.steps import use_queue

volcano_job = make_volcano_job()

__all__ = [
    "STROMBOLI_IMAGE",
    "JobFailed",
    "ParameterError",
    "make_volcano_job",
    "use_queue",
    "volcano_job",
]
