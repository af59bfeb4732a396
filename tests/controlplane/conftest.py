"""The ``control_plane`` fixture: a real etcd + kube-apiserver + kube-controller-manager + kwok
for the whole session.

The binaries are built from the Go module proxy by ``hack/build-control-plane.sh`` on first
use (about 6 minutes on 2 cores; cached in ``~/.cache/stromboli/controlplane`` afterwards) or
taken from ``$STROMBOLI_CONTROLPLANE_BIN``. If they cannot be built or the control plane does
not come up, every test using the fixture errors: these tests never skip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from stromboli.core.devcluster import ControlPlane, build_control_plane

NODES = 3
_started: list[ControlPlane] = []


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from own_control_plane(tmp_path_factory)


def own_control_plane(
    tmp_path_factory: pytest.TempPathFactory,
    nodes: int = NODES,
    prepare: Callable[[ControlPlane], None] | None = None,
) -> Iterator[ControlPlane]:
    """A control plane of its own: modules that judge the whole cluster (RBAC grids, doctor)
    override ``control_plane`` with one, so other tests' leftovers cannot sway them; modules
    that need their own nodes or CRDs start with ``nodes=0`` and ``prepare`` them."""
    run_dir = tmp_path_factory.mktemp("controlplane")
    build_log = run_dir / "build.log"
    try:
        binaries = build_control_plane(log_path=build_log)
    except Exception as err:
        pytest.fail(f"building the control plane failed ({build_log}): {err}", pytrace=False)
    cp = ControlPlane(binaries, run_dir=run_dir, nodes=nodes)
    try:
        cp.start()
        if prepare is not None:
            prepare(cp)
    except Exception as err:
        cp.stop()
        pytest.fail(f"control plane did not start: {err}\n{cp.log_tail(60)}", pytrace=False)
    _started.append(cp)
    try:
        yield cp
    finally:
        _started.remove(cp)
        cp.stop()  # logs stay in pytest's tmp dir (<basetemp>/controlplane0/logs)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if report.failed and "control_plane" in getattr(item, "fixturenames", ()) and _started:
        cp = _started[-1]
        report.sections.append(("control plane log tail", cp.log_tail(40)))
    return report
