#!/usr/bin/env python3
"""Regenerate the CustomResourceDefinitions under ``deploy/`` from Stromboli's API models.

    python deploy/generate.py          # write deploy/crds/ and deploy/helm/stromboli/crds/
    python deploy/generate.py --check  # exit 1 (and list them) if any file is out of date

Both folders get the same files, one per CRD (``<group>_<plural>.yaml``), exactly what
``stromboli crds --output-dir`` writes; files that no model produces any more are removed.
``tests/deploy/test_generated.py`` runs the check, so a model change without a regeneration
fails the tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stromboli.core.api.crds import build_crds, crd_filename, render_crd

DEPLOY = Path(__file__).resolve().parent
CRD_DIRS = (DEPLOY / "crds", DEPLOY / "helm" / "stromboli" / "crds")


def expected_files() -> dict[Path, str]:
    """Every generated file and the text it must have."""
    rendered = {crd_filename(crd): render_crd(crd) for crd in build_crds()}
    return {folder / name: text for folder in CRD_DIRS for name, text in rendered.items()}


def stale_files(expected: dict[Path, str]) -> list[Path]:
    """Generated files that are missing, differ, or should not be there at all."""
    stale = [path for path, text in expected.items() if _read(path) != text]
    for folder in CRD_DIRS:
        if folder.is_dir():
            stale += [p for p in sorted(folder.glob("*.yaml")) if p not in expected]
    return stale


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report out-of-date files")
    args = parser.parse_args(argv)
    expected = expected_files()
    stale = stale_files(expected)
    if args.check:
        for path in stale:
            print(f"out of date: {path.relative_to(DEPLOY.parent)}", file=sys.stderr)
        if stale:
            print("run: python deploy/generate.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        if path in expected:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(expected[path], encoding="utf-8")
            print(f"wrote   {path.relative_to(DEPLOY.parent)}")
        else:
            path.unlink()
            print(f"removed {path.relative_to(DEPLOY.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
