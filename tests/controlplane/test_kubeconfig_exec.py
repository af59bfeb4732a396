"""A kubeconfig whose ``exec`` plugin is a small script printing an ExecCredential
authenticates against the real API server: with a token (a ServiceAccount token from a
TokenRequest) or with client certificate data; a credential the server refuses is renewed by
running the plugin again, and the store's aiohttp transport carries the requests."""

from __future__ import annotations

import base64
import json
import stat
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from stromboli.core.cluster.errors import ApiError
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.controlplane import ADMIN_GROUPS

V1 = "client.authentication.k8s.io/v1"


def plugin_script(path: Path, outputs: list[dict[str, Any]], counter: Path) -> Path:
    """A plugin that prints ``outputs[n]`` on its n-th run (the last one from then on)."""
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"counter = {str(counter)!r}\n"
        "runs = int(open(counter).read()) if os.path.exists(counter) else 0\n"
        "open(counter, 'w').write(str(runs + 1))\n"
        f"outputs = json.loads({json.dumps(json.dumps(outputs))})\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "status = outputs[min(runs, len(outputs) - 1)]\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
        " 'status': status}))\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def exec_kubeconfig(cp: ControlPlane, directory: Path, outputs: list[dict[str, Any]]) -> Path:
    assert cp.ca is not None and cp.server_url is not None
    plugin_script(directory / "plugin.py", outputs, directory / "runs")
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dev",
                "cluster": {
                    "server": cp.server_url,
                    "certificate-authority-data": base64.b64encode(cp.ca.cert_pem).decode(),
                },
            }
        ],
        "users": [
            {
                "name": "via-plugin",
                "user": {
                    "exec": {
                        "apiVersion": V1,
                        "command": "./plugin.py",
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": "via-plugin"}}],
        "current-context": "dev",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def runs(directory: Path) -> int:
    return int((directory / "runs").read_text())


@pytest.fixture
def sa_token(control_plane: ControlPlane) -> str:
    """A token the API server accepts: a ServiceAccount's, bound to cluster-admin."""
    name = f"exec-{uuid.uuid4().hex[:6]}"
    client = control_plane.client
    client.post(
        "/api/v1/namespaces/default/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    client.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}],
        },
    )
    return str(
        client.post(
            f"/api/v1/namespaces/default/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )["status"]["token"]
    )


async def eventually_listed(store: KubeStore) -> None:
    """RBAC bindings reach the API server's authorizer through its informers."""
    import asyncio

    for _ in range(100):
        try:
            await store.list("v1", "Namespace")
            return
        except ApiError as err:
            if err.code != 403:
                raise
            await asyncio.sleep(0.1)
    await store.list("v1", "Namespace")


async def test_an_exec_token_authenticates(
    control_plane: ControlPlane, sa_token: str, tmp_path: Path
) -> None:
    path = exec_kubeconfig(
        control_plane,
        tmp_path,
        [{"token": sa_token, "expirationTimestamp": "2999-01-01T00:00:00Z"}],
    )
    store = KubeStore(KubeConfig.load(path))
    try:
        await eventually_listed(store)
        names = {o["metadata"]["name"] for o in (await store.list("v1", "Namespace")).items}
        assert "kube-system" in names
    finally:
        await store.close()
    assert runs(tmp_path) == 1  # one run serves every request until the expiry


async def test_a_refused_token_is_renewed_by_running_the_plugin_again(
    control_plane: ControlPlane, sa_token: str, tmp_path: Path
) -> None:
    path = exec_kubeconfig(control_plane, tmp_path, [{"token": "revoked"}, {"token": sa_token}])
    store = KubeStore(KubeConfig.load(path))
    try:
        await eventually_listed(store)
    finally:
        await store.close()
    assert runs(tmp_path) == 2


async def test_a_plugin_that_only_gives_refused_tokens_ends_in_401(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    path = exec_kubeconfig(control_plane, tmp_path, [{"token": "never-valid"}])
    store = KubeStore(KubeConfig.load(path))
    try:
        with pytest.raises(ApiError) as err:
            await store.list("v1", "Namespace")
        assert err.value.code == 401
    finally:
        await store.close()
    assert runs(tmp_path) == 2  # renewed once, not in a loop


async def test_exec_client_certificate_data_authenticates(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    assert control_plane.ca is not None
    keys = control_plane.ca.issue_client("exec-admin", ADMIN_GROUPS)
    status = {
        "clientCertificateData": keys.cert_pem.decode(),
        "clientKeyData": keys.key_pem.decode(),
    }
    path = exec_kubeconfig(control_plane, tmp_path, [status])
    store = KubeStore(KubeConfig.load(path))
    try:
        listed = await store.list("v1", "Node")
        assert len(listed.items) >= 1
    finally:
        await store.close()
    assert runs(tmp_path) == 1
