"""A real ``spark-submit --master k8s://... --deploy-mode cluster`` (the PyPI ``pyspark``, a
Debian JRE) against the test control plane, with the flags and templates of
``stromboli spark-conf``, and ``stromboli scheduler`` + ``stromboli controller`` running.

spark-submit creates the driver pod (and its ConfigMap and Service; with Spark's
``VolcanoFeatureStep`` also the PodGroup, before the pod) and returns
(``waitAppCompletion=false``). kwok runs nothing, so the test plays the driver: it creates the
executors as Spark's executor allocator does (the executor template, labels
``spark-app-selector``/``spark-role=executor``, a controlling ownerReference to the driver pod,
and, under the feature step, the group annotation the step adds to executors). Checked: the
driver lands in its PodGroup, in the queue asked for, bound by our scheduler (its ``Scheduled``
event comes from ``volcano``; no other scheduler runs), and the executors join the same group.

Java: a ``java`` of 17 or newer (on PATH or under /usr/lib/jvm), else the session fixture
installs Debian's ``openjdk-17-jre-headless`` (or ``-21-``, whichever apt offers) with apt-get;
CI runs as root on Debian. Without either the tests fail, they never skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stromboli.core.api import constants as k
from stromboli.core.cluster.errors import NotFoundError
from stromboli.core.devcluster import ControlPlane

from .jobs_live import (  # noqa: F401  (fixtures)
    POD,
    PODGROUP,
    QUEUE,
    Live,
    live_fixture,
    pod_phase,
    stack_fixture,
)

STROMBOLI = Path(sys.executable).with_name("stromboli")
JAVA_PACKAGES = ("openjdk-17-jre-headless", "openjdk-21-jre-headless")
MIN_JAVA = 17  # Spark 4
EXAMPLES_JAR = "local:///opt/spark/examples/jars/spark-examples.jar"
APP_SELECTOR = "spark-app-selector"
ROLE = "spark-role"
WAIT = 60.0


# --- Java and Spark -----------------------------------------------------------------------------


def java_major(java: str) -> int | None:
    """The feature release of a ``java`` binary (``17`` for 17.0.15, ``8`` for 1.8.0)."""
    try:
        shown = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', shown)
    if match is None:
        return None
    major, minor = int(match[1]), int(match[2] or 0)
    return minor if major == 1 else major


def install_java() -> None:
    """Debian's headless JRE, the first of ``JAVA_PACKAGES`` apt has a candidate for."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.fail(
            f"spark-submit needs java >= {MIN_JAVA}; install one (on Debian, as root: "
            f"apt-get install -y {JAVA_PACKAGES[0]}) and run again",
            pytrace=False,
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, env=env, capture_output=True, timeout=600)
    for package in JAVA_PACKAGES:
        policy = subprocess.run(
            ["apt-cache", "policy", package], env=env, capture_output=True, text=True, timeout=60
        ).stdout
        candidate = re.search(r"Candidate:\s*(\S+)", policy)
        if candidate and candidate[1] != "(none)":
            subprocess.run(
                ["apt-get", "install", "-y", "--no-install-recommends", package],
                check=True,
                env=env,
                capture_output=True,
                timeout=900,
            )
            return
    pytest.fail(f"apt offers none of {JAVA_PACKAGES}", pytrace=False)


def find_java() -> str | None:
    """``java`` on PATH if it is new enough, else one of Debian's JVMs that is."""
    candidates = [shutil.which("java"), *map(str, sorted(Path("/usr/lib/jvm").glob("*/bin/java")))]
    return next((c for c in candidates if c and (java_major(c) or 0) >= MIN_JAVA), None)


@pytest.fixture(scope="session")
def java() -> str:
    found = find_java()
    if found is None:
        install_java()
        found = find_java()
    assert found is not None, f"no java >= {MIN_JAVA} after installing one"
    return found


@pytest.fixture(scope="session")
def spark_home(java: str) -> Path:
    """The pyspark package is a Spark distribution: ``bin/spark-submit`` and ``jars/``."""
    import pyspark

    home = Path(pyspark.__file__).parent
    assert (home / "bin" / "spark-submit").exists(), f"no bin/spark-submit in {home}"
    return home


class SparkSubmit:
    """``spark-submit`` in cluster mode against the control plane, as its admin."""

    def __init__(self, cp: ControlPlane, home: Path, java: str) -> None:
        self.cp = cp
        self.home = home
        self.env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "JAVA_HOME": str(Path(java).resolve().parent.parent),
            # fabric8's client reads a PKCS#8 key as RSA unless told: our test PKI's are EC.
            "KUBERNETES_CERTS_CLIENT_KEY_ALGO": "EC",
            # Only this cluster's kubeconfig, never the user's ~/.kube/config.
            "KUBECONFIG": str(cp.kubeconfig_path),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }

    def auth(self) -> list[str]:
        pki = self.cp.pki_dir
        prefix = "spark.kubernetes.authenticate.submission"
        pairs = {
            "caCertFile": pki / "ca.crt",
            "clientCertFile": pki / "admin.crt",
            "clientKeyFile": pki / "admin.key",
        }
        return [arg for key, path in pairs.items() for arg in ("--conf", f"{prefix}.{key}={path}")]

    def run(self, name: str, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [
            str(self.home / "bin" / "spark-submit"),
            *("--master", f"k8s://{self.cp.server_url}", "--deploy-mode", "cluster"),
            *("--name", name, "--class", "org.apache.spark.examples.SparkPi"),
            *("--conf", f"spark.kubernetes.namespace={namespace}"),
            *("--conf", "spark.kubernetes.container.image=apache/spark:4.0.0"),
            *("--conf", "spark.kubernetes.submission.waitAppCompletion=false"),
            *self.auth(),
            *args,
            EXAMPLES_JAR,
            "10",
        ]
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (
            f"spark-submit exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        )
        return done


@pytest.fixture
def submit(control_plane: ControlPlane, spark_home: Path, java: str) -> SparkSubmit:
    return SparkSubmit(control_plane, spark_home, java)


@pytest.fixture
async def queue(live: Live) -> AsyncIterator[str]:
    """A queue of its own, so the test can tell the queue was honoured."""
    name = f"spark-{uuid.uuid4().hex[:6]}"
    await live.store.create(
        {
            "apiVersion": k.SCHEDULING_V1BETA1,
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1},
        }
    )
    try:
        yield name
    finally:
        await live.cleanup()  # pods and groups first: a queue in use is refused
        with contextlib.suppress(NotFoundError):
            await live.store.delete(*QUEUE, name)


def spark_conf(out: Path, *flags: str) -> list[str]:
    """``stromboli spark-conf`` as a user runs it; its stdout as spark-submit arguments."""
    done = subprocess.run(
        [str(STROMBOLI), "spark-conf", "--output-dir", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return shlex.split(done.stdout)


# --- what the cluster shows ---------------------------------------------------------------------


async def driver_of(live: Live, name: str) -> dict[str, Any]:
    async def probe() -> list[dict[str, Any]]:
        pods = (await live.store.list(*POD, live.ns)).items
        return [
            p
            for p in pods
            if (p["metadata"].get("labels") or {}).get("spark-app-name") == name
            and p["metadata"]["labels"].get(ROLE) == "driver"
        ]

    (driver,) = await live.wait(probe, lambda pods: len(pods) == 1, f"driver pod of {name}")
    return driver


async def pod(live: Live, name: str) -> dict[str, Any]:
    return await live.store.get(*POD, name, live.ns)


async def bound(live: Live, name: str) -> dict[str, Any]:
    """Wait until our scheduler bound the pod and kwok runs it; returns the pod."""
    found = await live.wait(
        lambda: pod(live, name),
        lambda p: bool(p["spec"].get("nodeName")) and pod_phase(p) == "Running",
        f"pod {name} bound and Running",
        WAIT,
    )
    events = (await live.store.list("v1", "Event", live.ns)).items
    scheduled = [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == "Scheduled"
    ]
    assert scheduled, f"no Scheduled event for {name}"
    assert {(e.get("source") or {}).get("component") for e in scheduled} == {"volcano"}
    return found


async def group_of(live: Live, name: str) -> str:
    """The PodGroup the pod is annotated with (the controller may add it after creation)."""
    found = await live.wait(
        lambda: pod(live, name),
        lambda p: bool((p["metadata"].get("annotations") or {}).get(k.GROUP_NAME_ANNOTATION)),
        f"pod {name} in a PodGroup",
        WAIT,
    )
    return str(found["metadata"]["annotations"][k.GROUP_NAME_ANNOTATION])


async def executors_like_spark(
    live: Live, driver: dict[str, Any], template: Path, count: int, group: str | None
) -> list[str]:
    """Create executors as Spark's allocator does: on the executor pod template, labelled with
    the app and role, controlled by the driver pod, asking for 1 cpu and 1g + 384Mi; with
    ``group`` also the annotation VolcanoFeatureStep adds to executors."""
    meta = driver["metadata"]
    prefix = meta["name"].removesuffix("-driver")
    names = []
    for index in range(1, count + 1):
        pod = yaml.safe_load(template.read_text())
        pod["metadata"].update(
            name=f"{prefix}-exec-{index}",
            namespace=live.ns,
            ownerReferences=[
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        )
        pod["metadata"].setdefault("labels", {}).update(
            {
                APP_SELECTOR: meta["labels"][APP_SELECTOR],
                "spark-app-name": meta["labels"]["spark-app-name"],
                ROLE: "executor",
                "spark-exec-id": str(index),
            }
        )
        if group:
            pod["metadata"]["annotations"][k.GROUP_NAME_ANNOTATION] = group
        pod["spec"].update(
            restartPolicy="Never",
            containers=[
                {
                    "name": "spark-kubernetes-executor",
                    "image": "apache/spark:4.0.0",
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1408Mi"},
                        "limits": {"memory": "1408Mi"},
                    },
                }
            ],
        )
        created = await live.store.create(pod)
        names.append(created["metadata"]["name"])
    return names


def requests_of(pod: dict[str, Any]) -> dict[str, str]:
    (container,) = pod["spec"]["containers"]
    return dict(container["resources"]["requests"])


# --- the tests ----------------------------------------------------------------------------------


async def test_volcano_feature_step(
    live: Live, queue: str, submit: SparkSubmit, tmp_path: Path
) -> None:
    flags = spark_conf(tmp_path, "--queue", queue, "--min-executors", "2")
    await asyncio.to_thread(submit.run, "pi-step", live.ns, *flags)

    driver = await driver_of(live, "pi-step")
    app_id = driver["metadata"]["labels"][APP_SELECTOR]
    # Spark's VolcanoFeatureStep made the group from our template, named after the app.
    group = f"{app_id}-podgroup"
    annotations = driver["metadata"]["annotations"]
    assert annotations[k.GROUP_NAME_ANNOTATION] == group
    assert annotations[k.QUEUE_NAME_ANNOTATION_KEY] == queue
    assert annotations[k.TASK_SPEC_KEY] == "driver"
    assert driver["spec"]["schedulerName"] == "volcano"
    # Spark sized the driver as spark-conf sized it in the template: 1 cpu, 1g + 384Mi.
    assert requests_of(driver) == {"cpu": "1", "memory": "1408Mi"}

    pg = await live.store.get(*PODGROUP, group, live.ns)
    assert pg["spec"]["queue"] == queue
    assert pg["spec"]["minMember"] == 1
    assert pg["spec"]["minResources"] == {"cpu": "3", "memory": "4224Mi"}
    (owner,) = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("Pod", driver["metadata"]["uid"])

    await bound(live, driver["metadata"]["name"])
    executors = await executors_like_spark(
        live, driver, tmp_path / "executor-pod-template.yaml", 2, group
    )
    for name in executors:
        await bound(live, name)
        assert await group_of(live, name) == group
    await live.wait(
        lambda: live.store.get(*PODGROUP, group, live.ns),
        lambda g: (
            (g.get("status") or {}).get("phase") == "Running"
            and (g.get("status") or {}).get("running") == 3
        ),
        f"PodGroup {group} Running with 3 pods",
        WAIT,
    )
    # Nothing else grouped these pods: the one group is Spark's.
    assert [g["metadata"]["name"] for g in await live.podgroups()] == [group]


async def test_enrol_by_our_controller(
    live: Live, queue: str, submit: SparkSubmit, tmp_path: Path
) -> None:
    spark_conf(tmp_path, "--queue", queue, "--mode", "enrol", "--min-executors", "1")
    # The properties file this time, read by Spark's own Java properties reader.
    properties = tmp_path / "stromboli-spark.properties"
    await asyncio.to_thread(submit.run, "pi-enrol", live.ns, "--properties-file", str(properties))

    driver = await driver_of(live, "pi-enrol")
    name = driver["metadata"]["name"]
    assert driver["spec"]["schedulerName"] == "volcano"
    assert driver["metadata"]["annotations"][k.QUEUE_NAME_ANNOTATION_KEY] == queue
    assert requests_of(driver) == {"cpu": "1", "memory": "1408Mi"}
    group = await group_of(live, name)
    # Enrolment by the owner chain today (the driver has no owner, executors are controlled
    # by it), or by the app id once the spark-submit adapter runs in the controller.
    app_id = driver["metadata"]["labels"][APP_SELECTOR]
    assert group in (f"podgroup-{driver['metadata']['uid']}", f"{app_id}-podgroup")
    pg = await live.store.get(*PODGROUP, group, live.ns)
    assert pg["spec"]["queue"] == queue
    assert pg["spec"]["minMember"] == 1
    await bound(live, name)

    executors = await executors_like_spark(
        live, driver, tmp_path / "executor-pod-template.yaml", 1, None
    )
    for executor in executors:
        assert await group_of(live, executor) == group
        await bound(live, executor)
    assert [g["metadata"]["name"] for g in await live.podgroups()] == [group]


async def test_enrol_into_a_named_group(
    live: Live, queue: str, submit: SparkSubmit, tmp_path: Path
) -> None:
    flags = spark_conf(
        tmp_path, "--queue", queue, "--mode", "enrol", "--group-name", "etl", "--namespace", live.ns
    )
    manifest = yaml.safe_load((tmp_path / "podgroup.yaml").read_text())
    await live.store.create(manifest)  # what `kubectl apply -f podgroup.yaml` does
    await asyncio.to_thread(submit.run, "pi-named", live.ns, *flags)

    driver = await driver_of(live, "pi-named")
    # The pod arrived in the group: the controller had nothing to enrol.
    assert driver["metadata"]["annotations"][k.GROUP_NAME_ANNOTATION] == "etl"
    await bound(live, driver["metadata"]["name"])
    assert [g["metadata"]["name"] for g in await live.podgroups()] == ["etl"]
    pg = await live.store.get(*PODGROUP, "etl", live.ns)
    assert pg["spec"]["queue"] == queue
