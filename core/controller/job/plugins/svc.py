"""``svc``: stable DNS names for a job's pods and the host lists of every task.

Each pod gets ``hostname`` = its name and ``subdomain`` = the job name, and a headless Service
named after the job makes ``<pod>.<job>`` resolve. A ConfigMap ``<job>-svc`` lists the hosts of
every task and is mounted at ``/etc/volcano``:

* ``<task>.host``: one host per line;
* ``VC_<TASK>_HOSTS``: the same hosts, comma-separated; ``VC_<TASK>_NUM``: how many.

(task names with ``-`` turned into ``_``, upper-cased in the ``VC_`` keys). Unless
``--inject-hosts-env=false``, the ``VC_`` keys are also environment variables of every container.
A NetworkPolicy ``<job>`` admits traffic to the pods only from pods of the same job, unless
``--disable-network-policy``. ``--publish-not-ready-addresses`` publishes pods before they are
ready (useful when workers must resolve each other to become ready).
"""

from __future__ import annotations

from stromboli.core.api import constants as k
from stromboli.core.api.jobflags import Flag
from stromboli.core.controller.job.plugins.base import (
    JobPlugin,
    Obj,
    ObjectRef,
    add_env,
    containers,
    env_key,
    task_hosts,
)

CONFIG_MAP_MOUNT_PATH = "/etc/volcano"


def hosts_env_name(task_name: str) -> str:
    return f"VC_{env_key(task_name).upper()}_HOSTS"


def hosts_num_env_name(task_name: str) -> str:
    return f"VC_{env_key(task_name).upper()}_NUM"


class SvcPlugin(JobPlugin):
    """See the module docstring."""

    name = "svc"
    flags = (
        Flag("publish-not-ready-addresses", False, "publish pods in DNS before they are ready"),
        Flag("disable-network-policy", False, "do not create the job's NetworkPolicy"),
        Flag("inject-hosts-env", True, "put VC_<TASK>_HOSTS/NUM into containers' environment"),
    )

    @property
    def config_map_name(self) -> str:
        return f"{self.job_name}-{self.name}"

    def host_file(self) -> dict[str, str]:
        """The ConfigMap data: host lists per task (see the module docstring)."""
        data: dict[str, str] = {}
        for task in self.tasks:
            task_name = str(task.get("name", ""))
            hosts = task_hosts(self.job_name, task)
            data[f"{env_key(task_name)}.host"] = "\n".join(hosts)
            data[hosts_env_name(task_name)] = ",".join(hosts)
            data[hosts_num_env_name(task_name)] = str(len(hosts))
        return data

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        spec = pod.setdefault("spec", {})
        if not spec.get("hostname"):
            spec["hostname"] = (pod.get("metadata") or {}).get("name", "")
        if not spec.get("subdomain"):
            spec["subdomain"] = self.job_name
        cm = self.config_map_name
        if self.options["inject-hosts-env"]:
            names = []
            for task in self.tasks:
                task_key = str(task.get("name", ""))
                names += [hosts_env_name(task_key), hosts_num_env_name(task_key)]
            variables = [
                {"name": n, "valueFrom": {"configMapKeyRef": {"name": cm, "key": n}}} for n in names
            ]
            for container in containers(pod):
                add_env(container, *variables)
        spec.setdefault("volumes", []).append({"name": cm, "configMap": {"name": cm}})
        for container in containers(pod):
            container.setdefault("volumeMounts", []).append(
                {"name": cm, "mountPath": CONFIG_MAP_MOUNT_PATH}
            )

    def config_map(self) -> Obj:
        return self.owned(k.CORE_V1, "ConfigMap", self.config_map_name, data=self.host_file())

    def service(self) -> Obj:
        spec: Obj = {
            "clusterIP": "None",
            "selector": self.job_selector(),
            "publishNotReadyAddresses": bool(self.options["publish-not-ready-addresses"]),
        }
        return self.owned(k.CORE_V1, "Service", self.job_name, spec=spec)

    def network_policy(self) -> Obj:
        spec = {
            "podSelector": {"matchLabels": self.job_selector()},
            "ingress": [{"from": [{"podSelector": {"matchLabels": self.job_selector()}}]}],
            "policyTypes": ["Ingress"],
        }
        return self.owned(k.NETWORKING_V1, "NetworkPolicy", self.job_name, spec=spec)

    def job_selector(self) -> dict[str, str]:
        return {k.JOB_NAME_KEY: self.job_name, k.JOB_NAMESPACE_KEY: self.namespace}

    def on_job_add(self) -> list[Obj]:
        objects = [self.config_map(), self.service()]
        if not self.options["disable-network-policy"]:
            objects.append(self.network_policy())
        return objects

    def on_job_update(self) -> list[Obj]:
        return [self.config_map()]

    def on_job_delete(self) -> list[ObjectRef]:
        refs = [
            (k.CORE_V1, "ConfigMap", self.config_map_name),
            (k.CORE_V1, "Service", self.job_name),
        ]
        if not self.options["disable-network-policy"]:
            refs.append((k.NETWORKING_V1, "NetworkPolicy", self.job_name))
        return refs
