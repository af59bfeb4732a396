"""The emulated workload controllers: Deployment → ReplicaSet → Pods, StatefulSet, batch Job
and CronJob, with kube-controller-manager's names, labels and ownerReferences, scheduled by
the real scheduler on the virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stromboli.core.simulate.engine import Simulation, SimulationResult
from stromboli.core.simulate.loader import load
from stromboli.core.simulate.output import as_list

NODE = """apiVersion: v1
kind: Node
metadata: {{name: n1}}
status: {{allocatable: {{cpu: "{cpu}", memory: 64Gi, pods: "110"}}}}
"""


def template(
    *,
    labels: str = "{app: x}",
    runtime: str | None = None,
    exit_code: int | None = None,
    cpu: str = "1",
    restart: str = "Always",
    scheduler: str = "volcano",
    extra: str = "",
) -> str:
    annotations = {}
    if runtime is not None:
        annotations["sim.stromboli.dev/runtime"] = runtime
    if exit_code is not None:
        annotations["sim.stromboli.dev/exit-code"] = f'"{exit_code}"'
    notes = ", ".join(f"{key}: {value}" for key, value in annotations.items())
    return f"""
    metadata: {{labels: {labels}, annotations: {{{notes}}}}}
    spec:
      schedulerName: {scheduler}
      restartPolicy: {restart}{extra}
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


async def simulate(
    tmp_path: Path, text: str, cpu: int = 8, **options: Any
) -> tuple[SimulationResult, dict[str, Any]]:
    path = tmp_path / "input.yaml"
    path.write_text(NODE.format(cpu=cpu) + "---\n" + text)
    result = await Simulation(load([path]), **options).run()
    return result, await as_list(result.store)


def of_kind(state: dict[str, Any], kind: str, api_version: str | None = None) -> list[dict]:
    return [
        o
        for o in state["items"]
        if o["kind"] == kind and (api_version is None or o["apiVersion"] == api_version)
    ]


def by_name(state: dict[str, Any], kind: str, api_version: str | None = None) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in of_kind(state, kind, api_version)}


def owner(obj: dict[str, Any]) -> dict[str, Any]:
    [ref] = obj["metadata"]["ownerReferences"]
    assert ref["controller"] is True and ref["blockOwnerDeletion"] is True
    return ref


def events(state: dict[str, Any], reason: str) -> list[dict]:
    return [e for e in of_kind(state, "Event") if e["reason"] == reason]


# --- Deployment → ReplicaSet → Pods --------------------------------------------------------------

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, annotations: {annotations}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:{template}"""


async def test_a_deployment_schedules_through_a_replicaset(tmp_path: Path) -> None:
    text = DEPLOYMENT.format(annotations="{}", replicas=3, template=template(labels="{app: web}"))
    _, state = await simulate(tmp_path, text)
    deployment = by_name(state, "Deployment")["web"]
    [rs] = of_kind(state, "ReplicaSet")
    digest = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{digest}"
    assert owner(rs)["uid"] == deployment["metadata"]["uid"]
    assert owner(rs)["kind"] == "Deployment"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": digest}
    assert rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == digest
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "4"
    pods = of_kind(state, "Pod")
    assert len(pods) == 3
    for pod in pods:
        assert pod["metadata"]["name"].startswith(f"web-{digest}-")
        assert pod["metadata"]["labels"] == {"app": "web", "pod-template-hash": digest}
        assert owner(pod)["uid"] == rs["metadata"]["uid"]
        assert pod["spec"]["nodeName"] == "n1"
        assert pod["status"]["phase"] == "Running"
        # The PodGroup controller's group for plain pods: one per owner.
        group = f"podgroup-{rs['metadata']['uid']}"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == group
    assert list(by_name(state, "PodGroup")) == [f"podgroup-{rs['metadata']['uid']}"]
    assert rs["status"]["replicas"] == rs["status"]["readyReplicas"] == 3
    assert deployment["status"]["availableReplicas"] == 3
    available = {c["type"]: c for c in deployment["status"]["conditions"]}["Available"]
    assert available["status"] == "True" and available["reason"] == "MinimumReplicasAvailable"
    [scaled] = events(state, "ScalingReplicaSet")
    assert scaled["message"] == f"Scaled up replica set web-{digest} from 0 to 3"


async def test_the_template_hash_depends_on_the_template_only(tmp_path: Path) -> None:
    one = DEPLOYMENT.format(annotations="{}", replicas=1, template=template(labels="{app: web}"))
    _, first = await simulate(tmp_path, one)
    _, again = await simulate(tmp_path, one.replace("replicas: 1", "replicas: 2"))
    _, other = await simulate(tmp_path, one.replace("image: x", "image: y"))
    name = [rs["metadata"]["name"] for rs in of_kind(first, "ReplicaSet")]
    assert name == [rs["metadata"]["name"] for rs in of_kind(again, "ReplicaSet")]
    assert name != [rs["metadata"]["name"] for rs in of_kind(other, "ReplicaSet")]


async def test_deployment_pods_that_do_not_fit_wait(tmp_path: Path) -> None:
    text = DEPLOYMENT.format(
        annotations="{}", replicas=3, template=template(labels="{app: web}", cpu="3")
    )
    _, state = await simulate(tmp_path, text, cpu=8)
    bound = [p for p in of_kind(state, "Pod") if p["spec"].get("nodeName")]
    assert len(bound) == 2
    deployment = by_name(state, "Deployment")["web"]
    assert deployment["status"]["unavailableReplicas"] == 1
    available = {c["type"]: c for c in deployment["status"]["conditions"]}["Available"]
    assert available["status"] == "False"


async def test_group_min_member_on_the_deployment_makes_a_gang(tmp_path: Path) -> None:
    # Three pods of 3 cpu on 8 cpu: as a gang of 3 none may run.
    text = DEPLOYMENT.format(
        annotations='{"scheduling.volcano.sh/group-min-member": "3"}',
        replicas=3,
        template=template(labels="{app: web}", cpu="3"),
    )
    _, state = await simulate(tmp_path, text, cpu=8)
    [group] = of_kind(state, "PodGroup")
    assert group["spec"]["minMember"] == 3
    assert not [p for p in of_kind(state, "Pod") if p["spec"].get("nodeName")]


async def test_finished_deployment_pods_are_replaced_up_to_the_cap(tmp_path: Path) -> None:
    text = DEPLOYMENT.format(
        annotations="{}", replicas=2, template=template(labels="{app: web}", runtime="10s")
    )
    result, state = await simulate(tmp_path, text, max_workload_pods=5, max_time=3600)
    pods = of_kind(state, "Pod")
    assert len(pods) == 5
    assert sum(1 for p in pods if p["status"]["phase"] == "Succeeded") >= 3
    [rs] = of_kind(state, "ReplicaSet")
    assert result.notes == [
        f"ReplicaSet default/{rs['metadata']['name']}: stopped creating pods after 5 (the "
        "simulator's limit; change it with --max-workload-pods)"
    ]


async def test_a_refused_pod_is_a_failed_create_event_on_the_replicaset(tmp_path: Path) -> None:
    text = DEPLOYMENT.format(
        annotations="{}",
        replicas=1,
        template=template(labels="{app: web}", extra="\n      priorityClassName: missing"),
    )
    _, state = await simulate(tmp_path, text)
    assert not of_kind(state, "Pod")
    [failed] = events(state, "FailedCreate")
    assert failed["involvedObject"]["kind"] == "ReplicaSet"
    assert "no PriorityClass named 'missing'" in failed["message"]


async def test_pods_for_another_scheduler_are_left_alone(tmp_path: Path) -> None:
    text = DEPLOYMENT.format(
        annotations="{}",
        replicas=1,
        template=template(labels="{app: web}", scheduler="default-scheduler"),
    )
    _, state = await simulate(tmp_path, text)
    [pod] = of_kind(state, "Pod")
    assert not pod["spec"].get("nodeName")
    assert not of_kind(state, "PodGroup")


async def test_a_replicaset_of_its_own(tmp_path: Path) -> None:
    text = (
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: frontend}\nspec:\n"
        "  replicas: 2\n  selector: {matchLabels: {tier: frontend}}\n  template:"
        + template(labels="{tier: frontend}")
    )
    _, state = await simulate(tmp_path, text)
    pods = of_kind(state, "Pod")
    assert len(pods) == 2
    assert all(p["metadata"]["name"].startswith("frontend-") for p in pods)
    assert all(p["spec"]["nodeName"] == "n1" for p in pods)
    assert len(events(state, "SuccessfulCreate")) == 2


# --- StatefulSet ---------------------------------------------------------------------------------

STATEFULSET = """apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db}}
spec:
  replicas: {replicas}
  serviceName: db-headless{policy}
  selector: {{matchLabels: {{app: db}}}}
  volumeClaimTemplates:
  - metadata: {{name: data}}
    spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}
  template:{template}"""


async def test_statefulset_pods_are_numbered_and_labelled(tmp_path: Path) -> None:
    text = STATEFULSET.format(replicas=3, policy="", template=template(labels="{app: db}"))
    _, state = await simulate(tmp_path, text)
    sts = by_name(state, "StatefulSet")["db"]
    pods = by_name(state, "Pod")
    assert sorted(pods) == ["db-0", "db-1", "db-2"]
    revision = sts["status"]["currentRevision"]
    assert revision.startswith("db-")
    for number, name in enumerate(sorted(pods)):
        pod = pods[name]
        assert pod["metadata"]["labels"] == {
            "app": "db",
            "controller-revision-hash": revision,
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": str(number),
        }
        assert pod["spec"]["hostname"] == name
        assert pod["spec"]["subdomain"] == "db-headless"
        assert owner(pod)["uid"] == sts["metadata"]["uid"]
        assert {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}} in pod[
            "spec"
        ]["volumes"]
        assert pod["spec"]["nodeName"] == "n1"
    assert sorted(by_name(state, "PersistentVolumeClaim")) == [
        "data-db-0",
        "data-db-1",
        "data-db-2",
    ]
    assert sts["status"]["readyReplicas"] == 3


async def test_ordered_ready_starts_one_pod_after_another(tmp_path: Path) -> None:
    text = STATEFULSET.format(replicas=3, policy="", template=template(labels="{app: db}"))
    _, state = await simulate(tmp_path, text)
    started = {n: p["status"]["startTime"] for n, p in by_name(state, "Pod").items()}
    assert started["db-0"] < started["db-1"] < started["db-2"]


async def test_parallel_starts_every_pod_at_once(tmp_path: Path) -> None:
    text = STATEFULSET.format(
        replicas=3,
        policy="\n  podManagementPolicy: Parallel",
        template=template(labels="{app: db}"),
    )
    _, state = await simulate(tmp_path, text)
    assert len({p["status"]["startTime"] for p in of_kind(state, "Pod")}) == 1


async def test_ordered_ready_waits_for_a_pod_that_does_not_fit(tmp_path: Path) -> None:
    # db-1 does not fit: db-2 is never made, though it would fit in what is left.
    text = STATEFULSET.format(replicas=3, policy="", template=template(labels="{app: db}", cpu="5"))
    _, state = await simulate(tmp_path, text, cpu=8)
    assert sorted(by_name(state, "Pod")) == ["db-0", "db-1"]


async def test_a_finished_statefulset_pod_is_made_again_under_its_name(tmp_path: Path) -> None:
    text = STATEFULSET.format(
        replicas=1, policy="", template=template(labels="{app: db}", runtime="30s")
    )
    result, state = await simulate(tmp_path, text, max_workload_pods=3, max_time=3600)
    [pod] = of_kind(state, "Pod")
    assert pod["metadata"]["name"] == "db-0"
    assert pod["status"]["phase"] == "Succeeded"  # the third: the cap leaves it as it ended
    [deleted] = events(state, "SuccessfulDelete")  # one Event, counted (as kubectl shows it)
    assert deleted["count"] == 2
    assert deleted["message"] == "delete Pod db-0 in StatefulSet db successful"
    assert any("stopped creating pods after 3" in note for note in result.notes)


# --- batch Job -----------------------------------------------------------------------------------

BATCH_JOB = """apiVersion: batch/v1
kind: Job
metadata: {{name: pi}}
spec:{spec}
  template:{template}"""


def batch_job(spec: str, **template_options: Any) -> str:
    template_options.setdefault("restart", "Never")
    template_options.setdefault("labels", "{app: pi}")
    return BATCH_JOB.format(spec=spec, template=template(**template_options))


async def test_a_batch_job_runs_its_completions_parallelism_at_a_time(tmp_path: Path) -> None:
    text = batch_job("\n  completions: 5\n  parallelism: 2", runtime="60s")
    _, state = await simulate(tmp_path, text)
    job = by_name(state, "Job", "batch/v1")["pi"]
    pods = of_kind(state, "Pod")
    assert len(pods) == 5
    uid = job["metadata"]["uid"]
    for pod in pods:
        assert pod["metadata"]["name"].startswith("pi-")
        labels = pod["metadata"]["labels"]
        assert labels["batch.kubernetes.io/controller-uid"] == labels["controller-uid"] == uid
        assert labels["batch.kubernetes.io/job-name"] == labels["job-name"] == "pi"
        assert owner(pod) == {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "pi",
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert pod["status"]["phase"] == "Succeeded"
    starts = sorted(p["status"]["startTime"] for p in pods)
    assert starts == [
        "1970-01-01T00:00:00Z",
        "1970-01-01T00:00:00Z",
        "1970-01-01T00:01:00Z",
        "1970-01-01T00:01:00Z",
        "1970-01-01T00:02:00Z",
    ]
    assert job["status"]["succeeded"] == 5
    assert "active" not in job["status"] and "failed" not in job["status"]
    assert job["status"]["completionTime"] == "1970-01-01T00:03:00Z"
    complete = {c["type"]: c for c in job["status"]["conditions"]}["Complete"]
    assert complete["status"] == "True"


async def test_failed_pods_count_towards_the_backoff_limit(tmp_path: Path) -> None:
    text = batch_job("\n  completions: 1\n  backoffLimit: 2", runtime="5s", exit_code=1)
    _, state = await simulate(tmp_path, text)
    job = by_name(state, "Job", "batch/v1")["pi"]
    pods = of_kind(state, "Pod")
    assert len(pods) == 3  # the first try and two retries
    assert all(p["status"]["phase"] == "Failed" for p in pods)
    assert job["status"]["failed"] == 3
    failed = {c["type"]: c for c in job["status"]["conditions"]}["Failed"]
    assert failed["reason"] == "BackoffLimitExceeded"
    assert failed["message"] == "Job has reached the specified backoff limit"
    # Each retry waits the controller's backoff: 10 s after the first failure, 20 s after the
    # second (each pod runs 5 s).
    starts = sorted(p["status"]["startTime"] for p in pods)
    assert starts == ["1970-01-01T00:00:00Z", "1970-01-01T00:00:15Z", "1970-01-01T00:00:40Z"]
    assert events(state, "BackoffLimitExceeded")


async def test_a_retry_that_succeeds_completes_the_job(tmp_path: Path) -> None:
    # exit-code is on the template, so every pod fails: with backoffLimit 0 the first does it.
    text = batch_job("\n  backoffLimit: 0", runtime="5s", exit_code=3)
    _, state = await simulate(tmp_path, text)
    job = by_name(state, "Job", "batch/v1")["pi"]
    assert len(of_kind(state, "Pod")) == 1
    assert {c["type"] for c in job["status"]["conditions"]} == {"Failed"}


async def test_the_remaining_pods_are_deleted_when_a_job_fails(tmp_path: Path) -> None:
    text = batch_job(
        "\n  completions: 4\n  parallelism: 2\n  activeDeadlineSeconds: 30", runtime="1h"
    )
    _, state = await simulate(tmp_path, text)
    job = by_name(state, "Job", "batch/v1")["pi"]
    failed = {c["type"]: c for c in job["status"]["conditions"]}["Failed"]
    assert failed["reason"] == "DeadlineExceeded"
    assert failed["lastTransitionTime"] == "1970-01-01T00:00:30Z"
    assert not of_kind(state, "Pod")


async def test_an_indexed_job_gives_each_pod_its_index(tmp_path: Path) -> None:
    text = batch_job(
        "\n  completions: 3\n  parallelism: 3\n  completionMode: Indexed", runtime="10s"
    )
    _, state = await simulate(tmp_path, text)
    job = by_name(state, "Job", "batch/v1")["pi"]
    indexes = set()
    for pod in of_kind(state, "Pod"):
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == index
        assert pod["metadata"]["name"].startswith(f"pi-{index}-")
        indexes.add(index)
    assert indexes == {"0", "1", "2"}
    assert job["status"]["completedIndexes"] == "0-2"


async def test_a_work_queue_job_completes_when_one_pod_succeeded(tmp_path: Path) -> None:
    text = batch_job("\n  parallelism: 2", runtime="10s")
    _, state = await simulate(tmp_path, text)
    job = by_name(state, "Job", "batch/v1")["pi"]
    assert len(of_kind(state, "Pod")) == 2
    assert job["status"]["succeeded"] == 2
    assert "Complete" in {c["type"] for c in job["status"]["conditions"]}


async def test_a_suspended_job_makes_no_pods(tmp_path: Path) -> None:
    text = batch_job("\n  suspend: true", runtime="10s")
    _, state = await simulate(tmp_path, text)
    job = by_name(state, "Job", "batch/v1")["pi"]
    assert not of_kind(state, "Pod")
    assert [c["type"] for c in job["status"]["conditions"]] == ["Suspended"]


async def test_a_batch_job_waits_for_room_and_its_pods_are_gang_enrolled(tmp_path: Path) -> None:
    text = batch_job("\n  completions: 2\n  parallelism: 2", runtime="10s", cpu="6")
    _, state = await simulate(tmp_path, text, cpu=8)
    pods = sorted(of_kind(state, "Pod"), key=lambda p: p["status"]["startTime"])
    assert [p["status"]["startTime"] for p in pods] == [
        "1970-01-01T00:00:00Z",
        "1970-01-01T00:00:10Z",
    ]
    job = by_name(state, "Job", "batch/v1")["pi"]
    group = f"podgroup-{job['metadata']['uid']}"
    assert {p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] for p in pods} == {group}


# --- CronJob -------------------------------------------------------------------------------------

CRONJOB = """apiVersion: batch/v1
kind: CronJob
metadata: {{name: nightly}}
spec:
  schedule: "{schedule}"{extra}
  jobTemplate:
    spec:
      template:{template}"""


def cronjob(schedule: str, extra: str = "", **template_options: Any) -> str:
    template_options.setdefault("restart", "Never")
    body = template(**template_options).replace("\n    ", "\n          ")
    return CRONJOB.format(schedule=schedule, extra=extra, template=body)


async def test_a_cronjob_makes_jobs_named_by_their_scheduled_minute(tmp_path: Path) -> None:
    text = cronjob("*/10 * * * *", runtime="60s")
    _, state = await simulate(tmp_path, text, max_time=1900)
    jobs = by_name(state, "Job", "batch/v1")
    # Three runs (10, 20 and 30 minutes); all complete; history limit 3 keeps them.
    assert sorted(jobs) == ["nightly-10", "nightly-20", "nightly-30"]
    cron = by_name(state, "CronJob", "batch/v1")["nightly"]
    for name, job in jobs.items():
        assert owner(job)["uid"] == cron["metadata"]["uid"]
        minute = int(name.rsplit("-", 1)[1])
        assert (
            job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
            == f"1970-01-01T00:{minute:02d}:00Z"
        )
        assert "Complete" in {c["type"] for c in job["status"]["conditions"]}
    assert cron["status"]["lastScheduleTime"] == "1970-01-01T00:30:00Z"
    assert cron["status"]["lastSuccessfulTime"] == "1970-01-01T00:31:00Z"
    pods = of_kind(state, "Pod")
    assert {p["metadata"]["labels"]["job-name"] for p in pods} == set(jobs)


async def test_cronjob_history_limits_delete_old_jobs(tmp_path: Path) -> None:
    text = cronjob("* * * * *", "\n  successfulJobsHistoryLimit: 1", runtime="10s")
    _, state = await simulate(tmp_path, text, max_time=330)
    assert sorted(by_name(state, "Job", "batch/v1")) == ["nightly-5"]


async def test_a_cronjob_is_capped_like_volcanos(tmp_path: Path) -> None:
    result, state = await simulate(tmp_path, cronjob("* * * * *", runtime="10s"), max_cron_runs=2)
    assert result.notes == [
        "CronJob default/nightly: suspended at 120s after 2 runs (the simulator's limit; change "
        "it with --max-cron-runs)"
    ]
    assert by_name(state, "CronJob", "batch/v1")["nightly"]["spec"]["suspend"] is True


async def test_forbid_skips_a_run_while_one_is_active(tmp_path: Path) -> None:
    text = cronjob("* * * * *", "\n  concurrencyPolicy: Forbid", runtime="150s")
    _, state = await simulate(tmp_path, text, max_time=300)
    # The 2 and 3 minute runs fall while the first is active; once it is done the most recent
    # missed time (3 minutes) is run late, as Kubernetes does without startingDeadlineSeconds.
    assert sorted(by_name(state, "Job", "batch/v1")) == ["nightly-1", "nightly-3"]
    starts = sorted(p["status"]["startTime"] for p in of_kind(state, "Pod"))
    assert starts[0] == "1970-01-01T00:01:00Z"
    assert "1970-01-01T00:03:30Z" <= starts[1] < "1970-01-01T00:04:00Z"


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
async def test_zero_replicas_make_nothing(tmp_path: Path, kind: str) -> None:
    source = DEPLOYMENT if kind == "Deployment" else STATEFULSET
    text = source.format(
        annotations="{}", replicas=0, policy="", template=template(labels="{app: web}")
    ).replace("{app: db}", "{app: web}")
    _, state = await simulate(tmp_path, text)
    assert not of_kind(state, "Pod")


# --- hostile input: no single object stalls or exhausts the run ---------------------------------


@pytest.mark.parametrize(
    "text",
    [
        DEPLOYMENT.format(
            annotations="{}", replicas=10**12, template=template(labels="{app: web}")
        ),
        STATEFULSET.format(
            replicas=10**12,
            policy="\n  podManagementPolicy: Parallel",
            template=template(labels="{app: db}"),
        ),
        batch_job(f"\n  completions: {10**12}\n  parallelism: {10**12}", runtime="1s"),
        batch_job(
            f"\n  completions: {10**12}\n  parallelism: {10**12}\n  completionMode: Indexed",
            runtime="1s",
        ),
    ],
    ids=["deployment", "statefulset", "job", "indexed-job"],
)
async def test_a_huge_workload_makes_what_the_cap_allows(tmp_path: Path, text: str) -> None:
    result, state = await simulate(tmp_path, text, max_workload_pods=5, max_time=600)
    assert len(of_kind(state, "Pod")) == 5
    assert len(result.notes) == 1 and "stopped creating pods after 5" in result.notes[0]


async def test_an_absurd_max_surge_is_no_surge(tmp_path: Path) -> None:
    text = DEPLOYMENT.format(
        annotations="{}", replicas=2, template=template(labels="{app: web}")
    ).replace(
        "spec:\n  replicas",
        'spec:\n  strategy: {rollingUpdate: {maxSurge: "1e400%"}}\n  replicas',
        1,
    )
    _, state = await simulate(tmp_path, text)
    [rs] = of_kind(state, "ReplicaSet")
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "2"
    assert len(of_kind(state, "Pod")) == 2
