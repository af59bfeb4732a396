"""Native ``spark-submit`` on Kubernetes: driver and executor pods grouped by application.

Spark built with ``-Pvolcano`` (``VolcanoFeatureStep``) makes the PodGroup
``<spark.app.id>-podgroup`` before the driver pod and owns it by the driver; we adopt it.
Stock Spark does not, so the adapter makes the same group itself from the driver pod: name
``<spark-app-selector>-podgroup`` (the app id Spark labels every pod with), owned by the
driver pod (as Spark's pre-resources are), ``minMember`` 1, ``minResources`` = the driver
pod's scheduling request (the executors' size lives in Spark's conf, which the pod does not
carry; a PodGroup template passed with ``podgroup_template_confs`` is the way to reserve
them), ``queue`` from the driver's ``scheduling.volcano.sh/queue-name`` annotation,
``priorityClassName`` from the driver pod.

Pods (``spark-role`` driver / executor) get ``scheduling.k8s.io/group-name``,
``volcano.sh/task-spec`` = the role and ``schedulerName: volcano`` where none is set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from stromboli.core.api import constants as k
from stromboli.integrations.common import (
    BaseAdapter,
    Context,
    Conversion,
    ConversionError,
    exact_name,
    labels_of,
    mapping,
    mutation,
    owner_reference,
    pod_resources,
    podgroup,
    read_meta,
    settle,
    string,
    volcano_network_topology,
)

FRAMEWORK = "spark-submit"
APP_SELECTOR_LABEL = "spark-app-selector"
ROLE_LABEL = "spark-role"
FEATURE_STEP = "org.apache.spark.deploy.k8s.features.VolcanoFeatureStep"


def group_name(app_id: str) -> str:
    return exact_name(f"{app_id}-podgroup")


class SparkSubmitAdapter(BaseAdapter):
    """Converts a Spark driver pod (the root of a native Spark application)."""

    framework = FRAMEWORK

    def _convert(self, obj: Mapping[str, Any], context: Context) -> Conversion:
        meta = read_meta(obj, "v1", "Pod")
        if meta.labels.get(ROLE_LABEL) != "driver":
            raise ConversionError(f"metadata.labels[{ROLE_LABEL}]", "must be driver")
        app_id = meta.labels.get(APP_SELECTOR_LABEL)
        if not app_id:
            raise ConversionError(f"metadata.labels[{APP_SELECTOR_LABEL}]", "is required")
        # A driver Spark already linked to a group keeps it (VolcanoFeatureStep's name).
        name = meta.annotations.get(k.GROUP_NAME_ANNOTATION) or group_name(app_id)
        mutations = [
            mutation(role, name, {APP_SELECTOR_LABEL: app_id, ROLE_LABEL: role}, "spec")
            for role in ("driver", "executor")
        ]
        spec = mapping(obj.get("spec"), "spec")
        group = podgroup(
            name=name,
            namespace=meta.namespace,
            owner=owner_reference(meta, block_owner_deletion=False),
            adapter=FRAMEWORK,
            min_member=1,
            queue=meta.annotations.get(k.QUEUE_NAME_ANNOTATION_KEY),
            priority_class=string(spec.get("priorityClassName"), "spec.priorityClassName"),
            min_resources=pod_resources(
                spec, "spec", fallback="per-resource", init_containers=True
            ),
            topology=volcano_network_topology(meta),
        )
        return settle([group], mutations, context)

    def group_name_for_pod(self, pod: Mapping[str, Any], owner: Mapping[str, Any]) -> str | None:
        app_id = labels_of(pod).get(APP_SELECTOR_LABEL)
        return f"{app_id}-podgroup" if isinstance(app_id, str) and app_id else None


def podgroup_template_confs(spec: Mapping[str, Any], *, scheduler: str = "volcano") -> list[str]:
    """``--conf`` values that make Spark ≥ 4.2 built with ``-Pvolcano`` create the PodGroup
    itself from ``spec`` (``minMember``, ``minResources``, ``queue``, ...)."""
    if not isinstance(spec, Mapping):
        raise ConversionError("spec", "a PodGroup spec must be an object")
    template = json.dumps({"spec": dict(spec)}, separators=(",", ":"), sort_keys=True)
    return [
        f"spark.kubernetes.scheduler.name={scheduler}",
        f"spark.kubernetes.driver.pod.featureSteps={FEATURE_STEP}",
        f"spark.kubernetes.executor.pod.featureSteps={FEATURE_STEP}",
        f"spark.kubernetes.scheduler.volcano.podGroupTemplateJson={template}",
    ]
