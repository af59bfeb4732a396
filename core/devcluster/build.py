"""Locating (and if needed building) the control-plane binaries.

The binaries come from ``hack/build-control-plane.sh``, which builds them from the Go module
proxy at the versions pinned in ``hack/go.mod`` and caches them under
``~/.cache/stromboli/controlplane/<version>/bin``. ``STROMBOLI_CONTROLPLANE_BIN`` points at an
existing bin directory instead (no build).

The script and the pins are package data (``stromboli/hack``, a link to the checkout's
``hack/``), so a wheel installed with pip builds the same binaries into the same cache
directory as a checkout does: the directory's name hashes the contents of ``go.mod`` and
``go.sum``, not where they lie.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BIN_ENV = "STROMBOLI_CONTROLPLANE_BIN"
BINARY_NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


class BuildError(RuntimeError):
    """The control plane could not be built or found."""


def repo_root() -> Path:
    """The source checkout this package lives in (editable installs only)."""
    return Path(__file__).resolve().parents[2]


def hack_dir() -> Path:
    """The folder holding ``go.mod``, ``go.sum`` and the build script, wherever the package is
    installed (the checkout's ``hack/`` in an editable install)."""
    from importlib.resources import files

    folder = files("stromboli") / "hack"
    # Go and bash need a real directory; pip installs unpacked, so this holds unless the
    # package is imported from a zip archive.
    if not isinstance(folder, Path):
        raise BuildError(
            f"the package's hack/ folder is not a directory on disk ({folder!r}): install "
            f"stromboli unpacked (pip does) or set {BIN_ENV}"
        )
    return folder


def build_script() -> Path:
    return hack_dir() / "build-control-plane.sh"


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path

    @classmethod
    def from_dir(cls, bin_dir: str | Path) -> Binaries:
        d = Path(bin_dir)
        missing = [n for n in BINARY_NAMES if not os.access(d / n, os.X_OK)]
        if missing:
            # A directory made before kube-controller-manager joined the set lands here too.
            raise BuildError(
                f"{d} lacks executable(s): {', '.join(missing)}; build them with "
                f"{build_script()} (it prints the directory to use) or point {BIN_ENV} at a "
                f"directory with all of {', '.join(BINARY_NAMES)}"
            )
        return cls(*(d / n for n in BINARY_NAMES))

    @property
    def bin_dir(self) -> Path:
        return self.etcd.parent


def build_control_plane(*, log_path: str | Path | None = None, echo: bool = False) -> Binaries:
    """Run the build script (a no-op when cached) and return the binaries.

    The script's output goes to ``log_path`` if given (and to stderr with ``echo``). On failure
    :class:`BuildError` carries the tail of the output.
    """
    override = os.environ.get(BIN_ENV)
    if override:
        return Binaries.from_dir(override)
    script = build_script()
    if not script.is_file():
        raise BuildError(
            f"{script} not found: set {BIN_ENV} to a directory with {', '.join(BINARY_NAMES)}"
        )
    proc = subprocess.Popen(
        ["bash", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=script.parent,
    )
    lines: list[str] = []
    log_fh = open(log_path, "a") if log_path else None  # noqa: SIM115
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if log_fh:
                log_fh.write(line)
                log_fh.flush()
            if echo:
                sys.stderr.write(line)
        rc = proc.wait()
    finally:
        if log_fh:
            log_fh.close()
    if rc != 0 or not lines:
        tail = "\n".join(lines[-40:])
        raise BuildError(f"{script} failed with exit status {rc}:\n{tail}")
    return Binaries.from_dir(lines[-1].strip())
