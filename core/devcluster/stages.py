"""kwok stage configuration for the test control plane.

kwok (the binary, as opposed to kwokctl) does nothing without Stage objects. These stages
simulate a kubelet just enough for scheduler tests:

* ``stromboli-node-ready``   a managed node without ``Ready=True`` gets Ready conditions and
  ``phase: Running``. Capacity, allocatable, addresses and nodeInfo are written by
  :meth:`ControlPlane.add_nodes` when the node is created, so the stage leaves them alone.
  Liveness afterwards comes from the node Lease, which kwok renews itself
  (``--node-lease-duration-seconds``).
* ``stromboli-pod-running``  a pod bound to a managed node, still ``Pending`` and not being
  deleted, becomes ``Running`` and Ready (pod IP from the node's ``spec.podCIDR``).
* ``stromboli-pod-succeeded`` / ``stromboli-pod-failed``  opt-in: a Running pod annotated
  ``devcluster.stromboli.io/succeed-after: "5s"`` (or ``fail-after``) finishes after that
  delay, with exit code 0 (or ``devcluster.stromboli.io/exit-code``, default 1). Pods without
  the annotations run until deleted, which is what gang/preemption tests want; pods of
  Volcano or batch Jobs are *not* completed implicitly.
* ``stromboli-pod-delete``  a pod with ``deletionTimestamp`` is deleted with grace period 0
  right away (finalizers, if any, are left to their owners, as with a real kubelet).
"""

from __future__ import annotations

SUCCEED_AFTER_ANNOTATION = "devcluster.stromboli.io/succeed-after"
FAIL_AFTER_ANNOTATION = "devcluster.stromboli.io/fail-after"
EXIT_CODE_ANNOTATION = "devcluster.stromboli.io/exit-code"

_NODE_READY = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: stromboli-node-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select(.type == "Ready") | .status'
      operator: NotIn
      values: ["True"]
  next:
    patches:
    - subresource: status
      root: status
      type: strategic
      template: |
        {{ $t := Now | Quote }}
        phase: Running
        conditions:
        {{ range $c := list
             (list "Ready" "True" "KubeletReady" "kwok simulates a ready kubelet")
             (list "MemoryPressure" "False" "KubeletHasSufficientMemory" "no memory pressure")
             (list "DiskPressure" "False" "KubeletHasNoDiskPressure" "no disk pressure")
             (list "PIDPressure" "False" "KubeletHasSufficientPID" "no PID pressure")
             (list "NetworkUnavailable" "False" "RouteCreated" "network is simulated") }}
        - type: {{ index $c 0 }}
          status: {{ index $c 1 | Quote }}
          reason: {{ index $c 2 }}
          message: {{ index $c 3 | Quote }}
          lastHeartbeatTime: {{ $t }}
          lastTransitionTime: {{ $t }}
        {{ end }}
"""

_POD_RUNNING = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: stromboli-pod-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: ["Pending"]
  next:
    event:
      type: Normal
      reason: Started
      message: kwok started the pod's containers
    patches:
    - subresource: status
      root: status
      type: strategic
      template: |
        {{ $t := Now | Quote }}
        {{ $node := .spec.nodeName }}
        {{ $hostIP := NodeIPWith $node }}
        {{ $podIP := PodIPWith $node (or .spec.hostNetwork false)
             (or .metadata.uid "") .metadata.name .metadata.namespace }}
        phase: Running
        startTime: {{ $t }}
        hostIP: {{ $hostIP | Quote }}
        hostIPs:
        - ip: {{ $hostIP | Quote }}
        podIP: {{ $podIP | Quote }}
        podIPs:
        - ip: {{ $podIP | Quote }}
        conditions:
        {{ range $type := list "PodReadyToStartContainers" "Initialized"
                               "ContainersReady" "Ready" }}
        - type: {{ $type }}
          status: "True"
          lastProbeTime: null
          lastTransitionTime: {{ $t }}
        {{ end }}
        {{ with .spec.initContainers }}
        initContainerStatuses:
        {{ range . }}
        - name: {{ .name | Quote }}
          image: {{ or .image "" | Quote }}
          imageID: {{ printf "kwok://%s" (or .image "") | Quote }}
          restartCount: 0
          {{ if eq (or .restartPolicy "") "Always" }}
          ready: true
          started: true
          state:
            running:
              startedAt: {{ $t }}
          {{ else }}
          ready: true
          started: false
          state:
            terminated:
              exitCode: 0
              reason: Completed
              startedAt: {{ $t }}
              finishedAt: {{ $t }}
          {{ end }}
        {{ end }}
        {{ end }}
        containerStatuses:
        {{ range .spec.containers }}
        - name: {{ .name | Quote }}
          image: {{ or .image "" | Quote }}
          imageID: {{ printf "kwok://%s" (or .image "") | Quote }}
          ready: true
          started: true
          restartCount: 0
          state:
            running:
              startedAt: {{ $t }}
        {{ end }}
"""


def _pod_finished(name: str, annotation: str, phase: str, exit_code: str) -> str:
    return rf"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: {name}
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: DoesNotExist
    - key: .status.phase
      operator: In
      values: ["Running"]
    - key: '.metadata.annotations["{annotation}"]'
      operator: Exists
  delay:
    durationMilliseconds: 0
    durationFrom:
      jq:
        expression: '.metadata.annotations["{annotation}"]'
  next:
    patches:
    - subresource: status
      root: status
      type: strategic
      template: |
        {{{{ $t := Now | Quote }}}}
        {{{{ $code := {exit_code} }}}}
        phase: {phase}
        conditions:
        {{{{ range $type := list "ContainersReady" "Ready" }}}}
        - type: {{{{ $type }}}}
          status: "False"
          reason: {"PodCompleted" if phase == "Succeeded" else "PodFailed"}
          lastProbeTime: null
          lastTransitionTime: {{{{ $t }}}}
        {{{{ end }}}}
        containerStatuses:
        {{{{ range .spec.containers }}}}
        - name: {{{{ .name | Quote }}}}
          image: {{{{ or .image "" | Quote }}}}
          imageID: {{{{ printf "kwok://%s" (or .image "") | Quote }}}}
          ready: false
          started: false
          restartCount: 0
          state:
            terminated:
              exitCode: {{{{ $code }}}}
              reason: {"Completed" if phase == "Succeeded" else "Error"}
              finishedAt: {{{{ $t }}}}
        {{{{ end }}}}
"""


_POD_SUCCEEDED = _pod_finished(
    "stromboli-pod-succeeded", SUCCEED_AFTER_ANNOTATION, "Succeeded", "0"
)
_POD_FAILED = _pod_finished(
    "stromboli-pod-failed",
    FAIL_AFTER_ANNOTATION,
    "Failed",
    f'(or (index (or .metadata.annotations dict) "{EXIT_CODE_ANNOTATION}") "1")',
)

_POD_DELETE = r"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: stromboli-pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: .metadata.deletionTimestamp
      operator: Exists
  next:
    delete: true
"""

KWOK_STAGES_YAML = "---".join([_NODE_READY, _POD_RUNNING, _POD_SUCCEEDED, _POD_FAILED, _POD_DELETE])
