"""shuffle: evict the running pods that plugins nominate, as Volcano's ``shuffle`` action does.

Every Running task of the session is offered to the ``victimTasks`` plugins
(``ssn.victim_tasks``: ``rescheduling``, ``tdm``; ``pdb`` vetoes); each task they return is
evicted with reason ``shuffle``. The action only evicts: the pods' owners re-create them and
later cycles place them anew.
"""

from __future__ import annotations

from stromboli.core.scheduler.api.status import TaskStatus
from stromboli.core.scheduler.framework.plugin import Action
from stromboli.core.scheduler.framework.session import Session
from stromboli.core.scheduler.util.victims import SHUFFLE


class ShuffleAction(Action):
    name = "shuffle"

    def execute(self, ssn: Session) -> None:
        running = [
            task
            for job in ssn.jobs.values()
            for task in (job.by_status.get(TaskStatus.RUNNING) or {}).values()
        ]
        if not running:
            return
        for victim in ssn.victim_tasks(running):
            if victim.status != TaskStatus.RUNNING:
                continue  # nominated twice, or not a running pod of this session
            stmt = ssn.statement()
            stmt.evict(victim, SHUFFLE)
            stmt.commit(self.name)
