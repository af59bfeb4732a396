"""``stromboli job run -f``: every document of the file, as ``kubectl create -f`` takes them,
and a vcjob refused, without the webhook, when its queue does not exist."""

from __future__ import annotations

from collections.abc import Callable

from .conftest import Cluster

JOB = ("batch.volcano.sh/v1alpha1", "Job")
QUEUE = ("scheduling.volcano.sh/v1beta1", "Queue")

QUEUE_DOC = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 2}
"""


def job_doc(name: str, queue: str | None = None) -> str:
    queue_line = f"  queue: {queue}\n" if queue else ""
    return (
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\n"
        f"metadata: {{name: {name}}}\nspec:\n{queue_line}"
        "  tasks: [{name: a, replicas: 1}]\n"
    )


def names(cluster: Cluster, kind: tuple[str, str], namespace: str | None = None) -> list[str]:
    return sorted(o["metadata"]["name"] for o in cluster.items(*kind, namespace))


def test_every_document_is_created_in_order(
    cluster: Cluster, write: Callable[[str, str], str]
) -> None:
    path = write(
        "all.yaml",
        QUEUE_DOC
        + "---\n"
        + job_doc("first", "research")
        + "---\n"
        + job_doc("second", "research"),
    )
    result = cluster.cli("job", "run", "-f", path)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "queues.scheduling.volcano.sh/research created",
        "run job first successfully",
        "run job second successfully",
    ]
    assert names(cluster, JOB, "default") == ["first", "second"]
    assert "namespace" not in cluster.call("get", *QUEUE, "research")["metadata"]


def test_a_job_whose_queue_does_not_exist_is_refused_naming_it(
    cluster: Cluster, write: Callable[[str, str], str]
) -> None:
    path = write("j.yaml", job_doc("lost", "nowhere"))
    result = cluster.cli("job", "run", "-f", path)
    assert result.exit_code == 255
    assert result.output == (
        "Failed to job run: Job default/lost: unable to find job queue: "
        'queue.scheduling.volcano.sh "nowhere" not found\n'
    )
    assert names(cluster, JOB) == []


def test_an_unset_queue_means_default_and_is_checked(
    cluster: Cluster, write: Callable[[str, str], str]
) -> None:
    result = cluster.cli("job", "run", "-f", write("j.yaml", job_doc("plain")))
    assert result.exit_code == 255
    assert 'queue.scheduling.volcano.sh "default" not found' in result.output
    cluster.create({"apiVersion": QUEUE[0], "kind": "Queue", "metadata": {"name": "default"}})
    result = cluster.cli("job", "run", "-f", write("j.yaml", job_doc("plain")))
    assert result.output == "run job plain successfully\n"


def test_the_other_documents_still_run_when_one_is_refused(
    cluster: Cluster, write: Callable[[str, str], str]
) -> None:
    path = write(
        "mixed.yaml",
        job_doc("early", "research")
        + "---\n"
        + QUEUE_DOC
        + "---\n"
        + job_doc("late", "research")
        + "---\n"
        + job_doc("lost", "nowhere"),
    )
    result = cluster.cli("job", "run", "-f", path)
    assert result.exit_code == 255
    lines = result.output.splitlines()
    assert lines[:2] == [
        "queues.scheduling.volcano.sh/research created",
        "run job late successfully",
    ]
    # The job before its queue is refused, as the webhook would refuse it at that moment.
    assert (
        'Job default/early: unable to find job queue: queue.scheduling.volcano.sh "research"'
        in lines[2]
    )
    assert (
        'Job default/lost: unable to find job queue: queue.scheduling.volcano.sh "nowhere"'
        in lines[2]
    )
    assert names(cluster, JOB, "default") == ["late"]


def test_an_existing_object_fails_alone(cluster: Cluster, write: Callable[[str, str], str]) -> None:
    cluster.create({"apiVersion": QUEUE[0], "kind": "Queue", "metadata": {"name": "research"}})
    path = write("q.yaml", QUEUE_DOC + "---\n" + job_doc("after", "research"))
    result = cluster.cli("job", "run", "-f", path)
    assert result.exit_code == 255
    assert result.output.splitlines()[0] == "run job after successfully"
    assert "Queue research: " in result.output and "already exists" in result.output


def test_a_list_document_is_expanded(cluster: Cluster, write: Callable[[str, str], str]) -> None:
    path = write(
        "list.yaml",
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q1}}\n"
        "- {apiVersion: batch.volcano.sh/v1alpha1, kind: Job, metadata: {name: j1},"
        " spec: {queue: q1, tasks: [{name: a, replicas: 1}]}}\n",
    )
    result = cluster.cli("job", "run", "-f", path, "-n", "team")
    assert result.exit_code == 0, result.output
    assert names(cluster, JOB, "team") == ["j1"]


def test_a_document_in_another_namespace_is_refused(
    cluster: Cluster, write: Callable[[str, str], str]
) -> None:
    path = write(
        "ns.yaml",
        QUEUE_DOC + "---\n" + job_doc("x").replace("{name: x}", "{name: x, namespace: b}"),
    )
    result = cluster.cli("job", "run", "-f", path, "-n", "a")
    assert result.exit_code == 255
    assert "does not match the namespace" in result.output
    assert names(cluster, QUEUE) == []  # nothing is sent when the file is wrong


def test_an_alias_bomb_is_refused_without_building_it(
    cluster: Cluster, write: Callable[[str, str], str]
) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    result = cluster.cli("job", "run", "-f", write("bomb.yaml", "\n".join(lines) + "\n"))
    assert result.exit_code == 255
    assert result.output.startswith("Failed to job run: failed to unmarshal file, err: ")
    assert names(cluster, JOB) == []
