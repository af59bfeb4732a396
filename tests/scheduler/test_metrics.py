"""The scheduler's Prometheus metrics (reference §7) after cycles with known outcomes: queue
gauges, job and pod latencies, preemption counters, unschedulable jobs, pending pods by
reason, and the removal of series whose queue or job is gone."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from stromboli.core.clock import parse_time
from stromboli.core.promtypes import CountedHistogram, exponential
from stromboli.core.scheduler.metrics import SchedulerMetrics
from stromboli.core.scheduler.pending import fit_error_reason

from .builders import (
    BASIC_CONF,
    SCHEDULING,
    Cluster,
    conf,
    node,
    pod,
    podgroup,
    priority_class,
    queue,
)

GiB = 1024**3
PREDICATES_CONF = conf(
    "enqueue, allocate, backfill",
    ["priority", "gang", "conformance"],
    ["overcommit", "drf", "predicates", "proportion"],
)
PREEMPT_CONF = conf(
    "enqueue, allocate, preempt, backfill",
    ["priority", "gang", "conformance"],
    ["overcommit", {"name": "drf", "enablePreemptable": False}, "predicates", "proportion"],
)


class Observed(Cluster):
    """A cluster whose cycles feed one ``SchedulerMetrics``, as the scheduler process does."""

    def __init__(self, tmp_path: Path, config: str | None = None) -> None:
        super().__init__(tmp_path, config or BASIC_CONF)
        self.metrics = SchedulerMetrics()

    async def cycle(self, cycles: int = 1) -> None:
        for _ in range(cycles):
            self.metrics.observe(await self.run())

    def value(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)

    def labelled(self, name: str, label: str) -> dict[str, float]:
        """Values of ``name`` by the value of ``label`` (every series of the family)."""
        out = {}
        for family in self.metrics.registry.collect():
            for sample in family.samples:
                if sample.name == name:
                    out[sample.labels[label]] = sample.value
        return out


async def observed(tmp_path: Path, *objects: dict, config: str | None = None) -> Observed:
    c = Observed(tmp_path, config)
    await c.start()
    await c.add(*objects)
    return c


def gang(name: str, count: int, *, queue_name: str | None = None, **pod_args: str) -> list[dict]:
    return [
        podgroup(name, count, queue=queue_name),
        *(pod(f"{name}-{i}", group=name, **pod_args) for i in range(count)),
    ]


# -- queues ------------------------------------------------------------------------------------


async def test_queue_gauges_after_a_cycle(tmp_path: Path) -> None:
    c = await observed(
        tmp_path,
        node("n1", cpu="8", memory="16Gi", extra={"nvidia.com/gpu": "2"}),
        queue("eng", 3, capability={"cpu": "6"}),
        queue("idle", 2),
        *gang("a", 2, queue_name="eng", cpu="1", memory="1Gi", extra={"nvidia.com/gpu": "1"}),
        *gang("b", 1, cpu="2", memory="2Gi"),
    )
    await c.cycle()
    v = c.value
    assert v("volcano_queue_allocated_milli_cpu", queue_name="eng") == 2000
    assert v("volcano_queue_allocated_memory_bytes", queue_name="eng") == 2 * GiB
    assert (
        v("volcano_queue_allocated_scalar_resources", queue_name="eng", resource="nvidia.com/gpu")
        == 2
    )
    assert v("volcano_queue_request_milli_cpu", queue_name="eng") == 2000
    assert v("volcano_queue_allocated_milli_cpu", queue_name="default") == 2000
    # proportion: what a queue asks for below its weighted part is what it deserves.
    assert v("volcano_queue_deserved_milli_cpu", queue_name="eng") == 2000
    assert v("volcano_queue_deserved_milli_cpu", queue_name="default") == 2000
    assert v("volcano_queue_share", queue_name="eng") == 1.0
    assert v("volcano_queue_overused", queue_name="eng") == 1
    assert v("volcano_queue_capacity_milli_cpu", queue_name="eng") == 6000
    # No memory capability: unbounded, so not exported as zero.
    assert v("volcano_queue_capacity_memory_bytes", queue_name="eng") is None
    assert v("volcano_queue_real_capacity_milli_cpu", queue_name="eng") == 6000
    assert v("volcano_queue_weight", queue_name="eng") == 3
    # A queue without jobs holds nothing and deserves nothing in particular.
    assert v("volcano_queue_weight", queue_name="idle") == 2
    assert v("volcano_queue_allocated_milli_cpu", queue_name="idle") == 0
    assert v("volcano_queue_deserved_milli_cpu", queue_name="idle") is None
    assert v("volcano_queue_overused", queue_name="idle") == 0


async def test_series_of_a_deleted_queue_and_job_are_removed(tmp_path: Path) -> None:
    c = await observed(tmp_path, node("n1"), queue("eng"), *gang("a", 2, queue_name="eng", cpu="1"))
    await c.cycle()
    job = {"job_name": "a", "queue": "eng", "job_namespace": "default"}
    assert c.value("volcano_queue_weight", queue_name="eng") == 1
    assert c.value("volcano_e2e_job_scheduling_start_time", **job) is not None
    assert c.value("volcano_e2e_job_scheduling_duration", **job) is not None
    assert c.value("volcano_job_share", job_ns="default", job_id="a") is not None

    for name in ("a-0", "a-1"):
        await c.store.delete("v1", "Pod", name, "default")
    await c.store.delete(SCHEDULING, "PodGroup", "a", "default")
    await c.store.delete(SCHEDULING, "Queue", "eng")
    await c.cycle()
    assert c.value("volcano_queue_weight", queue_name="eng") is None
    assert c.value("volcano_queue_allocated_milli_cpu", queue_name="eng") is None
    assert c.value("volcano_queue_overused", queue_name="eng") is None
    assert c.value("volcano_e2e_job_scheduling_start_time", **job) is None
    assert c.value("volcano_e2e_job_scheduling_duration", **job) is None
    assert c.value("volcano_e2e_job_scheduling_last_time", **job) is None
    assert c.value("volcano_job_share", job_ns="default", job_id="a") is None
    assert c.value("volcano_queue_weight", queue_name="default") == 1


# -- jobs and pods -----------------------------------------------------------------------------


async def test_job_and_task_latencies(tmp_path: Path) -> None:
    c = await observed(tmp_path, node("n1"), *gang("a", 2, cpu="1"))
    group = await c.pg("a")
    pods = [await c.pod(f"a-{i}") for i in range(2)]
    cycle_at = c.clock.seconds
    await c.cycle()

    def created(obj: dict) -> float:
        return parse_time(obj["metadata"]["creationTimestamp"]).timestamp()

    expected = sum((cycle_at - created(p)) * 1000 for p in pods)
    for stage in ("Assumed", "Bound"):
        count = c.value("volcano_task_scheduling_latency_milliseconds_count", stage=stage)
        total = c.value("volcano_task_scheduling_latency_milliseconds_sum", stage=stage)
        assert (count, total) == (2, expected)
    job = {"job_name": "a", "queue": "default", "job_namespace": "default"}
    waited = (cycle_at - created(group)) * 1000
    assert c.value("volcano_e2e_job_scheduling_duration", **job) == waited
    assert c.value("volcano_e2e_job_scheduling_start_time", **job) == created(group)
    assert c.value("volcano_e2e_job_scheduling_last_time", **job) == cycle_at
    assert c.value("volcano_e2e_job_scheduling_latency_milliseconds_count") == 1
    assert c.value("volcano_e2e_job_scheduling_latency_milliseconds_sum") == waited
    assert c.value("volcano_schedule_attempts_total", result="scheduled") == 2
    assert c.value("stromboli_pods_placed_per_cycle_sum") == 2
    # drf: the job holds 2 of the node's 8 cpus, its dominant share.
    assert c.value("volcano_job_share", job_ns="default", job_id="a") == 0.25
    assert c.value("volcano_namespace_share", namespace_name="default") == 0.25
    assert c.value("volcano_namespace_weighted_share", namespace_name="default") == 0.25


async def test_cycle_stage_and_action_timings_are_recorded(tmp_path: Path) -> None:
    c = await observed(tmp_path, node("n1"), node("n2"), *gang("a", 2, cpu="1"))
    await c.cycle(2)
    assert c.value("volcano_e2e_scheduling_latency_milliseconds_count") == 2
    assert c.value("volcano_open_session_duration_milliseconds_count") == 2
    for action in ("enqueue", "allocate", "backfill"):
        assert c.value("volcano_action_scheduling_latency_milliseconds_count", action=action) == 2
        assert c.value("stromboli_cycle_duration_seconds_count", part=action) == 2
    for stage in ("Predicate", "Scoring", "Bind"):
        count = c.value("volcano_scheduling_stage_duration_milliseconds_count", stage=stage)
        assert count == 2
    predicate = c.value("volcano_scheduling_stage_duration_milliseconds_sum", stage="Predicate")
    assert predicate is not None and predicate > 0
    assert (
        c.value(
            "volcano_plugin_scheduling_latency_milliseconds_count",
            plugin="gang",
            OnSession="OnSessionOpen",
        )
        == 2
    )
    # The buckets are Volcano's.
    bounds = [
        float(s.labels["le"])
        for f in c.metrics.registry.collect()
        for s in f.samples
        if s.name == "volcano_e2e_scheduling_latency_milliseconds_bucket"
    ]
    assert bounds[:-1] == exponential(1, 5000, 20)


async def test_unschedulable_gauges_are_set_then_cleared(tmp_path: Path) -> None:
    # The queue deserves what the cluster has (4 cpus), but no node holds a 3-cpu pod.
    c = await observed(tmp_path, node("n1", cpu="2"), node("n2", cpu="2"), *gang("big", 2, cpu="3"))
    await c.cycle()
    assert c.value("volcano_unschedule_job_count") == 1
    assert c.value("volcano_unschedule_task_count", job_id="big") == 2
    assert c.value("volcano_job_retry_counts", job_id="big") == 1
    assert c.value("volcano_schedule_attempts_total", result="unschedulable") == 1
    assert c.labelled("stromboli_pending_pods", "reason") == {"resources": 2}
    await c.cycle()
    assert c.value("volcano_job_retry_counts", job_id="big") == 2

    await c.add(node("n3", cpu="8"))
    await c.cycle()
    assert c.value("volcano_unschedule_job_count") == 0
    assert c.value("volcano_unschedule_task_count", job_id="big") is None
    assert c.labelled("stromboli_pending_pods", "reason") == {}
    assert c.value("volcano_job_retry_counts", job_id="big") == 2


# -- preemption --------------------------------------------------------------------------------


async def test_preemption_counts_transactions_attempts_and_victims(tmp_path: Path) -> None:
    c = await observed(
        tmp_path, priority_class("high", 1000), node("n1", cpu="4"), config=PREEMPT_CONF
    )
    low = [
        podgroup("low", 1),
        *(pod(f"low-{i}", group="low", cpu="1", priority=10) for i in range(4)),
    ]
    await c.add(*low)
    await c.cycle()
    for i in range(4):
        await c.set_phase(f"low-{i}", "Running")
    await c.add(
        podgroup("high", 2, priority_class="high"),
        *(pod(f"high-{i}", group="high", cpu="1", priority=1000) for i in range(2)),
    )
    await c.cycle()
    assert c.value("volcano_eviction_transactions_total", action="preempt") == 1
    for action in ("reclaim", "gangpreempt", "gangreclaim"):
        assert c.value("volcano_eviction_transactions_total", action=action) == 0
    assert c.value("volcano_total_preemption_attempts") == 2
    assert c.value("stromboli_evicted_pods_total", action="preempt") == 2
    victims = c.value("volcano_pod_preemption_victims")
    assert victims is not None and victims >= 1
    # The preemptors wait for the victims' room, nominated to it.
    assert c.labelled("stromboli_pending_pods", "reason") == {"pipelined": 2}


# -- pending pods by reason ----------------------------------------------------------------------


async def test_pending_pods_by_queue_and_reason(tmp_path: Path) -> None:
    # Four 2-cpu nodes: the default queue deserves all it asks for, but no node holds 3 cpus
    # ("huge"); "picky" selects a label no node has; "short" has fewer pods than minMember;
    # "small" is capped below its one pod's request; "closed" takes nothing; "later" asks for
    # more than the cluster has, so enqueue does not admit it.
    c = await observed(
        tmp_path,
        *(node(f"n{i}", cpu="2") for i in range(4)),
        queue("closed", state="Closed"),
        queue("small", capability={"cpu": "1"}),
        *gang("capped", 1, queue_name="small", cpu="2"),
        *gang("huge", 1, cpu="3"),
        *gang("shut", 1, queue_name="closed", cpu="1"),
        podgroup("short", 3),
        pod("short-0", group="short", cpu="1"),
        *gang("picky", 1, cpu="1"),
        podgroup("later", 1, min_resources={"cpu": "100"}),
        pod("later-0", group="later", cpu="1"),
        config=PREDICATES_CONF,
    )
    picky = await c.pod("picky-0")
    picky["spec"]["nodeSelector"] = {"zone": "nowhere"}
    await c.store.update(picky)
    await c.cycle()
    pending = {
        (s.labels["queue"], s.labels["reason"]): s.value
        for f in c.metrics.registry.collect()
        for s in f.samples
        if s.name == "stromboli_pending_pods"
    }
    assert pending == {
        ("default", "resources"): 1,
        ("closed", "queue-closed"): 1,
        ("default", "invalid"): 1,
        ("default", "predicates"): 1,
        ("small", "overused"): 1,
        ("default", "not-enqueued"): 1,
    }


def test_fit_error_reason_classes() -> None:
    assert fit_error_reason("0/3 nodes are unavailable: 3 Insufficient cpu.") == "resources"
    assert (
        fit_error_reason(
            "0/3 nodes are unavailable: 1 Insufficient memory, 2 Insufficient nvidia.com/gpu."
        )
        == "resources"
    )
    assert (
        fit_error_reason(
            "0/3 nodes are unavailable: 1 Insufficient cpu, 2 node(s) didn't match Pod's node "
            "affinity/selector."
        )
        == "predicates"
    )
    assert fit_error_reason("queue q has not enough resources left for the task") == "overused"


# -- the registry ----------------------------------------------------------------------------------


def test_every_volcano_scheduler_metric_is_registered() -> None:
    names = SchedulerMetrics().series_names()
    expected = {
        "volcano_e2e_scheduling_latency_milliseconds_bucket",
        "volcano_open_session_duration_milliseconds_bucket",
        "volcano_e2e_job_scheduling_latency_milliseconds_bucket",
        "volcano_e2e_job_scheduling_duration",
        "volcano_e2e_job_scheduling_start_time",
        "volcano_e2e_job_scheduling_last_time",
        "volcano_plugin_scheduling_latency_milliseconds_bucket",
        "volcano_action_scheduling_latency_milliseconds_bucket",
        "volcano_task_scheduling_latency_milliseconds_bucket",
        "volcano_scheduling_stage_duration_milliseconds_bucket",
        "volcano_schedule_attempts_total",
        "volcano_pod_preemption_victims",
        "volcano_total_preemption_attempts",
        "volcano_eviction_transactions_total",
        "volcano_unschedule_task_count",
        "volcano_unschedule_job_count",
        "volcano_job_share",
        "volcano_job_retry_counts",
        "volcano_namespace_share",
        "volcano_namespace_weight",
        "volcano_namespace_weighted_share",
        "volcano_queue_share",
        "volcano_queue_weight",
        "volcano_queue_overused",
        "stromboli_pending_pods",
        "stromboli_cycle_duration_seconds_bucket",
        "stromboli_pods_placed_per_cycle_bucket",
    }
    for figure in ("allocated", "request", "deserved", "capacity", "real_capacity", "inqueue"):
        for unit in ("milli_cpu", "memory_bytes", "scalar_resources"):
            expected.add(f"volcano_queue_{figure}_{unit}")
    assert expected <= names


def test_counted_histogram_exposes_what_a_histogram_would() -> None:
    buckets = exponential(50, 60000, 30)
    counted_registry, plain_registry = CollectorRegistry(), CollectorRegistry()
    counted = CountedHistogram("latency", "help", ("stage",), buckets, counted_registry)
    plain = Histogram("latency", "help", ["stage"], buckets=buckets, registry=plain_registry)
    for value, count in ((0.0, 3), (50.0, 2), (51.0, 1), (1234.5, 4), (60000.0, 1), (1e9, 2)):
        counted.labels("Bound").observe(value, count)
        for _ in range(count):
            plain.labels("Bound").observe(value)

    def samples(registry: CollectorRegistry) -> dict:
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect()
            for s in family.samples
            if not s.name.endswith("_created")
        }

    assert samples(counted_registry) == samples(plain_registry)
