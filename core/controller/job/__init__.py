"""The vcjob controller, as Volcano's job controller: Jobs become a PodGroup and pods, driven
through Volcano's job state machine by pod events, lifecycle policies and Commands.

- :mod:`.state` — the phase × action table, as pure functions over a status;
- :mod:`.policies` — pod/PodGroup changes → bus events, and events → actions (policies);
- :mod:`.build` — the PodGroup, pods and PVC names the controller creates;
- :mod:`.status` — the Job status: counts, conditions, durations;
- :mod:`.queue` — queue open/close Commands and Volcano's queue state rules;
- :mod:`.controller` — the reconciler that ties them to a cluster store, assembled from one
  layer per concern (:mod:`.base` → :mod:`.timers` → :mod:`.intake` → :mod:`.pods` →
  :mod:`.resources` → :mod:`.sync`): shared state, timers and TTL, events into requests, pods
  and PodGroup, plugin objects and PVCs, the sync and kill of one job.
"""
