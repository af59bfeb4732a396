"""extender: decisions handed to an HTTP service (a real one, on 127.0.0.1)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stromboli.core.scheduler.conf import ConfigError, parse_config
from stromboli.core.scheduler.framework.session import ABSTAIN, PERMIT, REJECT, Session
from stromboli.core.scheduler.plugins.extender import ExtenderClient, ExtenderError

from ..builders import Cluster, conf, make_session, node, pod, podgroup, queue, session_task

Answer = Callable[[dict], Any]


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (the timeout test) is expected; nothing to report."""


class Extender:
    """A scripted extender: ``answers[verb](body)`` gives the JSON answer (or an int status
    code to fail with); every call is recorded."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.calls: list[tuple[str, dict]] = []
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                owner.connections += 1

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                verb = self.path.rsplit("/", 1)[-1]
                owner.calls.append((verb, body))
                answer = owner.answers.get(verb, lambda _b: {})(body)
                if isinstance(answer, int):
                    self.send_response(answer)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ext"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.calls]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ext() -> Iterator[Extender]:
    server = Extender()
    yield server
    server.stop()


ALL_VERBS = {
    f"extender.{v}": v
    for v in (
        "onSessionOpenVerb",
        "onSessionCloseVerb",
        "predicateVerb",
        "prioritizeVerb",
        "preemptableVerb",
        "reclaimableVerb",
        "queueOverusedVerb",
        "jobEnqueueableVerb",
        "jobEnqueuedVerb",
        "jobReadyVerb",
        "allocateFuncVerb",
        "deallocateFuncVerb",
    )
}


def ext_conf(url: str, actions: str = "allocate", **arguments: Any) -> str:
    args = {"extender.urlPrefix": url, "extender.httpTimeout": "2s", **ALL_VERBS, **arguments}
    return conf(actions, [{"name": "extender", "arguments": args}])


def objects() -> list[dict]:
    return [
        node("n1"),
        node("n2"),
        node("n3"),
        queue("q"),
        podgroup("j", 1, queue="q", phase="Inqueue"),
        pod("j-0", group="j", uid="j-0", cpu="1"),
        pod("gpu-0", group="j", uid="gpu-0", cpu="1", extra={"nvidia.com/gpu": "1"}),
        podgroup("r", 1, queue="q", phase="Running"),
        *[
            pod(f"r-{i}", group="r", uid=f"r-{i}", cpu="1", node_name="n1", phase="Running")
            for i in range(3)
        ],
    ]


def session(ext: Extender, **arguments: Any) -> Session:
    return make_session(objects(), ext_conf(ext.url, **arguments))


def test_arguments_are_known() -> None:
    parse_config(ext_conf("http://x", **{"extender.ignorable": True}))
    parse_config(ext_conf("http://x", **{"extender.managedResources": ["nvidia.com/gpu"]}))
    with pytest.raises(ConfigError, match=r"extender\.predicate"):
        parse_config(
            conf("allocate", [{"name": "extender", "arguments": {"extender.predicate": 1}}])
        )


def test_session_open_and_close_are_announced(ext: Extender) -> None:
    ssn = session(ext)
    verb, body = ext.calls[0]
    assert verb == "onSessionOpenVerb"
    assert body["NodeList"] == ["n1", "n2", "n3"]
    assert set(body["Jobs"]) == {"default/j", "default/r"}
    assert body["Queues"]["q"]["Name"] == "q"
    assert body["Nodes"]["n1"]["Used"]["MilliCPU"] == 3000
    ssn.close()
    assert ext.verbs()[-1] == "onSessionCloseVerb"


def test_predicate_asks_per_node(ext: Extender) -> None:
    def answer(body: dict) -> dict:
        name = body["node"]["Name"]
        if name == "n2":
            return {"status": "too hot", "code": 3}
        if name == "n3":
            return {"status": "busy", "code": 2}
        return {"status": ""}

    ext.answers["predicateVerb"] = answer
    ssn = session(ext)
    result = ssn.predicate(session_task(ssn, "j-0"))
    assert result.passed.tolist() == [True, False, False]
    assert [(m.tolist(), r, u) for m, r, u in result.reasons] == [
        ([False, True, False], "too hot", True),
        ([False, False, True], "busy", False),
    ]
    task = next(body["task"] for verb, body in ext.calls if verb == "predicateVerb")
    assert task["Name"] == "j-0" and task["Resreq"]["MilliCPU"] == 1000
    assert task["Pod"]["metadata"]["name"] == "j-0"
    # One keep-alive connection serves the whole session.
    assert ext.connections == 1


def test_prioritize_scores_the_candidates(ext: Extender) -> None:
    ext.answers["prioritizeVerb"] = lambda body: {
        "nodeScore": {n["Name"]: 10.0 * (i + 1) for i, n in enumerate(body["nodes"])}
    }
    ssn = session(ext)
    scores = ssn.node_scores(session_task(ssn, "j-0"), np.array([2, 0]))
    assert scores.tolist() == [10.0, 20.0]


def test_prioritize_error_message_gives_no_scores(ext: Extender) -> None:
    ext.answers["prioritizeVerb"] = lambda body: {"errorMessage": "no idea", "nodeScore": {}}
    ssn = session(ext)
    assert ssn.node_scores(session_task(ssn, "j-0"), np.arange(3)).tolist() == [0, 0, 0]


def test_victims_by_uid_or_object(ext: Extender) -> None:
    ext.answers["preemptableVerb"] = lambda body: {"status": 1, "victims": ["r-0"]}
    ext.answers["reclaimableVerb"] = lambda body: {
        "status": 1,
        "victims": [body["evictees"][1]],
    }
    ssn = session(ext)
    evictees = [session_task(ssn, f"r-{i}") for i in range(3)]
    preempt = ssn._callbacks["preemptable"]["extender"]
    reclaim = ssn._callbacks["reclaimable"]["extender"]
    chosen, vote = preempt(session_task(ssn, "j-0"), evictees)
    assert ([t.name for t in chosen], vote) == (["r-0"], PERMIT)
    chosen, vote = reclaim(session_task(ssn, "j-0"), evictees)
    assert ([t.name for t in chosen], vote) == (["r-1"], PERMIT)


def test_job_and_queue_verdicts(ext: Extender) -> None:
    ext.answers["jobEnqueueableVerb"] = lambda body: {
        "status": -1 if body["job"]["Name"] == "j" else 1
    }
    ext.answers["queueOverusedVerb"] = lambda body: {"overused": body["queue"]["Name"] == "q"}
    ext.answers["jobReadyVerb"] = lambda body: {"status": body["job"]["MinAvailable"] == 1}
    ssn = session(ext)
    vote = ssn._callbacks["job_enqueueable"]["extender"]
    assert vote(ssn.jobs["default/j"]) == REJECT
    assert vote(ssn.jobs["default/r"]) == PERMIT
    assert ssn.overused(ssn.queues["q"])
    assert not ssn.overused(ssn.queues["default"])
    assert ssn.job_ready(ssn.jobs["default/j"])
    ssn.job_enqueued(ssn.jobs["default/j"])
    assert ext.calls[-1][0] == "jobEnqueuedVerb"
    assert ext.calls[-1][1]["job"]["PodGroup"]["metadata"]["name"] == "j"


def test_allocate_and_deallocate_are_reported(ext: Extender) -> None:
    ssn = session(ext)
    stmt = ssn.statement()
    stmt.allocate(session_task(ssn, "j-0"), "n2")
    stmt.discard()
    events = [(v, b["task"]["Name"]) for v, b in ext.calls if v.endswith("FuncVerb")]
    assert events == [("allocateFuncVerb", "j-0"), ("deallocateFuncVerb", "j-0")]


def test_managed_resources_limit_which_tasks_are_asked_about(ext: Extender) -> None:
    ext.answers["predicateVerb"] = lambda body: {"status": "no", "code": 2}
    ssn = session(ext, **{"extender.managedResources": "nvidia.com/gpu"})
    assert ssn.predicate(session_task(ssn, "j-0")).passed.all()
    assert not ssn.predicate(session_task(ssn, "gpu-0")).passed.any()
    preempt = ssn._callbacks["preemptable"]["extender"]
    assert preempt(session_task(ssn, "j-0"), [session_task(ssn, "r-0")]) == ([], ABSTAIN)


def test_failures_count_against_unless_ignorable(ext: Extender) -> None:
    for verb in ALL_VERBS.values():
        if verb != "onSessionOpenVerb":
            ext.answers[verb] = lambda body: 500
    strict = session(ext)
    task = session_task(strict, "j-0")
    assert not strict.predicate(task).passed.any()
    assert strict._callbacks["job_enqueueable"]["extender"](strict.jobs["default/j"]) == REJECT
    assert strict._callbacks["preemptable"]["extender"](task, []) == ([], REJECT)
    assert strict.overused(strict.queues["q"])
    assert not strict.job_ready(strict.jobs["default/j"])
    lenient = session(ext, **{"extender.ignorable": True})
    task = session_task(lenient, "j-0")
    assert lenient.predicate(task).passed.all()
    assert lenient._callbacks["job_enqueueable"]["extender"](lenient.jobs["default/j"]) == ABSTAIN
    assert lenient._callbacks["preemptable"]["extender"](task, []) == ([], ABSTAIN)
    assert not lenient.overused(lenient.queues["q"])
    assert lenient.job_ready(lenient.jobs["default/j"])


def test_failed_session_open_registers_nothing_unless_ignorable(ext: Extender) -> None:
    ext.answers["onSessionOpenVerb"] = lambda body: 503
    strict = session(ext)
    assert "extender" not in strict._callbacks.get("predicate", {})
    lenient = session(ext, **{"extender.ignorable": True})
    assert "extender" in lenient._callbacks["predicate"]


def test_unreachable_extender_fails_fast(ext: Extender) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    arguments = {"extender.onSessionOpenVerb": "", "extender.ignorable": True}
    ssn = make_session(objects(), ext_conf(f"http://127.0.0.1:{port}", **arguments))
    started = time.monotonic()
    assert ssn.predicate(session_task(ssn, "j-0")).passed.all()
    assert time.monotonic() - started < 2
    client = ssn.plugins["extender"].client  # type: ignore[attr-defined]
    assert client.down


def test_timeout(ext: Extender) -> None:
    def slow(body: dict) -> dict:
        time.sleep(0.5)
        return {}

    ext.answers["jobReadyVerb"] = slow
    client = ExtenderClient(ext.url, timeout=0.1)
    with pytest.raises(ExtenderError, match="timed out"):
        client.post("jobReadyVerb", {})
    client.close()


@pytest.mark.parametrize("url", ["127.0.0.1:80", "ftp://host/x", ""])
def test_bad_url(url: str) -> None:
    with pytest.raises(ValueError, match="http"):
        ExtenderClient(url, 1.0)


def test_bad_answers(ext: Extender) -> None:
    client = ExtenderClient(ext.url, 1.0)
    ext.answers["x"] = lambda body: 404
    with pytest.raises(ExtenderError, match="status 404"):
        client.post("x", {})
    ext.answers["y"] = lambda body: {"fine": True}
    assert client.post("y", {"a": 1}) == {"fine": True}
    client.close()


async def test_extender_steers_placement_through_the_scheduler(
    tmp_path: Path, ext: Extender
) -> None:
    ext.answers["predicateVerb"] = lambda body: (
        {"status": "reserved for others", "code": 3} if body["node"]["Name"] == "n1" else {}
    )
    ext.answers["prioritizeVerb"] = lambda body: {
        "nodeScore": {n["Name"]: (100 if n["Name"] == "n3" else 0) for n in body["nodes"]}
    }
    arguments = {
        "extender.urlPrefix": ext.url,
        "extender.predicateVerb": "predicateVerb",
        "extender.prioritizeVerb": "prioritizeVerb",
    }
    config = conf(
        "enqueue, allocate",
        ["priority", "gang"],
        ["predicates", {"name": "extender", "arguments": arguments}],
    )
    c = await Cluster(tmp_path, config).start()
    await c.add(
        node("n1"),
        node("n2"),
        node("n3"),
        podgroup("j", 1),
        *[pod(f"j-{i}", group="j", cpu="1") for i in range(2)],
    )
    assert (await c.run()).bound == 2
    assert {await c.node_of(f"j-{i}") for i in range(2)} == {"n3"}
