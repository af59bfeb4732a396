"""resourcequota: admit a PodGroup only while its namespace's ResourceQuotas have room.

A PodGroup's ``minResources`` is checked against every ResourceQuota of its namespace: for the
resources the quota limits (``spec.hard``, else ``status.hard``), what is already used
(``status.used``) plus what this session has admitted in the namespace plus the group's
minimum must stay within the limit. A group that does not fit is rejected with a PodGroup event
``resource quota insufficient, requested: ..., used: ..., limited: ...``.

Quota names and PodGroup names meet as Kubernetes counts them: a quota on ``requests.cpu`` also
limits a group's ``cpu`` (and a quota on ``cpu`` its ``requests.cpu``), since the PodGroups the
job controllers write usually name only the plain resources. Quantities are compared exactly.
"""

from __future__ import annotations

import logging
from fractions import Fraction

from stromboli.core.api.quantity import QuantityError, parse_quantity
from stromboli.core.scheduler.api.job import JobInfo
from stromboli.core.scheduler.framework.plugin import Plugin
from stromboli.core.scheduler.framework.points import ExtensionPoint
from stromboli.core.scheduler.framework.session import PERMIT, REJECT, Session

log = logging.getLogger(__name__)

REQUESTS_PREFIX = "requests."
Quantities = dict[str, Fraction]


def quantities(resources: dict | None, where: str) -> Quantities:
    """A ResourceList as exact quantities; unreadable entries are logged and left out."""
    out: Quantities = {}
    for name, value in (resources or {}).items():
        try:
            out[name] = parse_quantity(value, f"{where}.{name}")
        except QuantityError as err:
            log.warning("resourcequota: %s", err)
    return out


def requested_for(hard_name: str, minimum: Quantities) -> Fraction | None:
    """What a group's minimum asks of the quota name ``hard_name``, or None when it names
    nothing that quota counts."""
    if hard_name in minimum:
        return minimum[hard_name]
    if hard_name.startswith(REQUESTS_PREFIX):
        plain = hard_name[len(REQUESTS_PREFIX) :]
        return minimum.get(plain)
    return minimum.get(REQUESTS_PREFIX + hard_name)


def format_quantity(value: Fraction) -> str:
    """Short text for an exact quantity (``2``, ``500m``, ``1.5``)."""
    if value.denominator == 1:
        return str(value.numerator)
    millis = value * 1000
    if millis.denominator == 1:
        return f"{millis.numerator}m"
    return f"{float(value):g}"


def format_list(values: Quantities) -> str:
    """``map[cpu:2 memory:1073741824]``, the shape Go prints a ResourceList in."""
    return "map[" + " ".join(f"{n}:{format_quantity(v)}" for n, v in sorted(values.items())) + "]"


class ResourceQuotaPlugin(Plugin):
    name = "resourcequota"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        #: Namespace → minResources admitted by this session (not in any quota's ``used`` yet).
        self.pending: dict[str, Quantities] = {}
        ssn.register(ExtensionPoint.JOB_ENQUEUEABLE, self.name, self.job_enqueueable)
        ssn.register(ExtensionPoint.JOB_ENQUEUED, self.name, self.job_enqueued)

    def _quotas(self, namespace: str) -> list[dict]:
        return self.ssn.snapshot.resource_quotas.get(namespace) or []

    @staticmethod
    def _minimum(job: JobInfo) -> Quantities | None:
        raw = (job.podgroup.get("spec") or {}).get("minResources")
        if raw is None:
            return None
        return quantities(raw, f"PodGroup {job.uid} spec.minResources")

    def job_enqueueable(self, job: JobInfo) -> int:
        minimum = self._minimum(job)
        if minimum is None:
            return PERMIT
        pending = self.pending.get(job.namespace) or {}
        for quota in self._quotas(job.namespace):
            where = f"ResourceQuota {job.namespace}/{quota['metadata']['name']}"
            spec, status = quota.get("spec") or {}, quota.get("status") or {}
            hard = quantities(spec.get("hard") or status.get("hard"), f"{where} hard")
            used = quantities(status.get("used"), f"{where} status.used")
            requested: Quantities = {}
            for name in hard:
                amount = requested_for(name, minimum)
                if amount is not None:
                    requested[name] = amount
            short = [
                name
                for name, amount in requested.items()
                if used.get(name, Fraction(0))
                + (requested_for(name, pending) or Fraction(0))
                + amount
                > hard[name]
            ]
            if short:
                message = (
                    "resource quota insufficient, "
                    f"requested: {format_list({n: requested[n] for n in short})}, "
                    f"used: {format_list({n: used.get(n, Fraction(0)) for n in short})}, "
                    f"limited: {format_list({n: hard[n] for n in short})}"
                )
                self.ssn.job_events.append((job.uid, "Normal", "Unschedulable", message))
                return REJECT
        return PERMIT

    def job_enqueued(self, job: JobInfo) -> None:
        minimum = self._minimum(job)
        if minimum is None or not self._quotas(job.namespace):
            return
        pending = self.pending.setdefault(job.namespace, {})
        for name, amount in minimum.items():
            pending[name] = pending.get(name, Fraction(0)) + amount
