"""kube-scheduler's filters and score inputs over the session's node table.

One module per kube filter (node affinity, taints, ports, inter-pod affinity, topology spread,
unschedulable, pod count), the parsed pod spec they read, the node and pod indexes they share,
and the per-session state that keeps those indexes current. The ``predicates`` plugin filters
with them and the ``nodeorder`` plugin scores with them; neither imports the other.
"""
