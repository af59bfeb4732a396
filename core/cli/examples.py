"""The examples that ship inside the package, for ``stromboli simulate --example NAME``.

A pip install has no checkout to point ``simulate`` at, so the examples are package data
(``stromboli/examples``). Each example's header comment says how to run it; those lines are the
listing, rewritten for the installed copy: the example itself becomes ``--example NAME`` and the
files it runs with (a scheduler configuration, a queue policy) become their installed paths.
A file is an example when its header runs it; configuration files that only accompany one are
not listed. The folders in :data:`FOLDERS` hold examples too, named by their path: ``gpu/mig``
is ``examples/gpu/mig.yaml``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

LIST: Final = "list"
"""The ``--example`` value that prints the listing instead of running anything."""

FOLDERS: Final = ("", "gpu", "frameworks")
"""Where examples lie under ``examples/`` (``""``: the folder itself). ``pipelines/`` holds a
Kubeflow Pipelines definition, not a simulator input. ``setup.py`` packages the same folders."""

#: A path under ``examples/``: names of letters, digits, ``_``, ``-`` and ``.`` (never first,
#: so no ``..``), joined by ``/``.
_PATH: Final = r"[\w-][\w.-]*(?:/[\w-][\w.-]*)*"
_RUN_LINE: Final = re.compile(rf"^stromboli simulate examples/(?P<name>{_PATH})\.yaml\b")
_EXAMPLE_PATH: Final = re.compile(rf"\bexamples/(?P<file>{_PATH}\.yaml)\b")


class ExampleNotFound(ValueError):
    """No packaged example has that name; the message lists those that do."""


@dataclass(frozen=True, slots=True)
class Example:
    name: str
    path: Path
    title: str
    """The first sentence of the header comment."""
    commands: tuple[str, ...]
    """How the header runs it, rewritten for the installed copy."""


def examples_dir() -> Path:
    """Where the examples lie: the package's ``examples`` (the checkout's ``examples/`` in an
    editable install)."""
    from importlib.resources import files

    folder = files("stromboli") / "examples"
    if not isinstance(folder, Path) or not folder.is_dir():
        raise ExampleNotFound(f"this installation of stromboli has no examples folder ({folder})")
    return folder


def header(text: str) -> list[str]:
    """The leading comment block, without the ``#`` markers (a blank comment line stays)."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return lines


def commands(lines: list[str]) -> list[str]:
    """The ``stromboli simulate`` lines of a header, backslash continuations joined."""
    found: list[str] = []
    pending: str | None = None
    for line in lines:
        if pending is not None:
            pending = f"{pending} {line.rstrip(chr(92)).strip()}"
        elif line.startswith("stromboli simulate "):
            pending = line.rstrip(chr(92)).strip()
        else:
            continue
        if not line.endswith("\\"):
            found.append(re.sub(r"\s+", " ", pending))
            pending = None
    if pending is not None:
        found.append(pending)
    return found


def parse(path: Path, folder: Path) -> Example | None:
    """The example in ``path``, or ``None`` when its header does not run it."""
    name = path.relative_to(folder).as_posix().removesuffix(".yaml")
    lines = header(path.read_text())
    runs = [c for c in commands(lines) if _run_name(c) == name]
    if not runs:
        return None
    return Example(
        name, path, _title(lines) or name, tuple(_installed(c, name, folder) for c in runs)
    )


def _title(lines: list[str]) -> str:
    """The first sentence of the header's first paragraph."""
    paragraph: list[str] = []
    for line in lines:
        if not line:
            if paragraph:
                break
            continue
        paragraph.append(line)
    text = " ".join(paragraph)
    end = re.search(r"\.(\s|$)", text)
    return text[: end.start() + 1] if end else text


def _run_name(command: str) -> str | None:
    match = _RUN_LINE.match(command)
    return match.group("name") if match else None


def _installed(command: str, name: str, folder: Path) -> str:
    command = command.replace(
        f"stromboli simulate examples/{name}.yaml", f"stromboli simulate --example {name}", 1
    )
    return _EXAMPLE_PATH.sub(lambda m: str(folder / m.group("file")), command)


def packaged_examples(folder: Path | None = None) -> list[Example]:
    """Every example in ``folder`` (default: the package's) and its :data:`FOLDERS`, by name."""
    folder = folder or examples_dir()
    paths = (p for sub in FOLDERS for p in sorted((folder / sub).glob("*.yaml")))
    found = (parse(path, folder) for path in paths)
    return [example for example in found if example is not None]


def find_example(name: str, folder: Path | None = None) -> Example:
    """The example called ``name`` (its path under ``examples/`` without ``.yaml``, such as
    ``gang-waits`` or ``gpu/mig``)."""
    available = packaged_examples(folder)
    for example in available:
        if example.name == name or f"{example.name}.yaml" == name:
            return example
    names = ", ".join(e.name for e in available)
    raise ExampleNotFound(f"--example: no packaged example is called {name!r}; there are {names}")


def listing(folder: Path | None = None) -> str:
    """The text ``--example list`` prints: each name, its title and how to run it."""
    blocks = []
    for example in packaged_examples(folder):
        runs = "\n".join(f"    {command}" for command in example.commands)
        blocks.append(f"{example.name}: {example.title}\n{runs}")
    return "\n".join(blocks)
