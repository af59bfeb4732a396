"""How many pods one vcjob may ask for.

Kubernetes bounds ``replicas`` only by int32, so a single Job could ask for two billion pods and
the controller would try to create them. Stromboli refuses a Job whose tasks ask for more than
a limit in all: the webhook at create and update (``--max-job-replicas``), and the controller
for a Job stored while the webhook was not in the way (it stays unstarted, with a Warning).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: Pods one Job may ask for, summed over its tasks (Volcano's own e2e jobs stay far below).
MAX_JOB_REPLICAS = 50_000


@dataclass(frozen=True, slots=True)
class Oversize:
    """The first task at which the running total passes the limit."""

    index: int
    replicas: int
    total: int
    limit: int

    @property
    def field(self) -> str:
        return f"spec.tasks[{self.index}].replicas"

    def reason(self) -> str:
        return (
            f"the job's tasks ask for {self.total} pods in all (up to this task), more than "
            f"the {self.limit} one job may have"
        )


def oversize(replicas: Iterable[int], limit: int = MAX_JOB_REPLICAS) -> Oversize | None:
    """Where the tasks' ``replicas``, in order, first sum past ``limit``; None if they never do."""
    total = 0
    for index, count in enumerate(replicas):
        total += max(count, 0)
        if total > limit:
            return Oversize(index, count, total, limit)
    return None


def oversize_message(found: Oversize) -> str:
    """The webhook's refusal, in the API server's shape of a field error."""
    return (
        f"{found.field}: Invalid value: {found.replicas}: {found.reason()} "
        "(webhook-manager flag --max-job-replicas)"
    )
