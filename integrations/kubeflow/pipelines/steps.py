"""Put a pipeline's own step pods into a Volcano queue and gang, with kfp-kubernetes.

kfp-kubernetes can set a step pod's labels and annotations (``add_pod_label``,
``add_pod_annotation``) but not its ``schedulerName`` or ``priorityClassName``: no field of the
platform spec holds them. So this helper writes what the scheduler and the PodGroup controller
read from a pod's metadata, and the pod reaches Stromboli through the webhook's namespace
enrolment (``stromboli.dev/enroll: "true"`` on the namespace), which is what sets the
scheduler on pods that did not ask for it. See docs/integrations/kfp.md.
"""

from __future__ import annotations

import re

from kfp import kubernetes
from kfp.dsl import PipelineTask
from kfp.dsl.pipeline_channel import PipelineChannel

from stromboli.core.api import constants as k

#: Label on the step pod naming its queue, for ``kubectl get pods -l`` and dashboards; the
#: scheduler reads the annotation.
QUEUE_LABEL = k.QUEUE_NAME_KEY
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def _checked(parameter: str, value: str) -> str:
    if isinstance(value, PipelineChannel):
        raise ValueError(
            f"{parameter}: a pipeline parameter or task output cannot be used here: "
            "kfp-kubernetes writes pod annotations when the pipeline is compiled; pass a string"
        )
    if not isinstance(value, str) or len(value) > 63 or not _NAME.fullmatch(value):
        raise ValueError(
            f"{parameter}: {value!r} is not a valid name (lower-case letters, digits, '-', '.', "
            "at most 63)"
        )
    return value


def use_queue(task: PipelineTask, queue: str, *, gang: str = "") -> PipelineTask:
    """Schedule ``task``'s pod in ``queue``; with ``gang``, as a member of that PodGroup.

    Without ``gang`` the PodGroup controller gives the pod a one-member PodGroup in
    ``queue`` (annotation ``scheduling.volcano.sh/queue-name``). With ``gang`` the pod names
    the PodGroup itself (annotation ``scheduling.k8s.io/group-name``): steps that name the
    same gang start together once ``minMember`` of them can; that PodGroup, with its
    ``minMember``, must exist before the steps start (see the docs), or they wait for it.
    Returns ``task`` so that calls chain.
    """
    queue = _checked("queue", queue)
    kubernetes.add_pod_annotation(task, k.QUEUE_NAME_ANNOTATION_KEY, queue)
    kubernetes.add_pod_label(task, QUEUE_LABEL, queue)
    if gang:
        kubernetes.add_pod_annotation(task, k.GROUP_NAME_ANNOTATION, _checked("gang", gang))
    return task
