"""Process-wide settings for stromboli's long-running and batch commands."""

from __future__ import annotations

import gc

#: First-generation threshold of the cyclic garbage collector. The default (700) makes
#: Python scan the whole heap very often while the scheduler builds many small records per
#: cycle; the records hold few cycles, so collecting less often costs little memory.
GC_GEN0_THRESHOLD = 50_000


def tune_gc() -> None:
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)
