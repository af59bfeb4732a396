"""Commands that change something say what they changed; tables fit the terminal, or show
everything with ``-o wide``."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.cli.vcctl.common import fit, table
from stromboli.core.cli.vcctl.job import LIST_COLUMNS, format_jobs
from stromboli.core.cli.vcctl.queue import COLUMNS, format_queues

from .conftest import Cluster

COMMAND = ("bus.volcano.sh/v1alpha1", "Command")


def vcjob(name: str, namespace: str = "default", queue: str = "default") -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queue": queue, "tasks": [{"name": "t", "replicas": 2}]},
    }


def add_queue(cluster: Cluster, name: str, weight: int = 1, **spec: object) -> None:
    created = cluster.create(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": weight, **spec},
        }
    )
    created["status"] = {"state": "Open"}
    cluster.call("update_status", created)


# -- what changed ---------------------------------------------------------------------------------


def test_suspend_and_resume_say_which_command_they_created(cluster: Cluster) -> None:
    cluster.create(vcjob("j1", namespace="ns1"))
    suspended = cluster.cli("job", "suspend", "-N", "j1", "-n", "ns1").output
    resumed = cluster.cli("job", "resume", "-N", "j1", "-n", "ns1").output
    names = sorted(c["metadata"]["name"] for c in cluster.items(*COMMAND, "ns1"))
    abort = next(n for n in names if "-abortjob-" in n)
    resume = next(n for n in names if "-resumejob-" in n)
    assert suspended == (
        f"suspend job j1 successfully: Command {abort} (AbortJob) created for the job controller\n"
    )
    assert resumed == (
        f"resume job j1 successfully: Command {resume} (ResumeJob) created for the job controller\n"
    )


def test_queue_changes_are_reported(cluster: Cluster) -> None:
    created = cluster.cli("queue", "create", "-n", "q1", "-w", "2").output
    assert created == "create queue q1 successfully (weight 2, state Open)\n"
    updated = cluster.cli("queue", "operate", "-n", "q1", "-a", "update", "-w", "5").output
    assert updated == "update queue q1 successfully: weight 2 -> 5\n"
    closed = cluster.cli("queue", "operate", "-n", "q1", "-a", "close").output
    (command,) = cluster.items(*COMMAND, "default")
    assert closed == (
        f"close queue q1 successfully: Command default/{command['metadata']['name']} "
        "(CloseQueue) created for the queue controller\n"
    )
    assert cluster.cli("queue", "delete", "-n", "q1").output == "delete queue q1 successfully\n"


def test_a_failed_change_says_nothing_changed(cluster: Cluster) -> None:
    result = cluster.cli("job", "suspend", "-N", "ghost")
    assert "successfully" not in result.output
    assert result.output.startswith("Failed to job suspend: ")


# -- tables ---------------------------------------------------------------------------------------


def jobs(count: int) -> list[dict]:
    return [vcjob(f"training-run-{i:03d}", queue="research") for i in range(count)]


def test_job_table_is_vcctls_when_it_fits_or_has_no_terminal() -> None:
    full = format_jobs(jobs(3))
    assert format_jobs(jobs(3), width=None) == full
    assert format_jobs(jobs(3), width=400) == full
    assert full.splitlines()[0].split() == list(LIST_COLUMNS)


def test_job_table_narrows_to_an_80_column_terminal() -> None:
    text = format_jobs(jobs(3), width=80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    header = lines[0].split()
    assert header[0] == "Name" and "Phase" in header and "Running" in header
    assert "Unknown" not in header and "RetryCount" not in header
    assert [line.split()[0] for line in lines[1:]] == [f"training-run-{i:03d}" for i in range(3)]
    # Every remaining cell is under its header.
    row = lines[1]
    assert row[lines[0].index("Replicas") :].split()[0] == "2"


def test_wide_job_table_is_never_narrowed_and_adds_the_queue() -> None:
    text = format_jobs(jobs(2), wide=True, width=60)
    header, *rows = text.splitlines()
    assert header.split() == [*LIST_COLUMNS, "Queue"]
    assert [row.split()[-1] for row in rows] == ["research", "research"]


def test_job_list_o_wide_from_the_command(cluster: Cluster) -> None:
    cluster.create(vcjob("a", queue="q9"))
    lines = cluster.cli("job", "list", "-o", "wide").output.splitlines()
    assert lines[0].split()[-1] == "Queue"
    assert lines[1].split()[-1] == "q9"


def test_queue_table_narrows_and_wide_shows_bounds(cluster: Cluster) -> None:
    queue = {
        "metadata": {"name": "research"},
        "spec": {
            "weight": 3,
            "capability": {"cpu": "64", "memory": "256Gi"},
            "guarantee": {"resource": {"cpu": "8"}},
        },
        "status": {"state": "Open"},
    }
    narrow = format_queues([queue], {}, width=40).splitlines()
    assert all(len(line) <= 40 for line in narrow)
    assert narrow[0].split()[:2] == ["Name", "State"]
    wide = format_queues([queue], {}, wide=True, width=40).splitlines()
    assert wide[0].split() == [*COLUMNS, "Capability", "Deserved", "Guarantee"]
    assert wide[1].split()[-3:] == ["cpu=64,memory=256Gi", "<none>", "cpu=8"]
    add_queue(cluster, "q1", capability={"cpu": "4"})
    listed = cluster.cli("queue", "list", "-o", "wide").output.splitlines()
    assert next(line for line in listed if line.startswith("q1")).split()[-3] == "cpu=4"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.text(string.ascii_letters, min_size=1, max_size=12), min_size=4, max_size=4),
        min_size=1,
        max_size=6,
    ),
    st.integers(min_value=1, max_value=120),
)
def test_fit_keeps_rows_and_the_first_column_and_fits_when_it_can(
    body: list[list[str]], width: int
) -> None:
    rows = [["A", "B", "C", "D"], *body]
    full = table(rows)
    text = fit(rows, full, width, ("D", "B", "C"))
    lines = text.splitlines()
    assert len(lines) == len(rows)
    assert [line.split()[0] for line in lines] == [row[0] for row in rows]
    only_first = max(len(row[0]) for row in rows)
    if width >= only_first:
        assert all(len(line.rstrip()) <= width for line in lines)
