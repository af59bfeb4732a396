"""JSON (orjson) against Kubernetes protobuf for the lists and watches of a restart, measured on
the test control plane: is ``application/vnd.kubernetes.protobuf`` worth a decoder?

Starts etcd + kube-apiserver + kwok, makes ``--nodes`` kwok nodes and ``--pods`` pods bound to
them (kwok marks them Running, so every pod carries a realistic status), then stops kwok so
that nothing else talks to the API server. Each measurement runs in a fresh child process
(its peak RSS is its own), alternating JSON and protobuf ``--rounds`` times:

- ``list``: one ``resourceVersion=0`` list (the watch cache, as the scheduler's first list);
- ``watch``: a watch with ``sendInitialEvents=true`` read up to its initial-events-end bookmark
  (every object arrives as one watch event: the cost per event of following a busy kind).

For each it prints the bytes received, the API server's CPU seconds, the child's CPU seconds
to receive the body and to decode it into the dicts the store hands out (JSON: orjson plus the
store's typing and ``managedFields`` drop; protobuf: upb parse plus conversion to the same dict
shape, zero values dropped as ``omitempty`` does), its peak RSS above its start, and the parse
alone (protobuf messages, no dicts: the floor if the consumers read messages instead). Two
more pod cases: ``protobuf-read`` converts of a pod's status only what the scheduler reads,
``json-nogc`` pauses the cyclic collector during the JSON decode. The figures and the decision
are in ``benchmarks/README.md`` and ``docs/limits.md``.

The protobuf schema is Kubernetes' own ``generated.proto`` for ``k8s.io/api`` and
``k8s.io/apimachinery`` at the control plane's version, fetched with ``go mod download`` and
compiled into a descriptor set with grpcio-tools' bundled protoc (``pip install grpcio-tools``;
it is not a dependency of Stromboli), cached under ``~/.cache/stromboli/protobuf/``.

Run: .venv/bin/python benchmarks/protobuf_bench.py [--nodes 1000] [--pods 50000] [--rounds 3]
     [--modes list,watch] [--kinds pods,nodes] [--formats json,protobuf,protobuf-read,json-nogc]
     [--kubeconfig FILE --apiserver-pid PID]   (measure an existing, already filled cluster)
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from stromboli.core.cluster import jsondecode
from stromboli.core.cluster.kube import KubeConfig, KubeStore
from stromboli.core.runtime import tune_gc

PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON = "application/json"
MAGIC = b"k8s\x00"
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
CORE = "k8s.io.api.core.v1."
CACHE = Path.home() / ".cache" / "stromboli" / "protobuf"
TICKS = os.sysconf("SC_CLK_TCK")
KINDS = {"pods": ("Pod", "/api/v1/pods"), "nodes": ("Node", "/api/v1/nodes")}
READ_STATUS = frozenset({"phase", "conditions", "nominatedNodeName"})
FORMATS = ("json", "protobuf", "protobuf-read", "json-nogc")
PROTOS = (
    ("k8s.io/api", "core/v1/generated.proto"),
    ("k8s.io/apimachinery", "pkg/apis/meta/v1/generated.proto"),
    ("k8s.io/apimachinery", "pkg/runtime/generated.proto"),
    ("k8s.io/apimachinery", "pkg/runtime/schema/generated.proto"),
    ("k8s.io/apimachinery", "pkg/api/resource/generated.proto"),
    ("k8s.io/apimachinery", "pkg/util/intstr/generated.proto"),
)


# --- the schema -------------------------------------------------------------------------------


def descriptor_set(kube_version: str) -> Path:
    """Kubernetes' core protobuf schema at ``kube_version`` as a compiled descriptor set."""
    staging = "v0." + kube_version.lstrip("v").split(".", 1)[1]  # v1.36.3 -> v0.36.3
    out = CACHE / staging / "core.desc"
    if out.exists():
        return out
    try:
        import grpc_tools  # noqa: F401  # only its bundled protoc is used
    except ImportError:
        raise SystemExit("compiling the schema needs protoc: pip install grpcio-tools") from None
    tree = Path(tempfile.mkdtemp(prefix="stromboli-proto-"))
    try:
        for module, proto in PROTOS:
            answer = subprocess.run(
                ["go", "mod", "download", "-json", f"{module}@{staging}"],
                check=True,
                capture_output=True,
            )
            source = Path(json.loads(answer.stdout)["Dir"]) / proto
            target = tree / module / proto
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{tree}",
                "--include_imports",
                f"--descriptor_set_out={out}",
                "k8s.io/api/core/v1/generated.proto",
            ],
            check=True,
        )
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    return out


class ProtoDecoder:
    """Enveloped Kubernetes protobuf into JSON-shaped dicts, driven by the descriptors."""

    SCALAR, MESSAGE, REP_SCALAR, REP_MESSAGE, MAP_SCALAR, MAP_MESSAGE = range(6)

    def __init__(self, schema: Path) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        self.pool = descriptor_pool.DescriptorPool()
        files = descriptor_pb2.FileDescriptorSet()
        files.ParseFromString(schema.read_bytes())
        for file in files.file:
            self.pool.Add(file)

        def message(name: str) -> Any:
            return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))

        self.unknown = message("k8s.io.apimachinery.pkg.runtime.Unknown")
        self.watch_event = message(META + "WatchEvent")
        self.classes = {k: message(CORE + k) for k in ("Pod", "PodList", "Node", "NodeList")}
        self._times: dict[int, str] = {}
        self.special = {
            META + "Time": self._time,
            META + "MicroTime": self._micro_time,
            "k8s.io.apimachinery.pkg.api.resource.Quantity": lambda m: m.string,
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString": self._int_or_string,
            "k8s.io.apimachinery.pkg.runtime.RawExtension": self._raw,
            META + "FieldsV1": self._raw,
            META + "Duration": lambda m: m.duration,
        }
        self._plans: dict[Any, tuple[str, int, Any]] = {}

    def _time(self, msg: Any) -> str:
        seconds = msg.seconds
        text = self._times.get(seconds)
        if text is None:
            moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
            text = self._times[seconds] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        return text

    @staticmethod
    def _micro_time(msg: Any) -> str:
        moment = datetime.datetime.fromtimestamp(msg.seconds, datetime.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{msg.nanos // 1000:06d}Z"

    @staticmethod
    def _int_or_string(msg: Any) -> Any:
        return msg.strVal if msg.type == 1 else msg.intVal

    @staticmethod
    def _raw(msg: Any) -> Any:
        return orjson.loads(msg.raw) if msg.raw else {}

    def _plan(self, field: Any) -> tuple[str, int, Any]:
        kind = field.message_type
        if kind is not None and kind.GetOptions().map_entry:
            value = kind.fields_by_name["value"].message_type
            if value is None:
                return field.name, self.MAP_SCALAR, None
            return field.name, self.MAP_MESSAGE, self.special.get(value.full_name)
        repeated = field.is_repeated
        if kind is None:
            return field.name, self.REP_SCALAR if repeated else self.SCALAR, None
        mode = self.REP_MESSAGE if repeated else self.MESSAGE
        return field.name, mode, self.special.get(kind.full_name)

    def to_dict(self, msg: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        plans = self._plans
        for field, value in msg.ListFields():
            plan = plans.get(field)
            if plan is None:
                plan = plans[field] = self._plan(field)
            name, mode, special = plan
            if mode == self.SCALAR:
                if value:
                    out[name] = value
            elif mode == self.MESSAGE:
                out[name] = special(value) if special else self.to_dict(value)
            elif mode == self.REP_SCALAR:
                out[name] = list(value)
            elif mode == self.REP_MESSAGE:
                out[name] = [special(v) if special else self.to_dict(v) for v in value]
            elif mode == self.MAP_SCALAR:
                out[name] = dict(value)
            else:
                out[name] = {
                    k: special(v) if special else self.to_dict(v) for k, v in value.items()
                }
        return out

    def parse(self, body: bytes) -> Any:
        """The message inside one ``k8s\\0`` envelope."""
        if not body.startswith(MAGIC):
            raise ValueError(f"not a Kubernetes protobuf envelope: {body[:16]!r}")
        envelope = self.unknown()
        envelope.ParseFromString(memoryview(body)[4:])
        msg = self.classes[envelope.typeMeta.kind]()
        msg.ParseFromString(envelope.raw)
        return msg

    def typed(self, item: Any, api_version: str, kind: str, read: bool = False) -> dict[str, Any]:
        """The store's dict for one listed object; ``read``: of a pod's status only what the
        scheduler reads (phase, conditions, nominatedNodeName), the rest never converted."""
        item.metadata.ClearField("managedFields")
        if read and kind == "Pod":
            for field, _ in item.status.ListFields():
                if field.name not in READ_STATUS:
                    item.status.ClearField(field.name)
        obj = self.to_dict(item)
        obj["apiVersion"], obj["kind"] = api_version, kind
        return obj


# --- one measurement, in a child process ------------------------------------------------------


def vm_hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return 0.0


async def receive(store: KubeStore, path: str, params: dict[str, str], accept: str) -> Any:
    """A GET through the store's session and credentials, the body (or a response) raw."""
    transport = store.transport
    headers = transport.headers()
    headers["Accept"] = accept
    return transport.session.get(
        transport.base_url + path,
        params=params,
        headers=headers,
        timeout=None,
        **transport._extra,
    )


def strip_json(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """What ``KubeStore._typed`` does to every listed item."""
    for item in items:
        item.setdefault("apiVersion", "v1")
        item.setdefault("kind", kind)
        (item.get("metadata") or {}).pop("managedFields", None)
    return items


async def measure_list(store: KubeStore, fmt: str, kind: str, decoder: ProtoDecoder | None) -> dict:
    name, path = KINDS[kind]
    accept = f"{PROTOBUF}, {JSON}" if fmt.startswith("protobuf") else JSON
    cpu0 = time.process_time()
    async with await receive(store, path, {"resourceVersion": "0"}, accept) as resp:
        body = await resp.read()
        content_type = resp.headers.get("Content-Type", "")
        encoding = resp.headers.get("Content-Encoding", "")
    cpu1 = time.process_time()
    parse_s = 0.0
    if fmt == "json":
        items = strip_json(jsondecode.loads(body)["items"], name)
    elif fmt == "json-nogc":
        # The same with the cyclic collector paused: decoded JSON has no cycles to find, yet
        # a big document's objects trigger its full passes again and again while it grows.
        gc.disable()
        try:
            items = strip_json(jsondecode.loads(body)["items"], name)
        finally:
            gc.enable()
    else:
        assert decoder is not None and content_type.startswith(PROTOBUF), content_type
        listed = decoder.parse(body)
        parse_s = time.process_time() - cpu1
        read = fmt == "protobuf-read"
        items = [decoder.typed(item, "v1", name, read) for item in listed.items]
        del listed
    cpu2 = time.process_time()
    return {
        "objects": len(items),
        "bytes": len(body),
        "gzip": encoding == "gzip",
        "receive_cpu": cpu1 - cpu0,
        "decode_cpu": cpu2 - cpu1,
        "parse_cpu": parse_s,
        "peak_mib": vm_hwm_mib(),
    }


async def measure_watch(
    store: KubeStore, fmt: str, kind: str, decoder: ProtoDecoder | None
) -> dict:
    """Watch with initial events up to their end bookmark: every object one event."""
    name, path = KINDS[kind]
    accept = JSON if fmt == "json" else f"{PROTOBUF};stream=watch, {JSON}"
    params = {
        "watch": "1",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "resourceVersion": "0",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "600",
    }
    objects: list[dict[str, Any]] = []
    received = 0
    receive_cpu = decode_cpu = 0.0
    cpu0 = time.process_time()
    async with await receive(store, path, params, accept) as resp:
        if resp.status != 200:
            raise RuntimeError(f"watch answered {resp.status}: {(await resp.read())[:300]!r}")
        if fmt == "json":
            buffer = b""
            done = False
            async for chunk in resp.content.iter_any():
                t0 = time.process_time()
                received += len(chunk)
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                t1 = time.process_time()
                receive_cpu += t1 - t0
                for line in lines:
                    event = jsondecode.loads(line)
                    obj = event["object"]
                    if event["type"] == "BOOKMARK":
                        annotations = obj["metadata"].get("annotations") or {}
                        done = annotations.get("k8s.io/initial-events-end") == "true"
                        continue
                    obj["metadata"].pop("managedFields", None)
                    objects.append(obj)
                decode_cpu += time.process_time() - t1
                if done:
                    break
        else:
            assert decoder is not None
            got = resp.headers.get("Content-Type", "")
            assert got.startswith(PROTOBUF), got
            buffer = b""
            done = False
            async for chunk in resp.content.iter_any():
                t0 = time.process_time()
                received += len(chunk)
                buffer += chunk
                frames = []
                at = 0
                while len(buffer) - at >= 4:
                    size = int.from_bytes(buffer[at : at + 4], "big")
                    if len(buffer) - at < 4 + size:
                        break
                    frames.append(buffer[at + 4 : at + 4 + size])
                    at += 4 + size
                buffer = buffer[at:]
                t1 = time.process_time()
                receive_cpu += t1 - t0
                for frame in frames:
                    event = decoder.watch_event()
                    event.ParseFromString(frame)
                    item = decoder.parse(event.object.raw)
                    if event.type == "BOOKMARK":
                        annotations = item.metadata.annotations
                        done = annotations.get("k8s.io/initial-events-end") == "true"
                        continue
                    objects.append(decoder.typed(item, "v1", name, fmt == "protobuf-read"))
                decode_cpu += time.process_time() - t1
                if done:
                    break
    total = time.process_time() - cpu0
    return {
        "objects": len(objects),
        "bytes": received,
        # aiohttp's own reading is in neither bucket: it goes with receiving.
        "receive_cpu": total - decode_cpu,
        "decode_cpu": decode_cpu,
        "parse_cpu": 0.0,
        "peak_mib": vm_hwm_mib(),
    }


def child(args: argparse.Namespace) -> None:
    tune_gc()  # the collector's thresholds of every stromboli process (it dominates a decode)
    decoder = ProtoDecoder(Path(args.schema)) if args.format.startswith("protobuf") else None
    base = vm_hwm_mib()

    async def run() -> dict:
        store = KubeStore(KubeConfig.load(args.kubeconfig), qps=0, burst=1)
        try:
            measure = measure_list if args.mode == "list" else measure_watch
            return await measure(store, args.format, args.kind, decoder)
        finally:
            await store.close()

    began = time.monotonic()
    result = asyncio.run(run())
    result["wall"] = time.monotonic() - began
    result["peak_mib"] -= base
    print(orjson.dumps(result).decode())


# --- the parent: fill, alternate, report -------------------------------------------------------


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_child(args: argparse.Namespace, schema: Path, mode: str, fmt: str, kind: str) -> dict:
    before = proc_cpu(args.apiserver_pid)
    answer = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            f"--kubeconfig={args.kubeconfig}",
            f"--schema={schema}",
            f"--mode={mode}",
            f"--format={fmt}",
            f"--kind={kind}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result = json.loads(answer.stdout.strip().splitlines()[-1])
    result["apiserver_cpu"] = proc_cpu(args.apiserver_pid) - before
    return result


async def fill(kubeconfig: str, nodes: int, pods: int) -> None:
    """``pods`` pods bound round-robin to the kwok nodes (64 creates in flight)."""
    store = KubeStore(KubeConfig.load(kubeconfig), qps=0, burst=1)
    names = iter(range(pods))

    async def worker() -> None:
        for i in names:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{i}",
                    "namespace": "default",
                    "labels": {"bench": "protobuf"},
                    "annotations": {"scheduling.k8s.io/group-name": f"g{i // 10}"},
                },
                "spec": {
                    "schedulerName": "volcano",
                    "nodeName": f"kwok-node-{i % nodes}",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ],
                },
            }
            try:
                await store.create(pod)
            except Exception as err:
                if "AlreadyExists" not in type(err).__name__:
                    raise

    try:
        await asyncio.gather(*(worker() for _ in range(64)))
    finally:
        await store.close()


def report(results: dict[tuple[str, str, str], list[dict]]) -> None:
    print(
        f"\n{'case':<22}{'objects':>8}{'MiB':>8}{'apiserver':>11}{'receive':>9}"
        f"{'decode':>8}{'(parse)':>8}{'client':>8}{'peak MiB':>10}{'wall':>7}"
    )
    for (mode, kind, fmt), runs in results.items():

        def med(key: str, runs: list[dict] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        client = statistics.median(r["receive_cpu"] + r["decode_cpu"] for r in runs)
        parse = f"{med('parse_cpu'):8.2f}" if med("parse_cpu") else f"{'':8}"
        print(
            f"{mode + ' ' + kind + ' ' + fmt:<22}{int(med('objects')):>8}"
            f"{med('bytes') / 2**20:8.1f}{med('apiserver_cpu'):11.2f}{med('receive_cpu'):9.2f}"
            f"{med('decode_cpu'):8.2f}{parse}{client:8.2f}{med('peak_mib'):10.0f}{med('wall'):7.1f}"
        )
    print("(CPU seconds; medians of the rounds; peak MiB above the child's start)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="list,watch")
    parser.add_argument("--kinds", default="pods,nodes")
    parser.add_argument("--formats", default=",".join(FORMATS), help="for pods")
    parser.add_argument("--kubeconfig", help="an existing, filled cluster (else one is started)")
    parser.add_argument("--apiserver-pid", type=int, help="with --kubeconfig: its API server")
    parser.add_argument("--kube-version", help="the API server's version (default: asked)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--format", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    cp = None
    if args.kubeconfig is None:
        from stromboli.core.devcluster.controlplane import ControlPlane

        cp = ControlPlane(nodes=0, node_pods=200, start_controller_manager=False).start()
        for first in range(0, args.nodes, 250):
            cp.add_nodes(min(250, args.nodes - first), wait_ready=False)
        args.kubeconfig = str(cp.kubeconfig_path)
        args.apiserver_pid = cp.components["kube-apiserver"].pid
        began = time.monotonic()
        asyncio.run(fill(args.kubeconfig, args.nodes, args.pods))
        print(f"filled {args.nodes} nodes, {args.pods} pods in {time.monotonic() - began:.0f}s")
        time.sleep(10)  # kwok's last status patches
        cp.components["kwok"].stop()  # from here on only the measured requests reach the server
    try:
        version = args.kube_version or asyncio.run(server_version(args.kubeconfig))
        schema = descriptor_set(version)
        print(f"Kubernetes {version}; load {os.getloadavg()[0]:.1f}; {args.rounds} rounds")
        results: dict[tuple[str, str, str], list[dict]] = {}
        for _ in range(args.rounds):
            for mode in args.modes.split(","):
                for kind in args.kinds.split(","):
                    for fmt in args.formats.split(",") if kind == "pods" else FORMATS[:2]:
                        if mode == "watch" and fmt == "json-nogc":
                            continue  # a watch decodes one small event at a time
                        result = run_child(args, schema, mode, fmt, kind)
                        results.setdefault((mode, kind, fmt), []).append(result)
        report(results)
        print(f"load at the end {os.getloadavg()[0]:.1f}")
    finally:
        if cp is not None:
            cp.stop()


async def server_version(kubeconfig: str) -> str:
    store = KubeStore(KubeConfig.load(kubeconfig))
    try:
        answer = await store.transport.request("GET", "/version")
        return str(answer["gitVersion"]).split("-")[0].split("+")[0]
    finally:
        await store.close()


if __name__ == "__main__":
    main()
