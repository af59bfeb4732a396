"""Logging of the long-running commands: klog's ``-v`` levels, text and JSON lines, the start
line, and one line per scheduling decision at Volcano's default verbosity."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stromboli.core.logsetup import V, log_start, setup_logging, verbosity_of
from stromboli.core.scheduler.scheduler import DECISION_V
from tests.scheduler.builders import Cluster, conf, node, pod, podgroup


@pytest.fixture
def restore_root() -> Iterator[None]:
    """``setup_logging`` replaces the root handlers; put pytest's back afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def lines_at(verbosity: int, log_format: str, emit: list[tuple[int, str]]) -> list[str]:
    stream = io.StringIO()
    setup_logging(verbosity, log_format, stream)
    logger = logging.getLogger("stromboli.test")
    for level, message in emit:
        logger.log(level, message)
    return stream.getvalue().splitlines()


# -- levels -------------------------------------------------------------------------------------


def test_v_levels_sit_between_info_and_debug() -> None:
    assert V(0) == logging.INFO
    assert [V(n) for n in range(1, 5)] == [19, 18, 17, 16]
    assert V(5) == V(9) == logging.DEBUG
    assert V(-1) == logging.INFO
    assert [verbosity_of(V(n)) for n in range(5)] == [0, 1, 2, 3, 4]
    assert verbosity_of(logging.ERROR) == 0


@pytest.mark.parametrize("verbosity", [0, 1, 2, 3, 4, 5])
def test_minus_v_shows_levels_up_to_it_and_always_errors_and_warnings(
    verbosity: int, restore_root: None
) -> None:
    emit = [(V(n), f"v{n}") for n in range(6)] + [
        (logging.WARNING, "warned"),
        (logging.ERROR, "failed"),
    ]
    shown = [json.loads(line)["msg"] for line in lines_at(verbosity, "json", emit)]
    assert shown == [f"v{n}" for n in range(verbosity + 1)] + ["warned", "failed"]


# -- formats ------------------------------------------------------------------------------------


def test_json_lines_parse_and_carry_klog_fields(restore_root: None) -> None:
    stream = io.StringIO()
    setup_logging(3, "json", stream)
    logger = logging.getLogger("stromboli.test")
    logger.log(
        V(3), "Binding Task <%s> to node <%s>", "ns/p", "n1", extra={"fields": {"node": "n1"}}
    )
    logger.warning("careful")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("cycle failed")
    info, warning, error = (json.loads(line) for line in stream.getvalue().splitlines())
    assert info["msg"] == "Binding Task <ns/p> to node <n1>"
    assert (info["level"], info["v"], info["node"], info["logger"]) == (
        "info",
        3,
        "n1",
        "stromboli.test",
    )
    assert info["caller"].startswith("test_logging.py:")
    assert isinstance(info["ts"], float)
    assert (warning["level"], "v" in warning) == ("warning", False)
    assert error["level"] == "error"
    assert "RuntimeError: boom" in error["err"]


def test_text_lines_carry_a_klog_letter_and_key_values(restore_root: None) -> None:
    stream = io.StringIO()
    setup_logging(0, "text", stream)
    logger = logging.getLogger("stromboli.test")
    logger.info("hello", extra={"fields": {"a": "b c", "n": 2, "xs": ["x"], "flag": False}})
    logger.error("bad")
    hello, bad = stream.getvalue().splitlines()
    assert hello.endswith(' I stromboli.test: hello a="b c" n=2 xs=["x"] flag=false')
    assert bad.endswith(" E stromboli.test: bad")


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="--log-format: 'xml'"):
        setup_logging(0, "xml", io.StringIO())


def test_start_line_is_one_record_with_the_settings(restore_root: None) -> None:
    stream = io.StringIO()
    setup_logging(0, "json", stream)
    log_start(logging.getLogger("stromboli.test"), "thing", {"port": 8443, "names": ("a",)})
    (line,) = stream.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["msg"].startswith("starting thing ")
    assert (entry["component"], entry["port"], entry["names"]) == ("thing", 8443, ["a"])
    assert entry["caller"].startswith("test_logging.py:")


# -- the scheduler's decisions ------------------------------------------------------------------


async def test_each_binding_is_one_line_at_volcanos_default_verbosity(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert DECISION_V == 3  # Volcano's chart runs vc-scheduler at -v=3
    c = await Cluster(tmp_path, conf("enqueue, allocate", ["gang"], ["predicates"])).start()
    await c.add(
        node("n1", cpu="4"),
        podgroup("g", 2),
        pod("g-0", group="g", cpu="1"),
        pod("g-1", group="g", cpu="1"),
    )
    with caplog.at_level(V(3), logger="stromboli.core.scheduler.scheduler"):
        await c.run(3)
    lines = sorted(r.getMessage() for r in caplog.records if r.levelno == V(3))
    assert lines == [
        "Binding Task <default/g-0> to node <n1>",
        "Binding Task <default/g-1> to node <n1>",
    ]


async def test_decisions_are_not_logged_below_their_verbosity(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    c = await Cluster(tmp_path, conf("enqueue, allocate", ["gang"], ["predicates"])).start()
    await c.add(node("n1", cpu="4"), podgroup("g", 1), pod("g-0", group="g", cpu="1"))
    with caplog.at_level(V(2), logger="stromboli.core.scheduler.scheduler"):
        await c.run(3)
    assert await c.node_of("g-0") == "n1"
    assert not [r for r in caplog.records if "Binding Task" in r.getMessage()]


# -- the commands -------------------------------------------------------------------------------

LAUNCH = "import sys; from stromboli.core.cli import main; sys.argv[0] = 'stromboli'; main()"


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_scheduler_logs_its_start_line_as_json_before_connecting(tmp_path: Path) -> None:
    config = tmp_path / "volcano-scheduler.conf"
    config.write_text(conf("enqueue, allocate", ["gang", "usage"]))
    done = run_cli(
        "scheduler",
        "--log-format",
        "json",
        "--kubeconfig",
        str(tmp_path / "absent"),
        "--scheduler-conf",
        str(config),
        "--scheduler-configmap",
        "volcano-system/volcano-scheduler-configmap",
    )
    assert done.returncode == 1
    entries = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    skipped, start = entries
    assert skipped["level"] == "error"
    assert "Volcano's plugin 'usage' is not implemented by Stromboli; skipped" in skipped["msg"]
    assert start["component"] == "scheduler"
    assert start["actions"] == ["enqueue", "allocate"]
    assert start["tiers"] == [["gang"]]
    assert start["config_map"] == ["volcano-system", "volcano-scheduler-configmap"]
    assert start["strict_config"] is False
    assert "cannot read kubeconfig" in done.stderr.splitlines()[-1]


def test_scheduler_with_strict_config_refuses_before_connecting(tmp_path: Path) -> None:
    config = tmp_path / "s.conf"
    config.write_text(conf("allocate", ["gang", "task-topology"]))
    done = run_cli("scheduler", "--strict-config", "--scheduler-conf", str(config))
    assert done.returncode == 1
    assert "Volcano's plugin 'task-topology' is not implemented by Stromboli" in done.stderr
    assert "starting scheduler" not in done.stderr


@pytest.mark.parametrize("command", ["controller", "webhook-manager"])
def test_controller_and_webhook_log_a_start_line(command: str, tmp_path: Path) -> None:
    done = run_cli(command, "--log-format", "json", "--kubeconfig", str(tmp_path / "absent"))
    assert done.returncode != 0
    starts = [
        json.loads(line)
        for line in done.stderr.splitlines()
        if line.startswith("{") and '"starting ' in line
    ]
    assert len(starts) == 1
    assert starts[0]["component"] == command
    assert "healthz_address" in starts[0]
