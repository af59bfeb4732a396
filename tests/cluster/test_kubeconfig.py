"""Kubeconfig files as kubectl reads them: merged lists, contexts, data and files relative to
each file, credentials, and errors that name the file and the field."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stromboli.core.cluster.kubeconfig import KubeConfig, KubeConfigError
from stromboli.core.devcluster import CertificateAuthority


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def config(
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if clusters is not None:
        doc["clusters"] = [{"name": n, "cluster": c} for n, c in clusters.items()]
    if users is not None:
        doc["users"] = [{"name": n, "user": u} for n, u in users.items()]
    if contexts is not None:
        doc["contexts"] = [{"name": n, "context": c} for n, c in contexts.items()]
    if current is not None:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return path


def simple(tmp_path: Path, user: dict[str, Any], **cluster: Any) -> Path:
    return write(
        tmp_path / "config",
        config(
            {"c": {"server": "https://k:6443", **cluster}},
            {"u": user},
            {"ctx": {"cluster": "c", "user": "u"}},
            "ctx",
        ),
    )


@pytest.fixture(autouse=True)
def no_ambient_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


# --- which file, which context ---------------------------------------------------------------


def test_an_explicit_path_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = simple(tmp_path / "a", {"token": "a"})
    other = simple(tmp_path / "b", {"token": "b"})
    monkeypatch.setenv("KUBECONFIG", str(other))
    assert KubeConfig.load(mine).auth_headers() == {"Authorization": "Bearer a"}
    assert KubeConfig.load().auth_headers() == {"Authorization": "Bearer b"}


def test_the_default_file_is_home_kube_config(tmp_path: Path) -> None:
    simple(tmp_path / "home" / ".kube", {"token": "home"})
    assert KubeConfig.load().auth_headers() == {"Authorization": "Bearer home"}


def test_nothing_found_says_where_it_looked() -> None:
    with pytest.raises(KubeConfigError, match=r"pass --kubeconfig, set \$KUBECONFIG"):
        KubeConfig.load()


def test_merged_files_first_definition_of_a_name_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write(
        tmp_path / "first",
        config({"c": {"server": "https://first:1"}}, {"u": {"token": "t1"}}),
    )
    second = write(
        tmp_path / "second",
        config(
            {"c": {"server": "https://second:2"}, "d": {"server": "https://d:4"}},
            {"u": {"token": "t2"}},
            {"ctx": {"cluster": "c", "user": "u"}, "dctx": {"cluster": "d", "user": "u"}},
            "ctx",
        ),
    )
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    loaded = KubeConfig.load()
    assert loaded.server == "https://first:1"
    assert loaded.auth_headers() == {"Authorization": "Bearer t1"}
    assert KubeConfig.load(context="dctx").server == "https://d:4"


def test_the_first_current_context_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clusters = {"a": {"server": "https://a:1"}, "b": {"server": "https://b:2"}}
    contexts = {"a": {"cluster": "a"}, "b": {"cluster": "b"}}
    one = write(tmp_path / "one", config(clusters, None, contexts, "a"))
    two = write(tmp_path / "two", config(None, None, None, "b"))
    monkeypatch.setenv("KUBECONFIG", f"{one}:{two}")
    assert KubeConfig.load().server == "https://a:1"
    monkeypatch.setenv("KUBECONFIG", f"{two}:{one}")
    assert KubeConfig.load().server == "https://b:2"


def test_missing_and_empty_files_in_the_list_are_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = write(tmp_path / "empty", "")
    real = simple(tmp_path / "real", {"token": "t"})
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{empty}:{real}")
    assert KubeConfig.load().server == "https://k:6443"


def test_no_existing_file_in_the_list_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(KubeConfigError, match="none of those files exists"):
        KubeConfig.load()


def test_the_context_gives_the_namespace(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config",
        config(
            {"c": {"server": "https://k:1"}},
            {"u": {"token": "t"}},
            {"ctx": {"cluster": "c", "user": "u", "namespace": "team-a"}, "bare": {"cluster": "c"}},
            "ctx",
        ),
    )
    assert KubeConfig.load(path).namespace == "team-a"
    bare = KubeConfig.load(path, context="bare")
    assert bare.namespace == "default"
    assert bare.auth_headers() == {}


def test_a_trailing_slash_on_the_server_is_dropped(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config",
        config({"c": {"server": "https://k:1/"}}, None, {"x": {"cluster": "c"}}, "x"),
    )
    assert KubeConfig.load(path).server == "https://k:1"


# --- TLS and credentials ---------------------------------------------------------------------


def test_certificate_data_and_files_relative_to_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = CertificateAuthority()
    keys = ca.issue_client("alice")
    keys.write(tmp_path / "users" / "pki", "alice")
    ca.write(tmp_path / "clusters" / "pki")
    clusters = write(
        tmp_path / "clusters" / "config",
        config(
            {"c": {"server": "https://k:1", "certificate-authority": "pki/ca.crt"}},
            None,
            {"ctx": {"cluster": "c", "user": "alice"}},
            "ctx",
        ),
    )
    users = write(
        tmp_path / "users" / "config",
        config(
            None,
            {"alice": {"client-certificate": "pki/alice.crt", "client-key": "pki/alice.key"}},
        ),
    )
    monkeypatch.setenv("KUBECONFIG", f"{clusters}:{users}")
    loaded = KubeConfig.load()
    assert loaded.ca_data == ca.cert_pem
    assert loaded.cert_data == keys.cert_pem
    assert loaded.client_certificate() == (keys.cert_pem, keys.key_pem)
    ctx = loaded.ssl_context()
    assert not isinstance(ctx, bool) and ctx.check_hostname


def test_data_wins_over_a_file(tmp_path: Path) -> None:
    ca = CertificateAuthority()
    path = simple(
        tmp_path,
        {"token": "t"},
        **{"certificate-authority-data": b64(ca.cert_pem), "certificate-authority": "nowhere"},
    )
    assert KubeConfig.load(path).ca_data == ca.cert_pem


def test_insecure_and_tls_server_name(tmp_path: Path) -> None:
    path = simple(
        tmp_path, {"token": "t"}, **{"insecure-skip-tls-verify": True, "tls-server-name": "api"}
    )
    loaded = KubeConfig.load(path)
    assert loaded.insecure_skip_tls_verify and loaded.tls_server_name == "api"
    ctx = loaded.ssl_context()
    assert not isinstance(ctx, bool) and not ctx.check_hostname


def test_token_wins_over_token_file(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("from-file")
    both = KubeConfig.load(simple(tmp_path, {"token": "inline", "tokenFile": "tok"}))
    assert both.auth_headers() == {"Authorization": "Bearer inline"}
    only_file = KubeConfig.load(simple(tmp_path, {"tokenFile": "tok"}))
    assert only_file.token_file == tmp_path / "tok"
    assert only_file.auth_headers() == {"Authorization": "Bearer from-file"}


def test_basic_auth(tmp_path: Path) -> None:
    loaded = KubeConfig.load(simple(tmp_path, {"username": "ann", "password": "pw"}))
    assert loaded.auth_headers() == {"Authorization": f"Basic {b64(b'ann:pw')}"}


# --- errors name the file and the field ------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("- just\n- a list\n", "must be a mapping, got list"),
        ("clusters: {a: 1}\n", "clusters must be a list"),
        ("users: [{user: {}}]\n", r"users\[0\] needs a name"),
        ("contexts: [3]\n", r"contexts\[0\] needs a name"),
        ("current-context: [x]\n", "current-context must be a string"),
        ("clusters: [\n", "is not valid YAML"),
        (config({"c": {"server": "https://k:1"}}), "no current-context set and no context given"),
        (
            config({"c": {"server": "https://k:1"}}, None, {}, "gone"),
            "context 'gone' is not defined",
        ),
        (config(None, None, {"x": {"cluster": "c"}}, "x"), "names unknown cluster 'c'"),
        (config({"c": {}}, None, {"x": {"cluster": "c"}}, "x"), "cluster 'c' has no server"),
        (
            config({"c": {"server": "https://k:1"}}, {}, {"x": {"cluster": "c", "user": "v"}}, "x"),
            "names unknown user 'v'",
        ),
    ],
)
def test_bad_kubeconfig_names_the_field(tmp_path: Path, doc: Any, message: str) -> None:
    path = write(tmp_path / "config", doc)
    with pytest.raises(KubeConfigError, match=message) as err:
        KubeConfig.load(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    ("user", "cluster", "message"),
    [
        (
            {"client-certificate-data": "!!!", "client-key-data": "QQ=="},
            {},
            "client-certificate-data is not valid base64",
        ),
        (
            {"client-certificate": "missing.crt", "client-key": "missing.key"},
            {},
            "cannot read client-certificate",
        ),
        ({"client-certificate-data": b64(b"x")}, {}, "client certificate or key without the other"),
        ({"tokenFile": "absent"}, {}, "tokenFile .*absent does not exist"),
        ({"token": 5}, {}, "token must be a string"),
        (
            {"token": "t"},
            {"certificate-authority-data": "%%%"},
            "certificate-authority-data is not valid base64",
        ),
        ({"auth-provider": {"name": "keystone"}}, {}, "auth-provider.name 'keystone' is not one"),
    ],
)
def test_bad_credentials_name_the_user_or_cluster(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], message: str
) -> None:
    path = simple(tmp_path, user, **cluster)
    with pytest.raises(KubeConfigError, match=message) as err:
        KubeConfig.load(path)
    assert "user 'u'" in str(err.value) or "cluster 'c'" in str(err.value)


def test_a_binary_certificate_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "c.der").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "c.key").write_bytes(b"\xff\xfe\x00binary")
    path = simple(tmp_path, {"client-certificate": "c.der", "client-key": "c.key"})
    with pytest.raises(
        KubeConfigError, match=r"client-certificate 'c\.der' is not a PEM text file"
    ):
        KubeConfig.load(path)


# --- auth providers through the kubernetes package -------------------------------------------


def test_an_oidc_id_token_is_used_as_the_bearer(tmp_path: Path) -> None:
    # An id-token with no expiry claim: the package uses it as it is.
    payload = base64.urlsafe_b64encode(b'{"sub":"ann"}').decode().rstrip("=")
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').decode().rstrip("=")
    token = f"{header}.{payload}.sig"
    provider = {"name": "oidc", "config": {"id-token": token, "idp-issuer-url": "https://idp"}}
    loaded = KubeConfig.load(simple(tmp_path, {"auth-provider": provider}))
    assert loaded.auth_headers() == {"Authorization": f"Bearer {token}"}
    assert loaded.renewable


def test_a_gcp_access_token_before_its_expiry_is_used(tmp_path: Path) -> None:
    provider = {
        "name": "gcp",
        "config": {"access-token": "ya29.tok", "expiry": "2999-01-01T00:00:00Z"},
    }
    loaded = KubeConfig.load(simple(tmp_path, {"auth-provider": provider}))
    assert loaded.auth_headers() == {"Authorization": "Bearer ya29.tok"}


def test_an_auth_provider_that_yields_nothing_is_an_error(tmp_path: Path) -> None:
    provider = {"name": "azure", "config": {}}
    with pytest.raises(KubeConfigError, match="auth-provider 'azure' gave no token"):
        KubeConfig.load(simple(tmp_path, {"auth-provider": provider}))


# --- in-cluster ------------------------------------------------------------------------------


def test_in_cluster_needs_the_service_host(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="KUBERNETES_SERVICE_HOST is not set"):
        KubeConfig.in_cluster(tmp_path)


def test_in_cluster_without_a_ca_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    (tmp_path / "token").write_text("t")
    with pytest.raises(KubeConfigError, match=r"in-cluster config .*certification file"):
        KubeConfig.in_cluster(tmp_path)


def test_in_cluster_is_the_fallback_with_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("t")
    (sa / "ca.crt").write_bytes(CertificateAuthority().cert_pem)
    monkeypatch.setattr("stromboli.core.cluster.kubeconfig.SERVICE_ACCOUNT_DIR", sa)
    loaded = KubeConfig.load()
    assert loaded.server == "https://10.0.0.1:443"
    assert loaded.source == "in-cluster service account"


# --- open-ended input ------------------------------------------------------------------------

yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(
        st.sampled_from(["clusters", "users", "contexts", "current-context", "kind"]),
        yaml_values,
        max_size=5,
    )
)
def test_any_document_loads_or_is_a_kubeconfig_error(tmp_path: Path, doc: dict[str, Any]) -> None:
    path = write(tmp_path / "fuzz", doc)
    try:
        KubeConfig.load(path)
    except KubeConfigError as err:
        assert str(err)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(
        st.sampled_from(["exec", "auth-provider", "token", "tokenFile", "client-certificate-data"]),
        yaml_values,
        min_size=1,
        max_size=3,
    )
)
def test_any_user_section_loads_or_is_a_kubeconfig_error(
    tmp_path: Path, user: dict[str, Any]
) -> None:
    try:
        loaded = KubeConfig.load(simple(tmp_path, user))
        loaded.auth_headers()
    except KubeConfigError as err:
        assert "user 'u'" in str(err) or str(tmp_path) in str(err)
