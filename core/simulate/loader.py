"""Reading simulation input: multi-document Kubernetes YAML, parsed and shape-checked.

Every document is checked by the same models the API uses (the schema step of the admission
pass, :func:`~stromboli.core.simulate.admission.check_schema`); errors name the file, the
document number, the object and the field, and stop the run before anything is simulated.
The loader changes nothing but the namespace (``default`` when unset, as ``kubectl`` sends
it): the object is admitted, mutation included, when the engine submits it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stromboli.core.admission.shape import json_type
from stromboli.core.api import constants as k
from stromboli.core.api.durations import parse_duration
from stromboli.core.api.models import KubeObject
from stromboli.core.api.registry import InvalidObjectError, field_path, kind_info
from stromboli.core.api.yamlbounds import MAX_FILE_BYTES, YamlBoundsError, load_documents
from stromboli.core.simulate.admission import check_schema
from stromboli.core.simulate.inert import served_versions, simulator_kind


class SimulationInputError(ValueError):
    """Input the simulator cannot use; the message says where and what."""


@dataclass(slots=True)
class SimObject:
    """One input object, not yet admitted (the engine admits it when it is submitted)."""

    obj: dict[str, Any]
    submit_at: float
    where: str

    @property
    def kind(self) -> str:
        return self.obj["kind"]


def _annotation_seconds(obj: dict, key: str, where: str, name: str) -> float | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(key)
    if value is None:
        return None
    try:
        seconds = parse_duration(value, f"metadata.annotations[{key}]")
    except ValueError as err:
        raise SimulationInputError(f"{where}: {obj['kind']} {name!r}: {err}") from None
    if seconds < 0:
        raise SimulationInputError(
            f"{where}: {obj['kind']} {name!r}: metadata.annotations[{key}]: must not be negative"
        )
    return seconds


def _read(path: Path) -> str:
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise SimulationInputError(f"{path}: cannot read: {err.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise SimulationInputError(
            f"{path}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB; split it into several "
            "files"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SimulationInputError(f"{path}: not UTF-8 text (byte {err.start})") from None


def _documents(path: Path) -> list[tuple[str, Any]]:
    try:
        docs = load_documents(_read(path))
    except YamlBoundsError as err:
        raise SimulationInputError(f"{path}: {err}") from None
    out: list[tuple[str, Any]] = []
    for number, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        where = f"{path} document {number}"
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items = doc.get("items")
            if items is None:
                continue
            if not isinstance(items, list):
                raise SimulationInputError(
                    f"{where}: List: items: expected a list of objects, got {json_type(items)}"
                )
            out.extend((f"{where} item {i}", item) for i, item in enumerate(items))
        else:
            out.append((where, doc))
    return out


def load(paths: list[str | Path]) -> list[SimObject]:
    """The objects of every file as written (shape-checked, namespace set), in file order,
    each with its submit time."""
    objects: list[SimObject] = []
    seen: dict[tuple[str, str, str, str], str] = {}
    for path in paths:
        for where, doc in _documents(Path(path)):
            if not isinstance(doc, dict):
                raise SimulationInputError(f"{where}: expected a Kubernetes object (a mapping)")
            try:
                obj = _checked(doc, where)
            except InvalidObjectError as err:
                raise SimulationInputError(str(err)) from None
            info = simulator_kind(obj["apiVersion"], obj["kind"])
            meta = obj.setdefault("metadata", {})
            if info is not None and info.namespaced:
                meta.setdefault("namespace", "default")
            name = meta.get("name")
            if not name:
                raise SimulationInputError(f"{where}: {obj['kind']}: metadata.name is required")
            if "namespace" in meta:
                # The checked copy is dropped: the document goes on as written but for this.
                doc = {**doc, "metadata": {**doc["metadata"], "namespace": meta["namespace"]}}
            key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), name)
            if key in seen:
                raise SimulationInputError(
                    f"{where}: duplicate {obj['kind']} {name!r} (first defined in {seen[key]})"
                )
            seen[key] = where
            submit_at = _annotation_seconds(obj, k.SIM_SUBMIT_AT_ANNOTATION, where, name) or 0.0
            for key_name in (k.SIM_RUNTIME_ANNOTATION,):
                _annotation_seconds(obj, key_name, where, name)
            _check_exit_code(obj, where, name)
            _check_templates(doc.get("spec"), "spec", where, f"{obj['kind']} {name!r}")
            objects.append(SimObject(doc, submit_at, where))
    return objects


def _checked(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """The schema step; a Kubernetes kind outside Stromboli's table (a Role, a ResourceClaim)
    has its metadata checked only, as for any kind without a model."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if (
        isinstance(api_version, str)
        and isinstance(kind, str)
        and kind_info(api_version, kind) is None
        and simulator_kind(api_version, kind) is not None
    ):
        try:
            return KubeObject.model_validate(doc).model_dump(
                by_alias=True, exclude_none=True, mode="json"
            )
        except ValidationError as err:
            details = "; ".join(f"{field_path(e['loc'])}: {e['msg']}" for e in err.errors())
            raise InvalidObjectError(f"{where}: {kind}: {details}") from None
    try:
        return check_schema(doc, where)
    except InvalidObjectError as err:
        served = served_versions(kind) if isinstance(kind, str) else []
        if served and not err.problems:
            raise InvalidObjectError(
                f"{err} (Kubernetes serves it as {', '.join(served)})",
                where=err.where,
                kind=err.kind,
                name=err.name,
            ) from None
        raise


def _check_templates(value: Any, path: str, where: str, label: str) -> None:
    """The ``runtime`` and ``exit-code`` annotations of every pod template inside an object
    (a Deployment's ``spec.template``, a vcjob's ``spec.tasks[i].template``, a CronJob's job
    template, a framework's replica specs), checked now: the pods the controllers make from
    them would otherwise stop the run when they start, naming no object. Walks the document
    once; nesting is bounded by the YAML reader."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, list):
            stack.extend((item, f"{at}[{i}]") for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        meta = node.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if isinstance(annotations, dict):
            field = f"{at}.metadata.annotations"
            runtime = annotations.get(k.SIM_RUNTIME_ANNOTATION)
            if runtime is not None:
                try:
                    seconds = parse_duration(runtime, f"{field}[{k.SIM_RUNTIME_ANNOTATION}]")
                except ValueError as err:
                    raise SimulationInputError(f"{where}: {label}: {err}") from None
                if seconds < 0:
                    raise SimulationInputError(
                        f"{where}: {label}: {field}[{k.SIM_RUNTIME_ANNOTATION}]: must not be "
                        "negative"
                    )
            code = annotations.get(k.SIM_EXIT_CODE_ANNOTATION)
            if code is not None and not _is_integer(code):
                raise SimulationInputError(
                    f"{where}: {label}: {field}[{k.SIM_EXIT_CODE_ANNOTATION}]: {code!r} is not "
                    "an integer"
                )
        for key, child in node.items():
            if key != "metadata" and isinstance(child, dict | list):
                stack.append((child, f"{at}.{key}"))


def _is_integer(value: Any) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return True


def _check_exit_code(obj: dict, where: str, name: str) -> None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(k.SIM_EXIT_CODE_ANNOTATION)
    if value is None:
        return
    try:
        int(value)
    except (TypeError, ValueError):
        raise SimulationInputError(
            f"{where}: {obj['kind']} {name!r}: metadata.annotations"
            f"[{k.SIM_EXIT_CODE_ANNOTATION}]: {value!r} is not an integer"
        ) from None
