"""``stromboli simulate --example NAME``: the packaged examples, found and listed from their own
header comments, and run without a checkout path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from stromboli.core.cli import main
from stromboli.core.cli.examples import (
    ExampleNotFound,
    commands,
    examples_dir,
    find_example,
    header,
    listing,
    packaged_examples,
)

ROOT = Path(__file__).resolve().parents[2]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


# --- header parsing ------------------------------------------------------------------------


def test_header_stops_at_the_first_line_that_is_not_a_comment() -> None:
    assert header("# One.\n#\n#  two\napiVersion: v1\n# later\n") == ["One.", "", "two"]


def test_commands_join_backslash_continuations() -> None:
    lines = [
        "Intro.",
        "stromboli simulate examples/a.yaml \\",
        "    --scheduler-conf examples/a-conf.yaml",
        "stromboli simulate examples/a.yaml --max-time 1m",
        "kubectl apply -f examples/a.yaml",
    ]
    assert commands(lines) == [
        "stromboli simulate examples/a.yaml --scheduler-conf examples/a-conf.yaml",
        "stromboli simulate examples/a.yaml --max-time 1m",
    ]


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40)))
def test_commands_are_only_simulate_lines_whatever_the_header(lines: list[str]) -> None:
    for command in commands(lines):
        assert command.startswith("stromboli simulate ")


# --- a folder of examples ------------------------------------------------------------------


def test_a_file_is_an_example_only_when_its_header_runs_it(tmp_path: Path) -> None:
    write(
        tmp_path, "a.yaml", "# Alpha runs.\n#\n#   stromboli simulate examples/a.yaml\nkind: Node\n"
    )
    write(tmp_path, "a-conf.yaml", "# Configuration for a.\nactions: allocate\n")
    write(tmp_path, "b.yaml", "# Mentions another.\n#   stromboli simulate examples/a.yaml\n")
    assert [e.name for e in packaged_examples(tmp_path)] == ["a"]


def test_commands_are_rewritten_for_the_installed_copy(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.yaml",
        "# Alpha: first. More text\n# on two lines.\n#\n"
        "#   stromboli simulate examples/a.yaml --scheduler-conf examples/a-conf.yaml\n",
    )
    (example,) = packaged_examples(tmp_path)
    assert example.title == "Alpha: first."
    assert example.commands == (
        f"stromboli simulate --example a --scheduler-conf {tmp_path / 'a-conf.yaml'}",
    )
    assert example.path == tmp_path / "a.yaml"


def test_a_title_without_a_full_stop_is_the_whole_first_paragraph(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.yaml",
        "# Alpha\n# continues\n#\n# Later.\n#  stromboli simulate examples/a.yaml\n",
    )
    assert packaged_examples(tmp_path)[0].title == "Alpha continues"


def test_examples_in_the_listed_folders_are_named_by_their_path(tmp_path: Path) -> None:
    for sub in ("gpu", "frameworks", "pipelines", "other"):
        (tmp_path / sub).mkdir()
    write(tmp_path, "a.yaml", "# Top.\n#  stromboli simulate examples/a.yaml\n")
    write(
        tmp_path,
        "gpu/mig.yaml",
        "# MIG.\n#  stromboli simulate examples/gpu/mig.yaml --scheduler-conf "
        "examples/gpu/mig-conf.yaml\n",
    )
    write(tmp_path, "gpu/mig-conf.yaml", "# Its configuration.\nactions: allocate\n")
    write(
        tmp_path,
        "frameworks/ray.yaml",
        "# Ray.\n#  stromboli simulate examples/frameworks/ray.yaml\n",
    )
    # Only the listed folders: a pipeline definition or another folder is not an example.
    write(tmp_path, "pipelines/p.yaml", "# P.\n#  stromboli simulate examples/pipelines/p.yaml\n")
    write(tmp_path, "other/o.yaml", "# O.\n#  stromboli simulate examples/other/o.yaml\n")
    examples = {e.name: e for e in packaged_examples(tmp_path)}
    assert list(examples) == ["a", "gpu/mig", "frameworks/ray"]
    assert examples["gpu/mig"].commands == (
        f"stromboli simulate --example gpu/mig --scheduler-conf {tmp_path / 'gpu/mig-conf.yaml'}",
    )
    assert find_example("gpu/mig.yaml", tmp_path).path == tmp_path / "gpu/mig.yaml"
    with pytest.raises(ExampleNotFound):
        find_example("mig", tmp_path)


def test_an_unknown_name_lists_the_names_there_are(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "# A.\n#  stromboli simulate examples/a.yaml\n")
    with pytest.raises(ExampleNotFound, match=r"no packaged example is called 'zz'; there are a$"):
        find_example("zz", tmp_path)
    assert find_example("a.yaml", tmp_path).name == "a"


# --- the package's own examples ------------------------------------------------------------


def test_the_package_holds_the_checkouts_examples() -> None:
    assert examples_dir().resolve() == (ROOT / "examples").resolve()
    names = {e.name for e in packaged_examples()}
    assert {"gang-waits", "queues-by-weight", "preemption", "vcjob-complete"} <= names
    # Files that only accompany an example are not offered as one.
    assert not names & {"binpack-conf", "preempt-conf", "queue-policy"}


def test_the_gpu_and_framework_examples_are_packaged() -> None:
    names = {e.name for e in packaged_examples()}
    assert {"gpu/mig", "gpu/fragmentation", "frameworks/pytorchjob", "frameworks/workflow"} <= names
    assert not {n for n in names if n.endswith("-conf") or n.startswith("pipelines/")}
    on_disk = {
        p.relative_to(ROOT / "examples").as_posix().removesuffix(".yaml")
        for sub in ("gpu", "frameworks")
        for p in (ROOT / "examples" / sub).glob("*.yaml")
        if not p.name.endswith("-conf.yaml")
    }
    assert on_disk <= names


def test_every_file_a_listed_command_names_is_installed() -> None:
    for example in packaged_examples():
        for command in example.commands:
            paths = [word for word in command.split() if word.endswith(".yaml")]
            for path in paths:
                assert Path(path).is_file(), f"{example.name}: {command}"


def test_the_listing_names_each_example_and_how_to_run_it() -> None:
    text = listing()
    assert "gang-waits: A gang that must wait for room.\n" in text
    assert "    stromboli simulate --example gang-waits\n" in text
    assert f"--scheduler-conf {examples_dir() / 'preempt-conf.yaml'}" in text


# --- the command ---------------------------------------------------------------------------


def test_example_list_prints_the_listing() -> None:
    result = CliRunner().invoke(main, ["simulate", "--example", "list"])
    assert result.exit_code == 0, result.output
    assert result.output == listing() + "\n"


def test_example_runs_the_packaged_file() -> None:
    result = CliRunner().invoke(main, ["simulate", "--example", "gang-waits", "-o", "json"])
    assert result.exit_code == 0, result.output
    final = json.loads(result.stdout)
    pods = [o for o in final["items"] if o["kind"] == "Pod"]
    assert len(pods) == 6
    assert all(p["spec"].get("nodeName") for p in pods)


def test_a_gpu_example_runs_by_its_path_with_the_configuration_it_names() -> None:
    (command,) = find_example("gpu/mig").commands
    args = command.split()[2:]  # "stromboli simulate" dropped
    assert args[:2] == ["--example", "gpu/mig"]
    result = CliRunner().invoke(main, ["simulate", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    pods = {
        o["metadata"]["name"]: o for o in json.loads(result.stdout)["items"] if o["kind"] == "Pod"
    }
    # The header's story: every pod gets a MIG instance but "huge", larger than any geometry.
    assert not pods["huge"]["spec"].get("nodeName")
    assert all(p["spec"].get("nodeName") == "mig-node" for n, p in pods.items() if n != "huge")


def test_example_with_files_simulates_both(tmp_path: Path) -> None:
    extra = write(
        tmp_path,
        "extra.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-extra}\n"
        'status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}\n',
    )
    result = CliRunner().invoke(
        main, ["simulate", "--example", "gang-waits", str(extra), "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    nodes = {
        o["metadata"]["name"] for o in json.loads(result.stdout)["items"] if o["kind"] == "Node"
    }
    assert nodes == {"node-a", "node-b", "node-extra"}


def test_an_unknown_example_is_a_usage_error_naming_the_choices() -> None:
    result = CliRunner().invoke(main, ["simulate", "--example", "gang-wait"])
    assert result.exit_code == 2
    assert "no packaged example is called 'gang-wait'" in result.output
    assert "gang-waits" in result.output


def test_nothing_to_simulate_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["simulate"])
    assert result.exit_code == 2
    assert "--example NAME" in result.output
