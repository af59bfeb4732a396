"""The operator build cache (core/devcluster/operators.py), without running Go: pins read from
go.mod, the cache directory keyed by the pins, CRDs copied from a module zip, a complete build
found without a build, and errors that name what is missing."""

from __future__ import annotations

import json
import os
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from stromboli.core.devcluster import operators as ops
from stromboli.core.devcluster.operators import (
    OPERATORS,
    OperatorBuild,
    OperatorBuildError,
    build_operator,
    pin_hash,
    planned,
    required_version,
)


def test_every_operator_is_pinned_in_hack_at_the_version_its_go_mod_requires() -> None:
    expected = {
        "kuberay": "v1.5.0",
        "training-operator": "v1.8.1",
        "argo": "v4.0.5",
        "trainer": "v2.0.0",
    }
    for name, version in expected.items():
        build = planned(name)
        assert build.version == version
        assert build.directory.name == f"{name}-{version}-{pin_hash(OPERATORS[name].hack_dir)}"
        tools = (OPERATORS[name].hack_dir / "tools.go").read_text()
        assert f'_ "{OPERATORS[name].package}"' in tools  # what go mod tidy keeps


@pytest.mark.parametrize(
    "text",
    [
        "module m\n\nrequire example.com/op v1.2.3\n",
        "module m\n\nrequire (\n\texample.com/other v0.1.0 // indirect\n"
        "\texample.com/op v1.2.3\n)\n",
        "module m\nrequire example.com/op v1.2.3 // a comment\n",
    ],
)
def test_required_version_reads_one_line_and_block_requires(tmp_path: Path, text: str) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text(text)
    assert required_version(go_mod, "example.com/op") == "v1.2.3"


def test_a_module_not_required_is_an_error_naming_it(tmp_path: Path) -> None:
    go_mod = tmp_path / "go.mod"
    go_mod.write_text("module m\n\nrequire example.com/op/v2 v2.0.0\n")
    with pytest.raises(OperatorBuildError, match=r"does not require example\.com/op$"):
        required_version(go_mod, "example.com/op")


def test_the_cache_directory_changes_with_any_pin_file(tmp_path: Path) -> None:
    for name in ops.PIN_FILES:
        (tmp_path / name).write_text(f"{name}\n")
    before = pin_hash(tmp_path)
    for name in ops.PIN_FILES:
        original = (tmp_path / name).read_text()
        (tmp_path / name).write_text(original + "changed\n")
        assert pin_hash(tmp_path) != before, name
        (tmp_path / name).write_text(original)
    assert pin_hash(tmp_path) == before
    (tmp_path / "tools.go").unlink()
    with pytest.raises(OperatorBuildError, match=r"tools\.go is missing"):
        pin_hash(tmp_path)


def test_an_unknown_operator_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(OperatorBuildError, match="unknown operator 'spark'; known: argo, kuberay"):
        planned("spark")


def test_crds_are_copied_from_the_named_folder_of_the_module_zip_only(tmp_path: Path) -> None:
    archive = tmp_path / "demo.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        prefix = "example.com/demo@v0.1.0/"
        zf.writestr(f"{prefix}config/crd/demo.io_things.yaml", "kind: CustomResourceDefinition\n")
        zf.writestr(f"{prefix}config/crd/kustomization.yaml", "resources: []\n")
        zf.writestr(f"{prefix}config/crd/patches/demo.io_patch.yaml", "patch: true\n")
        zf.writestr(f"{prefix}config/samples/thing.yaml", "kind: Thing\n")
        zf.writestr(f"{prefix}config/crd/README.md", "docs\n")
    into = tmp_path / "crds"
    into.mkdir()
    assert ops._copy_crds("example.com/demo@v0.1.0/config/crd", archive, into) == 1
    assert [p.name for p in into.iterdir()] == ["demo.io_things.yaml"]


def test_a_module_zip_without_crds_is_an_error_naming_the_folder(tmp_path: Path) -> None:
    archive = tmp_path / "demo.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("example.com/demo@v0.1.0/main.go", "package main\n")
    with pytest.raises(
        OperatorBuildError,
        match=r"no CRD manifests under example\.com/demo@v0\.1\.0/config/crd in ",
    ):
        ops._copy_crds("example.com/demo@v0.1.0/config/crd", archive, tmp_path)


def test_a_complete_build_is_found_without_running_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STROMBOLI_CACHE", str(tmp_path))
    monkeypatch.setenv("GO", str(tmp_path / "no-such-go"))  # any build would fail
    build = planned("kuberay")
    (build.directory / "bin").mkdir(parents=True)
    build.binary.write_text("#!/bin/sh\n")
    build.binary.chmod(0o755)
    (build.directory / "crds").mkdir()
    (build.directory / "crds" / "ray.io_rayclusters.yaml").write_text("kind: CRD\n")
    record = {
        "version": "v1.5.0",
        "build_seconds": 1.0,
        "binary_bytes": 10,
        "crd_sources": ["github.com/ray-project/kuberay/ray-operator@v1.5.0/config/crd/bases"],
    }
    (build.directory / "build.json").write_text(json.dumps(record))
    found = build_operator("kuberay")
    assert found.directory == build.directory and found.record == record
    # Half a build (no CRDs) is not complete: it is built again, and here Go is missing.
    os.unlink(build.directory / "crds" / "ray.io_rayclusters.yaml")
    with pytest.raises(
        OperatorBuildError, match="no-such-go' not found: Go is needed to build kuberay"
    ):
        build_operator("kuberay")


FAKE_GO = """#!{python}
import json, sys, time, pathlib
log = pathlib.Path({log!r})
args = sys.argv[1:]
with log.open("a") as fh:
    fh.write(" ".join(args[:2]) + "\\n")
if args[0] == "build":
    time.sleep(0.5)  # long enough for a second builder to arrive and wait
    out = pathlib.Path(args[args.index("-o") + 1])
    out.write_text("#!/bin/sh\\n")
    out.chmod(0o755)
elif args[:2] == ["mod", "download"]:
    print(json.dumps({{"Zip": {zip!r}}}))
elif args[:2] == ["env", "GOVERSION"]:
    print("go0.0-fake")
"""


def test_two_builders_at_once_build_once_and_both_get_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "ray.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        prefix = "github.com/ray-project/kuberay/ray-operator@v1.5.0/config/crd/bases/"
        zf.writestr(f"{prefix}ray.io_rayclusters.yaml", "kind: CustomResourceDefinition\n")
    calls = tmp_path / "calls.log"
    go = tmp_path / "go"
    go.write_text(FAKE_GO.format(python=sys.executable, log=str(calls), zip=str(archive)))
    go.chmod(0o755)
    monkeypatch.setenv("STROMBOLI_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GO", str(go))
    monkeypatch.setattr(ops, "_NICE", ())  # the fake go needs no nice
    results: list[OperatorBuild] = []
    threads = [
        threading.Thread(target=lambda: results.append(build_operator("kuberay"))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 2 and results[0].directory == results[1].directory
    assert calls.read_text().splitlines().count("build -p") == 1
    build = results[0]
    assert build.complete()
    assert [p.name for p in build.crds] == ["ray.io_rayclusters.yaml"]
    assert build.record["go"] == "go0.0-fake" and build.record["version"] == "v1.5.0"
    assert build.record["binary_bytes"] == build.binary.stat().st_size
    assert not list(build.binary.parent.glob(".*.tmp.*"))  # nothing half-written left


def test_trainer_also_copies_the_jobset_crds_at_the_version_its_go_mod_requires() -> None:
    sources = planned("trainer").crd_sources()
    assert sources == [
        ("github.com/kubeflow/trainer/v2", "v2.0.0", "manifests/base/crds"),
        ("sigs.k8s.io/jobset", "v0.8.2", "config/components/crd/bases"),
    ]


def test_a_build_whose_binary_exists_only_copies_crds_and_keeps_its_build_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "ray.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        prefix = "github.com/ray-project/kuberay/ray-operator@v1.5.0/config/crd/bases/"
        zf.writestr(f"{prefix}ray.io_rayjobs.yaml", "kind: CustomResourceDefinition\n")
    calls = tmp_path / "calls.log"
    go = tmp_path / "go"
    go.write_text(FAKE_GO.format(python=sys.executable, log=str(calls), zip=str(archive)))
    go.chmod(0o755)
    monkeypatch.setenv("STROMBOLI_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GO", str(go))
    build = planned("kuberay")
    (build.directory / "bin").mkdir(parents=True)
    build.binary.write_text("#!/bin/sh\n")
    build.binary.chmod(0o755)
    (build.directory / "build.json").write_text(json.dumps({"build_seconds": 152.0}))
    found = build_operator("kuberay")
    assert "build -p" not in calls.read_text()
    assert found.complete() and found.record["build_seconds"] == 152.0
    assert [p.name for p in found.crds] == ["ray.io_rayjobs.yaml"]
