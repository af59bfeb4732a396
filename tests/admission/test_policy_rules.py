"""Decisions made with a queue policy: default queues at mutation, refusals at validation (each
naming the field and the queues to use instead), and the simulator's single pass."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from stromboli.core.admission.policy import EMPTY_POLICY, parse_policy
from stromboli.core.admission.policyrules import (
    MAX_NAMED_QUEUES,
    PolicyRefusal,
    default_queue,
    enforce,
    judged_pod,
    pod_request,
    violations,
    with_default_queue,
    workload,
)

POLICY = parse_policy(
    """
namespaces:
  team-a: {queues: [team-a, shared, spot], defaultQueue: team-a}
  locked: {queues: []}
  "*": {queues: [shared], defaultQueue: shared}
queues:
  team-a:
    maxPodsPerJob: 4
    maxResourcesPerJob: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "2"}
    priorityClassNames: [normal]
  shared:
    maxPodsPerJob: 16
    schedulerNames: [volcano]
  spot:
    preemptableOnly: true
"""
)
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def container(cpu: str = "1", memory: str = "1Gi", **extra: Any) -> dict:
    return {
        "name": "c",
        "image": "x",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    } | extra


def job(
    namespace: str = "team-a",
    queue: str | None = None,
    replicas: tuple[int, ...] = (2,),
    annotations: dict | None = None,
    **spec: Any,
) -> dict:
    tasks = [
        {"name": f"t{i}", "replicas": n, "template": {"spec": {"containers": [container()]}}}
        for i, n in enumerate(replicas)
    ]
    meta: dict[str, Any] = {"name": "j", "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    body: dict[str, Any] = {"tasks": tasks, **spec}
    if queue is not None:
        body["queue"] = queue
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": meta,
        "spec": body,
    }


def podgroup(namespace: str = "team-a", queue: str | None = None, **spec: Any) -> dict:
    body = dict(spec)
    if queue is not None:
        body["queue"] = queue
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": namespace},
        "spec": body,
    }


def pod(
    namespace: str = "team-a",
    queue: str | None = None,
    scheduler: str = "volcano",
    annotations: dict | None = None,
    **spec: Any,
) -> dict:
    meta_annotations = dict(annotations or {})
    if queue is not None:
        meta_annotations[QUEUE_ANNOTATION] = queue
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, "annotations": meta_annotations},
        "spec": {"schedulerName": scheduler, "containers": [container()], **spec},
    }


# --- default queue -------------------------------------------------------------------------------


@pytest.mark.parametrize("named", [None, "", "default"])
def test_a_job_that_chose_no_queue_gets_the_namespace_default(named: str | None) -> None:
    assert with_default_queue(POLICY, job(queue=named), {})["spec"]["queue"] == "team-a"
    assert with_default_queue(POLICY, job("other", named), {})["spec"]["queue"] == "shared"


def test_a_chosen_queue_is_kept_and_the_object_not_copied() -> None:
    given = job(queue="spot")
    assert with_default_queue(POLICY, given, {}) is given
    given = podgroup(queue="shared")
    assert with_default_queue(POLICY, given, {}) is given


def test_defaulting_leaves_its_argument_alone() -> None:
    given = job()
    with_default_queue(POLICY, given, {})
    assert "queue" not in given["spec"]


def test_the_namespace_annotation_wins_over_the_policy_default() -> None:
    annotations = {QUEUE_ANNOTATION: "from-namespace"}
    assert default_queue(POLICY, "team-a", annotations) == "from-namespace"
    assert with_default_queue(POLICY, job(), annotations)["spec"]["queue"] == "from-namespace"
    assert default_queue(POLICY, "team-a", {}) == "team-a"


def test_no_default_without_a_rule_or_a_default() -> None:
    bare = parse_policy("namespaces: {a: {queues: [q]}}\nqueues: {q: {}}")
    given = job("a")
    assert with_default_queue(bare, given, {}) is given
    given = job("elsewhere")
    assert with_default_queue(bare, given, {}) is given
    given = job()
    assert with_default_queue(EMPTY_POLICY, given, {}) is given


def test_a_podgroup_without_a_queue_gets_the_default() -> None:
    assert with_default_queue(POLICY, podgroup(), {})["spec"]["queue"] == "team-a"


def test_a_pod_gets_the_queue_annotation() -> None:
    mutated = with_default_queue(POLICY, pod(), {})
    assert mutated["metadata"]["annotations"][QUEUE_ANNOTATION] == "team-a"
    bare = pod()
    del bare["metadata"]["annotations"]
    mutated = with_default_queue(POLICY, bare, {QUEUE_ANNOTATION: "ns-q"})
    assert mutated["metadata"]["annotations"] == {QUEUE_ANNOTATION: "ns-q"}
    given = pod(queue="spot")
    assert with_default_queue(POLICY, given, {}) is given


def test_pods_the_policy_does_not_judge_are_not_defaulted() -> None:
    for given in (
        pod(scheduler="default-scheduler"),
        pod(annotations={"scheduling.k8s.io/group-name": "operator-gang"}),
        pod(nodeName="node-0"),
    ):
        assert with_default_queue(POLICY, given, {}) is given


def test_an_enrolled_podgroup_uid_pod_is_judged() -> None:
    enrolled = pod(annotations={"scheduling.k8s.io/group-name": "podgroup-1234"})
    assert judged_pod(enrolled, ["volcano"])
    assert (
        with_default_queue(POLICY, enrolled, {})["metadata"]["annotations"][QUEUE_ANNOTATION]
        == "team-a"
    )


def test_the_request_namespace_stands_in_for_a_missing_one() -> None:
    given = job()
    del given["metadata"]["namespace"]
    assert with_default_queue(POLICY, given, {}, namespace="team-a")["spec"]["queue"] == "team-a"
    assert with_default_queue(POLICY, given, {})["spec"]["queue"] == "shared"  # "default" ns


# --- what is counted -----------------------------------------------------------------------------


def test_a_job_counts_replicas_and_requests_times_replicas() -> None:
    work = workload(job(replicas=(2, 3)))
    assert work is not None
    assert work.pods == 5
    assert work.total("cpu") == 5
    assert work.total("memory") == 5 * 2**30
    assert work.total("nvidia.com/gpu") == 0


def test_negative_or_odd_replicas_count_nothing() -> None:
    given = job(replicas=(4,))
    given["spec"]["tasks"].append({"replicas": -100, "template": {}})
    given["spec"]["tasks"].append({"replicas": True})
    given["spec"]["tasks"].append({"replicas": "7"})
    given["spec"]["tasks"].append("not a task")
    work = workload(given)
    assert work is not None
    assert work.pods == 4
    assert work.total("cpu") == 4


def test_a_pod_request_counts_init_containers_sidecars_limits_and_overhead() -> None:
    spec = {
        "containers": [container("1"), container("500m")],
        "initContainers": [
            container("1", restartPolicy="Always"),  # a sidecar: runs beside the containers
            container("3"),  # alone, but with the sidecar started before it
        ],
        "overhead": {"cpu": "250m"},
    }
    assert pod_request(spec, "cpu") == Fraction(4) + Fraction(1, 4)
    spec["initContainers"] = [container("1")]
    assert pod_request(spec, "cpu") == Fraction(3, 2) + Fraction(1, 4)
    limited = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    assert pod_request(limited, "nvidia.com/gpu") == 2
    assert pod_request("not a spec", "cpu") == 0


def test_a_bad_or_negative_quantity_names_the_field() -> None:
    given = job()
    given["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "cpu"
    ] = "a lot"
    work = workload(given)
    assert work is not None
    total = work.total("cpu")
    assert isinstance(total, str)
    assert "spec.tasks[0].template.spec.containers[0].resources.requests['cpu']" in total
    assert work.total("cpu") is total  # computed once
    negative = podgroup(minResources={"cpu": "-4"})
    work = workload(negative)
    assert work is not None
    assert work.total("cpu") == "spec.minResources['cpu']: must not be negative"


def test_a_podgroup_counts_min_member_and_min_resources() -> None:
    work = workload(podgroup(minMember=3, minResources={"cpu": "6"}))
    assert work is not None
    assert (work.pods, work.total("cpu")) == (3, 6)


def test_an_enrolled_pod_counts_its_group_min_member() -> None:
    enrolled = pod(annotations={"scheduling.volcano.sh/group-min-member": "3"})
    work = workload(enrolled)
    assert work is not None
    assert (work.pods, work.total("cpu")) == (3, 3)
    for odd in ("x", "-2", "0", "99999999999999"):
        work = workload(pod(annotations={"scheduling.volcano.sh/group-min-member": odd}))
        assert work is not None
        assert work.pods == 1


def test_job_scheduler_names_come_from_templates_else_the_job() -> None:
    given = job(replicas=(1, 1), schedulerName="volcano")
    given["spec"]["tasks"][1]["template"]["spec"]["schedulerName"] = "other"
    work = workload(given)
    assert work is not None
    assert work.scheduler_names == [
        ("volcano", "spec.schedulerName"),
        ("other", "spec.tasks[1].template.spec.schedulerName"),
    ]
    work = workload(job(), ["mine"])
    assert work is not None
    assert work.scheduler_names == [("mine", "spec.schedulerName")]


def test_other_kinds_are_not_judged() -> None:
    assert workload({"apiVersion": "v1", "kind": "Node"}) is None
    assert workload({"apiVersion": "batch/v1", "kind": "Job"}) is None
    assert violations(POLICY, {"apiVersion": "v1", "kind": "ConfigMap"}) == []


# --- refusals ------------------------------------------------------------------------------------


def test_a_job_within_every_rule_is_taken() -> None:
    assert violations(POLICY, job(queue="team-a", priorityClassName="normal")) == []
    assert violations(POLICY, job("other", "shared", schedulerName="volcano")) == []


def test_the_empty_policy_takes_everything() -> None:
    assert violations(EMPTY_POLICY, job(queue="anything", replicas=(10**6,))) == []


def test_a_queue_the_namespace_may_not_use_is_refused_with_the_ones_it_may() -> None:
    got = violations(POLICY, job(queue="gpu"))
    assert got == [
        'queue policy: namespace "team-a" may not use queue "gpu" (spec.queue)',
        'queues that namespace "team-a" may use and that take this Job: team-a, shared',
    ]


def test_the_star_rule_covers_unnamed_namespaces() -> None:
    got = violations(POLICY, job("web", "team-a"))
    assert got[0] == 'queue policy: namespace "web" may not use queue "team-a" (spec.queue)'
    assert got[-1] == 'queues that namespace "web" may use and that take this Job: shared'


def test_a_namespace_with_no_queues_may_use_none() -> None:
    got = violations(POLICY, job("locked", "shared"))
    assert got[-1] == 'no queue namespace "locked" may use takes this Job (it may use: none)'


def test_too_many_pods_is_refused() -> None:
    got = violations(POLICY, job(queue="team-a", replicas=(3, 2)))
    assert got[0] == (
        'queue policy: queue "team-a" takes at most 4 pods per job; this Job has 5 '
        "(the sum of spec.tasks[*].replicas)"
    )
    assert got[-1].endswith("take this Job: shared")


def test_too_many_resources_are_refused_in_the_files_units() -> None:
    given = job(queue="team-a", replicas=(4,))
    given["spec"]["tasks"][0]["template"]["spec"]["containers"] = [container("2500m", "10Gi")]
    got = violations(POLICY, given)
    assert (
        'queue "team-a" takes at most 8 cpu per job; this Job requests 10 '
        "(each task's pod request × its replicas)"
    ) in got[0]
    assert 'queue "team-a" takes at most 32Gi memory per job; this Job requests 40Gi' in got[1]


def test_fractions_of_a_unit_are_shown_plainly() -> None:
    policy = parse_policy("queues: {q: {maxResourcesPerJob: {cpu: 100m}}}")
    given = podgroup(queue="q", minResources={"cpu": "150m"})
    assert "this PodGroup requests 150m (spec.minResources)" in violations(policy, given)[0]


def test_a_priority_class_the_queue_does_not_take_is_refused() -> None:
    given = job(queue="team-a", priorityClassName="high")
    given["spec"]["tasks"][0]["template"]["spec"]["priorityClassName"] = "urgent"
    got = violations(POLICY, given)
    assert got[0] == (
        'queue policy: queue "team-a" does not take priorityClassName "high" '
        "(spec.priorityClassName); it takes: normal"
    )
    assert got[1] == (
        'queue "team-a" does not take priorityClassName "urgent" '
        "(spec.tasks[0].template.spec.priorityClassName); it takes: normal"
    )


def test_an_object_naming_no_priority_class_passes_that_rule() -> None:
    assert violations(POLICY, job(queue="team-a")) == []


def test_a_scheduler_the_queue_does_not_take_is_refused() -> None:
    got = violations(
        POLICY, pod("web", "shared", scheduler="volcano-gpu"), ["volcano", "volcano-gpu"]
    )
    assert got[0] == (
        'queue policy: queue "shared" does not take schedulerName "volcano-gpu" '
        "(spec.schedulerName); it takes: volcano"
    )


def test_a_preemptable_only_queue_wants_the_annotation_or_label() -> None:
    got = violations(POLICY, job(queue="spot"))
    assert got[0] == (
        'queue policy: queue "spot" takes only preemptable jobs; set '
        'metadata.annotations["volcano.sh/preemptable"] to "true"'
    )
    assert (
        violations(POLICY, job(queue="spot", annotations={"volcano.sh/preemptable": "true"})) == []
    )
    labelled = job(queue="spot")
    labelled["metadata"]["labels"] = {"volcano.sh/preemptable": "1"}
    assert violations(POLICY, labelled) == []
    for value in ("false", "yes", ""):
        refused = job(queue="spot", annotations={"volcano.sh/preemptable": value})
        assert violations(POLICY, refused), value


def test_the_alternatives_are_the_queues_that_take_the_object() -> None:
    preemptable = {"volcano.sh/preemptable": "true"}
    got = violations(POLICY, job(queue="team-a", replicas=(20,), annotations=preemptable))
    assert got[-1] == 'queues that namespace "team-a" may use and that take this Job: spot'
    got = violations(POLICY, job(queue="team-a", replicas=(20,)))
    assert got[-1] == (
        'no queue namespace "team-a" may use takes this Job (it may use: team-a, shared, spot)'
    )


def test_known_queues_narrow_the_alternatives() -> None:
    got = violations(POLICY, job(queue="gpu"), known_queues={"team-a", "root", "default"})
    assert got[-1] == 'queues that namespace "team-a" may use and that take this Job: team-a'


def test_a_namespace_that_may_use_any_queue_is_pointed_at_those_that_fit() -> None:
    policy = parse_policy("queues: {small: {maxPodsPerJob: 1}, big: {}, '*': {maxPodsPerJob: 2}}")
    given = job("anywhere", "small", replicas=(3,))
    assert violations(policy, given)[-1] == (
        'queues that namespace "anywhere" may use and that take this Job: big'
    )
    known = {"small", "big", "other", "root"}
    assert violations(policy, given, known_queues=known)[-1] == (
        'queues that namespace "anywhere" may use and that take this Job: big'
    )
    open_policy = parse_policy("queues: {small: {maxPodsPerJob: 1}}")
    assert violations(open_policy, given)[-1] == (
        'namespace "anywhere" may use any queue the policy does not name'
    )


def test_a_long_list_of_alternatives_is_cut() -> None:
    names = [f"q{i:02}" for i in range(30)]
    policy = parse_policy(f"namespaces: {{a: {{queues: [{', '.join(names)}]}}}}")
    got = violations(policy, job("a", "elsewhere"))
    shown = ", ".join(names[:MAX_NAMED_QUEUES])
    assert got[-1].endswith(f"{shown} and {30 - MAX_NAMED_QUEUES} more")


def test_pods_in_another_group_or_scheduler_are_not_judged() -> None:
    assert violations(POLICY, pod("web", "team-a", scheduler="default-scheduler")) == []
    in_gang = pod("web", "team-a", annotations={"scheduling.k8s.io/group-name": "job-uid"})
    assert violations(POLICY, in_gang) == []
    assert violations(POLICY, pod("web", "team-a"))[0].startswith(
        'queue policy: namespace "web" may not use queue "team-a" '
        '(metadata.annotations["scheduling.volcano.sh/queue-name"])'
    )


# --- the simulator's pass ------------------------------------------------------------------------


def test_enforce_defaults_then_judges() -> None:
    assert enforce(POLICY, job(), {})["spec"]["queue"] == "team-a"
    with pytest.raises(PolicyRefusal) as caught:
        enforce(POLICY, job(replicas=(9,)), {}, known_queues={"team-a", "shared"})
    assert str(caught.value).startswith(
        'admission webhook "validatejob.volcano.sh" denied the request: queue policy: '
        'queue "team-a" takes at most 4 pods per job'
    )
    assert str(caught.value).endswith("take this Job: shared")


def test_enforce_applies_volcanos_podgroup_default_first() -> None:
    annotations = {"team-a": {QUEUE_ANNOTATION: "shared"}}
    assert enforce(POLICY, podgroup(), annotations)["spec"]["queue"] == "shared"
    with pytest.raises(PolicyRefusal, match=r'"validatepodgroup\.volcano\.sh"'):
        enforce(POLICY, podgroup("web"), {"web": {QUEUE_ANNOTATION: "team-a"}})


def test_enforce_refuses_pods_with_the_pod_webhook() -> None:
    with pytest.raises(PolicyRefusal, match=r'"validatepod\.volcano\.sh".*"spot" takes only'):
        enforce(POLICY, pod(queue="spot"), {})


def test_enforce_without_a_policy_returns_the_object() -> None:
    given = job(queue="x")
    assert enforce(EMPTY_POLICY, given, {}) is given
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    assert enforce(POLICY, node, {}) is node


def test_a_job_exactly_at_the_limits_is_taken() -> None:
    given = job(queue="team-a", replicas=(4,))
    given["spec"]["tasks"][0]["template"]["spec"]["containers"] = [container("2", "8Gi")]
    assert violations(POLICY, given) == []
    given["spec"]["tasks"][0]["replicas"] = 5
    assert len(violations(POLICY, given)) == 4  # pods, cpu, memory, then the alternatives
