"""cdp: cooldown protection, a pod that just started is not evicted again at once.

A pod carrying ``volcano.sh/cooldown-time`` (a Go duration such as ``600s``; the label is read
before the annotation, as Volcano does) is not a victim of ``preempt`` or ``reclaim`` while it
is Running and less than that long has passed since it became Ready. Elastic jobs whose pods
are preempted and come back would otherwise be preempted again right after each start.

When the pod reports no ``Ready=True`` condition the time it was scheduled
(``PodScheduled=True``, what Volcano reads) and then ``status.startTime`` stand in. A pod that
is not Running, or whose value is not a duration, is not protected.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from stromboli.core.api.constants import COOLDOWN_TIME_KEY
from stromboli.core.api.durations import parse_duration
from stromboli.core.clock import parse_time
from stromboli.core.scheduler.api.job import TaskInfo
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, Session

log = logging.getLogger(__name__)


def cooldown_of(pod: dict) -> float | None:
    """The pod's cooldown in seconds, or None when it has none (or an unreadable one)."""
    meta = pod.get("metadata") or {}
    value = (meta.get("labels") or {}).get(COOLDOWN_TIME_KEY)
    if value is None:
        value = (meta.get("annotations") or {}).get(COOLDOWN_TIME_KEY)
    if value is None:
        return None
    try:
        return parse_duration(value, COOLDOWN_TIME_KEY)
    except ValueError as err:
        log.warning("pod %s/%s: %s", meta.get("namespace"), meta.get("name"), err)
        return None


def stable_since(pod: dict) -> datetime | None:
    """When the running pod became Ready (else was scheduled, else started)."""
    status = pod.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or ()}
    times = [
        condition.get("lastTransitionTime")
        for condition in (conditions.get("Ready"), conditions.get("PodScheduled"))
        if condition and condition.get("status") == "True"
    ]
    times.append(status.get("startTime"))
    for text in times:
        if not text:
            continue
        try:
            return parse_time(text)
        except ValueError as err:
            meta = pod.get("metadata") or {}
            log.warning("pod %s/%s: %s", meta.get("namespace"), meta.get("name"), err)
    return None


def cooling_down(pod: dict, now: datetime) -> bool:
    """Whether the pod is still within its cooldown."""
    cooldown = cooldown_of(pod)
    if cooldown is None or (pod.get("status") or {}).get("phase") != "Running":
        return False
    since = stable_since(pod)
    return since is not None and now < since + timedelta(seconds=cooldown)


class CdpPlugin(Plugin):
    name = "cdp"

    def on_session_open(self, ssn: Session) -> None:
        now = ssn.now

        def victims(_evictor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return [t for t in candidates if not cooling_down(t.pod, now)], PERMIT

        ssn.register(ExtensionPoint.PREEMPTABLE, self.name, victims)
        ssn.register(ExtensionPoint.RECLAIMABLE, self.name, victims)
