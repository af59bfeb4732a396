"""The simulator admits its input as a cluster with Volcano's webhook would."""

from __future__ import annotations

import re
from pathlib import Path

from stromboli.core.simulate.engine import Simulation
from stromboli.core.simulate.loader import load

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
"""
CLASSES = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
"""


def gang(name: str, priority_class: str) -> str:
    return f"""---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}}}
spec: {{minMember: 1, priorityClassName: {priority_class}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}-0
  annotations: {{scheduling.k8s.io/group-name: {name}}}
spec:
  schedulerName: volcano
  priorityClassName: {priority_class}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "3"}}}}}}]
"""


async def rejected(tmp_path: Path, text: str) -> str:
    """Every rejection of the run, one per line: a refused object is an outcome."""
    simulation = await run(tmp_path, text)
    assert simulation.rejections, "nothing was refused"
    return "\n".join(str(r) for r in simulation.rejections)


async def run(tmp_path: Path, text: str) -> Simulation:
    path = tmp_path / "input.yaml"
    path.write_text(text)
    simulation = Simulation(load([path]))
    await simulation.run()
    return simulation


async def test_higher_priority_group_is_placed_first(tmp_path: Path) -> None:
    # "a-low" sorts first by name and creation; only priority can put "b-high" ahead.
    simulation = await run(tmp_path, NODE + CLASSES + gang("a-low", "low") + gang("b-high", "high"))
    high = await simulation.store.get("v1", "Pod", "b-high-0", "default")
    low = await simulation.store.get("v1", "Pod", "a-low-0", "default")
    assert high["spec"]["priority"] == 1000
    assert high["spec"].get("nodeName") == "n1"
    assert not low["spec"].get("nodeName")


async def test_unknown_priority_class_is_rejected(tmp_path: Path) -> None:
    assert re.search(
        "no PriorityClass named 'missing'", await rejected(tmp_path, NODE + gang("a", "missing"))
    )


async def test_queue_weight_zero_is_defaulted_like_volcano(tmp_path: Path) -> None:
    text = (
        NODE
        + """---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {weight: 0}
"""
    )
    simulation = await run(tmp_path, text)
    queue = await simulation.store.get("scheduling.volcano.sh/v1beta1", "Queue", "q")
    assert queue["spec"]["weight"] == 1
    assert queue["spec"]["reclaimable"] is True
    assert queue["status"]["state"] == "Open"


async def test_namespace_queue_annotation_moves_default_podgroups(tmp_path: Path) -> None:
    text = (
        NODE
        + """---
apiVersion: v1
kind: Namespace
metadata:
  name: team
  annotations: {scheduling.volcano.sh/queue-name: team-q}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-q}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pg, namespace: team}
spec: {minMember: 1}
"""
    )
    simulation = await run(tmp_path, text)
    pg = await simulation.store.get("scheduling.volcano.sh/v1beta1", "PodGroup", "pg", "team")
    assert pg["spec"]["queue"] == "team-q"


def vcjob(name: str, queue: str, tasks: list[tuple[str, int]]) -> str:
    task_text = "".join(
        f"""
  - name: {task}
    replicas: {replicas}
    template:
      spec:
        containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]"""
        for task, replicas in tasks
    )
    return f"""---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}}}
spec:
  queue: {queue}
  tasks:{task_text}
"""


async def test_vcjob_with_duplicate_task_names_is_refused(tmp_path: Path) -> None:
    assert re.search(
        "duplicated task name worker",
        await rejected(tmp_path, NODE + vcjob("j", "default", [("worker", 1), ("worker", 2)])),
    )


async def test_vcjob_to_a_missing_queue_is_refused(tmp_path: Path) -> None:
    assert re.search(
        r'validatejob\.volcano\.sh" denied',
        await rejected(tmp_path, NODE + vcjob("j", "nowhere", [("worker", 1)])),
    )


async def test_queue_with_deserved_above_capability_is_refused(tmp_path: Path) -> None:
    text = (
        NODE
        + """---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {capability: {cpu: "2"}, deserved: {cpu: "4"}}
"""
    )
    assert re.search(r"validatequeue\.volcano\.sh", await rejected(tmp_path, text))


async def test_podgroup_to_a_closed_queue_is_refused(tmp_path: Path) -> None:
    text = (
        NODE
        + """---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: shut}
status: {state: Closed}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pg}
spec: {minMember: 1, queue: shut}
"""
    )
    assert re.search("queue with state `Open`", await rejected(tmp_path, text))
