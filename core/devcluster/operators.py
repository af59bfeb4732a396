"""Building the framework operators (KubeRay, the Kubeflow training-operator, Argo's
workflow-controller, Kubeflow Trainer) from their Go modules, for tests on the control plane.

Each operator is pinned by its own module under ``hack/operators/<name>/`` (``go.mod``,
``go.sum`` and a ``tools.go`` naming the main package), so its dependency graph is the
operator's own and not the control plane's. A build goes to

    ${STROMBOLI_CACHE:-~/.cache/stromboli}/operators/<name>-<version>-<hash>/
        bin/<binary>   the operator (CGO off, -trimpath, -ldflags "-s -w")
        crds/*.yaml    its CustomResourceDefinitions, copied from the module's zip in the Go
                       module cache (never kept in the repository)
        build.json     version, Go version, build seconds, binary size

``<hash>`` covers the three pin files, so a change of pins gets a fresh directory. Builds are
serialised per operator by a file lock, so two test sessions (or a benchmark and a test) that
need the same operator build it once; a binary is written under a temporary name and renamed
into place, so an interrupted build leaves nothing half-written.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from stromboli.core.devcluster.build import BuildError, repo_root

PIN_FILES = ("go.mod", "go.sum", "tools.go")
#: Builds run at the lowest CPU priority: the tests and other builds on the machine go first.
_NICE: tuple[str, ...] = ("nice", "-n", "19")


class OperatorBuildError(BuildError):
    """An operator could not be built, or its CRDs not found in its module."""


@dataclass(frozen=True)
class Operator:
    """Where an operator's main package and CRDs are in its Go module."""

    name: str
    module: str
    package: str
    binary: str
    #: Folders of the module (paths inside its zip) holding CRD manifests.
    crd_dirs: tuple[str, ...]
    #: (module, folder) of dependencies whose CRDs the operator needs served, at the version
    #: the operator's go.mod requires (Trainer watches JobSets).
    dependency_crds: tuple[tuple[str, str], ...] = ()

    @property
    def hack_dir(self) -> Path:
        return repo_root() / "hack" / "operators" / self.name


OPERATORS: dict[str, Operator] = {
    op.name: op
    for op in (
        Operator(
            "kuberay",
            "github.com/ray-project/kuberay/ray-operator",
            "github.com/ray-project/kuberay/ray-operator",
            "kuberay-operator",
            ("config/crd/bases",),
        ),
        Operator(
            "training-operator",
            "github.com/kubeflow/training-operator",
            "github.com/kubeflow/training-operator/cmd/training-operator.v1",
            "training-operator",
            ("manifests/base/crds",),
        ),
        Operator(
            "argo",
            "github.com/argoproj/argo-workflows/v4",
            "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller",
            "workflow-controller",
            ("manifests/base/crds/minimal",),
        ),
        Operator(
            "trainer",
            "github.com/kubeflow/trainer/v2",
            "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
            "trainer-controller-manager",
            ("manifests/base/crds",),
            (("sigs.k8s.io/jobset", "config/components/crd/bases"),),
        ),
    )
}


@dataclass(frozen=True)
class OperatorBuild:
    """A built operator in the cache."""

    operator: Operator
    version: str
    directory: Path

    @property
    def binary(self) -> Path:
        return self.directory / "bin" / self.operator.binary

    @property
    def crds(self) -> list[Path]:
        return sorted((self.directory / "crds").glob("*.yaml"))

    @property
    def record(self) -> dict[str, Any]:
        """What build.json says: version, go, build_seconds, binary_bytes."""
        data: dict[str, Any] = json.loads((self.directory / "build.json").read_text())
        return data

    def crd_sources(self) -> list[tuple[str, str, str]]:
        """(module, version, folder) of every CRD folder this build copies."""
        sources = [(self.operator.module, self.version, d) for d in self.operator.crd_dirs]
        go_mod = self.operator.hack_dir / "go.mod"
        for module, folder in self.operator.dependency_crds:
            sources.append((module, required_version(go_mod, module), folder))
        return sources

    def complete(self) -> bool:
        if not (os.access(self.binary, os.X_OK) and self.crds):
            return False
        try:
            return bool(self.record.get("crd_sources") == _spelled(self.crd_sources()))
        except (OSError, ValueError):
            return False


def cache_root() -> Path:
    return Path(os.environ.get("STROMBOLI_CACHE") or Path.home() / ".cache" / "stromboli")


def required_version(go_mod: Path, module: str) -> str:
    """The version of ``module`` that ``go_mod`` requires (one-line or block form)."""
    for raw in go_mod.read_text().splitlines():
        fields = raw.split("//")[0].split()
        if fields[:1] == ["require"]:
            fields = fields[1:]
        if len(fields) >= 2 and fields[0] == module and fields[1].startswith("v"):
            return fields[1]
    raise OperatorBuildError(f"{go_mod} does not require {module}")


def pin_hash(hack_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in PIN_FILES:
        path = hack_dir / name
        if not path.is_file():
            raise OperatorBuildError(f"{path} is missing: each operator is pinned by {PIN_FILES}")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def planned(name: str) -> OperatorBuild:
    """Where the build of operator ``name`` at its pinned version lives (built or not)."""
    try:
        operator = OPERATORS[name]
    except KeyError:
        raise OperatorBuildError(
            f"unknown operator {name!r}; known: {', '.join(sorted(OPERATORS))}"
        ) from None
    hack = operator.hack_dir
    version = required_version(hack / "go.mod", operator.module)
    directory = cache_root() / "operators" / f"{name}-{version}-{pin_hash(hack)}"
    return OperatorBuild(operator, version, directory)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(argv: list[str], cwd: Path, env: dict[str, str], log: IO[str] | None) -> str:
    """Run a go command, its output teed to ``log``; the output, or OperatorBuildError."""
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    if log is not None:
        log.write(f"$ {' '.join(argv)}\n{output}")
        log.flush()
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-40:])
        raise OperatorBuildError(
            f"{' '.join(argv[:3])} failed in {cwd} ({proc.returncode}):\n{tail}"
        )
    return proc.stdout


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = f"-mod=readonly -trimpath {env.get('GOFLAGS', '')}".strip()
    return env


def _spelled(sources: list[tuple[str, str, str]]) -> list[str]:
    return [f"{module}@{version}/{folder}" for module, version, folder in sources]


def _copy_crds(source: str, zip_path: Path, into: Path) -> int:
    """Copy the CRD manifests of ``module@version/folder`` from the module's zip to ``into``;
    how many."""
    wanted = source.rstrip("/") + "/"
    count = 0
    with zipfile.ZipFile(zip_path) as archive:
        for entry in archive.namelist():
            folder, _, base = entry.rpartition("/")
            if folder + "/" != wanted:
                continue
            if not base.endswith((".yaml", ".yml")) or base.startswith("kustomization"):
                continue
            (into / base).write_bytes(archive.read(entry))
            count += 1
    if count == 0:
        raise OperatorBuildError(f"no CRD manifests under {source} in {zip_path}")
    return count


def build_operator(
    name: str, *, log_path: str | Path | None = None, force: bool = False
) -> OperatorBuild:
    """Build operator ``name`` (a no-op when cached) and return where it is.

    Blocks while another process builds the same operator. The first build takes minutes
    (see hack/operators/README.md for the figures); ``STROMBOLI_BUILD_JOBS`` sets ``go build -p``.
    """
    build = planned(name)
    if build.complete() and not force:
        return build
    lock = build.directory.parent / f".{name}.lock"
    log = open(log_path, "a") if log_path else None  # noqa: SIM115
    try:
        with _locked(lock):
            if build.complete() and not force:
                return build  # another process built it while we waited
            _build(build, log, force)
    finally:
        if log is not None:
            log.close()
    return build


def _build(build: OperatorBuild, log: IO[str] | None, force: bool) -> None:
    go = os.environ.get("GO", "go")
    if shutil.which(go) is None:
        raise OperatorBuildError(f"{go!r} not found: Go is needed to build {build.operator.name}")
    env = _go_env()
    hack = build.operator.hack_dir
    bin_dir = build.directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    tmp = bin_dir / f".{build.operator.binary}.tmp.{os.getpid()}"
    jobs = os.environ.get("STROMBOLI_BUILD_JOBS", "2")
    if not force and os.access(build.binary, os.X_OK):
        # Only ever renamed into place whole, in a folder keyed by the pins: only the CRDs or
        # the record are missing (say, the CRD sources changed). Keep the first build's time.
        _copy_and_record(build, go, env, log, _previous_seconds(build))
        return
    started = time.monotonic()
    try:
        _run(
            [
                *_NICE,
                go,
                "build",
                "-p",
                jobs,
                "-ldflags",
                "-s -w",
                "-o",
                str(tmp),
                build.operator.package,
            ],
            hack,
            env,
            log,
        )
        tmp.rename(build.binary)
    finally:
        tmp.unlink(missing_ok=True)
    _copy_and_record(build, go, env, log, round(time.monotonic() - started, 1))


def _previous_seconds(build: OperatorBuild) -> float | None:
    try:
        seconds = build.record.get("build_seconds")
    except (OSError, ValueError):
        return None
    return seconds if isinstance(seconds, int | float) else None


def _copy_and_record(
    build: OperatorBuild, go: str, env: dict[str, str], log: IO[str] | None, seconds: float | None
) -> None:
    """Copy the CRDs into the build folder (whole, by rename) and write build.json."""
    hack = build.operator.hack_dir
    crd_tmp = build.directory / f".crds.tmp.{os.getpid()}"
    shutil.rmtree(crd_tmp, ignore_errors=True)
    crd_tmp.mkdir()
    sources = build.crd_sources()
    try:
        for module, version, folder in sources:
            download = [go, "mod", "download", "-json", f"{module}@{version}"]
            info = json.loads(_run(download, hack, env, log))
            _copy_crds(f"{module}@{version}/{folder}", Path(info["Zip"]), crd_tmp)
        shutil.rmtree(build.directory / "crds", ignore_errors=True)
        crd_tmp.rename(build.directory / "crds")
    finally:
        shutil.rmtree(crd_tmp, ignore_errors=True)
    go_version = _run([go, "env", "GOVERSION"], hack, env, None).strip()
    record = {
        "operator": build.operator.name,
        "module": build.operator.module,
        "version": build.version,
        "go": go_version,
        "build_seconds": seconds,
        "binary_bytes": build.binary.stat().st_size,
        "crd_sources": _spelled(sources),
    }
    (build.directory / "build.json").write_text(json.dumps(record, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m stromboli.core.devcluster.operators NAME...``: build, print each directory."""
    names = (argv if argv is not None else sys.argv[1:]) or sorted(OPERATORS)
    status = 0
    for name in names:
        try:
            build = build_operator(name, log_path=None)
        except OperatorBuildError as err:
            print(f"{name}: {err}", file=sys.stderr)
            status = 1
            continue
        print(f"{name}\t{build.version}\t{build.directory}\t{json.dumps(build.record)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
