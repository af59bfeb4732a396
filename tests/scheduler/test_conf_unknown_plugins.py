"""A Volcano configuration naming plugins, arguments or keys Stromboli lacks: skipped as
Volcano skips them, each one listed, and refused under ``strict`` (``--strict-config``)."""

from __future__ import annotations

import logging
import os
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.conf import ConfigError, ConfigSource, parse_config, read_config
from stromboli.core.scheduler.framework.plugin import PLUGINS
from stromboli.core.scheduler.server import SchedulerOptions, SchedulerServer
from stromboli.core.scheduler.volcanoconf import VOLCANO_ONLY_PLUGINS

from .builders import Cluster, conf, node, pod, podgroup

register_builtins()

#: Volcano's Helm default with the plugins a Volcano user may well have added.
VOLCANO_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.GPUSharingEnable: true
      predicate.resources: nvidia.com/gpu
      predicate.resources.nvidia.com/gpu.cpu: 4
      predicate.NodeAffinityEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: usage
    arguments:
      usage.weight: 5
  - name: task-topology
"""


def write(path: Path, text: str, mtime: int) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


# -- lenient reading (the scheduler process, as Volcano) ---------------------------------------


def test_volcano_plugins_we_lack_are_skipped_and_the_rest_kept() -> None:
    config, skipped = read_config(VOLCANO_CONF, "volcano-scheduler.conf")
    assert config.plugin_names() == [
        "priority",
        "gang",
        "conformance",
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
    ]
    plugins = [(s.owner, s.volcano) for s in skipped if not s.key]
    assert plugins == [("usage", True), ("task-topology", True)]
    usage = next(s for s in skipped if s.owner == "usage")
    assert usage.message == (
        "volcano-scheduler.conf: tiers[1].plugins[6]: Volcano's plugin 'usage' is not "
        "implemented by Stromboli; skipped"
    )


def test_volcano_arguments_we_do_not_read_are_skipped_and_named() -> None:
    config, skipped = read_config(VOLCANO_CONF)
    predicates = next(o for o in config.tiers[1] if o.name == "predicates")
    assert predicates.arguments.get("predicate.NodeAffinityEnable") is True
    assert predicates.arguments.get("predicate.GPUSharingEnable") is None
    arguments = [(s.owner, s.key, s.volcano) for s in skipped if s.key]
    assert arguments == [
        ("predicates", "predicate.GPUSharingEnable", True),
        ("predicates", "predicate.resources", True),
        ("predicates", "predicate.resources.nvidia.com/gpu.cpu", True),
    ]
    assert "argument 'predicate.GPUSharingEnable' of Volcano's predicates is not implemented" in (
        skipped[0].message
    )


def test_a_name_neither_knows_is_skipped_with_a_typo_hint() -> None:
    text = conf("allocate", ["gang", "gnag", {"name": "binpack", "arguments": {"binpak.cpu": 2}}])
    config, skipped = read_config(text)
    assert config.plugin_names() == ["gang", "binpack"]
    gnag, binpak = skipped
    assert (gnag.owner, gnag.key, gnag.volcano) == ("gnag", "", False)
    assert "unknown plugin 'gnag', not Volcano's either (a typo?)" in gnag.message
    assert (binpak.owner, binpak.key, binpak.volcano) == ("binpack", "binpak.cpu", False)
    assert "known arguments: binpack.cpu" in binpak.message


def test_unknown_switches_top_level_keys_and_action_configurations_are_skipped() -> None:
    text = (
        'actions: "allocate"\n'
        "tier: []\n"
        "tiers:\n- plugins:\n  - name: gang\n    enablePreemptible: false\n"
        "configurations:\n- name: alocate\n  arguments: {x: 1}\n"
        "- name: allocate\n  arguments: {predicateErrorCacheEnable: true, nope: 1}\n"
    )
    config, skipped = read_config(text, "s.conf")
    assert config.tiers[0][0].switches == {}
    assert config.action_args("allocate").get("predicateErrorCacheEnable") is True
    assert config.action_args("allocate").get("nope") is None
    assert [(s.owner, s.key) for s in skipped] == [
        ("", "tier"),
        ("gang", "enablePreemptible"),
        ("alocate", ""),
        ("allocate", "nope"),
    ]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('actions: "allocate, alocate"\n', "unknown action 'alocate'"),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - {name: gang, enableJobOrder: "yes"}\n',
            "enableJobOrder must be true or false",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - {name: gang, arguments: [1, 2]}\n',
            r"tiers\[0\]\.plugins\[0\] \(gang\): arguments must be a mapping",
        ),
        ('actions: "allocate"\ntiers: {plugins: []}\n', "'tiers' must be a list"),
        ('actions: "allocate"\nconfigurations: [allocate]\n', r"configurations\[0\] must be"),
        ('actions: "allocate"\ntiers: ' + "[" * 200 + "]" * 200 + "\n", "nested more than"),
        (
            "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
            + "".join(
                f"{c}: &{c} [{', '.join(['*' + chr(ord(c) - 1)] * 10)}]\n" for c in "bcdefgh"
            ),
            "aliases expand to more than",
        ),
    ],
)
def test_what_volcano_refuses_is_refused_even_when_lenient(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        read_config(text)


# -- strict reading (--strict-config, and parse_config's default) --------------------------------


def test_strict_refuses_a_volcano_plugin_we_lack_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"tiers\[1\]\.plugins\[6\]: Volcano's plugin 'usage'"):
        parse_config(VOLCANO_CONF, strict=True)


def test_strict_refuses_an_unimplemented_argument_naming_it() -> None:
    text = conf(
        "allocate", [{"name": "predicates", "arguments": {"predicate.ProportionalEnable": 1}}]
    )
    with pytest.raises(
        ConfigError, match=r"'predicate\.ProportionalEnable' of Volcano's predicates"
    ):
        parse_config(text)


def test_lenient_parse_config_keeps_what_it_can() -> None:
    config = parse_config(VOLCANO_CONF, strict=False)
    assert "usage" not in config.plugin_names()
    assert "binpack" in config.plugin_names()


def test_every_volcano_only_plugin_is_really_missing_here() -> None:
    assert not VOLCANO_ONLY_PLUGINS & set(PLUGINS)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(alphabet=string.ascii_letters + string.digits + "-._/", min_size=1, max_size=20),
        min_size=1,
        max_size=8,
    )
)
def test_any_plugin_names_are_kept_or_skipped_never_lost(names: list[str]) -> None:
    entries = "".join(f"  - name: '{n}'\n" for n in names)
    config, skipped = read_config(f'actions: "allocate"\ntiers:\n- plugins:\n{entries}')
    kept = config.plugin_names()
    assert kept == [n for n in names if n in PLUGINS]
    assert [s.owner for s in skipped] == [n for n in names if n not in PLUGINS]
    assert all(s.volcano == (s.owner in VOLCANO_ONLY_PLUGINS) for s in skipped)


# -- the process's configuration source --------------------------------------------------------


def test_config_source_skips_logs_each_and_counts_versions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    write(path, VOLCANO_CONF, 1000)
    with caplog.at_level(logging.ERROR, logger="stromboli.core.scheduler.conf"):
        source = ConfigSource(path)
    assert source.generation == 1
    assert [s.owner for s in source.skipped if not s.key] == ["usage", "task-topology"]
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert logged == [s.message for s in source.skipped]
    # A fixed file clears the list; the new version is a new generation.
    write(path, conf("allocate", ["gang"]), 2000)
    assert source.current().plugin_names() == ["gang"]
    assert (source.generation, source.skipped) == (2, [])


def test_strict_config_source_refuses_at_start_and_keeps_the_old_version_on_reload(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.conf"
    write(path, VOLCANO_CONF, 1000)
    with pytest.raises(ConfigError, match="'usage'"):
        ConfigSource(path, strict=True)
    write(path, conf("allocate", ["gang"]), 1000)
    source = ConfigSource(path, strict=True)
    write(path, conf("allocate", ["gang", "usage"]), 2000)
    assert source.current().plugin_names() == ["gang"]
    assert "Volcano's plugin 'usage'" in source.last_error
    assert source.generation == 1


async def test_a_scheduler_with_an_unknown_plugin_still_schedules(tmp_path: Path) -> None:
    text = conf("enqueue, allocate", ["priority", "gang", "task-topology"], ["predicates", "nope"])
    c = await Cluster(tmp_path, text).start()
    assert [s.owner for s in c.config.skipped] == ["task-topology", "nope"]
    await c.add(
        node("n1", cpu="4"),
        podgroup("g", 2),
        *[pod(f"g-{i}", group="g", cpu="1") for i in range(2)],
    )
    await c.run(3)
    assert await c.node_of("g-0") == "n1"
    assert await c.node_of("g-1") == "n1"


# -- the scheduler process: metric and events, again on each new version ------------------------


async def test_server_reports_skipped_names_as_events_and_metric_per_version(
    tmp_path: Path,
) -> None:
    path = tmp_path / "volcano-scheduler.conf"
    write(path, VOLCANO_CONF, 1000)
    store = MemoryStore(VirtualClock(1000.0))
    server = SchedulerServer(
        store,
        SchedulerOptions(
            scheduler_conf=str(path),
            listen_address="",
            healthz_address="",
            config_map=("volcano-system", "volcano-scheduler-configmap"),
        ),
    )
    await server.report_config()
    assert await server.events.flush(5)  # the server writes events in the background
    events = (await store.list("v1", "Event", "volcano-system")).items
    reasons = sorted((e["reason"], e["type"]) for e in events)
    assert reasons == [("UnknownConfiguration", "Warning")] * 3 + [("UnknownPlugin", "Warning")] * 2
    assert {e["involvedObject"]["name"] for e in events} == {"volcano-scheduler-configmap"}
    assert "uid" not in events[0]["involvedObject"]  # no such ConfigMap here: by name only
    text = server.metrics.exposition().decode()
    assert 'stromboli_scheduler_config_skipped{key="",owner="usage",volcano="true"} 1.0' in text
    # A fixed version clears the metric and posts nothing new.
    write(path, conf("allocate", ["gang"]), 2000)
    server.config.current()
    await server.report_config()
    assert await server.events.flush(5)
    assert "stromboli_scheduler_config_skipped{" not in server.metrics.exposition().decode()
    assert len((await store.list("v1", "Event", "volcano-system")).items) == len(events)


async def test_server_without_a_config_map_still_exports_the_metric(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    write(path, conf("allocate", ["gang", "rescheduling"]), 1000)
    store = MemoryStore(VirtualClock(1000.0))
    server = SchedulerServer(
        store, SchedulerOptions(scheduler_conf=str(path), listen_address="", healthz_address="")
    )
    await server.report_config()
    assert not (await store.list("v1", "Event")).items
    assert 'owner="rescheduling"' in server.metrics.exposition().decode()


def test_an_oversized_file_is_refused_without_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stromboli.core.scheduler import conf as conf_module

    path = tmp_path / "s.conf"
    write(path, conf("allocate", ["gang"]) + "#" * 200, 1000)
    monkeypatch.setattr(conf_module, "MAX_FILE_BYTES", 100)
    with pytest.raises(ConfigError, match="over the 100-byte limit"):
        ConfigSource(path)
