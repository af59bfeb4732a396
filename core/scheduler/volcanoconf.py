"""What Volcano's scheduler configuration accepts that Stromboli does not implement.

A configuration written for Volcano may name a plugin Stromboli has not got, or give a plugin an
argument its Volcano counterpart reads (or read in a release users still copy from) and ours
does not. Volcano itself skips any plugin name it has no builder for (an error in its log at
every session) and ignores any argument key its plugin does not read. The loader uses these
tables to say which of the two a skipped name is: a Volcano feature not built here, or a name
neither knows (most likely a typo).
"""

from __future__ import annotations

#: Plugins Volcano registers (``pkg/scheduler/plugins/factory.go``) that Stromboli has not got.
VOLCANO_ONLY_PLUGINS: frozenset[str] = frozenset(
    {"resource-strategy-fit", "rescheduling", "task-topology", "usage"}
)

#: Per plugin Stromboli has: argument keys Volcano documents for it that ours does not read,
#: and prefixes of such keys. The ``predicates`` ones are the GPU-sharing and proportional
#: switches of Volcano's user guide, moved to ``deviceshare`` and ``resource-strategy-fit`` in
#: later releases (where Volcano reads them no more, either).
VOLCANO_ONLY_ARGUMENTS: dict[str, frozenset[str]] = {
    "predicates": frozenset(
        {
            "predicate.GPUSharingEnable",
            "predicate.GPUNumberEnable",
            "predicate.ProportionalEnable",
            "predicate.resources",
        }
    ),
}
VOLCANO_ONLY_ARGUMENT_PREFIXES: dict[str, tuple[str, ...]] = {
    "predicates": ("predicate.resources.",),
}


def is_volcano_plugin(name: str) -> bool:
    """Whether Volcano registers a plugin of this name that Stromboli has not got."""
    return name in VOLCANO_ONLY_PLUGINS


def is_volcano_argument(plugin: str, key: str) -> bool:
    """Whether Volcano documents argument ``key`` for ``plugin`` and Stromboli does not read it."""
    if key in VOLCANO_ONLY_ARGUMENTS.get(plugin, frozenset()):
        return True
    return any(key.startswith(p) for p in VOLCANO_ONLY_ARGUMENT_PREFIXES.get(plugin, ()))
