"""``exec`` credential plugins: the ExecCredential forms a plugin may print, the settings a
kubeconfig gives it, real plugin programs run, and renewal on expiry or refusal."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.cluster.execcredential import (
    EXPIRY_SKEW,
    Credential,
    ExecCredentialError,
    ExecCredentialSource,
    ExecPlugin,
    parse_exec_credential,
)
from stromboli.core.cluster.kubeconfig import KubeConfig, KubeConfigError
from stromboli.core.devcluster import CertificateAuthority

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
WHERE = "config: user 'u': exec"


def credential(status: Any, api_version: str = V1, kind: str = "ExecCredential") -> str:
    return json.dumps({"apiVersion": api_version, "kind": kind, "status": status})


# --- what a plugin prints --------------------------------------------------------------------


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_a_token(api_version: str) -> None:
    got = parse_exec_credential(credential({"token": "abc"}, api_version), api_version, WHERE)
    assert got == Credential(token="abc")


def test_client_certificate_data() -> None:
    status = {"clientCertificateData": "CERT PEM", "clientKeyData": "KEY PEM"}
    got = parse_exec_credential(credential(status), V1, WHERE)
    assert got.cert_data == b"CERT PEM" and got.key_data == b"KEY PEM" and got.token is None


@pytest.mark.parametrize(
    ("stamp", "unix"),
    [
        ("2026-01-02T03:04:05Z", 1767323045.0),
        ("2026-01-02T03:04:05.5Z", 1767323045.5),
        ("2026-01-02T05:04:05+02:00", 1767323045.0),
        ("2026-01-02t03:04:05z", 1767323045.0),
    ],
)
def test_expiration_timestamps(stamp: str, unix: float) -> None:
    status = {"token": "t", "expirationTimestamp": stamp}
    assert parse_exec_credential(credential(status), V1, WHERE).expires_at == unix


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("not json", "output is not JSON"),
        ("[1, 2]", "must be an ExecCredential object"),
        (credential({"token": "t"}, kind="Status"), "printed kind 'Status', not ExecCredential"),
        (credential({"token": "t"}, api_version=V1BETA1), "answered apiVersion .*v1beta1"),
        (json.dumps({"apiVersion": V1, "kind": "ExecCredential"}), "has no status"),
        (credential({}), "neither token nor clientCertificateData"),
        (credential({"token": 7}), r"status\.token must be a string"),
        (credential({"clientCertificateData": "C"}), r"status\.clientKeyData is missing"),
        (credential({"clientKeyData": "K"}), r"status\.clientCertificateData is missing"),
        (credential({"token": "t", "expirationTimestamp": "soon"}), "'soon' is not an RFC 3339"),
        (credential({"token": "t", "expirationTimestamp": 5}), "must be an RFC 3339 time"),
        (
            credential({"token": "t", "expirationTimestamp": "2026-01-02T03:04:05"}),
            "has no time zone",
        ),
    ],
)
def test_unusable_output_names_the_user_and_the_field(output: str, message: str) -> None:
    with pytest.raises(ExecCredentialError, match=message) as err:
        parse_exec_credential(output, V1, WHERE)
    assert str(err.value).startswith(WHERE)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "apiVersion": st.sampled_from([V1, V1BETA1, "x"]),
            "kind": st.sampled_from(["ExecCredential", "Other"]),
            "status": st.dictionaries(
                st.sampled_from(
                    ["token", "clientCertificateData", "clientKeyData", "expirationTimestamp"]
                ),
                json_values,
            )
            | json_values,
        },
    )
)
def test_any_output_is_a_credential_or_a_named_error(doc: dict[str, Any]) -> None:
    try:
        got = parse_exec_credential(json.dumps(doc), V1, WHERE)
    except ExecCredentialError as err:
        assert str(err).startswith(WHERE)
    else:
        assert got.token or (got.cert_data and got.key_data)


# --- the kubeconfig's exec section -----------------------------------------------------------


def plugin(section: dict[str, Any], base: Path = Path("/kc")) -> ExecPlugin:
    return ExecPlugin.from_kubeconfig(section, base, "config: user 'u'")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"command": "x"}, r"exec\.apiVersion is None"),
        (
            {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"},
            r"exec\.apiVersion is .*v1alpha1",
        ),
        ({"apiVersion": V1}, "missing key 'command'"),
        ({"command": "x", "apiVersion": V1, "interactiveMode": "Sometimes"}, "interactiveMode"),
        ({"command": "x", "apiVersion": V1, "interactiveMode": "Always"}, "without a terminal"),
        ({"command": "x", "apiVersion": V1, "args": "--flag"}, r"exec\.args must be a list"),
        ({"command": "x", "apiVersion": V1, "env": [{"name": "A"}]}, r"exec\.env\[0\] needs"),
    ],
)
def test_bad_exec_sections_name_the_field(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ExecCredentialError, match=message) as err:
        plugin(section)
    assert "user 'u'" in str(err.value)


def test_command_args_and_env() -> None:
    got = plugin(
        {
            "apiVersion": V1,
            "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", "prod"],
            "env": [{"name": "AWS_PROFILE", "value": "ops"}],
            "interactiveMode": "IfAvailable",
        }
    )
    assert got.argv == ("aws", "eks", "get-token", "--cluster-name", "prod")
    assert got.env == {"AWS_PROFILE": "ops"}
    assert json.loads(got.exec_info()) == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }


def test_a_relative_command_path_is_relative_to_the_kubeconfig() -> None:
    assert plugin({"apiVersion": V1, "command": "./bin/auth"}).argv[0] == "/kc/bin/auth"
    assert plugin({"apiVersion": V1, "command": "/opt/auth"}).argv[0] == "/opt/auth"
    # A bare name is looked up on PATH, as kubectl does.
    assert plugin({"apiVersion": V1, "command": "kubelogin"}).argv[0] == "kubelogin"


# --- real plugin programs --------------------------------------------------------------------


def script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def kubeconfig(tmp_path: Path, exec_section: dict[str, Any], **cluster: Any) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://k:6443", **cluster}}],
        "users": [{"name": "u", "user": {"exec": exec_section}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


ECHO_INFO = """
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
token = json.dumps({"info": info, "profile": os.environ.get("PROFILE"), "argv": sys.argv[1:]})
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                  "status": {"token": token}}))
"""


@pytest.mark.parametrize("api_version", [V1, V1BETA1])
def test_the_plugin_gets_exec_info_args_and_env(tmp_path: Path, api_version: str) -> None:
    script(tmp_path / "plugin.py", ECHO_INFO)
    path = kubeconfig(
        tmp_path,
        {
            "apiVersion": api_version,
            "command": "./plugin.py",
            "args": ["--region", "eu"],
            "env": [{"name": "PROFILE", "value": "ops"}],
        },
    )
    header = KubeConfig.load(path).auth_headers()["Authorization"]
    told = json.loads(header.removeprefix("Bearer "))
    assert told == {
        "info": {
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        },
        "profile": "ops",
        "argv": ["--region", "eu"],
    }


def test_provide_cluster_info_passes_the_cluster(tmp_path: Path) -> None:
    script(tmp_path / "plugin.py", ECHO_INFO)
    ca = CertificateAuthority()
    import base64

    path = kubeconfig(
        tmp_path,
        {"apiVersion": V1, "command": "./plugin.py", "provideClusterInfo": True},
        **{
            "certificate-authority-data": base64.b64encode(ca.cert_pem).decode(),
            "extensions": [
                {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "k8s"}}
            ],
        },
    )
    header = KubeConfig.load(path).auth_headers()["Authorization"]
    cluster = json.loads(header.removeprefix("Bearer "))["info"]["spec"]["cluster"]
    assert cluster["server"] == "https://k:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == ca.cert_pem
    assert cluster["config"] == {"audience": "k8s"}


def test_a_plugin_run_once_and_kept_until_it_expires(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    script(
        tmp_path / "plugin.py",
        f"""
runs = int(open({str(counter)!r}).read()) + 1 if os.path.exists({str(counter)!r}) else 1
open({str(counter)!r}, "w").write(str(runs))
status = {{"token": f"t{{runs}}", "expirationTimestamp": "2999-01-01T00:00:00Z"}}
print(json.dumps({{"apiVersion": "{V1}", "kind": "ExecCredential", "status": status}}))
""",
    )
    loaded = KubeConfig.load(kubeconfig(tmp_path, {"apiVersion": V1, "command": "./plugin.py"}))
    assert not counter.exists()  # nothing runs until a credential is needed
    for _ in range(3):
        assert loaded.auth_headers() == {"Authorization": "Bearer t1"}
    assert counter.read_text() == "1"
    assert loaded.renewable and not loaded.credential_stale()
    loaded.renew_credential(loaded.current_exec_credential())
    assert loaded.auth_headers() == {"Authorization": "Bearer t2"}


def test_client_certificates_from_a_plugin_reach_the_tls_context(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    keys = ca.issue_client("ann")
    status = {
        "clientCertificateData": keys.cert_pem.decode(),
        "clientKeyData": keys.key_pem.decode(),
    }
    script(
        tmp_path / "plugin.py",
        f"print(json.dumps({{'apiVersion': '{V1}', 'kind': 'ExecCredential',"
        f" 'status': {status!r}}}))",
    )
    loaded = KubeConfig.load(kubeconfig(tmp_path, {"apiVersion": V1, "command": "./plugin.py"}))
    assert loaded.client_certificate() == (keys.cert_pem, keys.key_pem)
    assert loaded.auth_headers() == {}
    assert not isinstance(loaded.ssl_context(), bool)


def test_a_failing_plugin_reports_its_status_and_stderr(tmp_path: Path) -> None:
    script(
        tmp_path / "plugin.py",
        'sys.stderr.write("token expired, run aws sso login\\n"); sys.exit(3)',
    )
    loaded = KubeConfig.load(kubeconfig(tmp_path, {"apiVersion": V1, "command": "./plugin.py"}))
    with pytest.raises(
        KubeConfigError, match="exited with status 3: token expired, run aws sso"
    ) as err:
        loaded.auth_headers()
    assert "user 'u'" in str(err.value)


def test_a_missing_plugin_shows_the_install_hint(tmp_path: Path) -> None:
    section = {
        "apiVersion": V1,
        "command": "no-such-plugin-anywhere",
        "installHint": "install it with: brew install no-such-plugin",
    }
    loaded = KubeConfig.load(kubeconfig(tmp_path, section))
    with pytest.raises(KubeConfigError, match=r"was not found \(install it with: brew install"):
        loaded.auth_headers()


def test_a_plugin_that_is_not_executable_is_named(tmp_path: Path) -> None:
    (tmp_path / "plugin.sh").write_text("echo hi\n")
    loaded = KubeConfig.load(kubeconfig(tmp_path, {"apiVersion": V1, "command": "./plugin.sh"}))
    with pytest.raises(KubeConfigError, match="is not executable"):
        loaded.auth_headers()


def test_a_plugin_that_never_answers_is_stopped(tmp_path: Path) -> None:
    script(tmp_path / "plugin.py", "time.sleep(600)")
    stuck = ExecPlugin.from_kubeconfig(
        {"apiVersion": V1, "command": str(tmp_path / "plugin.py")}, tmp_path, "config: user 'u'"
    )
    with pytest.raises(ExecCredentialError, match=r"did not answer within 0\.5s"):
        stuck.run(timeout=0.5)


def test_a_plugin_printing_garbage_is_named(tmp_path: Path) -> None:
    script(tmp_path / "plugin.py", 'print("Please log in at https://idp/device")')
    loaded = KubeConfig.load(kubeconfig(tmp_path, {"apiVersion": V1, "command": "./plugin.py"}))
    with pytest.raises(KubeConfigError, match="output is not JSON"):
        loaded.auth_headers()


# --- renewal ---------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Issuer:
    """A plugin stand-in that counts its runs and hands out numbered tokens."""

    def __init__(self, lifetime: float | None) -> None:
        self.lifetime = lifetime
        self.clock = Clock()
        self.runs = 0

    def __call__(self, _: ExecPlugin) -> Credential:
        self.runs += 1
        expires = None if self.lifetime is None else self.clock.now + self.lifetime
        return Credential(token=f"t{self.runs}", expires_at=expires)


def source(lifetime: float | None) -> tuple[ExecCredentialSource, Issuer]:
    issuer = Issuer(lifetime)
    fake = ExecPlugin(argv=("x",), env={}, api_version=V1)
    return ExecCredentialSource(fake, wall_clock=issuer.clock, runner=issuer), issuer


def test_a_credential_is_reused_until_shortly_before_it_expires() -> None:
    creds, issuer = source(lifetime=300)
    assert creds.stale()
    assert creds.get().token == "t1"
    issuer.clock.now += 300 - EXPIRY_SKEW - 1
    assert not creds.stale() and creds.get().token == "t1"
    issuer.clock.now += 1
    assert creds.stale() and creds.get().token == "t2"
    assert issuer.runs == 2


def test_a_credential_without_expiry_lasts_until_refused() -> None:
    creds, issuer = source(lifetime=None)
    first = creds.get()
    issuer.clock.now += 10**9
    assert creds.get() is first
    assert creds.refresh(first).token == "t2"
    assert issuer.runs == 2


def test_a_refusal_of_a_credential_already_replaced_does_not_run_the_plugin_again() -> None:
    creds, issuer = source(lifetime=None)
    first = creds.get()
    second = creds.refresh(first)
    # A second request that was refused with the first credential arrives late.
    assert creds.refresh(first) is second
    assert issuer.runs == 2


def test_expired_status_fields_are_handled_through_kubeconfig(tmp_path: Path) -> None:
    # A credential that expires within the skew counts as stale at once: every use renews it.
    script(
        tmp_path / "plugin.py",
        f"""print(json.dumps({{"apiVersion": "{V1}", "kind": "ExecCredential",
              "status": {{"token": "short", "expirationTimestamp": "2000-01-01T00:00:00Z"}}}}))""",
    )
    loaded = KubeConfig.load(kubeconfig(tmp_path, {"apiVersion": V1, "command": "./plugin.py"}))
    assert loaded.credential_stale()
    assert loaded.auth_headers() == {"Authorization": "Bearer short"}
    assert loaded.credential_stale()
    assert loaded.credential_expiry() == 946684800.0


def test_the_environment_is_the_processes_plus_the_kubeconfigs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROFILE", "from-shell")
    script(tmp_path / "plugin.py", ECHO_INFO)
    loaded = KubeConfig.load(kubeconfig(tmp_path, {"apiVersion": V1, "command": "./plugin.py"}))
    told = json.loads(loaded.auth_headers()["Authorization"].removeprefix("Bearer "))
    assert told["profile"] == "from-shell"
    assert os.environ["PROFILE"] == "from-shell"
