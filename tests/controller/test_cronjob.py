"""The CronJob controller on a memory store and a virtual clock; the test plays the job
controller (it sets the phases of the jobs the CronJob creates)."""

from __future__ import annotations

import asyncio
from typing import Any

from stromboli.core.api import constants as k
from stromboli.core.clock import VirtualClock
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.controller.cronjob import CronJobController, job_name, rfc3339

from .jobkit import task

CRONJOB = (k.BATCH_V1ALPHA1, "CronJob")
JOB = (k.BATCH_V1ALPHA1, "Job")


def cronjob(name: str = "cj", schedule: str = "* * * * *", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": k.BATCH_V1ALPHA1,
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"app": name}},
                "spec": {"tasks": [task("worker", 1)]},
            },
            **spec,
        },
    }


class Cron:
    def __init__(self, start: float = 0.0) -> None:
        self.clock = VirtualClock(start)
        self.store = MemoryStore(self.clock, seed=0)
        self.controller = CronJobController(self.store, self.clock)

    async def create(self, obj: dict[str, Any]) -> None:
        await self.store.create(obj)
        await self.controller.step()

    async def at(self, seconds: float) -> int:
        """Move the clock to ``seconds`` through every wakeup before it, stepping each time."""
        writes = 0
        while True:
            wakeup = self.controller.next_wakeup()
            if wakeup is None or wakeup > seconds:
                break
            self.clock.set(max(wakeup, self.clock.seconds))
            writes += await self.controller.step()
        self.clock.set(seconds)
        return writes + await self.controller.step()

    async def jobs(self) -> dict[str, dict[str, Any]]:
        listed = await self.store.list(*JOB, "default")
        return {j["metadata"]["name"]: j for j in listed.items}

    async def cron(self, name: str = "cj") -> dict[str, Any]:
        return await self.store.get(*CRONJOB, name, "default")

    async def finish(self, name: str, phase: str = "Completed") -> None:
        job = await self.store.get(*JOB, name, "default")
        job["status"] = {"state": {"phase": phase, "lastTransitionTime": _now(self.clock)}}
        await self.store.update_status(job)
        await self.controller.step()

    async def events(self) -> list[str]:
        listed = await self.store.list("v1", "Event", "default")
        return [e["reason"] for e in listed.items]


def _now(clock: VirtualClock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def active(cron: dict[str, Any]) -> list[str]:
    return [ref["name"] for ref in (cron.get("status") or {}).get("active") or []]


async def test_nothing_runs_before_the_first_schedule_time() -> None:
    c = Cron()
    await c.create(cronjob())
    assert await c.jobs() == {}
    assert c.controller.next_wakeup() == 60.0


async def test_a_job_is_created_at_each_schedule_time() -> None:
    c = Cron()
    await c.create(cronjob())
    await c.at(60)
    assert list(await c.jobs()) == ["cj-1"]
    await c.at(120)
    assert sorted(await c.jobs()) == ["cj-1", "cj-2"]
    cron = await c.cron()
    assert cron["status"]["lastScheduleTime"] == "1970-01-01T00:02:00Z"
    assert active(cron) == ["cj-1", "cj-2"]


async def test_the_job_carries_template_annotation_and_owner() -> None:
    c = Cron()
    await c.create(cronjob())
    await c.at(60)
    job = (await c.jobs())["cj-1"]
    meta = job["metadata"]
    assert meta["labels"] == {"app": "cj"}
    assert meta["annotations"][k.CRONJOB_SCHEDULED_TIMESTAMP_KEY] == "1970-01-01T00:01:00Z"
    owner = meta["ownerReferences"][0]
    cron = await c.cron()
    assert owner["kind"] == "CronJob"
    assert owner["uid"] == cron["metadata"]["uid"]
    assert owner["controller"] is True
    assert job["spec"]["tasks"][0]["name"] == "worker"


async def test_hourly_schedule_skips_to_the_right_minute() -> None:
    c = Cron()
    await c.create(cronjob(schedule="30 * * * *"))
    assert c.controller.next_wakeup() == 1800.0
    await c.at(1799)
    assert await c.jobs() == {}
    await c.at(1800)
    assert list(await c.jobs()) == [job_name("cj", c.clock.now())]
    assert list(await c.jobs()) == ["cj-30"]


async def test_time_zone_sets_schedule_and_annotation() -> None:
    c = Cron()
    # 01:00 in Paris (UTC+1 in January 1970) is midnight UTC.
    await c.create(cronjob(schedule="0 1 * * *", timeZone="Europe/Paris"))
    assert c.controller.next_wakeup() == 24 * 3600.0
    await c.at(24 * 3600)
    job = next(iter((await c.jobs()).values()))
    stamp = job["metadata"]["annotations"][k.CRONJOB_SCHEDULED_TIMESTAMP_KEY]
    assert stamp == "1970-01-02T01:00:00+01:00"


async def test_unknown_time_zone_is_an_event_and_no_job() -> None:
    c = Cron()
    await c.create(cronjob(timeZone="Mars/Olympus"))
    await c.at(120)
    assert await c.jobs() == {}
    assert "UnknownTimeZone" in await c.events()


async def test_finished_job_leaves_active_and_sets_last_successful_time() -> None:
    c = Cron()
    await c.create(cronjob())
    await c.at(60)
    await c.at(90)
    await c.finish("cj-1")
    cron = await c.cron()
    assert active(cron) == []
    assert cron["status"]["lastSuccessfulTime"] == "1970-01-01T00:01:30Z"
    assert "SawCompletedJob" in await c.events()


async def test_forbid_skips_while_a_job_is_active() -> None:
    c = Cron()
    await c.create(cronjob(concurrencyPolicy="Forbid", startingDeadlineSeconds=10))
    await c.at(60)
    await c.at(180)
    assert list(await c.jobs()) == ["cj-1"]
    await c.at(195)  # 180 is now past its 10s starting deadline
    await c.finish("cj-1")
    assert list(await c.jobs()) == ["cj-1"]
    await c.at(240)
    assert sorted(await c.jobs()) == ["cj-1", "cj-4"]


async def test_forbid_runs_a_skipped_time_still_within_its_deadline() -> None:
    c = Cron()
    await c.create(cronjob(concurrencyPolicy="Forbid", startingDeadlineSeconds=30))
    await c.at(60)
    await c.at(125)
    await c.finish("cj-1")
    assert sorted(await c.jobs()) == ["cj-1", "cj-2"]


async def test_allow_runs_jobs_side_by_side() -> None:
    c = Cron()
    await c.create(cronjob(concurrencyPolicy="Allow"))
    await c.at(180)
    assert sorted(await c.jobs()) == ["cj-1", "cj-2", "cj-3"]
    assert len(active(await c.cron())) == 3


async def test_replace_deletes_the_running_job() -> None:
    c = Cron()
    await c.create(cronjob(concurrencyPolicy="Replace"))
    await c.at(60)
    await c.at(120)
    assert list(await c.jobs()) == ["cj-2"]
    assert active(await c.cron()) == ["cj-2"]
    assert "SuccessfulDelete" in await c.events()


async def test_suspended_cronjob_creates_nothing_until_resumed() -> None:
    c = Cron()
    await c.create(cronjob(suspend=True))
    await c.at(300)
    assert await c.jobs() == {}
    assert c.controller.next_wakeup() is None
    cron = await c.cron()
    cron["spec"]["suspend"] = False
    cron["spec"]["startingDeadlineSeconds"] = 30
    await c.store.update(cron)
    await c.controller.step()
    # 300s is itself a schedule time, within the deadline: it runs now.
    assert list(await c.jobs()) == ["cj-5"]


async def test_starting_deadline_limits_catch_up() -> None:
    c = Cron()
    await c.create(cronjob(startingDeadlineSeconds=10))
    c.clock.set(125)  # the controller was away; 120 is only 5s late
    await c.controller.step()
    assert list(await c.jobs()) == ["cj-2"]


async def test_missed_run_beyond_deadline_does_not_start() -> None:
    c = Cron()
    await c.create(cronjob(schedule="0 * * * *", startingDeadlineSeconds=10))
    c.clock.set(3700)
    await c.controller.step()
    assert await c.jobs() == {}


async def test_too_many_missed_schedules_is_an_event_and_runs_the_latest() -> None:
    c = Cron()
    await c.create(cronjob())
    c.clock.set(200 * 60 + 5)
    await c.controller.step()
    assert list(await c.jobs()) == ["cj-200"]
    assert "TooManyMissedTimes" in await c.events()


async def test_successful_history_limit() -> None:
    c = Cron()
    await c.create(cronjob(successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1))
    for minute in range(1, 5):
        await c.at(minute * 60)
        await c.at(minute * 60 + 10)
        await c.finish(f"cj-{minute}")
    assert sorted(await c.jobs()) == ["cj-3", "cj-4"]


async def test_failed_history_limit() -> None:
    c = Cron()
    await c.create(cronjob(successfulJobsHistoryLimit=3, failedJobsHistoryLimit=1))
    await c.at(60)
    await c.finish("cj-1", "Failed")
    await c.at(120)
    await c.finish("cj-2", "Failed")
    await c.at(180)
    await c.finish("cj-3")
    assert sorted(await c.jobs()) == ["cj-2", "cj-3"]


async def test_zero_history_limit_deletes_finished_jobs() -> None:
    c = Cron()
    await c.create(cronjob(successfulJobsHistoryLimit=0))
    await c.at(60)
    await c.finish("cj-1")
    assert await c.jobs() == {}


async def test_deleted_active_job_leaves_active() -> None:
    c = Cron()
    await c.create(cronjob())
    await c.at(60)
    await c.store.delete(*JOB, "cj-1", "default")
    await c.controller.step()
    assert active(await c.cron()) == []


async def test_status_is_written_against_the_latest_version() -> None:
    c = Cron()
    await c.create(cronjob())
    # Someone else writes the CronJob; the controller's copy is stale but it still succeeds.
    cron = await c.cron()
    cron["metadata"].setdefault("labels", {})["touched"] = "yes"
    await c.store.update(cron)
    c.clock.set(60)
    await c.controller.step()
    assert (await c.cron())["status"]["lastScheduleTime"] == "1970-01-01T00:01:00Z"


async def test_a_schedule_is_run_once_even_if_stepped_again() -> None:
    c = Cron()
    await c.create(cronjob())
    await c.at(60)
    assert await c.controller.step() == 0
    assert list(await c.jobs()) == ["cj-1"]


def test_rfc3339_offsets() -> None:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    when = datetime(2024, 7, 1, 12, 0, tzinfo=ZoneInfo("America/New_York"))
    assert rfc3339(when) == "2024-07-01T12:00:00-04:00"


async def test_run_follows_watches() -> None:
    c = Cron()
    await c.store.create(cronjob())
    c.clock.set(61)
    task_ = asyncio.create_task(c.controller.run())
    try:
        for _ in range(100):
            if await c.jobs():
                break
            await asyncio.sleep(0.01)
        assert list(await c.jobs()) == ["cj-1"]
    finally:
        task_.cancel()
        await asyncio.gather(task_, return_exceptions=True)
