"""``stromboli job run -f`` against a real API server with Volcano's CRDs and no webhook: every
document is created, and a vcjob whose queue does not exist is refused by the command itself."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from stromboli.core.api.crds import build_crds
from stromboli.core.cli import main
from stromboli.core.devcluster import ControlPlane

TASK = "{name: t, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}"


@pytest.fixture(scope="module")
def kubeconfig(control_plane: ControlPlane) -> str:
    control_plane.apply_manifests(build_crds())
    return str(control_plane.kubeconfig_path)


def test_every_document_and_the_missing_queue(
    control_plane: ControlPlane, kubeconfig: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    queue, ok, lost = f"q-{tag}", f"ok-{tag}", f"lost-{tag}"
    path = tmp_path / "jobs.yaml"
    path.write_text(
        f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: {queue}}}
spec: {{weight: 1}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {ok}}}
spec: {{queue: {queue}, tasks: [{TASK}]}}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {lost}}}
spec: {{queue: nowhere-{tag}, tasks: [{TASK}]}}
"""
    )
    result = CliRunner().invoke(main, ["job", "run", "-f", str(path), "-k", kubeconfig])
    assert result.exit_code == 255
    assert result.output.splitlines() == [
        f"queues.scheduling.volcano.sh/{queue} created",
        f"run job {ok} successfully",
        f"Failed to job run: Job default/{lost}: unable to find job queue: "
        f'queue.scheduling.volcano.sh "nowhere-{tag}" not found',
    ]
    jobs = control_plane.client.get("/apis/batch.volcano.sh/v1alpha1/namespaces/default/jobs")
    names = {j["metadata"]["name"] for j in jobs["items"]}
    assert ok in names and lost not in names
    stored = control_plane.client.get(f"/apis/scheduling.volcano.sh/v1beta1/queues/{queue}")
    assert stored["spec"]["weight"] == 1
