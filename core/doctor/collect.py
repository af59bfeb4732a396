"""Gather a :class:`ClusterView` from a live cluster: one list per kind, one Get for the
webhook's Secret, one SubjectAccessReview per RBAC question, and a TLS handshake with a
webhook served at a URL. Reading fails soft: a kind that cannot be listed is recorded in
``view.unread`` and its checks are skipped with a line saying why."""

from __future__ import annotations

import asyncio
import ssl
from typing import Final
from urllib.parse import urlsplit

from stromboli.core.cluster.errors import ApiError, NotFoundError
from stromboli.core.cluster.kubehttp import UnreachableError
from stromboli.core.cluster.store import ClusterStore, Obj
from stromboli.core.doctor import rbac
from stromboli.core.doctor.install import settings
from stromboli.core.doctor.view import AccessQuestion, ClusterView, meta, text
from stromboli.integrations.kinds import CONVERTED

SA_GROUPS: Final = ("system:serviceaccounts", "system:authenticated")
CONCURRENT_REVIEWS: Final = 16
HANDSHAKE_TIMEOUT: Final = 5.0

LISTED: Final[tuple[tuple[str, str, str, str], ...]] = (
    # (view attribute, apiVersion, kind, namespace: "" all / "install" the install namespace)
    ("crds", "apiextensions.k8s.io/v1", "CustomResourceDefinition", ""),
    (
        "mutating_configurations",
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "",
    ),
    (
        "validating_configurations",
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "",
    ),
    ("deployments", "apps/v1", "Deployment", ""),
    ("namespaces", "v1", "Namespace", ""),
    ("service_accounts", "v1", "ServiceAccount", "install"),
)


async def _list(
    store: ClusterStore, view: ClusterView, api: str, kind: str, ns: str | None
) -> list[Obj]:
    try:
        return (await store.list(api, kind, ns)).items
    except UnreachableError:
        raise  # nothing else will answer either: one error, not a line per kind
    except ApiError as err:
        view.unread[kind] = str(err)
        return []


async def _review(store: ClusterStore, question: AccessQuestion, namespace: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{namespace}:{question.service_account}",
            "groups": [*SA_GROUPS, f"system:serviceaccounts:{namespace}"],
            "resourceAttributes": question.attributes(),
        },
    }
    answer = await store.create(review)
    status = answer.get("status")
    return isinstance(status, dict) and status.get("allowed") is True


async def _access(store: ClusterStore, view: ClusterView) -> None:
    gate = asyncio.Semaphore(CONCURRENT_REVIEWS)

    async def ask(question: AccessQuestion) -> None:
        async with gate:
            view.access[question] = await _review(store, question, view.namespace)

    try:
        await asyncio.gather(*(ask(q) for q in dict.fromkeys(rbac.all_questions(view))))
    except ApiError as err:
        view.access_error = str(err)


def presented_certificate(url: str, timeout: float = HANDSHAKE_TIMEOUT) -> bytes | str:
    """The PEM certificate the server at ``url`` presents (not verified: that is the check's
    job), or why none was read."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return f"{url!r} is not an https URL"
    try:
        pem = ssl.get_server_certificate((parts.hostname, parts.port or 443), timeout=timeout)
    except (OSError, ssl.SSLError, ValueError) as err:
        return f"TLS handshake failed: {err}"
    return pem.encode()


async def collect(store: ClusterStore, namespace: str) -> ClusterView:
    view = ClusterView(namespace=namespace)
    for attribute, api, kind, scope in LISTED:
        items = await _list(store, view, api, kind, namespace if scope else None)
        setattr(view, attribute, items)
    wanted = settings(view)
    for api, kind, attribute in (
        ("v1", "Service", "services"),
        ("discovery.k8s.io/v1", "EndpointSlice", "endpoint_slices"),
    ):
        setattr(view, attribute, await _list(store, view, api, kind, wanted.namespace))
    if wanted.secret_name:
        try:
            view.secrets = [await store.get("v1", "Secret", wanted.secret_name, wanted.namespace)]
        except NotFoundError:
            view.secrets = []
        except ApiError as err:
            view.unread["Secret"] = str(err)
    installed = {text(meta(crd).get("name")) for crd in view.crds}
    for info in CONVERTED:
        if f"{info.plural}.{info.group}" not in installed:
            continue
        try:
            objects = (await store.list(info.api_version, info.kind)).items
        except ApiError:
            continue  # another version of the CRD (MPIJob v1 / v2beta1): the other one answers
        spaces = view.framework_namespaces.setdefault(info.kind, set())
        spaces.update(text(meta(o).get("namespace")) for o in objects)
    await _access(store, view)
    if wanted.url:
        view.peer_certificates[wanted.url] = await asyncio.to_thread(
            presented_certificate, wanted.url
        )
    return view
