"""Poison objects on the real control plane: objects the API server stores but our processes
cannot read (a quantity beyond int64 milli-units, a queue with such a capability, a vcjob whose
template asks for it) never stop the scheduler or the controller, not even at a restart; each
gets a Warning ``InvalidObject`` event naming the field, and a normal pod is still bound."""

from __future__ import annotations

import time
from typing import Any

from stromboli.core.api import constants as k

from .jobs_live import (  # noqa: F401  (fixtures)
    POD,
    QUEUE,
    Live,
    eventually,
    live_fixture,
    stack_fixture,
    task,
    vcjob,
)

HUGE = "1e309"  # a valid quantity to the API server; 10^309 overflows a float


def plain_pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": k.DEFAULT_SCHEDULER_NAME,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
            **spec,
        },
    }


async def node_names(live: Live) -> list[str]:
    return sorted(n["metadata"]["name"] for n in (await live.store.list("v1", "Node")).items)


async def create_poison(live: Live) -> None:
    await live.create(plain_pod("huge-pending", HUGE))
    nodes = await node_names(live)
    # Already bound (nodeName set at create, as a user may do): the scheduler must count it.
    bound = plain_pod("huge-bound", HUGE, nodeName=nodes[0])
    bound["spec"]["schedulerName"] = "default-scheduler"
    await live.create(bound)
    await live.store.create(
        {
            "apiVersion": QUEUE[0],
            "kind": QUEUE[1],
            "metadata": {"name": f"{live.ns}-huge"},
            "spec": {"weight": 1, "capability": {"cpu": HUGE}},
        }
    )
    await live.create(vcjob("huge-job", task("worker", 2, cpu=HUGE)))
    # 1,500 levels deep in the free-form pod template: the API server stores up to 10,000,
    # JSON decoders commonly stop at 1,024. Sent as text: no encoder of ours nests that deep.
    depth = 1500
    deep = '{"a":' * depth + "1" + "}" * depth
    body = (
        '{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","metadata":{"name":"deep-job"},'
        '"spec":{"queue":"default","minAvailable":1,"tasks":[{"name":"w","replicas":1,'
        '"template":{"spec":{"containers":[{"name":"c","image":"busybox"}]},"x":' + deep + "}}]}}"
    )
    status, answer = live.stack.cp.client.request_raw(
        "POST", f"/apis/batch.volcano.sh/v1alpha1/namespaces/{live.ns}/jobs", body.encode()
    )
    assert status == 201, answer[:300]


async def wait_bound(live: Live, name: str, timeout: float) -> float:
    started = time.monotonic()

    async def bound() -> str | None:
        pod = await live.store.get(*POD, name, live.ns)
        return (pod.get("spec") or {}).get("nodeName") or None

    await eventually(bound, bool, f"pod {name} bound", timeout=timeout, on_fail=live.stack.logs)
    return time.monotonic() - started


async def test_poison_objects_neither_stop_nor_block(live: Live) -> None:
    await create_poison(live)
    await live.create(plain_pod("normal-before", "100m"))
    await wait_bound(live, "normal-before", 30)
    live.stack.check_alive()

    async def warnings(name: str) -> list[str]:
        return [m for t, r, m in await live.events(name) if (t, r) == ("Warning", "InvalidObject")]

    message, *_ = await eventually(
        lambda: warnings("huge-pending"), bool, "InvalidObject event on huge-pending"
    )
    assert "spec.containers[0].resources.requests.cpu" in message
    assert "out of range" in message
    # The job controller reads a vcjob's spec itself: its own Warning, and the job's status
    # names the field, as for any malformed job.
    status = await eventually(
        lambda: live.status("huge-job"),
        lambda s: (s.get("state") or {}).get("reason") == "InvalidSpec",
        "huge-job's InvalidSpec state",
    )
    message = status["state"]["message"]
    assert "spec.tasks[0].template" in message and HUGE in message

    # Both processes restarted over the stored poison: they come up and keep working.
    live.stack.scheduler.kill()
    live.stack.scheduler.start()
    live.stack.restart_controller()
    await live.create(plain_pod("normal-after", "100m"))
    seconds = await wait_bound(live, "normal-after", 30)
    print(f"normal pod bound {seconds:.1f} s after both processes restarted over poison")
    live.stack.check_alive()
    huge = await live.store.get(*POD, "huge-pending", live.ns)
    assert not huge["spec"].get("nodeName")
    await live.store.delete(*QUEUE, f"{live.ns}-huge")
