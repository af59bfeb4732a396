"""Hostile simulator input: refused with the file, document, object and field, never a crash,
a traceback, a hang or gigabytes of memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from stromboli.core.api import yamlbounds
from stromboli.core.cli import main
from stromboli.core.simulate.loader import SimulationInputError, load

LAUGHS = "\n".join(
    [
        'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)),
    ]
)


def write(tmp_path: Path, text: str, name: str = "input.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(SimulationInputError) as caught:
        load([write(tmp_path, text)])
    return str(caught.value)


# --- YAML bounds ---------------------------------------------------------------------------------


def test_deep_nesting_is_refused_without_recursion(tmp_path: Path) -> None:
    message = refused(tmp_path, "a: " + "[" * 100_000 + "]" * 100_000)
    assert "input.yaml: line 1: nested more than 100 levels deep" in message


def test_nesting_at_the_limit_loads() -> None:
    depth = yamlbounds.MAX_DEPTH
    assert yamlbounds.load_documents("[" * depth + "]" * depth) is not None


def test_billion_laughs_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, LAUGHS)
    assert "aliases expand to more than 1,000,000 nodes" in message


def test_alias_that_deepens_past_the_limit_is_refused() -> None:
    text = "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 50 + "*a" + "]" * 50
    with pytest.raises(yamlbounds.YamlBoundsError, match="alias \\*a nests more than 100"):
        yamlbounds.load_documents(text)


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(yamlbounds.YamlBoundsError, match="recursive"):
        yamlbounds.load_documents("a: &a [1, *a]")


def test_small_aliases_still_work() -> None:
    assert yamlbounds.load_documents("a: &x {k: 1}\nb: [*x, *x]") == [
        {"a": {"k": 1}, "b": [{"k": 1}, {"k": 1}]}
    ]


def test_file_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("stromboli.core.simulate.loader.MAX_FILE_BYTES", 1024)
    message = refused(tmp_path, "# " + "x" * 2000)
    assert "larger than" in message and "input.yaml" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: " + "1" * 5000, "not valid YAML"),  # past Python's int-from-string limit
        ("when: 2020-13-45", "not valid YAML"),
        ("? [a]\n: 1", "unhashable key"),
        ("a: *nowhere", "undefined alias"),
        ("!!python/object:os.system x", "could not determine a constructor"),
        ("a: [", "not valid YAML"),
    ],
)
def test_malformed_yaml_is_a_loader_error(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in refused(tmp_path, text)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "input.yaml"
    path.write_bytes(b"kind: \xff\xfe")
    with pytest.raises(SimulationInputError, match="not UTF-8"):
        load([path])


# --- shapes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: []",
            'document 1: Queue "q": spec:',
        ),
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: []\nspec: {}",
            "document 1: Queue",
        ),
        (
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g}\n"
            "spec: 5",
            'PodGroup "g": spec:',
        ),
        (
            "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\n"
            "spec: {tasks: 7}",
            'Job "j": spec.tasks:',
        ),
        ("kind: List\napiVersion: v1\nitems: 3", "List: items: expected a list of objects"),
        ("- 1\n- 2", "document 1: expected a Kubernetes object (a mapping)"),
    ],
)
def test_wrong_shapes_name_the_field(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in refused(tmp_path, text)


# --- the command ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 100_000 + "]" * 100_000,
        LAUGHS,
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: []",
    ],
    ids=["deep", "laughs", "queue-spec-list"],
)
def test_simulate_prints_an_error_and_exits_non_zero(tmp_path: Path, text: str) -> None:
    result = CliRunner().invoke(main, ["simulate", str(write(tmp_path, text))])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("Error: ") and "input.yaml" in result.output


# --- durations -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "１0s", "1e400", "Infinity"])
def test_submit_at_must_be_a_finite_ascii_duration(tmp_path: Path, value: str) -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
        f"  annotations: {{sim.stromboli.dev/submit-at: '{value}'}}\n"
        "spec: {containers: [{name: c, image: x}]}\n"
    )
    message = refused(tmp_path, text)
    assert "Pod 'p': metadata.annotations[sim.stromboli.dev/submit-at]" in message
