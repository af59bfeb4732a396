"""``stromboli job``: vcctl's job commands against a memory store (reference §8, §9 vcctl)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stromboli.core.cli import main
from stromboli.core.cli.vcctl.common import VcctlContext, human_duration
from stromboli.core.cli.vcctl.job import build_job, format_jobs, parse_resources

from .conftest import Cluster

JOB = ("batch.volcano.sh/v1alpha1", "Job")
COMMAND = ("bus.volcano.sh/v1alpha1", "Command")


def vcjob(name: str, namespace: str = "default", **spec: object) -> dict:
    body = {"queue": "default", "schedulerName": "volcano", "tasks": [{"name": "t", "replicas": 2}]}
    body.update(spec)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


# --- help (vcctl e2e "Test Help option of vcctl cli") -------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["job", "--help"],
        ["job", "list", "--help"],
        ["job", "suspend", "-n", "job1", "--help"],
        ["job", "resume", "-n", "job1", "--help"],
        ["job", "run", "--help"],
        ["job", "view", "--help"],
        ["job", "delete", "--help"],
    ],
)
def test_help(cluster: Cluster, args: list[str]) -> None:
    result = cluster.cli(*args)
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_job_help_lists_commands(cluster: Cluster) -> None:
    output = cluster.cli("job", "--help").output
    for command in ("delete", "list", "resume", "run", "suspend", "view"):
        assert f"  {command} " in output


def test_run_help_shows_vcctl_flags_and_defaults(cluster: Cluster) -> None:
    output = cluster.cli("job", "run", "--help").output
    for flag in (
        "-i, --image",
        "-n, --namespace",
        "-N, --name",
        "-m, --min",
        "-r, --replicas",
        "-R, --requests",
        "-L, --limits",
        "-S, --scheduler",
        "-f, --filename",
        "-s, --master",
        "-k, --kubeconfig",
    ):
        assert flag in output
    assert "[default: busybox]" in output
    assert "cpu=1000m,memory=100Mi" in output


def test_list_help_shows_flags(cluster: Cluster) -> None:
    output = cluster.cli("job", "list", "--help").output
    for flag in ("-q, --queue", "-S, --scheduler", "--all-namespaces", "--selector"):
        assert flag in output


# --- run -----------------------------------------------------------------------------------------


def test_run_creates_a_one_task_job(cluster: Cluster) -> None:
    result = cluster.cli("job", "run", "-N", "j1", "-r", "3", "-m", "2", "-i", "nginx")
    assert result.exit_code == 0
    assert result.output == "run job j1 successfully\n"
    (job,) = cluster.items(*JOB, "default")
    spec = job["spec"]
    assert spec["minAvailable"] == 2
    assert spec["schedulerName"] == "volcano"
    (task,) = spec["tasks"]
    assert task["replicas"] == 3
    assert task["template"]["metadata"]["labels"] == {"job.volcano.sh": "j1"}
    pod_spec = task["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    (container,) = pod_spec["containers"]
    assert container["name"] == "j1"
    assert container["image"] == "nginx"
    assert container["imagePullPolicy"] == "IfNotPresent"
    expected = {"cpu": "1000m", "memory": "100Mi"}
    assert container["resources"] == {"limits": expected, "requests": expected}


def test_run_flags(cluster: Cluster) -> None:
    result = cluster.cli(
        "job", "run", "-N", "j2", "-n", "ns1", "-R", "cpu=2", "-L", "cpu=4", "-S", "other"
    )
    assert result.exit_code == 0
    (job,) = cluster.items(*JOB, "ns1")
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"cpu": "4"}, "requests": {"cpu": "2"}}
    assert job["spec"]["schedulerName"] == "other"


def test_run_without_name(cluster: Cluster) -> None:
    result = cluster.cli("job", "run")
    assert result.exit_code == 255
    assert result.output == "Failed to job run: job name cannot be left blank\n"


def test_run_with_bad_resources(cluster: Cluster) -> None:
    result = cluster.cli("job", "run", "-N", "j", "-R", "cpu")
    assert result.exit_code == 255
    assert "invalid argument syntax cpu, expected <resource>=<value>" in result.output


def test_run_from_file(cluster: Cluster, write: Callable[[str, str], str]) -> None:
    path = write(
        "job.yaml",
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: from-file}\n"
        "spec: {tasks: [{name: a, replicas: 1}]}\n",
    )
    # The scheduler creates the default queue on a real cluster; the job goes there.
    cluster.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": "default"}, "spec": {"weight": 1}})  # fmt: skip
    result = cluster.cli("job", "run", "-f", path)
    assert result.output == "run job from-file successfully\n"
    assert [j["metadata"]["name"] for j in cluster.items(*JOB, "default")] == ["from-file"]


def test_run_file_must_be_yaml(cluster: Cluster, write: Callable[[str, str], str]) -> None:
    result = cluster.cli("job", "run", "-f", write("job.json", "{}"))
    assert result.output == "Failed to job run: only support yaml file\n"


def test_run_file_namespace_must_match(cluster: Cluster, write: Callable[[str, str], str]) -> None:
    path = write("j.yaml", "metadata: {name: x, namespace: other}\nspec: {tasks: []}\n")
    result = cluster.cli("job", "run", "-f", path)
    assert result.exit_code == 255
    assert "does not match the namespace" in result.output


def test_run_existing_name_fails(cluster: Cluster) -> None:
    cluster.cli("job", "run", "-N", "dup")
    result = cluster.cli("job", "run", "-N", "dup")
    assert result.exit_code == 255
    assert result.output.startswith("Failed to job run: ")
    assert "already exists" in result.output


def test_parse_resources() -> None:
    assert parse_resources("cpu=1,memory=1Gi") == {"cpu": "1", "memory": "1Gi"}
    assert parse_resources("") is None


def test_build_job_without_requests() -> None:
    job = build_job("j", "ns", "img", 1, 1, None, None, "volcano")
    assert job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] == {}


# --- list ----------------------------------------------------------------------------------------


def test_list_empty(cluster: Cluster) -> None:
    assert cluster.cli("job", "list").output == "No resources found\n"


def test_list_table(cluster: Cluster) -> None:
    job = cluster.create(vcjob("job-a"))
    job["status"] = {
        "state": {"phase": "Running"},
        "minAvailable": 2,
        "running": 2,
        "retryCount": 1,
    }
    cluster.call("update_status", job)
    output = cluster.cli("job", "list").output
    header, row = output.splitlines()
    assert header.split() == [
        "Name",
        "Creation",
        "Phase",
        "JobType",
        "Replicas",
        "Min",
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
        "Unknown",
        "RetryCount",
    ]
    expected = "job-a 2023-11-14 Running Batch 2 2 0 2 0 0 0 1"
    assert " ".join(row.split()) == expected


def test_list_column_widths_match_vcctl(cluster: Cluster) -> None:
    cluster.create(vcjob("a-rather-long-job-name"))
    header = cluster.cli("job", "list").output.splitlines()[0]
    assert header.startswith("Name" + " " * (len("a-rather-long-job-name") + 3 - 4) + "Creation")
    assert header.index("Phase") - header.index("Creation") == 15
    assert header.index("JobType") - header.index("Phase") == 12


def test_list_job_type_label(cluster: Cluster) -> None:
    job = vcjob("typed")
    job["metadata"]["labels"] = {"volcano.sh/job-type": "Training"}
    cluster.create(job)
    assert "Training" in cluster.cli("job", "list").output


def test_list_filters(cluster: Cluster) -> None:
    cluster.create(vcjob("alpha", queue="q1"))
    cluster.create(vcjob("beta", queue="q2", schedulerName="other"))
    cluster.create(vcjob("gamma", namespace="ns2"))

    def names(*args: str) -> list[str]:
        lines = cluster.cli("job", "list", *args).output.splitlines()[1:]
        return [line.split()[0] for line in lines]

    assert names() == ["alpha", "beta"]
    assert names("-q", "q1") == ["alpha"]
    assert names("-S", "other") == ["beta"]
    assert names("--selector", "lph") == ["alpha"]
    assert names("-n", "ns2") == ["gamma"]


def test_list_all_namespaces_adds_namespace_column(cluster: Cluster) -> None:
    cluster.create(vcjob("one", namespace="zz"))
    cluster.create(vcjob("two", namespace="aa"))
    lines = cluster.cli("job", "list", "--all-namespaces").output.splitlines()
    assert lines[0].split()[:2] == ["Namespace", "Name"]
    assert [line.split()[:2] for line in lines[1:]] == [["aa", "two"], ["zz", "one"]]


def test_format_jobs_without_status() -> None:
    row = format_jobs([vcjob("x")]).splitlines()[1]
    assert row.split() == ["x", "Batch", "2", "0", "0", "0", "0", "0", "0", "0"]


# --- view ----------------------------------------------------------------------------------------


def test_view(cluster: Cluster) -> None:
    cluster.create(vcjob("viewed", plugins={"svc": ["--disable-network-policy"]}))
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "viewed.17a", "namespace": "default"},
            "type": "Normal",
            "reason": "ExecuteAction",
            "message": "Start to execute action SyncJob ",
            "source": {"component": "vc-controller-manager"},
            "count": 1,
            "lastTimestamp": "2023-11-14T22:12:20Z",
        }
    )
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "other.17a", "namespace": "default"},
            "reason": "Unrelated",
        }
    )
    output = cluster.cli("job", "view", "-N", "viewed").output
    assert "Name:        viewed" in output
    assert "Namespace:   default" in output
    assert "svc: --disable-network-policy" in output
    assert "Events:" in output
    assert "ExecuteAction" in output and "vc-controller-manager" in output
    assert "60s" in output
    assert "Unrelated" not in output


def test_view_without_events(cluster: Cluster) -> None:
    cluster.create(vcjob("quiet"))
    assert cluster.cli("job", "view", "-N", "quiet").output.endswith("Events: <none>\n")


def test_view_requires_name(cluster: Cluster) -> None:
    result = cluster.cli("job", "view")
    assert result.exit_code == 255
    assert "is mandatory to view a particular job" in result.output


def test_view_missing_job(cluster: Cluster) -> None:
    result = cluster.cli("job", "view", "-N", "ghost")
    assert result.exit_code == 255
    assert 'jobs.batch.volcano.sh "ghost" not found' in result.output


# --- suspend / resume / delete -------------------------------------------------------------------


@pytest.mark.parametrize(("verb", "action"), [("suspend", "AbortJob"), ("resume", "ResumeJob")])
def test_commands_are_created(cluster: Cluster, verb: str, action: str) -> None:
    job = cluster.create(vcjob("j1", namespace="ns1"))
    result = cluster.cli("job", verb, "-N", "j1", "-n", "ns1")
    assert result.exit_code == 0
    (command,) = cluster.items(*COMMAND, "ns1")
    assert command["action"] == action
    assert command["metadata"]["generateName"] == f"j1-{action.lower()}-"
    assert command["metadata"]["name"].startswith(f"j1-{action.lower()}-")
    reference = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "j1",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert command["metadata"]["ownerReferences"] == [reference]
    assert command["target"] == reference


@pytest.mark.parametrize("verb", ["suspend", "resume"])
def test_commands_require_name(cluster: Cluster, verb: str) -> None:
    result = cluster.cli("job", verb)
    assert (
        result.output == f"Failed to job {verb}: job name is mandatory to {verb} a particular job\n"
    )


def test_suspend_missing_job(cluster: Cluster) -> None:
    result = cluster.cli("job", "suspend", "-N", "ghost")
    assert result.exit_code == 255
    assert cluster.items(*COMMAND) == []


def test_command_is_garbage_collected_with_job(cluster: Cluster) -> None:
    cluster.create(vcjob("j1"))
    cluster.cli("job", "suspend", "-N", "j1")
    cluster.cli("job", "delete", "-N", "j1")
    assert cluster.items(*COMMAND) == []


def test_delete(cluster: Cluster) -> None:
    cluster.create(vcjob("gone"))
    result = cluster.cli("job", "delete", "-N", "gone")
    assert result.output == "delete job gone successfully\n"
    assert cluster.items(*JOB) == []


def test_delete_requires_name(cluster: Cluster) -> None:
    assert "job name is mandatory to delete" in cluster.cli("job", "delete").output


def test_delete_missing(cluster: Cluster) -> None:
    result = cluster.cli("job", "delete", "-N", "ghost")
    assert result.exit_code == 255
    assert "not found" in result.output


# --- connection ----------------------------------------------------------------------------------


def test_connection_flags_reach_the_store_factory(cluster: Cluster) -> None:
    cluster.cli("job", "list", "-k", "/tmp/kubeconfig", "-s", "https://1.2.3.4:6443")
    assert cluster.connections == [("/tmp/kubeconfig", "https://1.2.3.4:6443")]
    cluster.cli("job", "list")
    assert cluster.connections[-1] == (None, None)


def test_default_store_reports_bad_kubeconfig(tmp_path: object) -> None:
    from click.testing import CliRunner

    result = CliRunner().invoke(
        main, ["job", "list", "-k", "/nonexistent/kubeconfig"], obj=VcctlContext()
    )
    assert result.exit_code == 255
    assert result.output.startswith("Failed to job list: ")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (185, "3m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (20 * 3600, "20h"),
        (3 * 86400 + 3600, "3d1h"),
        (30 * 86400, "30d"),
        (3 * 365 * 86400, "3y"),
        (-5, "<invalid>"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text
