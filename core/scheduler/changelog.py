"""Which jobs the scheduler cache changed, in order, so that a cycle's close can look at those
jobs alone (``settled.py``) instead of every job it knows.

The cache notes a job's id whenever the job's PodGroup or one of its pods changes; a reader
takes a mark and later asks for every id noted since. Entries older than the oldest mark still
wanted are forgotten; a change that concerns every job (a PriorityClass) or a log grown past
its bound makes older marks unanswerable, and their reader looks at every job instead.
"""

from __future__ import annotations

#: Entries kept at most before the log gives up on older marks (a reader that stopped asking).
MAX_ENTRIES = 1_000_000


class JobChanges:
    __slots__ = ("_base", "_floor", "_ids")

    def __init__(self) -> None:
        self._ids: list[str] = []
        #: The mark of ``_ids[0]``.
        self._base = 0
        #: Marks below this cannot be answered: everything changed at ``_floor - 1``.
        self._floor = 0

    def note(self, job_id: str) -> None:
        self._ids.append(job_id)
        if len(self._ids) > MAX_ENTRIES:
            self.note_all()

    def note_all(self) -> None:
        """Every job may have changed: marks taken before now get None from ``since``."""
        self._base += len(self._ids) + 1
        self._ids = []
        self._floor = self._base

    def mark(self) -> int:
        """A position to ask ``since`` about later."""
        return self._base + len(self._ids)

    def since(self, mark: int) -> set[str] | None:
        """Ids noted after ``mark``; None when the log cannot tell (every job may have)."""
        if mark < self._floor or mark < self._base:
            return None
        return set(self._ids[mark - self._base :])

    def forget_before(self, mark: int) -> None:
        """Nobody will ask about marks before ``mark`` any more."""
        drop = min(mark - self._base, len(self._ids))
        if drop > 0:
            del self._ids[:drop]
            self._base += drop
