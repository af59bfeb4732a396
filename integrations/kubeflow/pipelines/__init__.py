"""Kubeflow Pipelines v2 with Stromboli: run a vcjob as a pipeline step, and put the pipeline's
own step pods into a queue and a gang.

- :data:`volcano_job`: the component (on the Stromboli image); :func:`make_volcano_job`
  builds it on another image.
- :func:`use_queue`: queue and gang annotations for a step's pod (kfp-kubernetes).

The component's logic lives in plain modules (:mod:`.spec` builds and checks the vcjob,
:mod:`.runner` submits and follows it, :mod:`.progress` words what it sees), so that it is
tested without kfp; the component itself is a thin function kfp compiles into the pipeline.

The names are imported on first use: inside a running step kfp loads only its runtime part
(``_KFP_RUNTIME``), and importing its compiler side there fails, so the step's own import
(:mod:`.step`) must not pull in :mod:`.component`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "STROMBOLI_IMAGE": "component",
    "make_volcano_job": "component",
    "use_queue": "steps",
    "JobFailed": "errors",
    "ParameterError": "errors",
}

__all__ = [*sorted(_EXPORTS), "volcano_job"]


def __getattr__(name: str) -> Any:
    if name == "volcano_job":
        value = importlib.import_module(f"{__name__}.component").make_volcano_job()
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # built once
    return value
