from stromboli.core.admission.mutate import mutate_podgroup, mutate_queue


def queue(spec: dict | None = None, annotations: dict | None = None) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q", "annotations": annotations or {}},
        "spec": spec or {},
    }


def test_queue_defaults_reclaimable_and_weight() -> None:
    out = mutate_queue(queue({"weight": 0}))
    assert out["spec"] == {"weight": 1, "reclaimable": True}


def test_queue_keeps_values_it_was_given() -> None:
    out = mutate_queue(queue({"weight": 5, "reclaimable": False}))
    assert out["spec"] == {"weight": 5, "reclaimable": False}


def test_queue_mutation_leaves_its_argument_alone() -> None:
    original = queue({})
    mutate_queue(original)
    assert original["spec"] == {}


def test_hierarchy_is_put_under_root() -> None:
    out = mutate_queue(
        queue(
            annotations={"volcano.sh/hierarchy": "eng/dev", "volcano.sh/hierarchy-weights": "2/8"}
        )
    )
    annotations = out["metadata"]["annotations"]
    assert annotations["volcano.sh/hierarchy"] == "root/eng/dev"
    assert annotations["volcano.sh/hierarchy-weights"] == "1/2/8"


def test_hierarchy_already_rooted_is_unchanged() -> None:
    out = mutate_queue(
        queue(annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/2"})
    )
    assert out["metadata"]["annotations"]["volcano.sh/hierarchy"] == "root/a"


def podgroup(queue_name: str | None) -> dict:
    spec = {"minMember": 1} | ({"queue": queue_name} if queue_name else {})
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "team"},
        "spec": spec,
    }


def test_podgroup_in_default_queue_takes_the_namespace_queue() -> None:
    out = mutate_podgroup(podgroup("default"), {"scheduling.volcano.sh/queue-name": "team-q"})
    assert out["spec"]["queue"] == "team-q"
    out = mutate_podgroup(podgroup(None), {"scheduling.volcano.sh/queue-name": "team-q"})
    assert out["spec"]["queue"] == "team-q"


def test_podgroup_with_its_own_queue_keeps_it() -> None:
    out = mutate_podgroup(podgroup("mine"), {"scheduling.volcano.sh/queue-name": "team-q"})
    assert out["spec"]["queue"] == "mine"


def test_podgroup_without_namespace_queue_stays_default() -> None:
    assert mutate_podgroup(podgroup("default"), {})["spec"]["queue"] == "default"
