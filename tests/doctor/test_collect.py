"""The parts of gathering that need no API server: the TLS handshake with a webhook at a
URL (a real TLS server on loopback), and the command's answer when the cluster is down."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from stromboli.core.cli import main
from stromboli.core.doctor.certificates import parse_bundle
from stromboli.core.doctor.collect import presented_certificate
from stromboli.webhooks.tls import self_signed


@pytest.fixture
def tls_server() -> Iterator[tuple[str, bytes]]:
    certificate = self_signed(["127.0.0.1"])
    context = certificate.ssl_context()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{port}", certificate.cert_pem
    stop.set()
    thread.join(5)
    listener.close()


def test_the_presented_certificate_is_read_by_handshake(tls_server: tuple[str, bytes]) -> None:
    url, cert_pem = tls_server
    presented = presented_certificate(url)
    assert isinstance(presented, bytes)
    assert parse_bundle(presented)[0].parsed == parse_bundle(cert_pem)[0].parsed


def test_no_server_is_a_reason_not_an_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    presented = presented_certificate(f"https://127.0.0.1:{port}", timeout=2)
    assert isinstance(presented, str) and presented.startswith("TLS handshake failed")
    assert presented_certificate("http://x/") == "'http://x/' is not an https URL"


def test_an_unreachable_cluster_is_one_error_and_exit_1(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', "
        "insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    result = CliRunner().invoke(main, ["doctor", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 1
    assert f"cannot read the cluster: cannot connect to https://127.0.0.1:{port}" in result.output


def test_a_kubeconfig_that_does_not_parse_is_named(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("clusters: 7\n")
    result = CliRunner().invoke(main, ["doctor", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 1
    assert "cannot read the cluster" in result.output
    assert str(kubeconfig) in result.output
