"""The installed package is ``src/stromboli/``, whose entries link to the code folders: each
folder setup.py packages has its link, and an editable install is one plain path (what static
tools and editors follow), not an import hook."""

from __future__ import annotations

import re
from pathlib import Path

import stromboli

ROOT = Path(__file__).resolve().parents[2]


def folders() -> list[str]:
    found = re.search(r"FOLDERS = \(([^)]*)\)", (ROOT / "setup.py").read_text())
    assert found, "setup.py no longer lists its FOLDERS"
    return re.findall(r'"([^"]+)"', found.group(1))


def test_each_folder_is_linked_into_the_package() -> None:
    for folder in folders():
        link = ROOT / "src" / "stromboli" / folder
        assert link.is_symlink(), f"src/stromboli/{folder} must link to {folder}/"
        assert link.resolve() == (ROOT / folder).resolve()


def test_the_package_resolves_from_a_plain_path() -> None:
    # An import hook would leave the package without a file on disk under src/.
    assert Path(stromboli.__file__).resolve() == (ROOT / "src" / "stromboli" / "__init__.py")
