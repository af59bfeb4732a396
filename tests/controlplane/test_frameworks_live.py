"""The framework adapters' live handlers on a real API server, garbage collector and kwok.

``stromboli controller`` runs as deploy/rbac.yaml's ServiceAccount (so the grants for the
handlers are the ones shipped), ``stromboli webhook-manager`` serves ``/pods/mutate`` as
deploy/webhook.yaml's, ``stromboli scheduler`` binds. The framework CRDs are the structural
ones of :mod:`.framework_crds` (a real operator's CRD is kept where one is installed). No
operator runs here: the test creates the framework objects, and the pods as the operator's
code creates them (cited at each), in a namespace labelled ``stromboli.dev/enroll: "true"``.

Checked: each kind's PodGroup has the name, minMember, minResources, queue and
priorityClassName of the adapter's conversion of the stored object and is owned by it; the
owner's deletion takes it (kube-controller-manager's garbage collector); a replicas change
updates it; a PodGroup an operator made is adopted untouched; enrolled pods get the group and
their role and are bound all-or-nothing; a bad object gets a Warning event naming the field.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.api.crds import build_crds
from stromboli.core.devcluster import ControlPlane
from stromboli.core.devcluster.client import KubeAPIError, KubeHTTP
from stromboli.core.devcluster.controlplane import free_port
from stromboli.integrations.common import Context
from stromboli.integrations.kinds import FRAMEWORK_KINDS, framework_kind
from stromboli.integrations.registry import adapter_for
from tests.integrations import test_argo, test_jobset, test_kubeflow, test_kuberay, test_spark
from tests.integrations.kit import obj, template

from .framework_crds import CRDS, install_framework_crds
from .jobs_live import DRIVER_ENV, STROMBOLI, Process
from .operators import GROUP, TASK, Pool, bound, make_namespace, pods, wait_until

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:volcano-system")
CONTROLLER_USER = "system:serviceaccount:volcano-system:stromboli-controller"
WEBHOOK_USER = "system:serviceaccount:volcano-system:stromboli-webhook"
CONFIGURATION = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
    "volcano-admission-service-pods-mutate"
)
PODGROUP_PATH = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
SUFFIX = uuid.uuid4().hex[:6]
ENROLLED, LATER = f"fw-{SUFFIX}", f"fw-later-{SUFFIX}"
PRIORITY = f"fw-high-{SUFFIX}"
PYTORCH = ("kubeflow.org/v1", "PyTorchJob")
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
ALL_KINDS = [(info.api_version, info.kind) for info in FRAMEWORK_KINDS]


def path(api_version: str, kind: str, ns: str, name: str = "") -> str:
    info = framework_kind(api_version, kind)
    assert info is not None, kind
    base = f"/apis/{api_version}/namespaces/{ns}/{info.plural}"
    return f"{base}/{name}" if name else base


@dataclass
class Live:
    client: KubeHTTP
    pool: Pool
    processes: dict[str, subprocess.Popen[bytes] | Process]
    logs_dir: Path
    lws_installed_first: bool

    def logs(self) -> str:
        parts = []
        for log in sorted(self.logs_dir.glob("*.log")):
            parts.append(f"--- {log.name} ---\n{log.read_text(errors='replace')[-2500:]}")
        return "\n".join(parts)

    def alive(self) -> list[Any]:
        def check() -> None:
            for name, process in self.processes.items():
                proc = process.process if isinstance(process, Process) else process
                assert proc is not None and proc.poll() is None, f"{name} exited\n{self.logs()}"

        return [check]

    def wait(self, what: str, probe: Any, timeout: float = 60.0) -> Any:
        return wait_until(what, probe, timeout=timeout, alive=self.alive(), logs=self.logs)

    def group(self, ns: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.client.get(f"{PODGROUP_PATH.format(ns=ns)}/{name}")
            return found
        except KubeAPIError as err:
            if err.status == 404:
                return None
            raise

    def create(self, obj: dict[str, Any], ns: str = ENROLLED) -> dict[str, Any]:
        """Post a framework object (a unit-test builder's) into ``ns``, as a user would."""
        body = {**obj, "metadata": {**obj["metadata"], "namespace": ns}}
        body["metadata"].pop("uid", None)
        body.pop("status", None)
        created: dict[str, Any] = self.client.post(path(obj["apiVersion"], obj["kind"], ns), body)
        return created


def _mutating(client: KubeHTTP) -> bool:
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "probe-", "namespace": ENROLLED},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    created = client.post(f"/api/v1/namespaces/{ENROLLED}/pods", probe, dryRun="All")
    return created["spec"].get("schedulerName") == "volcano"


@pytest.fixture(scope="module")
def live(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    cp = control_plane
    client = cp.client
    cp.apply_manifests(build_crds())
    for manifest in ("namespace.yaml", "rbac.yaml", "webhook.yaml"):
        cp.apply_manifests(DEPLOY / manifest)
    # LeaderWorkerSet's CRD comes later (test_a_crd_installed_later_...), unless another
    # module of the session installed it already.
    try:
        client.get(f"{CRDS}/leaderworkersets.leaderworkerset.x-k8s.io")
        lws_there = True
    except KubeAPIError as err:
        assert err.status == 404, err
        lws_there = False
    install_framework_crds(client, [k for k in ALL_KINDS if k != LWS])
    make_namespace(client, ENROLLED, {"stromboli.dev/enroll": "true"})
    make_namespace(client, LATER)
    client.post(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": PRIORITY},
            "value": 1000,
        },
    )
    pool = Pool(cp, "fw", cpu="2", memory="8Gi")
    pool.add(2)
    run_dir = tmp_path_factory.mktemp("frameworks-live")
    processes: dict[str, subprocess.Popen[bytes] | Process] = {}
    port = free_port()
    webhook_config = cp.write_kubeconfig(
        run_dir / "webhook.kubeconfig", user=WEBHOOK_USER, groups=SA_GROUPS
    )
    with (run_dir / "webhook-manager.log").open("ab") as out:
        processes["webhook-manager"] = subprocess.Popen(
            [
                str(STROMBOLI),
                "webhook-manager",
                f"--kubeconfig={webhook_config}",
                "--listen-address=127.0.0.1",
                f"--port={port}",
                f"--webhook-url=https://127.0.0.1:{port}",
                "--enabled-admission=/pods/mutate",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    scheduler = Process(
        cp, run_dir / "scheduler.log", "scheduler", "--schedule-period=100ms", "--listen-address="
    )
    driver = os.environ.get(DRIVER_ENV)  # both drivers must pass, as for the vcjob tests
    controller = Process(
        cp,
        run_dir / "controller.log",
        "controller",
        "--leader-elect=false",
        "--listen-address=",
        *([f"--driver={driver}"] if driver else []),
    )
    controller_config = cp.write_kubeconfig(
        run_dir / "controller.kubeconfig", user=CONTROLLER_USER, groups=SA_GROUPS
    )
    controller.argv = [
        f"--kubeconfig={controller_config}" if a.startswith("--kubeconfig=") else a
        for a in controller.argv
    ]
    processes["scheduler"] = scheduler.start()
    processes["controller"] = controller.start()
    state = Live(client, pool, processes, run_dir, lws_there)
    try:
        deadline = time.monotonic() + 60
        while not _mutating(client):
            state.alive()[0]()
            assert time.monotonic() < deadline, f"never mutated\n{state.logs()}"
            time.sleep(0.2)
        yield state
    finally:
        for process in processes.values():
            if isinstance(process, Process):
                process.stop()
            elif process.poll() is None:
                process.terminate()
                process.wait(30)
        client.delete(CONFIGURATION)
        client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{PRIORITY}")
        pool.remove()
        for name in (ENROLLED, LATER):
            client.delete(f"/api/v1/namespaces/{name}")


def pytorchjob(
    name: str, workers: int, pool: Pool, ns: str = ENROLLED, **policy: Any
) -> dict[str, Any]:
    spec = pool.pod_spec()
    replica = {"template": template(cpu="1", memory="1Gi", **spec)}
    body: dict[str, Any] = {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, **replica},
            "Worker": {"replicas": workers, **replica},
        }
    }
    if policy:
        body["runPolicy"] = {"schedulingPolicy": policy}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": body,
    }


def operator_pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the training operator creates for ``job`` (training-operator v1.8.1,
    ``pkg/controller.v1/common/pod.go`` createNewPod: ``<job>-<type>-<index>``, the job-name,
    replica-type (lower case) and replica-index labels, the pod template's spec, a controller
    reference to the job); nothing for scheduling, which plain mode leaves to enrolment."""
    meta = job["metadata"]
    made = []
    for rtype, replica in job["spec"]["pytorchReplicaSpecs"].items():
        for index in range(replica["replicas"]):
            labels = {
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/job-name": meta["name"],
                "training.kubeflow.org/replica-type": rtype.lower(),
                "training.kubeflow.org/replica-index": str(index),
            }
            if rtype == "Master":
                labels["training.kubeflow.org/job-role"] = "master"
            made.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{meta['name']}-{rtype.lower()}-{index}",
                        "namespace": meta["namespace"],
                        "labels": labels,
                        "ownerReferences": [
                            {
                                "apiVersion": "kubeflow.org/v1",
                                "kind": "PyTorchJob",
                                "name": meta["name"],
                                "uid": meta["uid"],
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": replica["template"]["spec"],
                }
            )
    return made


def test_a_pytorchjob_is_a_gang_from_podgroup_to_bound_pods(live: Live) -> None:
    client = live.client
    job = client.post(
        path(*PYTORCH, ENROLLED),
        pytorchjob("train", 2, live.pool, priorityClass=PRIORITY),
    )
    group = live.wait("PodGroup train", lambda: live.group(ENROLLED, "train"))
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["minResources"] == {"cpu": "3", "memory": "3Gi"}
    assert group["spec"]["queue"] == "default"
    assert group["spec"]["priorityClassName"] == PRIORITY
    [owner] = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "PyTorchJob",
        "train",
        job["metadata"]["uid"],
    )
    assert owner["controller"] is True and owner["blockOwnerDeletion"] is True
    for pod in operator_pods(job):
        client.post(f"/api/v1/namespaces/{ENROLLED}/pods", pod)
    selector = "training.kubeflow.org/job-name=train"
    made = live.wait(
        "train bound", lambda: (p := pods(client, ENROLLED, selector)) and len(bound(p)) == 3 and p
    )
    roles = {}
    for pod in made:
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"][GROUP] == "train"
        roles[pod["metadata"]["name"]] = pod["metadata"]["annotations"][TASK]
    assert roles == {
        "train-master-0": "master",
        "train-worker-0": "worker",
        "train-worker-1": "worker",
    }

    # All or nothing: 4 pods of 1 cpu, 1 cpu free — none binds until train is gone.
    big = client.post(path(*PYTORCH, ENROLLED), pytorchjob("big", 3, live.pool))
    live.wait("PodGroup big", lambda: live.group(ENROLLED, "big"))
    for pod in operator_pods(big):
        client.post(f"/api/v1/namespaces/{ENROLLED}/pods", pod)
    big_pods = "training.kubeflow.org/job-name=big"
    live.wait("big's pods stored", lambda: len(pods(client, ENROLLED, big_pods)) == 4)
    time.sleep(3)  # many scheduling cycles (100ms each)
    assert bound(pods(client, ENROLLED, big_pods)) == []
    # The garbage collector deletes train's PodGroup and pods with it.
    client.delete(path(*PYTORCH, ENROLLED, "train"))
    live.wait("train's PodGroup collected", lambda: live.group(ENROLLED, "train") is None)
    live.wait("big bound whole", lambda: len(bound(pods(client, ENROLLED, big_pods))) == 4)

    # Scaled: the PodGroup follows.
    stored = client.get(path(*PYTORCH, ENROLLED, "big"))
    stored["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 5
    client.put(path(*PYTORCH, ENROLLED, "big"), stored)
    scaled = live.wait(
        "big scaled",
        lambda: (g := live.group(ENROLLED, "big")) and g["spec"]["minMember"] == 6 and g,
    )
    assert scaled["spec"]["minResources"] == {"cpu": "6", "memory": "6Gi"}
    client.delete(path(*PYTORCH, ENROLLED, "big"))


def test_a_podgroup_the_operator_made_is_adopted_untouched(live: Live) -> None:
    client = live.client
    # Not enrolled yet, so the operator (here: the test, as the training operator's Volcano
    # mode does in pkg/controller.v1/control/podgroup_control.go) makes the group first.
    job = client.post(path(*PYTORCH, LATER), pytorchjob("adopt", 2, live.pool, LATER))
    made = client.post(
        PODGROUP_PATH.format(ns=LATER),
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": "adopt",
                "namespace": LATER,
                "ownerReferences": [
                    {
                        "apiVersion": "kubeflow.org/v1",
                        "kind": "PyTorchJob",
                        "name": "adopt",
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {"minMember": 1, "queue": "default"},
        },
    )
    ns = client.get(f"/api/v1/namespaces/{LATER}")
    ns["metadata"]["labels"] = {
        **(ns["metadata"].get("labels") or {}),
        "stromboli.dev/enroll": "true",
    }
    client.put(f"/api/v1/namespaces/{LATER}", ns)
    # A second job in the same namespace shows the controller has acted on it since.
    client.post(path(*PYTORCH, LATER), pytorchjob("witness", 1, live.pool, LATER))
    live.wait("witness PodGroup", lambda: live.group(LATER, "witness"))
    time.sleep(1)  # and a few rounds more
    after = live.group(LATER, "adopt")
    assert after is not None
    # The scheduler writes its status; nobody touches the rest (ours would say minMember 3).
    assert after["spec"] == made["spec"]
    assert after["metadata"]["ownerReferences"] == made["metadata"]["ownerReferences"]
    assert "labels" not in after["metadata"]


def warnings_of(client: KubeHTTP, name: str) -> list[dict[str, Any]]:
    events = client.get(
        f"/api/v1/namespaces/{ENROLLED}/events",
        fieldSelector=f"involvedObject.name={name}",
    )["items"]
    return [e for e in events if e["reason"] == "PodGroupError"]


def test_a_bad_object_gets_a_warning_naming_the_field_and_no_podgroup(live: Live) -> None:
    client = live.client
    bad = pytorchjob("bad", 1, live.pool)
    worker = bad["spec"]["pytorchReplicaSpecs"]["Worker"]
    worker["template"] = template(cpu="-2", memory="1Gi")
    client.post(path(*PYTORCH, ENROLLED), bad)
    client.post(path(*PYTORCH, ENROLLED), pytorchjob("fine", 1, live.pool))
    live.wait("fine's PodGroup", lambda: live.group(ENROLLED, "fine"))
    [event] = live.wait("the Warning on bad", lambda: warnings_of(client, "bad"))
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "PyTorchJob"
    field = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.requests.cpu"
    assert field in event["message"]
    assert live.group(ENROLLED, "bad") is None
    for name in ("bad", "fine"):
        client.delete(path(*PYTORCH, ENROLLED, name))


def _kind_cases() -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    rc = test_kuberay.raycluster(test_kuberay.group())
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "ns"},
        "spec": {
            "entrypoint": "python pi.py",
            "rayClusterSpec": test_kuberay.cluster_spec(test_kuberay.group()),
        },
    }
    js = test_jobset.jobset(
        test_jobset.replicated("workers", 2, 2, template("1", "1Gi")),
        annotations={"scheduling.volcano.sh/queue-name": "q"},
    )
    runtime = test_kubeflow.runtime(("node", 1, template("1", "2Gi")))
    return [
        (
            "TFJob",
            obj(
                "kubeflow.org/v1",
                "TFJob",
                "tf",
                {
                    "tfReplicaSpecs": {
                        "PS": {"replicas": 1, "template": template()},
                        "Worker": {"replicas": 2, "template": template()},
                    }
                },
            ),
            [],
        ),
        (
            "XGBoostJob",
            obj(
                "kubeflow.org/v1",
                "XGBoostJob",
                "xgb",
                {
                    "xgbReplicaSpecs": {
                        "Master": {"replicas": 1, "template": template()},
                        "Worker": {"replicas": 1, "template": template()},
                    }
                },
            ),
            [],
        ),
        (
            "PaddleJob",
            obj(
                "kubeflow.org/v1",
                "PaddleJob",
                "paddle",
                {"paddleReplicaSpecs": {"Worker": {"replicas": 3, "template": template()}}},
            ),
            [],
        ),
        (
            "JAXJob",
            obj(
                "kubeflow.org/v1",
                "JAXJob",
                "jax",
                {"jaxReplicaSpecs": {"Worker": {"replicas": 2, "template": template()}}},
            ),
            [],
        ),
        ("MPIJob", test_kubeflow.mpijob(2), []),
        ("TrainJob", test_kubeflow.trainjob(2), [runtime]),
        ("RayCluster", rc, []),
        ("RayJob", rayjob, []),
        ("SparkApplication", test_spark.app(), []),
        ("Workflow", test_argo.workflow(), []),
        ("JobSet", js, []),
    ]


CASES = _kind_cases()


@pytest.mark.parametrize(("kind", "source", "related"), CASES, ids=[c[0] for c in CASES])
def test_every_kind_gets_the_podgroup_its_conversion_names(
    live: Live, kind: str, source: dict[str, Any], related: list[dict[str, Any]]
) -> None:
    client = live.client
    for extra in related:  # cluster-scoped runtimes
        info = framework_kind(extra["apiVersion"], extra["kind"])
        assert info is not None
        try:
            client.post(f"/apis/{extra['apiVersion']}/{info.plural}", extra)
        except KubeAPIError as err:
            assert err.status == 409, err
    stored = live.create(source)
    adapter = adapter_for(stored["apiVersion"], stored["kind"])
    assert adapter is not None
    expected = adapter.convert(stored, Context(related=related)).podgroups
    assert expected, f"{kind}: the conversion makes no PodGroup"
    for want in expected:
        name = want["metadata"]["name"]
        got = live.wait(f"{kind}'s PodGroup {name}", lambda n=name: live.group(ENROLLED, n))
        for field in ("minMember", "minResources", "queue", "priorityClassName", "networkTopology"):
            assert got["spec"].get(field) == want["spec"].get(field), (kind, field)
        assert got["metadata"]["ownerReferences"] == want["metadata"]["ownerReferences"]
    meta = stored["metadata"]
    client.delete(path(stored["apiVersion"], stored["kind"], ENROLLED, meta["name"]))
    for want in expected:
        name = want["metadata"]["name"]
        live.wait(
            f"{kind}'s PodGroup {name} collected", lambda n=name: live.group(ENROLLED, n) is None
        )


def test_a_crd_installed_later_is_followed_without_a_restart(live: Live) -> None:
    """A CRD installed while the controller runs is followed as soon as it is established
    (the controller watches CRDs), by the same process. LeaderWorkerSet groups are owned by
    their leader pods."""
    client = live.client
    controller = live.processes["controller"]
    assert isinstance(controller, Process) and controller.process is not None
    pid = controller.process.pid
    if not live.lws_installed_first:
        # Not installed when the controller started: it said so, once.
        def said() -> list[str]:
            log = controller.tail(200_000).splitlines()
            return [line for line in log if "not installed" in line]

        lines = live.wait("the controller's discovery", said)
        assert len(lines) == 1 and "LeaderWorkerSet" in lines[0], lines
    install_framework_crds(client, [LWS])
    if not live.lws_installed_first:
        on = "framework adapter on for LeaderWorkerSet (leaderworkerset.x-k8s.io/v1)"
        live.wait("the controller follows LeaderWorkerSet", lambda: on in controller.tail(200_000))
    spec = {
        "replicas": 1,
        "leaderWorkerTemplate": {
            "size": 2,
            "workerTemplate": template(cpu="100m", memory="128Mi", **live.pool.pod_spec()),
        },
    }
    lws = client.post(
        path(*LWS, ENROLLED),
        {"apiVersion": LWS[0], "kind": LWS[1], "metadata": {"name": "serve"}, "spec": spec},
    )
    # The leader as LWS's pod controller makes it (pkg/controllers/pod_controller.go, labels
    # from pkg/utils/...: name, group index, worker index 0, template revision hash).
    labels = {
        "leaderworkerset.sigs.k8s.io/name": "serve",
        "leaderworkerset.sigs.k8s.io/group-index": "0",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
        "leaderworkerset.sigs.k8s.io/template-revision-hash": "rev1",
    }
    leader = client.post(
        f"/api/v1/namespaces/{ENROLLED}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "serve-0",
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": LWS[0],
                        "kind": LWS[1],
                        "name": "serve",
                        "uid": lws["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": spec["leaderWorkerTemplate"]["workerTemplate"]["spec"],
        },
    )
    group = live.wait("serve's group", lambda: live.group(ENROLLED, "serve-0-rev1"))
    assert controller.process.pid == pid and controller.process.poll() is None
    assert group["spec"]["minMember"] == 2
    [owner] = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Pod",
        "serve-0",
        leader["metadata"]["uid"],
    )
    client.delete(path(*LWS, ENROLLED, "serve"))
