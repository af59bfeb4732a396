"""A kwok-like pod lifecycle on the virtual clock.

A bound pod starts running at once; with ``sim.stromboli.dev/runtime`` it finishes that long
after it started, succeeding, or failing with ``sim.stromboli.dev/exit-code`` when that is
not zero. Without a runtime it runs until the simulation ends.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from stromboli.core.api import constants as k
from stromboli.core.api.durations import parse_duration
from stromboli.core.clock import VirtualClock, format_time
from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.store import ClusterStore
from stromboli.core.informer import Informer
from stromboli.core.scheduler.api.plaingroup import plain_group_name

POD = ("v1", "Pod")


@dataclass(slots=True)
class PodTimes:
    job: str
    started: float | None = None
    finished: float | None = None
    phase: str = "Pending"


@dataclass(order=True, slots=True)
class _Finish:
    at: float
    serial: int
    namespace: str = field(compare=False)
    name: str = field(compare=False)
    uid: str = field(compare=False)


class PodLifecycle:
    def __init__(self, store: ClusterStore, clock: VirtualClock) -> None:
        self.store = store
        self.clock = clock
        self.informer = Informer(store, [POD], self._seen)
        self._to_start: dict[str, dict] = {}
        self._finishes: list[_Finish] = []
        #: Uids of the pods whose finish is still ahead (a deleted pod's is dropped).
        self._running: set[str] = set()
        self._serial = 0
        #: Per pod uid: its job and start/finish times, for the report.
        self.times: dict[str, PodTimes] = {}

    async def start(self) -> None:
        await self.informer.start()

    def _seen(self, _kind: tuple[str, str], event_type: str, pod: dict) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        if event_type == "DELETED":
            self._to_start.pop(uid, None)
            self._running.discard(uid)  # deleted (killed, evicted): it will not finish
            return
        # A plain pod's group, should the run keep it in memory (named later when enrolled).
        job = (meta.get("annotations") or {}).get(k.GROUP_NAME_ANNOTATION, "") or (
            plain_group_name(pod) or ""
        )
        times = self.times.setdefault(uid, PodTimes(f"{meta.get('namespace')}/{job}"))
        times.job = f"{meta.get('namespace')}/{job}" if job else times.job
        phase = (pod.get("status") or {}).get("phase", "Pending")
        times.phase = phase
        if phase == "Pending" and (pod.get("spec") or {}).get("nodeName"):
            self._to_start[uid] = pod

    def next_finish(self) -> float | None:
        while self._finishes and self._finishes[0].uid not in self._running:
            heapq.heappop(self._finishes)
        return self._finishes[0].at if self._finishes else None

    async def step(self) -> int:
        """Start bound pods and finish those whose runtime is over; returns changes made."""
        await self.informer.pump()
        changes = 0
        now = self.clock.seconds
        while self._finishes and self._finishes[0].at <= now:
            finish = heapq.heappop(self._finishes)
            if finish.uid in self._running:
                self._running.discard(finish.uid)
                changes += await self._finish(finish)
        for uid, pod in list(self._to_start.items()):
            del self._to_start[uid]
            changes += await self._run(pod)
        await self.informer.pump()
        return changes

    async def _run(self, pod: dict) -> int:
        meta = pod["metadata"]
        now = format_time(self.clock.now())
        status = {
            **(pod.get("status") or {}),
            "phase": "Running",
            "startTime": now,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            ],
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "state": {"running": {"startedAt": now}},
                }
                for c in (pod.get("spec") or {}).get("containers") or ()
            ],
        }
        status.pop("nominatedNodeName", None)
        if not await self._write_status(meta, status):
            return 0
        times = self.times.get(meta["uid"])
        if times is not None:
            times.started = self.clock.seconds
        runtime = (meta.get("annotations") or {}).get(k.SIM_RUNTIME_ANNOTATION)
        if runtime is not None:
            self._serial += 1
            self._running.add(meta["uid"])
            heapq.heappush(
                self._finishes,
                _Finish(
                    self.clock.seconds + parse_duration(runtime),
                    self._serial,
                    meta.get("namespace", "default"),
                    meta["name"],
                    meta["uid"],
                ),
            )
        return 1

    async def _finish(self, finish: _Finish) -> int:
        try:
            pod = await self.store.get("v1", "Pod", finish.name, finish.namespace)
        except NotFoundError:
            return 0
        meta = pod["metadata"]
        if meta.get("uid") != finish.uid or (pod.get("status") or {}).get("phase") != "Running":
            return 0
        exit_code = int((meta.get("annotations") or {}).get(k.SIM_EXIT_CODE_ANNOTATION) or 0)
        now = format_time(self.clock.now())
        started = (pod.get("status") or {}).get("startTime", now)
        phase = "Succeeded" if exit_code == 0 else "Failed"
        status = {
            **(pod.get("status") or {}),
            "phase": phase,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": now,
                },
            ],
            "containerStatuses": [
                {
                    "name": c.get("name", ""),
                    "ready": False,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": "Completed" if exit_code == 0 else "Error",
                            "startedAt": started,
                            "finishedAt": now,
                        }
                    },
                }
                for c in (pod.get("spec") or {}).get("containers") or ()
            ],
        }
        if not await self._write_status(meta, status):
            return 0
        times = self.times.get(finish.uid)
        if times is not None:
            times.finished = self.clock.seconds
            times.phase = phase
        return 1

    async def _write_status(self, meta: dict, status: dict) -> bool:
        for _ in range(5):
            try:
                pod = await self.store.get("v1", "Pod", meta["name"], meta.get("namespace"))
                pod["status"] = status
                await self.store.update_status(pod)
                return True
            except NotFoundError:
                return False
            except ApiError:
                continue
        return False
