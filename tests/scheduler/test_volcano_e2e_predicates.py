"""Volcano's ``test/e2e/schedulingaction/predicates.go`` ("Predicates E2E Test"), case by
case, on the in-process cluster of :mod:`.volcano_e2e` (four 4-cpu workers beside kindnet,
Volcano's CI scheduler configuration)."""

from __future__ import annotations

from pathlib import Path

from .volcano_e2e import E2ECluster, task_spec, vcjob

TAINT = {"key": "test-taint-key", "value": "test-taint-val", "effect": "NoSchedule"}
FOO_BAR = {"foo": "bar"}


def term(labels: dict[str, str]) -> dict:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}


async def nodes_of(c: E2ECluster, job: str) -> list[str]:
    return [(p.get("spec") or {}).get("nodeName", "") for p in await c.pods_of(job)]


async def set_taints(c: E2ECluster, taints: list[dict]) -> None:
    """``TaintAllNodes`` / ``RemoveTaintsFromAllNodes`` on the workers."""
    for name in c.workers:
        obj = await c.store.get("v1", "Node", name, None)
        obj["spec"]["taints"] = list(taints)
        await c.store.update(obj)


async def test_hostport(tmp_path: Path) -> None:
    """It("Hostport")"""
    c = await E2ECluster(tmp_path).start()
    nn = len(c.workers)
    spec = task_spec(nn * 2, cpu="1", host_port=28080)
    await c.create(vcjob("hp-spec", spec, min_available=nn))
    assert await c.wait(lambda: _ready(c, "hp-spec", nn))
    await c.step(5)
    assert await c.ready("hp-spec") == nn
    assert await c.pending("hp-spec") == nn
    placed = [n for n in await nodes_of(c, "hp-spec") if n]
    assert sorted(placed) == sorted(c.workers)


async def test_node_affinity(tmp_path: Path) -> None:
    """It("NodeAffinity")"""
    c = await E2ECluster(tmp_path).start()
    node_name, rep = c.workers[0], 3  # ComputeNode(ctx, OneCPU): 3 one-cpu slots beside kindnet
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            }
        }
    }
    await c.create(vcjob("na-job", task_spec(rep, cpu="1", affinity=affinity), min_available=1))
    assert await c.wait(lambda: _ready(c, "na-job", rep))
    assert await nodes_of(c, "na-job") == [node_name] * rep


async def test_pod_affinity(tmp_path: Path) -> None:
    """It("Pod Affinity")"""
    c = await E2ECluster(tmp_path).start()
    rep = 7  # ComputeNode(ctx, HalfCPU): seven half-cpu slots on a worker
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(FOO_BAR)]}}
    spec = task_spec(rep // 2, cpu="500m", affinity=affinity, labels=FOO_BAR)
    await c.create(vcjob("pa-job", spec, min_available=rep // 2))
    assert await c.wait(lambda: _ready(c, "pa-job", rep // 2))
    placed = await nodes_of(c, "pa-job")
    assert len(set(placed)) == 1 and placed[0]


async def test_pod_anti_affinity(tmp_path: Path) -> None:
    """It("Pod Anti-Affinity")"""
    c = await E2ECluster(tmp_path).start()
    affinity = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(FOO_BAR)]}
    }
    spec = task_spec(2, cpu="1", affinity=affinity, labels=FOO_BAR)
    await c.create(vcjob("pa-job", spec, min_available=2))
    assert await c.wait(lambda: _ready(c, "pa-job", 2))
    first, second = await nodes_of(c, "pa-job")
    assert first and second and first != second


async def test_taints(tmp_path: Path) -> None:
    """It("Taints")"""
    c = await E2ECluster(tmp_path).start()
    await set_taints(c, [TAINT])
    await c.create(vcjob("tt-job", task_spec(1, cpu="1"), min_available=1))
    assert await c.wait(lambda: _pending(c, "tt-job", 1))
    await c.step(5)
    assert await c.pending("tt-job") == 1
    await set_taints(c, [])
    assert await c.wait(lambda: _ready(c, "tt-job", 1))


async def test_taints_and_tolerations(tmp_path: Path) -> None:
    """It("Taints and Tolerations")"""
    c = await E2ECluster(tmp_path).start()
    await set_taints(c, [TAINT])
    toleration = {**TAINT, "operator": "Equal"}
    spec1 = task_spec(1, cpu="1", tolerations=[toleration])
    await c.create(vcjob("tt-job", spec1, min_available=1))
    assert await c.wait(lambda: _ready(c, "tt-job", 1))
    await c.create(vcjob("tt-job-no-toleration", task_spec(1, cpu="1"), min_available=1))
    assert await c.wait(lambda: _pending(c, "tt-job-no-toleration", 1))
    await c.step(5)
    assert await c.pending("tt-job-no-toleration") == 1
    await set_taints(c, [])
    assert await c.wait(lambda: _ready(c, "tt-job-no-toleration", 1))


async def _ready(c: E2ECluster, job: str, count: int) -> bool:
    return await c.ready(job) >= count


async def _pending(c: E2ECluster, job: str, count: int) -> bool:
    return await c.pending(job) >= count
