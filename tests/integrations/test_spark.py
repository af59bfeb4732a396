"""Spark conversions: the Spark operator's SparkApplication and native spark-submit pods."""

from __future__ import annotations

from typing import Any

import pytest

from stromboli.integrations.common import Context, ConversionError, apply_mutation
from stromboli.integrations.spark.convert import SparkApplicationAdapter
from stromboli.integrations.spark.submit import SparkSubmitAdapter, podgroup_template_confs
from stromboli.integrations.spark.units import jvm_memory, kubernetes_memory

from .kit import (
    GROUP_NAME,
    TASK_SPEC,
    convert,
    obj,
    only_group,
    operator_made,
    pod_spec,
    raises_field,
    roles,
    stored,
)

APP = SparkApplicationAdapter()
SUBMIT = SparkSubmitAdapter()


def app(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "Scala",
        "mode": "cluster",
        "driver": {"cores": 1, "memory": "512m"},
        "executor": {"instances": 2, "cores": 1, "memory": "512m"},
        "batchSchedulerOptions": {"queue": "q2"},
    }
    body.update(spec)
    return obj("sparkoperator.k8s.io/v1beta2", "SparkApplication", "pi", body)


def mode(name: str) -> Context:
    return Context(options={"spark.resources": name})


def test_golden_spark_application() -> None:
    """integrations.md §9.1: cluster mode, JVM units parsed."""
    result = convert(APP, app())
    pg = only_group(result)
    assert pg["metadata"]["name"] == "spark-pi-pg"
    [owner] = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("SparkApplication", "pi", True)
    assert pg["spec"] == {
        "minMember": 1,
        "queue": "q2",
        "minResources": {"cpu": "3", "memory": "1536Mi"},
    }
    assert pg["status"] == {"phase": "Pending"}
    assert roles(result) == {
        "driver": {GROUP_NAME: "spark-pi-pg", TASK_SPEC: "driver"},
        "executor": {GROUP_NAME: "spark-pi-pg", TASK_SPEC: "executor"},
    }


def test_golden_upstream_identical_mode_reads_512m_as_millibytes() -> None:
    pg = only_group(convert(APP, app(), mode("upstream")))
    assert pg["spec"]["minResources"] == {"cpu": "3", "memory": "1536m"}
    # "1g" is no Kubernetes quantity: the operator drops memory altogether.
    spec = app(
        driver={"cores": 1, "memory": "1g"}, executor={"instances": 1, "cores": 1, "memory": "1g"}
    )
    assert only_group(convert(APP, spec, mode("upstream")))["spec"]["minResources"] == {"cpu": "2"}


def test_golden_accurate_mode_adds_spark_default_overhead() -> None:
    pg = only_group(convert(APP, app(), mode("accurate")))
    assert pg["spec"]["minResources"] == {"cpu": "3", "memory": "2688Mi"}  # 3 × (512Mi + 384Mi)
    big = app(
        driver={"cores": 1, "memory": "10g"}, executor={"instances": 0}, memoryOverheadFactor="0.2"
    )
    # 10Gi + 20 % = 12Gi for the driver; executors none; executor defaults unused.
    assert only_group(convert(APP, big, mode("accurate")))["spec"]["minResources"] == {
        "cpu": "1",
        "memory": "12Gi",
    }


def test_explicit_overhead_and_gpu() -> None:
    spec = app(
        driver={
            "cores": 2,
            "memory": "1g",
            "memoryOverhead": "512m",
            "gpu": {"name": "nvidia.com/gpu", "quantity": 1},
        },
        executor={
            "instances": 3,
            "coreRequest": "500m",
            "cores": 4,
            "memory": "2g",
            "gpu": {"name": "nvidia.com/gpu", "quantity": 2},
        },
    )
    assert only_group(convert(APP, spec))["spec"]["minResources"] == {
        "cpu": "3500m",
        "memory": "7680Mi",
    }
    assert only_group(convert(APP, spec, mode("accurate")))["spec"]["minResources"] == {
        "cpu": "3500m",
        "memory": "8832Mi",
        "nvidia.com/gpu": "7",
    }  # 1536Mi + 3 × (2Gi + 384Mi)


def test_cpu_precedence_and_defaults() -> None:
    spec = app(driver={"coreLimit": "1200m"}, executor={"instances": 1, "coreLimit": "3"})
    # no memory given: the API default 1g per pod
    assert only_group(convert(APP, spec))["spec"]["minResources"] == {
        "cpu": "4200m",
        "memory": "2Gi",
    }
    spec = app(driver={}, executor={})  # executors default to 2, no cpu field at all
    assert only_group(convert(APP, spec))["spec"]["minResources"] == {"memory": "3Gi"}
    assert only_group(convert(APP, spec, mode("accurate")))["spec"]["minResources"] == {
        "cpu": "3",
        "memory": "4224Mi",
    }


def test_dynamic_allocation_takes_the_largest_start_count() -> None:
    spec = app(
        dynamicAllocation={
            "enabled": True,
            "initialExecutors": 5,
            "minExecutors": 3,
            "maxExecutors": 50,
        }
    )
    assert only_group(convert(APP, spec))["spec"]["minResources"] == {"cpu": "6", "memory": "3Gi"}


def test_client_mode_counts_and_annotates_executors_only() -> None:
    result = convert(APP, app(mode="client"))
    assert only_group(result)["spec"]["minResources"] == {"cpu": "2", "memory": "1Gi"}
    assert set(roles(result)) == {"executor"}


def test_batch_scheduler_options_override() -> None:
    spec = app(
        batchSchedulerOptions={
            "queue": "q",
            "priorityClassName": "p",
            "resources": {"cpu": "10", "memory": "20Gi"},
        }
    )
    pg = only_group(convert(APP, spec))
    assert pg["spec"] == {
        "minMember": 1,
        "queue": "q",
        "priorityClassName": "p",
        "minResources": {"cpu": "10", "memory": "20Gi"},
    }


def test_batch_scheduler_sets_the_pod_scheduler() -> None:
    result = convert(APP, app(batchScheduler="volcano"))
    pod = {
        "metadata": {"labels": {"spark-role": "driver", "sparkoperator.k8s.io/app-name": "pi"}},
        "spec": {"schedulerName": "other"},
    }
    assert apply_mutation(pod, result.mutation_for(pod))["spec"]["schedulerName"] == "volcano"
    result = convert(APP, app())
    assert apply_mutation(pod, result.mutation_for(pod))["spec"]["schedulerName"] == "other"


def test_queue_follows_the_app_only_while_pending() -> None:
    first = only_group(convert(APP, app()))
    pending = Context(existing={"spark-pi-pg": stored(first)})
    moved = app(batchSchedulerOptions={"queue": "q-new"})
    assert only_group(convert(APP, moved, pending))["spec"]["queue"] == "q-new"
    running = stored(first)
    running["status"] = {"phase": "Running"}
    pg = only_group(convert(APP, moved, Context(existing={"spark-pi-pg": running})))
    assert pg["spec"]["queue"] == "q2" and "status" not in pg


def test_finished_app_and_adoption() -> None:
    done = app()
    done["status"] = {"applicationState": {"state": "COMPLETED"}}
    assert convert(APP, done).podgroups == ()
    made = operator_made(only_group(convert(APP, app())))
    result = convert(APP, app(), Context(existing={"spark-pi-pg": made}))
    assert result.podgroups == () and result.adopted == ("spark-pi-pg",)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"driver": {"memory": "1.5g"}}, "spec.driver.memory"),
        ({"driver": {"memory": "2Gi"}}, "spec.driver.memory"),
        ({"executor": {"memoryOverhead": "lots"}}, "spec.executor.memoryOverhead"),
        ({"executor": {"coreRequest": "-1"}}, "spec.executor.coreRequest"),
        ({"executor": {"instances": -2}}, "spec.executor.instances"),
        ({"mode": "local"}, "spec.mode"),
        ({"memoryOverheadFactor": "x"}, "spec.memoryOverheadFactor"),
        (
            {"batchSchedulerOptions": {"resources": {"cpu": "1e400"}}},
            "spec.batchSchedulerOptions.resources.cpu",
        ),
    ],
)
def test_bad_applications_name_the_field(spec: dict[str, Any], field: str) -> None:
    raises_field(APP, app(**spec), field)


def test_unknown_resource_mode_is_refused() -> None:
    raises_field(APP, app(), "options[spark.resources]", mode("exact"))


def test_jvm_memory_units() -> None:
    assert jvm_memory("512m", "f") == 512 * 2**20
    assert jvm_memory("2G", "f") == 2 * 2**30
    assert jvm_memory("1024", "f") == 2**30  # a bare number is MiB, as Spark reads it
    assert jvm_memory("64kb", "f") == 64 * 2**10
    assert jvm_memory("1t", "f") == 2**40
    for bad in ("", "1.5g", "g", "1 g g", "1x", "9" * 40, True, None):
        with pytest.raises(ConversionError):
            jvm_memory(bad, "f")
    assert kubernetes_memory("512m", "f") * 1000 == 512
    assert kubernetes_memory("1g", "f") is None


# --- native spark-submit -----------------------------------------------------------------------


def driver_pod(**annotations: str) -> dict[str, Any]:
    pod = obj(
        "v1",
        "Pod",
        "pi-driver",
        pod_spec("1", "1408Mi", priorityClassName="batch"),
        labels={"spark-role": "driver", "spark-app-selector": "spark-0123abcd"},
        annotations=annotations or None,
    )
    return pod


def test_spark_submit_driver_makes_the_app_podgroup() -> None:
    result = convert(SUBMIT, driver_pod(**{"scheduling.volcano.sh/queue-name": "etl"}))
    pg = only_group(result)
    assert pg["metadata"]["name"] == "spark-0123abcd-podgroup"
    [owner] = pg["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == ("v1", "Pod", "pi-driver")
    assert pg["spec"] == {
        "minMember": 1,
        "queue": "etl",
        "priorityClassName": "batch",
        "minResources": {"cpu": "1", "memory": "1408Mi"},
    }
    executor = {
        "metadata": {"labels": {"spark-role": "executor", "spark-app-selector": "spark-0123abcd"}}
    }
    assert result.mutation_for(executor).annotations[TASK_SPEC] == "executor"
    assert SUBMIT.group_name_for_pod(executor, executor) == "spark-0123abcd-podgroup"


def test_spark_submit_keeps_the_group_volcano_feature_step_chose() -> None:
    pod = driver_pod(**{GROUP_NAME: "spark-0123abcd-podgroup"})
    made = operator_made(only_group(convert(SUBMIT, driver_pod())))
    result = convert(SUBMIT, pod, Context(existing={"spark-0123abcd-podgroup": made}))
    assert result.podgroups == () and result.adopted == ("spark-0123abcd-podgroup",)


def test_spark_submit_needs_a_driver_with_an_app_id() -> None:
    pod = driver_pod()
    pod["metadata"]["labels"]["spark-role"] = "executor"
    raises_field(SUBMIT, pod, "metadata.labels[spark-role]")
    pod = driver_pod()
    del pod["metadata"]["labels"]["spark-app-selector"]
    raises_field(SUBMIT, pod, "metadata.labels[spark-app-selector]")


def test_podgroup_template_confs() -> None:
    confs = podgroup_template_confs({"minMember": 1, "queue": "etl"})
    assert confs[0] == "spark.kubernetes.scheduler.name=volcano"
    key, _, value = confs[-1].partition("=")
    assert key == "spark.kubernetes.scheduler.volcano.podGroupTemplateJson"
    assert value == '{"spec":{"minMember":1,"queue":"etl"}}'
