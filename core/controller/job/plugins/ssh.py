"""``ssh``: password-less SSH between the pods of a job (what MPI launchers need).

On job add a Secret ``<job>-ssh`` is made with a fresh 2048-bit RSA key pair (or the
``--ssh-private-key`` / ``--ssh-public-key`` given), holding ``id_rsa``, ``id_rsa.pub``,
``authorized_keys`` (the public key) and an ssh ``config`` with ``StrictHostKeyChecking no``
and a ``Host`` entry per pod of the job (``HostName <pod>.<job>``, ``Port`` = ``--ssh-port``).
Every (init) container mounts it at ``--ssh-key-file-path`` (default ``/root/.ssh``).

The private key is always mode 0600: ssh refuses a key that others can read, and a key
readable by every user of the container is no secret. Under root's path the other files are
0600 too; elsewhere they are 0644, so that the non-root user the path belongs to can read the
public key, ``authorized_keys`` and ``config`` of the root-owned volume. That user reads the
private key through the pod's ``securityContext.fsGroup``, to which the kubelet gives group
read access on the volume (ssh accepts a key that is not its user's own file). Volcano makes
every file 0644 in that case, private key included; this is where Stromboli differs.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from stromboli.core.api import constants as k
from stromboli.core.api.jobflags import Flag
from stromboli.core.controller.job.plugins.base import (
    JobPlugin,
    Obj,
    ObjectRef,
    containers,
    task_hosts,
)

log = logging.getLogger(__name__)

PRIVATE_KEY = "id_rsa"
PUBLIC_KEY = "id_rsa.pub"
AUTHORIZED_KEYS = "authorized_keys"
CONFIG = "config"
ROOT_SSH_PATH = "/root/.ssh"
RELATIVE_PATH = ".ssh"
KEY_BITS = 2048
PRIVATE_KEY_MODE = 0o600
ROOT_MODE = 0o600
NON_ROOT_MODE = 0o644


def generate_key_pair(bits: int = KEY_BITS) -> tuple[bytes, bytes]:
    """A new RSA key: PKCS#1 PEM private key, and the public key as an authorized_keys line."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, public + b"\n"


class SshPlugin(JobPlugin):
    """See the module docstring."""

    name = "ssh"
    flags = (
        Flag("ssh-key-file-path", ROOT_SSH_PATH, "where containers find the keys"),
        Flag("ssh-private-key", "", "use this private key instead of generating one"),
        Flag("ssh-public-key", "", "the public key matching --ssh-private-key"),
        Flag("ssh-port", 22, "port written into the ssh config"),
    )

    def __init__(self, arguments: Sequence[str] | None, job: Mapping[str, Any]) -> None:
        super().__init__(arguments, job)
        port = self.options["ssh-port"]
        if not 0 < port <= 65535:
            log.warning("ssh plugin: invalid ssh port %d, using 22", port)
            self.options["ssh-port"] = 22

    @property
    def secret_name(self) -> str:
        return f"{self.job_name}-{self.name}"

    def ssh_config(self) -> str:
        port = self.options["ssh-port"]
        lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
        for task in self.tasks:
            for host in task_hosts(self.job_name, task):
                short = host.split(".", 1)[0]
                lines += [f"Host {short}", f"  HostName {host}", f"  Port {port}"]
        return "\n".join(lines) + "\n"

    def key_files(self) -> dict[str, bytes]:
        """The Secret's files (plain bytes); generates a key pair unless one was given."""
        if self.options["ssh-private-key"]:
            private = self.options["ssh-private-key"].encode()
            public = self.options["ssh-public-key"].encode()
        else:
            private, public = generate_key_pair()
        return {
            PRIVATE_KEY: private,
            PUBLIC_KEY: public,
            AUTHORIZED_KEYS: public,
            CONFIG: self.ssh_config().encode(),
        }

    def on_job_add(self) -> list[Obj]:
        data = {name: base64.b64encode(v).decode() for name, v in self.key_files().items()}
        return [self.owned(k.CORE_V1, "Secret", self.secret_name, type="Opaque", data=data)]

    def on_job_delete(self) -> list[ObjectRef]:
        return [(k.CORE_V1, "Secret", self.secret_name)]

    def on_pod_create(self, pod: Obj, task_name: str, index: int) -> None:
        path = self.options["ssh-key-file-path"]
        public_mode = ROOT_MODE if path == ROOT_SSH_PATH else NON_ROOT_MODE
        items = [
            {"key": PRIVATE_KEY, "path": f"{RELATIVE_PATH}/{PRIVATE_KEY}", "mode": PRIVATE_KEY_MODE}
        ]
        items += [
            {"key": key, "path": f"{RELATIVE_PATH}/{key}", "mode": public_mode}
            for key in (PUBLIC_KEY, AUTHORIZED_KEYS, CONFIG)
        ]
        # defaultMode covers nothing listed; it is the private key's, so that a file added
        # to the list without a mode is never readable by others.
        volume = {
            "name": self.secret_name,
            "secret": {
                "secretName": self.secret_name,
                "items": items,
                "defaultMode": PRIVATE_KEY_MODE,
            },
        }
        pod.setdefault("spec", {}).setdefault("volumes", []).append(volume)
        for container in containers(pod):
            container.setdefault("volumeMounts", []).append(
                {"name": self.secret_name, "mountPath": path, "subPath": RELATIVE_PATH}
            )
