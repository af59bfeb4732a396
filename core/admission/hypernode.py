"""Volcano's validating admission rule for HyperNodes (its ``/hypernodes/validate`` webhook, on
create and update), plus a refusal of member cycles.

A HyperNode needs members; a ``regexMatch`` pattern must compile. Beyond Volcano: a member of
type HyperNode named by ``exactMatch`` may not lead back to the HyperNode itself through the
members of the HyperNodes already stored, since a cycle has no place in a tree and would send
anything walking it round forever. Members chosen by pattern are not followed (what a pattern
matches changes as HyperNodes come and go; the scheduler ignores such a loop).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NO_MEMBERS = "member must have at least one member"


def _members(hypernode: Mapping[str, Any]) -> list[Any] | None:
    spec = hypernode.get("spec")
    members = spec.get("members") if isinstance(spec, Mapping) else None
    return members if isinstance(members, list) else None


def hypernode_children(hypernode: Mapping[str, Any]) -> list[str]:
    """Names of the HyperNodes this one lists by ``exactMatch``."""
    out = []
    for member in _members(hypernode) or ():
        if not isinstance(member, Mapping) or member.get("type") != "HyperNode":
            continue
        selector = member.get("selector")
        exact = selector.get("exactMatch") if isinstance(selector, Mapping) else None
        name = exact.get("name") if isinstance(exact, Mapping) else None
        if isinstance(name, str) and name:
            out.append(name)
    return out


def member_cycle(
    name: str, children: list[str], hypernodes: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """A path from ``name`` through ``children`` back to ``name`` (``[a, b, a]``), or empty.
    Breadth-first over names, each visited once: bounded even if the stored ones loop."""
    parents: dict[str, str] = {}
    queue = []
    for child in children:
        if child == name:
            return [name, name]
        if child not in parents:
            parents[child] = name
            queue.append(child)
    for current in queue:  # grows while iterated: a breadth-first walk
        stored = hypernodes.get(current)
        for child in hypernode_children(stored) if isinstance(stored, Mapping) else ():
            if child == name:
                path = [current]
                while path[-1] != name:
                    path.append(parents[path[-1]])
                return [*reversed(path), name]
            if child not in parents:
                parents[child] = current
                queue.append(child)
    return []


def validate_hypernode(
    hypernode: Mapping[str, Any], hypernodes: Mapping[str, Mapping[str, Any]] | None = None
) -> list[str]:
    """Reasons to refuse ``hypernode``; ``hypernodes`` are the stored ones by name."""
    members = _members(hypernode)
    if not members:
        return [NO_MEMBERS]
    errors: list[str] = []
    for index, member in enumerate(members):
        selector = member.get("selector") if isinstance(member, Mapping) else None
        regex = selector.get("regexMatch") if isinstance(selector, Mapping) else None
        pattern = regex.get("pattern") if isinstance(regex, Mapping) else None
        if isinstance(pattern, str):
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as err:
                errors.append(
                    f"spec.members[{index}].selector.regexMatch.pattern: member regexMatch "
                    f"pattern is invalid: {err}"
                )
    meta = hypernode.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if isinstance(name, str) and name:
        cycle = member_cycle(name, hypernode_children(hypernode), hypernodes or {})
        if cycle:
            errors.append(
                "spec.members: Invalid value: HyperNode members form a cycle: " + " -> ".join(cycle)
            )
    return errors
