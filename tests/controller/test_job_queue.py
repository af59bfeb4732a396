"""Queue Commands (OpenQueue / CloseQueue) and Volcano's queue state rules (reference §5.5)."""

from __future__ import annotations

import pytest

from stromboli.core.api import constants as k
from stromboli.core.api.constants import Action, QueueState
from stromboli.core.controller.job.queue import decide
from stromboli.core.scheduler.scheduler import builtin_queue

from .jobkit import Harness, queue_command, task, vcjob

QUEUE = (k.SCHEDULING_V1BETA1, "Queue")


@pytest.mark.parametrize(
    ("state", "action", "busy", "op", "to"),
    [
        ("", Action.SYNC_QUEUE, False, "sync", QueueState.OPEN),
        (QueueState.OPEN, Action.OPEN_QUEUE, False, "sync", QueueState.OPEN),
        (QueueState.OPEN, Action.CLOSE_QUEUE, False, "close", QueueState.CLOSED),
        (QueueState.OPEN, Action.CLOSE_QUEUE, True, "close", QueueState.CLOSING),
        (QueueState.CLOSING, Action.SYNC_QUEUE, True, "sync", QueueState.CLOSING),
        (QueueState.CLOSING, Action.SYNC_QUEUE, False, "sync", QueueState.CLOSED),
        (QueueState.CLOSING, Action.CLOSE_QUEUE, False, "sync", QueueState.CLOSED),
        (QueueState.CLOSING, Action.OPEN_QUEUE, True, "open", QueueState.OPEN),
        (QueueState.CLOSED, Action.OPEN_QUEUE, False, "open", QueueState.OPEN),
        (QueueState.CLOSED, Action.CLOSE_QUEUE, False, "sync", QueueState.CLOSED),
        (QueueState.CLOSED, Action.SYNC_QUEUE, True, "sync", QueueState.CLOSED),
        (QueueState.UNKNOWN, Action.OPEN_QUEUE, False, "open", QueueState.OPEN),
        (QueueState.UNKNOWN, Action.CLOSE_QUEUE, True, "close", QueueState.CLOSING),
        (QueueState.UNKNOWN, Action.SYNC_QUEUE, False, "sync", QueueState.UNKNOWN),
        ("Weird", Action.SYNC_QUEUE, False, "sync", None),
    ],
)
def test_queue_state_table(state: str, action: str, busy: bool, op: str, to: str | None) -> None:
    decision = decide(state, action, busy)
    assert (decision.op, decision.state) == (op, to)


async def queue_state(h: Harness, name: str) -> str:
    return (await h.store.get(*QUEUE, name)).get("status", {}).get("state", "")


async def closed_by_parent(h: Harness, name: str) -> str | None:
    queue = await h.store.get(*QUEUE, name)
    return (queue["metadata"].get("annotations") or {}).get(k.CLOSED_BY_PARENT_KEY)


async def add_queue(h: Harness, name: str, parent: str = k.ROOT_QUEUE) -> None:
    queue = builtin_queue(name)
    queue["spec"]["parent"] = parent
    created = await h.store.create(queue)
    created["status"] = {"state": "Open"}
    await h.store.update_status(created)
    await h.step()


async def test_an_idle_queue_closes_at_once_and_reopens() -> None:
    h = await Harness().start("q1")
    await h.create(queue_command("q1", Action.CLOSE_QUEUE))
    assert await queue_state(h, "q1") == QueueState.CLOSED
    assert (await h.store.list(k.BUS_V1ALPHA1, "Command")).items == []
    assert any(e["message"] == "Close queue succeed" for e in await h.events("CloseQueue"))
    await h.create(queue_command("q1", Action.OPEN_QUEUE))
    assert await queue_state(h, "q1") == QueueState.OPEN


async def test_a_busy_queue_is_closing_until_its_last_podgroup_is_gone() -> None:
    h = await Harness().start("q1")
    await h.create(vcjob("j", task("worker", 1), queue="q1"))
    await h.create(queue_command("q1", Action.CLOSE_QUEUE))
    assert await queue_state(h, "q1") == QueueState.CLOSING
    await h.store.delete(k.BATCH_V1ALPHA1, "Job", "j", "default")  # its PodGroup goes too
    await h.step()
    assert await queue_state(h, "q1") == QueueState.CLOSED


async def test_closing_a_parent_closes_its_children_and_opening_reopens_them() -> None:
    h = await Harness().start()
    await add_queue(h, "eng")
    await add_queue(h, "dev", parent="eng")
    await add_queue(h, "ops", parent="eng")
    await h.create(queue_command("ops", Action.CLOSE_QUEUE))  # closed by hand, not by parent
    await h.create(queue_command("eng", Action.CLOSE_QUEUE))
    assert await queue_state(h, "eng") == QueueState.CLOSED
    assert await queue_state(h, "dev") == QueueState.CLOSED
    assert await closed_by_parent(h, "dev") == "true"
    assert await closed_by_parent(h, "ops") is None

    await h.create(queue_command("dev", Action.OPEN_QUEUE))  # not while the parent is closed
    assert await queue_state(h, "dev") == QueueState.CLOSED
    refused = await h.events("OpenQueue")
    assert "Open the parent queue first" in refused[0]["message"]

    await h.create(queue_command("eng", Action.OPEN_QUEUE))
    assert await queue_state(h, "eng") == QueueState.OPEN
    assert await queue_state(h, "dev") == QueueState.OPEN
    assert await closed_by_parent(h, "dev") == "false"
    assert await queue_state(h, "ops") == QueueState.CLOSED  # stays as its owner left it


async def test_a_new_child_of_a_closed_parent_closes() -> None:
    h = await Harness().start()
    await add_queue(h, "eng")
    await h.create(queue_command("eng", Action.CLOSE_QUEUE))
    await add_queue(h, "late", parent="eng")
    assert await queue_state(h, "late") == QueueState.CLOSED
    assert await closed_by_parent(h, "late") == "true"


async def test_the_root_queue_cannot_be_closed() -> None:
    h = await Harness().start()
    await h.create(queue_command(k.ROOT_QUEUE, Action.CLOSE_QUEUE))
    assert await queue_state(h, k.ROOT_QUEUE) == QueueState.OPEN
