"""A throw-away Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kwok,
kube-scheduler) for tests and benchmarks; see :class:`ControlPlane` and
``hack/build-control-plane.sh``."""

from stromboli.core.pki import CertificateAuthority, KeyPair

from .build import BIN_ENV, Binaries, BuildError, build_control_plane
from .client import KubeAPIError, KubeHTTP, load_manifests
from .controlplane import (
    ADMIN_USER,
    KWOK_NODE_ANNOTATION,
    ControlPlane,
    ControlPlaneError,
    free_port,
    node_is_ready,
)
from .stages import EXIT_CODE_ANNOTATION, FAIL_AFTER_ANNOTATION, SUCCEED_AFTER_ANNOTATION

__all__ = [
    "ADMIN_USER",
    "BIN_ENV",
    "EXIT_CODE_ANNOTATION",
    "FAIL_AFTER_ANNOTATION",
    "KWOK_NODE_ANNOTATION",
    "SUCCEED_AFTER_ANNOTATION",
    "Binaries",
    "BuildError",
    "CertificateAuthority",
    "ControlPlane",
    "ControlPlaneError",
    "KeyPair",
    "KubeAPIError",
    "KubeHTTP",
    "build_control_plane",
    "free_port",
    "load_manifests",
    "node_is_ready",
]
