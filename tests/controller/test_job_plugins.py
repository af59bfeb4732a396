"""Job plugins (reference §5.4): arguments, pod changes, and the objects they ask for."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.api.jobflags import Flag
from stromboli.core.controller.job.plugins import (
    JOB_PLUGINS,
    EnvPlugin,
    HcclRankPlugin,
    JobPlugin,
    JobPluginError,
    MpiPlugin,
    PytorchPlugin,
    RayPlugin,
    SshPlugin,
    SvcPlugin,
    TensorflowPlugin,
    UnknownJobPluginError,
    build_plugins,
    parse_flags,
)

# --- builders ------------------------------------------------------------------------------------


def task(name: str, replicas: int = 1, **spec: Any) -> dict:
    containers = spec.pop("containers", None) or [{"name": "main", "image": "busybox"}]
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": containers, **spec}},
    }


def job(*tasks: dict, name: str = "job1", plugins: dict | None = None) -> dict:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns1", "uid": "uid-1"},
        "spec": {"tasks": list(tasks), "plugins": plugins or {}},
    }


def pod(j: dict, task_name: str, index: int) -> dict:
    """The pod the controller would build before plugins run."""
    t = next(t for t in j["spec"]["tasks"] if t["name"] == task_name)
    name = f"{j['metadata']['name']}-{task_name}-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": j["metadata"]["namespace"],
            "labels": {"volcano.sh/task-spec": task_name, "volcano.sh/task-index": str(index)},
            "annotations": {"volcano.sh/task-spec": task_name},
        },
        "spec": copy.deepcopy(t["template"]["spec"]),
    }


def created(plugin: JobPlugin, j: dict, task_name: str, index: int) -> dict:
    p = pod(j, task_name, index)
    plugin.on_pod_create(p, task_name, index)
    return p


def env(container: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def main(p: dict) -> dict:
    return p["spec"]["containers"][0]


MASTER_WORKER = job(task("master", 1), task("worker", 3))


# --- registry ------------------------------------------------------------------------------------


def test_all_volcano_plugins_are_registered() -> None:
    assert set(JOB_PLUGINS) == {
        "env",
        "svc",
        "ssh",
        "tensorflow",
        "mpi",
        "pytorch",
        "ray",
        "hcclrank",
    }


def test_unknown_plugin_raises_a_clear_error() -> None:
    with pytest.raises(UnknownJobPluginError, match="unable to find job plugin: big_plugin"):
        JOB_PLUGINS["big_plugin"]


def test_unknown_plugin_error_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        JOB_PLUGINS["nope"]


def test_build_plugins_keeps_the_job_order() -> None:
    j = job(task("a"), plugins={"svc": [], "env": [], "ssh": []})
    assert [p.name for p in build_plugins(j)] == ["svc", "env", "ssh"]


def test_build_plugins_rejects_unknown_names() -> None:
    with pytest.raises(UnknownJobPluginError):
        build_plugins(job(task("a"), plugins={"env": [], "bogus": []}))


def test_controlled_resource_key() -> None:
    assert SvcPlugin([], MASTER_WORKER).controlled_resource_key == "plugin-svc"


# --- argument parsing (Go's flag package) -------------------------------------------------------

FLAGS = (Flag("port", 22), Flag("master", "master"), Flag("on", False))


def test_defaults_when_no_arguments() -> None:
    values, error = parse_flags([], FLAGS)
    assert values == {"port": 22, "master": "master", "on": False}
    assert error is None


@pytest.mark.parametrize(
    "args", [["--port=23"], ["-port=23"], ["--port", "23"], ["-port", "23"], ["--port=0x17"]]
)
def test_int_flag_spellings(args: list[str]) -> None:
    assert parse_flags(args, FLAGS)[0]["port"] == 23


def test_leading_zero_int_is_octal_like_go() -> None:
    assert parse_flags(["--port=027"], FLAGS)[0]["port"] == 23


@pytest.mark.parametrize(("arg", "value"), [("--on", True), ("--on=false", False), ("-on=T", True)])
def test_bool_flag_spellings(arg: str, value: bool) -> None:
    assert parse_flags([arg], FLAGS)[0]["on"] is value


def test_bool_flag_does_not_take_the_next_argument() -> None:
    values, error = parse_flags(["--on", "false", "--port=1"], FLAGS)
    assert values["on"] is True
    assert values["port"] == 22  # parsing stopped at the non-flag "false"
    assert error is None


def test_unknown_flag_stops_parsing_and_keeps_earlier_values() -> None:
    values, error = parse_flags(["--port=1", "--nope=2", "--master=m"], FLAGS)
    assert values == {"port": 1, "master": "master", "on": False}
    assert str(error) == "flag provided but not defined: -nope"


def test_bad_int_is_reported() -> None:
    values, error = parse_flags(["--port=abc"], FLAGS)
    assert values["port"] == 22
    assert "invalid value" in str(error)


def test_missing_value_is_reported() -> None:
    _, error = parse_flags(["--master"], FLAGS)
    assert str(error) == "flag needs an argument: -master"


def test_double_dash_ends_flags() -> None:
    assert parse_flags(["--", "--port=1"], FLAGS)[0]["port"] == 22


def test_plugin_keeps_argument_error() -> None:
    plugin = PytorchPlugin(["--prot=1"], MASTER_WORKER)
    assert plugin.argument_error is not None
    assert plugin.options["port"] == 23456


# --- env -----------------------------------------------------------------------------------------


def test_env_sets_both_index_variables() -> None:
    j = job(task("worker", 3))
    p = created(EnvPlugin([], j), j, "worker", 2)
    assert env(main(p)) == {"VK_TASK_INDEX": "2", "VC_TASK_INDEX": "2"}


def test_env_covers_init_containers() -> None:
    j = job(task("worker", 2, initContainers=[{"name": "init", "image": "busybox"}]))
    p = created(EnvPlugin([], j), j, "worker", 1)
    assert env(p["spec"]["initContainers"][0])["VC_TASK_INDEX"] == "1"


def test_env_keeps_existing_variables() -> None:
    containers = [{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}]}]
    j = job(task("w", 1, containers=containers))
    p = created(EnvPlugin([], j), j, "w", 0)
    assert list(env(main(p))) == ["A", "VK_TASK_INDEX", "VC_TASK_INDEX"]


def test_env_asks_for_no_objects() -> None:
    plugin = EnvPlugin([], MASTER_WORKER)
    assert plugin.on_job_add() == []
    assert plugin.on_job_delete() == []


# --- svc -----------------------------------------------------------------------------------------


def test_svc_sets_hostname_and_subdomain() -> None:
    p = created(SvcPlugin([], MASTER_WORKER), MASTER_WORKER, "worker", 1)
    assert p["spec"]["hostname"] == "job1-worker-1"
    assert p["spec"]["subdomain"] == "job1"


def test_svc_keeps_template_hostname() -> None:
    j = job(task("ps", 1, hostname="ps0", subdomain="sub"))
    p = created(SvcPlugin([], j), j, "ps", 0)
    assert (p["spec"]["hostname"], p["spec"]["subdomain"]) == ("ps0", "sub")


def test_svc_host_file() -> None:
    data = SvcPlugin([], MASTER_WORKER).host_file()
    assert data == {
        "master.host": "job1-master-0.job1",
        "VC_MASTER_HOSTS": "job1-master-0.job1",
        "VC_MASTER_NUM": "1",
        "worker.host": "job1-worker-0.job1\njob1-worker-1.job1\njob1-worker-2.job1",
        "VC_WORKER_HOSTS": "job1-worker-0.job1,job1-worker-1.job1,job1-worker-2.job1",
        "VC_WORKER_NUM": "3",
    }


def test_svc_task_names_with_dashes() -> None:
    data = SvcPlugin([], job(task("param-server", 1))).host_file()
    assert set(data) == {"param_server.host", "VC_PARAM_SERVER_HOSTS", "VC_PARAM_SERVER_NUM"}


def test_svc_fixed_hostname_gives_one_host() -> None:
    data = SvcPlugin([], job(task("ps", 3, hostname="ps"))).host_file()
    assert data["VC_PS_HOSTS"] == "ps.job1"
    assert data["VC_PS_NUM"] == "1"


def test_svc_zero_replicas() -> None:
    data = SvcPlugin([], job(task("w", 0))).host_file()
    assert data == {"w.host": "", "VC_W_HOSTS": "", "VC_W_NUM": "0"}


def test_svc_injects_hosts_env_from_config_map() -> None:
    p = created(SvcPlugin([], MASTER_WORKER), MASTER_WORKER, "master", 0)
    variables = env(main(p))
    assert list(variables) == [
        "VC_MASTER_HOSTS",
        "VC_MASTER_NUM",
        "VC_WORKER_HOSTS",
        "VC_WORKER_NUM",
    ]
    assert variables["VC_WORKER_NUM"] == {
        "configMapKeyRef": {"name": "job1-svc", "key": "VC_WORKER_NUM"}
    }


def test_svc_inject_hosts_env_disabled() -> None:
    plugin = SvcPlugin(["--inject-hosts-env=false"], MASTER_WORKER)
    p = created(plugin, MASTER_WORKER, "master", 0)
    assert "env" not in main(p)
    assert p["spec"]["volumes"] == [{"name": "job1-svc", "configMap": {"name": "job1-svc"}}]


def test_svc_mounts_config_map_in_every_container() -> None:
    j = job(task("w", 1, initContainers=[{"name": "i", "image": "x"}]))
    p = created(SvcPlugin([], j), j, "w", 0)
    mount = {"name": "job1-svc", "mountPath": "/etc/volcano"}
    assert main(p)["volumeMounts"] == [mount]
    assert p["spec"]["initContainers"][0]["volumeMounts"] == [mount]


def test_svc_objects() -> None:
    cm, service, policy = SvcPlugin([], MASTER_WORKER).on_job_add()
    assert (cm["kind"], cm["metadata"]["name"]) == ("ConfigMap", "job1-svc")
    assert cm["metadata"]["namespace"] == "ns1"
    assert cm["data"]["VC_WORKER_NUM"] == "3"
    assert service["kind"] == "Service" and service["metadata"]["name"] == "job1"
    selector = {"volcano.sh/job-name": "job1", "volcano.sh/job-namespace": "ns1"}
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": selector,
        "publishNotReadyAddresses": False,
    }
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    assert policy["spec"]["podSelector"] == {"matchLabels": selector}
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": selector}}]}]
    assert policy["spec"]["policyTypes"] == ["Ingress"]


def test_svc_objects_are_owned_by_the_job() -> None:
    for obj in SvcPlugin([], MASTER_WORKER).on_job_add():
        assert obj["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": "job1",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def test_svc_publish_not_ready_addresses() -> None:
    plugin = SvcPlugin(["--publish-not-ready-addresses"], MASTER_WORKER)
    assert plugin.on_job_add()[1]["spec"]["publishNotReadyAddresses"] is True


def test_svc_disable_network_policy() -> None:
    plugin = SvcPlugin(["--disable-network-policy=true"], MASTER_WORKER)
    assert [o["kind"] for o in plugin.on_job_add()] == ["ConfigMap", "Service"]
    assert ("networking.k8s.io/v1", "NetworkPolicy", "job1") not in plugin.on_job_delete()


def test_svc_delete_list() -> None:
    assert SvcPlugin([], MASTER_WORKER).on_job_delete() == [
        ("v1", "ConfigMap", "job1-svc"),
        ("v1", "Service", "job1"),
        ("networking.k8s.io/v1", "NetworkPolicy", "job1"),
    ]


def test_svc_update_follows_replicas() -> None:
    j = job(task("w", 1))
    plugin = SvcPlugin([], j)
    j["spec"]["tasks"][0]["replicas"] = 2
    assert plugin.on_job_update()[0]["data"]["VC_W_NUM"] == "2"


# --- ssh -----------------------------------------------------------------------------------------


def secret_files(secret: dict) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


@pytest.fixture(scope="module")
def ssh_secret() -> dict:
    (secret,) = SshPlugin([], MASTER_WORKER).on_job_add()
    return secret


def test_ssh_secret_name_and_keys(ssh_secret: dict) -> None:
    assert ssh_secret["kind"] == "Secret"
    assert ssh_secret["metadata"]["name"] == "job1-ssh"
    assert set(ssh_secret["data"]) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}


def test_ssh_keys_are_a_valid_pair(ssh_secret: dict) -> None:
    files = secret_files(ssh_secret)
    assert files["id_rsa"].startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    private = serialization.load_pem_private_key(files["id_rsa"], password=None)
    assert private.key_size == 2048  # type: ignore[union-attr]
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert files["id_rsa.pub"] == public + b"\n"
    assert files["authorized_keys"] == files["id_rsa.pub"]
    serialization.load_ssh_public_key(files["id_rsa.pub"].strip())


def test_ssh_config_lists_every_pod(ssh_secret: dict) -> None:
    config = secret_files(ssh_secret)["config"].decode()
    assert config.startswith("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n")
    assert "Host job1-worker-2\n  HostName job1-worker-2.job1\n  Port 22\n" in config
    assert config.count("Host ") == 4


def test_ssh_new_key_per_job() -> None:
    a = secret_files(SshPlugin([], MASTER_WORKER).on_job_add()[0])["id_rsa"]
    b = secret_files(SshPlugin([], MASTER_WORKER).on_job_add()[0])["id_rsa"]
    assert a != b


def test_ssh_user_provided_keys() -> None:
    plugin = SshPlugin(["--ssh-private-key=PRIV", "--ssh-public-key=PUB"], MASTER_WORKER)
    files = secret_files(plugin.on_job_add()[0])
    assert files["id_rsa"] == b"PRIV"
    assert files["id_rsa.pub"] == files["authorized_keys"] == b"PUB"


def test_ssh_custom_port() -> None:
    plugin = SshPlugin(["--ssh-port=2222", "--ssh-private-key=k"], MASTER_WORKER)
    assert "  Port 2222\n" in plugin.ssh_config()


@pytest.mark.parametrize("port", ["0", "70000", "-1"])
def test_ssh_invalid_port_falls_back_to_22(port: str) -> None:
    plugin = SshPlugin([f"--ssh-port={port}"], MASTER_WORKER)
    assert plugin.options["ssh-port"] == 22


def test_ssh_mounts_secret_for_root() -> None:
    p = created(SshPlugin([], MASTER_WORKER), MASTER_WORKER, "worker", 0)
    (volume,) = p["spec"]["volumes"]
    assert volume["name"] == "job1-ssh"
    assert volume["secret"]["secretName"] == "job1-ssh"
    assert volume["secret"]["defaultMode"] == 0o600
    assert [(i["path"], i["mode"]) for i in volume["secret"]["items"]] == [
        (".ssh/id_rsa", 0o600),
        (".ssh/id_rsa.pub", 0o600),
        (".ssh/authorized_keys", 0o600),
        (".ssh/config", 0o600),
    ]
    assert main(p)["volumeMounts"] == [
        {"name": "job1-ssh", "mountPath": "/root/.ssh", "subPath": ".ssh"}
    ]


def ssh_modes(path: str) -> dict[str, int]:
    """File name -> mode of every file the ssh volume projects, ``defaultMode`` applied."""
    plugin = SshPlugin([f"--ssh-key-file-path={path}"], MASTER_WORKER)
    p = created(plugin, MASTER_WORKER, "worker", 0)
    (volume,) = p["spec"]["volumes"]
    secret = volume["secret"]
    assert {i["key"] for i in secret["items"]} == {
        "id_rsa",
        "id_rsa.pub",
        "authorized_keys",
        "config",
    }
    return {
        i["path"].rsplit("/", 1)[-1]: i.get("mode", secret["defaultMode"]) for i in secret["items"]
    }


def test_ssh_non_root_path_keeps_the_private_key_private() -> None:
    """Public files are readable by the non-root user; the private key only by owner and,
    through fsGroup, the pod's group (Volcano makes it 0644)."""
    modes = ssh_modes("/home/user/.ssh")
    assert modes == {
        "id_rsa": 0o600,
        "id_rsa.pub": 0o644,
        "authorized_keys": 0o644,
        "config": 0o644,
    }
    plugin = SshPlugin(["--ssh-key-file-path=/home/user/.ssh"], MASTER_WORKER)
    p = created(plugin, MASTER_WORKER, "worker", 0)
    assert p["spec"]["volumes"][0]["secret"]["defaultMode"] == 0o600
    assert main(p)["volumeMounts"][0]["mountPath"] == "/home/user/.ssh"


@given(
    path=st.one_of(
        st.just("/root/.ssh"),
        st.text(alphabet="/abcdefgh._-", min_size=1, max_size=30),
    )
)
def test_ssh_private_key_is_0600_and_nothing_is_writable_by_others(path: str) -> None:
    modes = ssh_modes(path)
    assert modes["id_rsa"] == 0o600
    for name, mode in modes.items():
        assert mode & 0o022 == 0, f"{name} writable by group or others: {mode:o}"
        assert mode & 0o111 == 0, f"{name} executable: {mode:o}"


def test_ssh_delete_list() -> None:
    assert SshPlugin([], MASTER_WORKER).on_job_delete() == [("v1", "Secret", "job1-ssh")]


# --- tensorflow ----------------------------------------------------------------------------------

TF_JOB = job(task("ps", 2), task("worker", 2), task("chief", 1))


def tf_config(p: dict) -> dict:
    return json.loads(env(main(p))["TF_CONFIG"])


def test_tf_config_for_a_worker() -> None:
    p = created(TensorflowPlugin([], TF_JOB), TF_JOB, "worker", 1)
    assert tf_config(p) == {
        "cluster": {
            "ps": ["job1-ps-0.job1:2222", "job1-ps-1.job1:2222"],
            "worker": ["job1-worker-0.job1:2222", "job1-worker-1.job1:2222"],
            "chief": ["job1-chief-0.job1:2222"],
        },
        "task": {"type": "worker", "index": 1},
    }


def test_tf_config_is_compact_json_in_role_order() -> None:
    p = created(TensorflowPlugin([], TF_JOB), TF_JOB, "ps", 0)
    raw = env(main(p))["TF_CONFIG"]
    assert raw.startswith('{"cluster":{"ps":["job1-ps-0.job1:2222"')
    assert raw.endswith('"task":{"type":"ps","index":0}}')


def test_tf_custom_port_and_role_names() -> None:
    j = job(task("param", 1), task("trainer", 2))
    plugin = TensorflowPlugin(["--ps=param", "--worker=trainer", "--port=5000"], j)
    config = tf_config(created(plugin, j, "trainer", 0))
    assert config["cluster"] == {
        "ps": ["job1-param-0.job1:5000"],
        "worker": ["job1-trainer-0.job1:5000", "job1-trainer-1.job1:5000"],
    }
    assert config["task"] == {"type": "worker", "index": 0}


def test_tf_unknown_task_keeps_its_name_as_type() -> None:
    j = job(task("worker", 2), task("other", 1))
    config = tf_config(created(TensorflowPlugin([], j), j, "other", 0))
    assert config["task"]["type"] == "other"
    assert "other" not in config["cluster"]


def test_tf_evaluator_role() -> None:
    j = job(task("worker", 2), task("evaluator", 1))
    config = tf_config(created(TensorflowPlugin([], j), j, "evaluator", 0))
    assert config["cluster"]["evaluator"] == ["job1-evaluator-0.job1:2222"]
    assert config["task"]["type"] == "evaluator"


def test_tf_standalone_job_gets_nothing() -> None:
    j = job(task("worker", 1))
    assert "env" not in main(created(TensorflowPlugin([], j), j, "worker", 0))


def test_tf_only_main_containers() -> None:
    j = job(task("worker", 2, initContainers=[{"name": "i", "image": "x"}]), task("ps", 1))
    p = created(TensorflowPlugin([], j), j, "worker", 0)
    assert "env" not in p["spec"]["initContainers"][0]


# --- mpi -----------------------------------------------------------------------------------------


def test_mpi_master_gets_worker_hosts() -> None:
    p = created(MpiPlugin([], MASTER_WORKER), MASTER_WORKER, "master", 0)
    assert env(main(p)) == {"MPI_HOST": "job1-worker-0.job1,job1-worker-1.job1,job1-worker-2.job1"}


def test_mpi_worker_gets_no_host_list() -> None:
    p = created(MpiPlugin([], MASTER_WORKER), MASTER_WORKER, "worker", 0)
    assert "env" not in main(p)


def test_mpi_opens_ssh_port_everywhere() -> None:
    j = job(task("master", 1, initContainers=[{"name": "i", "image": "x"}]), task("worker", 1))
    for name in ("master", "worker"):
        p = created(MpiPlugin([], j), j, name, 0)
        assert main(p)["ports"] == [{"name": "mpijob-port", "containerPort": 22}]
    assert created(MpiPlugin([], j), j, "master", 0)["spec"]["initContainers"][0]["ports"]


def test_mpi_does_not_duplicate_a_declared_port() -> None:
    containers = [{"name": "c", "image": "x", "ports": [{"name": "ssh", "containerPort": 22}]}]
    j = job(task("master", 1, containers=containers), task("worker", 1))
    p = created(MpiPlugin([], j), j, "master", 0)
    assert main(p)["ports"] == [{"name": "ssh", "containerPort": 22}]


def test_mpi_custom_names_and_port() -> None:
    j = job(task("launcher", 1), task("node", 2))
    plugin = MpiPlugin(["--master=launcher", "--worker=node", "--port=5000"], j)
    p = created(plugin, j, "launcher", 0)
    assert env(main(p))["MPI_HOST"] == "job1-node-0.job1,job1-node-1.job1"
    assert main(p)["ports"][0]["containerPort"] == 5000


def test_mpi_fixed_worker_hostname() -> None:
    j = job(task("master", 1), task("worker", 3, hostname="w"))
    p = created(MpiPlugin([], j), j, "master", 0)
    assert env(main(p))["MPI_HOST"] == "w.job1"


def test_mpi_without_worker_task_leaves_master_alone() -> None:
    j = job(task("master", 1))
    p = created(MpiPlugin([], j), j, "master", 0)
    assert "env" not in main(p) and "ports" not in main(p)


# --- pytorch -------------------------------------------------------------------------------------


def test_pytorch_master_env() -> None:
    p = created(PytorchPlugin([], MASTER_WORKER), MASTER_WORKER, "master", 0)
    assert env(main(p)) == {
        "MASTER_ADDR": "job1-master-0.job1",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "4",
        "RANK": "0",
    }


@pytest.mark.parametrize("index", [0, 1, 2])
def test_pytorch_worker_rank(index: int) -> None:
    p = created(PytorchPlugin([], MASTER_WORKER), MASTER_WORKER, "worker", index)
    assert env(main(p))["RANK"] == str(index + 1)


def test_pytorch_other_task_gets_no_rank() -> None:
    j = job(task("master", 1), task("worker", 1), task("logger", 1))
    variables = env(main(created(PytorchPlugin([], j), j, "logger", 0)))
    assert "RANK" not in variables
    assert variables["WORLD_SIZE"] == "2"


def test_pytorch_opens_port() -> None:
    plugin = PytorchPlugin(["--port=5000"], MASTER_WORKER)
    p = created(plugin, MASTER_WORKER, "worker", 0)
    assert main(p)["ports"] == [{"name": "pytorchjob-port", "containerPort": 5000}]
    assert env(main(p))["MASTER_PORT"] == "5000"


def test_pytorch_custom_task_names() -> None:
    j = job(task("chief", 1), task("trainer", 2))
    plugin = PytorchPlugin(["--master=chief", "--worker=trainer"], j)
    variables = env(main(created(plugin, j, "trainer", 1)))
    assert variables["MASTER_ADDR"] == "job1-chief-0.job1"
    assert variables["RANK"] == "2"
    assert variables["WORLD_SIZE"] == "3"


def test_pytorch_without_master_does_nothing() -> None:
    j = job(task("worker", 2))
    assert "env" not in main(created(PytorchPlugin([], j), j, "worker", 0))


def test_pytorch_wait_master_disabled_by_default() -> None:
    p = created(PytorchPlugin([], MASTER_WORKER), MASTER_WORKER, "worker", 0)
    assert "initContainers" not in p["spec"]


def test_pytorch_wait_master_init_container() -> None:
    args = ["--wait-master-enabled", "--wait-master-timeout=60", "--wait-master-image=alpine:3"]
    plugin = PytorchPlugin(args, MASTER_WORKER)
    p = created(plugin, MASTER_WORKER, "worker", 0)
    (init,) = p["spec"]["initContainers"]
    assert init["name"] == "wait-for-master"
    assert init["image"] == "alpine:3"
    assert init["command"][:2] == ["sh", "-c"]
    assert "job1-master-0.job1 23456" in init["command"][2]
    assert "-ge 60" in init["command"][2]
    assert "RANK" not in env(init)
    plugin.add_wait_container(p, "x", 1)
    assert len(p["spec"]["initContainers"]) == 1


def test_pytorch_master_never_waits() -> None:
    plugin = PytorchPlugin(["--wait-master-enabled=true"], MASTER_WORKER)
    assert "initContainers" not in created(plugin, MASTER_WORKER, "master", 0)["spec"]


# --- ray -----------------------------------------------------------------------------------------

RAY_JOB = job(
    task("head", 1, containers=[{"name": "head", "image": "ray"}]),
    task("worker", 2, containers=[{"name": "worker", "image": "ray"}]),
)


def test_ray_head_command_and_ports() -> None:
    p = created(RayPlugin([], RAY_JOB), RAY_JOB, "head", 0)
    assert main(p)["command"] == [
        "sh",
        "-c",
        "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 --dashboard-port=8265 "
        "--ray-client-server-port=10001",
    ]
    assert main(p)["ports"] == [
        {"name": "gcs", "containerPort": 6379},
        {"name": "dashboard", "containerPort": 8265},
        {"name": "client-server", "containerPort": 10001},
    ]


def test_ray_worker_command() -> None:
    p = created(RayPlugin([], RAY_JOB), RAY_JOB, "worker", 1)
    assert main(p)["command"] == ["sh", "-c", "ray start --block --address=job1-head-0.job1:6379"]
    assert "ports" not in main(p)


def test_ray_custom_ports() -> None:
    plugin = RayPlugin(["--port=7000", "--dashboardPort=9000", "--clientPort=11000"], RAY_JOB)
    head = main(created(plugin, RAY_JOB, "head", 0))
    assert "--port=7000 --dashboard-port=9000 --ray-client-server-port=11000" in head["command"][2]
    worker = main(created(plugin, RAY_JOB, "worker", 0))
    assert worker["command"][2].endswith("job1-head-0.job1:7000")


def test_ray_only_named_containers() -> None:
    j = job(task("head", 1, containers=[{"name": "sidecar", "image": "x"}]))
    p = created(RayPlugin([], j), j, "head", 0)
    assert "command" not in main(p)


def test_ray_custom_container_names() -> None:
    j = job(
        task("head", 1, containers=[{"name": "ray-head", "image": "ray"}]),
        task("worker", 1, containers=[{"name": "ray-worker", "image": "ray"}]),
    )
    plugin = RayPlugin(["--headContainer=ray-head", "--workerContainer=ray-worker"], j)
    assert "command" in main(created(plugin, j, "head", 0))
    assert "command" in main(created(plugin, j, "worker", 0))


def test_ray_without_head_task_is_an_error() -> None:
    j = job(task("worker", 1, containers=[{"name": "worker", "image": "ray"}]))
    with pytest.raises(JobPluginError, match="head"):
        created(RayPlugin([], j), j, "worker", 0)


def test_ray_head_service() -> None:
    (service,) = RayPlugin([], RAY_JOB).on_job_add()
    assert service["kind"] == "Service"
    assert service["metadata"]["name"] == "job1-head-svc"
    assert service["spec"]["selector"] == {
        "volcano.sh/job-name": "job1",
        "volcano.sh/job-namespace": "ns1",
        "volcano.sh/task-spec": "head",
    }
    assert service["spec"]["ports"] == [
        {"name": "gcs", "port": 6379, "targetPort": "gcs", "protocol": "TCP"},
        {"name": "dashboard", "port": 8265, "targetPort": "dashboard", "protocol": "TCP"},
        {"name": "client-server", "port": 10001, "targetPort": "client-server", "protocol": "TCP"},
    ]
    assert "clusterIP" not in service["spec"]


def test_ray_delete_list() -> None:
    assert RayPlugin([], RAY_JOB).on_job_delete() == [("v1", "Service", "job1-head-svc")]


# --- hcclrank ------------------------------------------------------------------------------------


def rank(p: dict) -> str | None:
    return p["metadata"].get("annotations", {}).get("hccl/rankIndex")


def test_hccl_master_rank_is_index() -> None:
    j = job(task("master", 2), task("worker", 2))
    assert rank(created(HcclRankPlugin([], j), j, "master", 1)) == "1"


def test_hccl_worker_rank_follows_masters() -> None:
    j = job(task("master", 2), task("worker", 3))
    assert rank(created(HcclRankPlugin([], j), j, "worker", 2)) == "4"


def test_hccl_prefers_rank_env() -> None:
    p = pod(MASTER_WORKER, "worker", 1)
    PytorchPlugin([], MASTER_WORKER).on_pod_create(p, "worker", 1)
    HcclRankPlugin([], MASTER_WORKER).on_pod_create(p, "worker", 1)
    assert rank(p) == "2"


def test_hccl_keeps_existing_annotation() -> None:
    p = pod(MASTER_WORKER, "worker", 1)
    p["metadata"]["annotations"]["hccl/rankIndex"] = "7"
    HcclRankPlugin([], MASTER_WORKER).on_pod_create(p, "worker", 1)
    assert rank(p) == "7"


def test_hccl_other_tasks_untouched() -> None:
    j = job(task("master", 1), task("ps", 1))
    assert rank(created(HcclRankPlugin([], j), j, "ps", 0)) is None


def test_hccl_custom_names() -> None:
    j = job(task("lead", 1), task("member", 2))
    plugin = HcclRankPlugin(["--master=lead", "--worker=member"], j)
    assert rank(created(plugin, j, "member", 0)) == "1"


def test_hccl_pod_without_annotations() -> None:
    p = pod(MASTER_WORKER, "master", 0)
    del p["metadata"]["annotations"]
    HcclRankPlugin([], MASTER_WORKER).on_pod_create(p, "master", 0)
    assert rank(p) == "0"


# --- all together --------------------------------------------------------------------------------


def test_plugins_compose_on_one_pod() -> None:
    j = job(
        task("master", 1),
        task("worker", 2),
        plugins={"svc": [], "ssh": [], "env": [], "mpi": [], "pytorch": []},
    )
    p = pod(j, "worker", 1)
    for plugin in build_plugins(j):
        plugin.on_pod_create(p, "worker", 1)
    variables = env(main(p))
    assert variables["VC_TASK_INDEX"] == "1"
    assert variables["RANK"] == "2"
    assert "VC_WORKER_HOSTS" in variables
    assert {v["name"] for v in p["spec"]["volumes"]} == {"job1-svc", "job1-ssh"}
    assert {port["containerPort"] for port in main(p)["ports"]} == {22, 23456}


def test_plugins_do_not_modify_the_job() -> None:
    j = job(task("master", 1), task("worker", 2), plugins={"svc": [], "pytorch": []})
    before = copy.deepcopy(j)
    for plugin in build_plugins(j):
        plugin.on_pod_create(pod(j, "worker", 0), "worker", 0)
        plugin.on_job_add()
    assert j == before
