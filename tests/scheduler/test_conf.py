"""The scheduler configuration file (reference §3.2) and its hot reload."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stromboli.core.scheduler.builtins import register_builtins
from stromboli.core.scheduler.conf import (
    DEFAULT_CONFIG,
    ConfigError,
    ConfigSource,
    load_config,
    parse_config,
)
from stromboli.core.scheduler.framework.arguments import Arguments
from stromboli.core.scheduler.framework.options import SWITCHES, PluginOption
from stromboli.core.scheduler.framework.plugin import PLUGINS, Plugin

from .builders import BASIC_CONF, conf


@pytest.fixture
def default_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-ins for default-config plugins that are not registered yet."""
    register_builtins()
    for name in ("predicates", "nodeorder"):
        if name not in PLUGINS:
            monkeypatch.setitem(PLUGINS, name, type(f"Fake_{name}", (Plugin,), {"name": name}))


# -- the default configuration ---------------------------------------------------------------


def test_default_config_matches_volcano(default_plugins: None) -> None:
    cfg = parse_config(DEFAULT_CONFIG)
    assert cfg.actions == ["enqueue", "allocate", "backfill"]
    assert [[o.name for o in tier] for tier in cfg.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]
    assert cfg.plugin_names()[0] == "priority"


def test_config_source_without_path_uses_the_default(default_plugins: None) -> None:
    source = ConfigSource(None)
    assert source.current().actions == ["enqueue", "allocate", "backfill"]
    assert source.current().source == "<default>"


def test_basic_config_parses() -> None:
    cfg = parse_config(BASIC_CONF)
    assert cfg.plugin_names() == [
        "priority",
        "gang",
        "conformance",
        "overcommit",
        "drf",
        "proportion",
    ]


def test_actions_are_comma_separated_and_trimmed() -> None:
    cfg = parse_config(conf(" allocate ,backfill,  enqueue", ["gang"]))
    assert cfg.actions == ["allocate", "backfill", "enqueue"]


def test_tiers_may_be_empty() -> None:
    cfg = parse_config('actions: "allocate"\n')
    assert cfg.tiers == []


# -- errors name the bad key -----------------------------------------------------------------


def test_unknown_action_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown action 'alocate'"):
        parse_config(conf("enqueue, alocate", ["gang"]))


def test_unknown_plugin_is_named_with_its_position() -> None:
    with pytest.raises(ConfigError, match=r"tiers\[1\]\.plugins\[0\].*unknown plugin 'gnag'"):
        parse_config(conf("allocate", ["priority"], ["gnag"]))


def test_unknown_switch_is_named() -> None:
    text = conf("allocate", [{"name": "gang", "enablePreemptible": False}])
    with pytest.raises(ConfigError, match=r"\(gang\): unknown key 'enablePreemptible'"):
        parse_config(text)


def test_switch_must_be_boolean() -> None:
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: "no"\n'
    with pytest.raises(ConfigError, match="enableJobOrder must be true or false"):
        parse_config(text)


def test_unknown_argument_is_named() -> None:
    text = conf("enqueue", [{"name": "overcommit", "arguments": {"overcommit-factr": 2}}])
    with pytest.raises(ConfigError, match="unknown argument 'overcommit-factr'"):
        parse_config(text)


def test_known_argument_is_accepted() -> None:
    text = conf("enqueue", [{"name": "overcommit", "arguments": {"overcommit-factor": 2.5}}])
    option = parse_config(text).tiers[0][0]
    assert option.arguments.get_float("overcommit-factor", 1.2) == 2.5


def test_plugin_without_arguments_rejects_any() -> None:
    text = conf("allocate", [{"name": "gang", "arguments": {"anything": 1}}])
    with pytest.raises(ConfigError, match="unknown argument 'anything'"):
        parse_config(text)


def test_unknown_top_level_key_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown key 'tier'"):
        parse_config('actions: "allocate"\ntier: []\n')


def test_actions_must_be_a_string() -> None:
    with pytest.raises(ConfigError, match="'actions'"):
        parse_config("actions: [allocate]\n")


def test_missing_actions_is_an_error() -> None:
    with pytest.raises(ConfigError, match="'actions'"):
        parse_config("tiers: []\n")


def test_plugin_needs_a_name() -> None:
    with pytest.raises(ConfigError, match=r"tiers\[0\]\.plugins\[0\]: each plugin needs a 'name'"):
        parse_config('actions: "allocate"\ntiers:\n- plugins:\n  - enableJobOrder: true\n')


def test_tier_needs_a_plugins_list() -> None:
    with pytest.raises(ConfigError, match=r"tiers\[0\] must be a mapping"):
        parse_config('actions: "allocate"\ntiers:\n- gang\n')


def test_not_yaml_is_an_error() -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse_config('actions: "allocate\n  : [')


def test_document_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        parse_config("- allocate\n")


def test_action_configuration_unknown_action() -> None:
    text = 'actions: "allocate"\nconfigurations:\n- name: alocate\n  arguments: {}\n'
    with pytest.raises(ConfigError, match=r"configurations\[0\]: unknown action 'alocate'"):
        parse_config(text)


def test_action_configuration_unknown_argument() -> None:
    text = (
        'actions: "allocate"\nconfigurations:\n- name: allocate\n'
        "  arguments: {predicateErrorCache: true}\n"
    )
    with pytest.raises(ConfigError, match="unknown argument 'predicateErrorCache'"):
        parse_config(text)


def test_action_configuration_arguments() -> None:
    text = (
        'actions: "allocate"\nconfigurations:\n- name: allocate\n'
        "  arguments: {predicateErrorCacheEnable: false}\n"
    )
    cfg = parse_config(text)
    assert cfg.action_args("allocate").get_bool("predicateErrorCacheEnable", True) is False
    # Unconfigured actions get empty arguments, so defaults apply.
    assert cfg.action_args("backfill").get_bool("predicateErrorCacheEnable", True) is True


def test_error_names_the_source() -> None:
    with pytest.raises(ConfigError, match=r"^/etc/volcano\.conf: "):
        parse_config('actions: "nope"\n', "/etc/volcano.conf")


# -- proportion and hierarchical drf -----------------------------------------------------------


def test_proportion_and_hierarchical_drf_cannot_share_a_tier() -> None:
    text = conf("allocate", ["proportion", {"name": "drf", "enableHierarchy": True}])
    with pytest.raises(ConfigError, match=r"tiers\[0\]: proportion and drf with enableHierarchy"):
        parse_config(text)


def test_proportion_and_hierarchical_drf_in_different_tiers() -> None:
    text = conf("allocate", ["proportion"], [{"name": "drf", "enableHierarchy": True}])
    cfg = parse_config(text)
    assert cfg.tiers[1][0].hierarchy


def test_proportion_and_plain_drf_share_a_tier() -> None:
    cfg = parse_config(conf("allocate", ["proportion", "drf"]))
    assert not cfg.tiers[0][1].hierarchy


# -- switches ----------------------------------------------------------------------------------


def option(**switches: bool) -> PluginOption:
    return PluginOption("x", Arguments("x"), switches)


def test_every_switch_defaults_on() -> None:
    opt = option()
    assert all(opt.enabled(point) for point in SWITCHES)
    assert not opt.hierarchy


def test_points_without_switch_are_always_on() -> None:
    assert option(enableJobOrder=False).enabled("job_valid")


@pytest.mark.parametrize(
    ("switch", "points"),
    [
        ("enableJobOrder", {"job_order"}),
        ("enableJobEnqueued", {"job_enqueueable", "job_enqueued"}),
        ("enablePredicate", {"predicate", "pre_predicate"}),
        ("enableNodeOrder", {"node_order", "batch_node_order"}),
        ("enableJobStarving", {"job_starving"}),
        ("enableQueueOrder", {"queue_order"}),
        ("enabledOverused", {"overused"}),
        ("enabledAllocatable", {"allocatable"}),
        ("enablePreemptable", {"preemptable"}),
    ],
)
def test_switch_turns_off_exactly_its_points(switch: str, points: set[str]) -> None:
    opt = option(**{switch: False})
    off = {point for point in SWITCHES if not opt.enabled(point)}
    assert off == points


def test_switches_are_parsed_per_plugin() -> None:
    text = conf("allocate", [{"name": "gang", "enableJobOrder": False}, "priority"])
    gang, priority = parse_config(text).tiers[0]
    assert not gang.enabled("job_order")
    assert gang.enabled("job_ready")
    assert priority.enabled("job_order")


# -- files and hot reload ----------------------------------------------------------------------


def write(path: Path, text: str, stamp: float) -> None:
    path.write_text(text)
    os.utime(path, (stamp, stamp))


def test_load_config_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read scheduler configuration"):
        load_config(tmp_path / "absent.conf")


def test_invalid_file_at_start_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    path.write_text('actions: "allocate, nope"\n')
    with pytest.raises(ConfigError, match="unknown action 'nope'"):
        ConfigSource(path)


def test_hot_reload_picks_up_a_valid_change(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    write(path, conf("enqueue, allocate", ["gang"]), 1000)
    source = ConfigSource(path)
    assert source.current().actions == ["enqueue", "allocate"]
    write(path, conf("allocate, backfill", ["gang"], ["drf"]), 2000)
    cfg = source.current()
    assert cfg.actions == ["allocate", "backfill"]
    assert cfg.plugin_names() == ["gang", "drf"]
    assert source.last_error == ""


def test_hot_reload_keeps_old_config_when_new_file_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    write(path, conf("enqueue, allocate", ["gang"]), 1000)
    source = ConfigSource(path)
    before = source.current()
    write(path, conf("enqueue, alocate", ["gang"]), 2000)
    assert source.current() is before
    assert "unknown action 'alocate'" in source.last_error
    # Fixing the file brings the new version in and clears the error.
    write(path, conf("allocate", ["gang"]), 3000)
    assert source.current().actions == ["allocate"]
    assert source.last_error == ""


def test_hot_reload_ignores_an_unchanged_file(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    write(path, conf("allocate", ["gang"]), 1000)
    source = ConfigSource(path)
    first = source.current()
    assert source.current() is first


def test_deleted_file_keeps_the_config(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    write(path, conf("allocate", ["gang"]), 1000)
    source = ConfigSource(path)
    first = source.current()
    path.unlink()
    assert source.current() is first
