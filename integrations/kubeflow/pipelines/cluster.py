"""The Kubernetes API as a pipeline step sees it, through the ``kubernetes`` package.

A step runs once, for minutes or hours, in a pod of the pipeline's service account: the
official client with ``kubernetes.config`` (in-cluster or a kubeconfig) is the ordinary way to
reach the API there, and its few calls are no hot path. Answers are read as plain JSON
(``_preload_content=False``), never as the client's model objects.

The first request (:meth:`Cluster.check_reachable`) does not retry, so an unreachable cluster
fails the step at once; later reads are retried by the caller while the API is briefly away.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from stromboli.core.api import constants as k
from stromboli.integrations.kubeflow.pipelines.errors import ParameterError

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
#: Seconds to connect and to wait for one answer.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0

BATCH_GROUP, BATCH_VERSION = k.BATCH_V1ALPHA1.split("/")
SCHEDULING_GROUP, SCHEDULING_VERSION = k.SCHEDULING_V1BETA1.split("/")

#: Errors worth another try later: the connection, or an API server that is busy or restarting.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
TransportError = urllib3.exceptions.HTTPError


def is_transient(error: BaseException) -> bool:
    if isinstance(error, ApiException):
        return error.status in TRANSIENT_STATUS
    return isinstance(error, TransportError)


def api_message(error: ApiException) -> str:
    """The API server's own message (its ``Status.message``), else the HTTP reason."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or f"{error.status} {error.reason}")


class Cluster:
    """One API server: the calls a step makes, each returning plain JSON."""

    def __init__(self, api: client.ApiClient, default_namespace: str) -> None:
        self.api = api
        self.default_namespace = default_namespace
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.host = str(api.configuration.host)

    @classmethod
    def connect(cls, kubeconfig: str = "") -> Cluster:
        """From ``kubeconfig`` (a file), else the pod's service account, else ``$KUBECONFIG``
        or ``~/.kube/config``. Raises :class:`ParameterError` naming ``kubeconfig``."""
        configuration = client.Configuration()
        namespace = ""
        try:
            if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
                path = kubeconfig or None
                if kubeconfig and not Path(kubeconfig).is_file():
                    raise ParameterError("kubeconfig", f"no file at {kubeconfig}")
                config.load_kube_config(config_file=path, client_configuration=configuration)
                _, active = config.list_kube_config_contexts(config_file=path)
                namespace = str(((active or {}).get("context") or {}).get("namespace") or "")
            else:
                config.load_incluster_config(client_configuration=configuration)
                namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        except ConfigException as error:
            raise ParameterError(
                "kubeconfig",
                f"no cluster to talk to ({error}): run the step in a pod with a service "
                "account, or pass a kubeconfig file",
            ) from None
        except OSError as error:
            raise ParameterError("kubeconfig", f"cannot read the configuration: {error}") from None
        configuration.retries = False  # the caller decides what to retry
        return cls(client.ApiClient(configuration), namespace or "default")

    def close(self) -> None:
        self.api.close()

    # --- requests ------------------------------------------------------------------------------

    def _json(self, response: Any) -> dict[str, Any]:
        return json.loads(response.data)

    @property
    def _timeout(self) -> tuple[float, float]:
        return (CONNECT_TIMEOUT, READ_TIMEOUT)

    def check_reachable(self) -> None:
        """One request to the API server; :class:`ParameterError` naming ``kubeconfig`` if
        it cannot be reached or refuses the credentials."""
        try:
            client.VersionApi(self.api).get_code(
                _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as error:
            raise ParameterError(
                "kubeconfig", f"the API server at {self.host} refused: {api_message(error)}"
            ) from None
        except TransportError as error:
            reason = getattr(error, "reason", None) or error
            raise ParameterError(
                "kubeconfig", f"cannot reach the Kubernetes API at {self.host}: {reason}"
            ) from None

    def get_queue(self, name: str) -> dict[str, Any]:
        return self._json(
            self.custom.get_cluster_custom_object(
                SCHEDULING_GROUP,
                SCHEDULING_VERSION,
                "queues",
                name,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )

    def queue_names(self) -> list[str]:
        listed = self._json(
            self.custom.list_cluster_custom_object(
                SCHEDULING_GROUP,
                SCHEDULING_VERSION,
                "queues",
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )
        return sorted(str((q.get("metadata") or {}).get("name")) for q in listed.get("items", ()))

    def create_job(self, job: Mapping[str, Any]) -> dict[str, Any]:
        namespace = job["metadata"]["namespace"]
        return self._json(
            self.custom.create_namespaced_custom_object(
                BATCH_GROUP,
                BATCH_VERSION,
                namespace,
                "jobs",
                dict(job),
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )

    def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(
            self.custom.get_namespaced_custom_object(
                BATCH_GROUP,
                BATCH_VERSION,
                namespace,
                "jobs",
                name,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        """Delete this very job (the uid is a precondition); its pods and PodGroup go with it
        through their owner references (background propagation: the garbage collector)."""
        self.custom.delete_namespaced_custom_object(
            BATCH_GROUP,
            BATCH_VERSION,
            namespace,
            "jobs",
            name,
            body={"propagationPolicy": "Background", "preconditions": {"uid": uid}},
            _preload_content=False,
            _request_timeout=self._timeout,
        )

    def get_podgroup(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self._json(
                self.custom.get_namespaced_custom_object(
                    SCHEDULING_GROUP,
                    SCHEDULING_VERSION,
                    namespace,
                    "podgroups",
                    name,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                )
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def podgroup_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The events about the PodGroup ``name`` (the scheduler's reasons; an enqueue
        refusal is only there), selected by the server."""
        listed = self._json(
            self.core.list_namespaced_event(
                namespace,
                field_selector=f"involvedObject.kind=PodGroup,involvedObject.name={name}",
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )
        return [e for e in listed.get("items") or () if isinstance(e, dict)]

    def job_pods(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        listed = self._json(
            self.core.list_namespaced_pod(
                namespace,
                label_selector=f"{k.JOB_NAME_KEY}={job_name}",
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        )
        pods = list(listed.get("items") or ())
        pods.sort(key=lambda p: str((p.get("metadata") or {}).get("name")))
        return pods
