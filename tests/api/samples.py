"""Realistic objects of every modelled kind, written the way users write them in YAML."""

from __future__ import annotations

from typing import Any

QUEUE: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "research", "annotations": {"volcano.sh/hierarchy": "root/research"}},
    "spec": {
        "weight": 4,
        "capability": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": 8},
        "deserved": {"cpu": "32", "memory": "128Gi"},
        "guarantee": {"resource": {"cpu": "8", "memory": "32Gi"}},
        "reclaimable": True,
        "parent": "root",
        "priority": 10,
        "type": "team",
        "affinity": {
            "nodeGroupAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": ["group-a"],
                "preferredDuringSchedulingIgnoredDuringExecution": ["group-b"],
            },
            "nodeGroupAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["c"]},
        },
        "extendClusters": [{"name": "east", "weight": 2, "capacity": {"cpu": "100"}}],
        "dequeueStrategy": "fifo",
    },
    "status": {
        "state": "Open",
        "pending": 1,
        "running": 2,
        "reservation": {"nodes": ["n1"], "resource": {"cpu": "1"}},
        "allocated": {"cpu": "3500m", "memory": "7Gi"},
    },
}

PODGROUP: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "PodGroup",
    "metadata": {"name": "pg1", "namespace": "team-a"},
    "spec": {
        "minMember": 4,
        "minTaskMember": {"ps": 1, "worker": 3},
        "queue": "research",
        "priorityClassName": "high",
        "minResources": {"cpu": "4", "memory": "8Gi"},
        "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
        "subGroupPolicy": [
            {
                "name": "replica",
                "subGroupSize": 2,
                "minSubGroups": 1,
                "labelSelector": {"matchLabels": {"app": "x"}},
                "matchLabelKeys": ["replica-id"],
                "networkTopology": {"mode": "hard", "highestTierName": "rack"},
            }
        ],
    },
    "status": {
        "phase": "Running",
        "running": 4,
        "conditions": [
            {
                "type": "Scheduled",
                "status": "True",
                "transitionID": "0b1c",
                "lastTransitionTime": "1970-01-01T00:00:05Z",
                "reason": "tasks in gang are ready to be scheduled",
                "message": "",
            }
        ],
    },
}

POD_TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "x"}, "creationTimestamp": None},
    "spec": {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "futureField": {"kept": True},
            }
        ],
    },
}

JOB: dict[str, Any] = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {
        "name": "mpi-job",
        "namespace": "team-a",
        "labels": {"volcano.sh/job-type": "MPI"},
    },
    "spec": {
        "schedulerName": "volcano",
        "minAvailable": 3,
        "queue": "research",
        "priorityClassName": "high",
        "plugins": {"ssh": [], "svc": ["--publish-not-ready-addresses"], "env": []},
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "volumes": [{"mountPath": "/data", "volumeClaimName": "shared"}],
        "ttlSecondsAfterFinished": 60,
        "minSuccess": 1,
        "runningEstimate": "1h30m",
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        "tasks": [
            {
                "name": "master",
                "replicas": 1,
                "template": POD_TEMPLATE,
                "policies": [{"events": ["TaskCompleted"], "action": "CompleteJob"}],
            },
            {
                "name": "worker",
                "replicas": 4,
                "minAvailable": 2,
                "maxRetry": 5,
                "topologyPolicy": "single-numa-node",
                "dependsOn": {"name": ["master"], "iteration": "any"},
                "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1},
                "template": POD_TEMPLATE,
                "policies": [{"exitCode": 3, "action": "RestartTask", "timeout": "10m"}],
            },
        ],
    },
    "status": {
        "state": {"phase": "Running", "lastTransitionTime": "1970-01-01T00:01:00Z"},
        "minAvailable": 3,
        "running": 5,
        "retryCount": 1,
        "version": 2,
        "runningDuration": "1m0s",
        "taskStatusCount": {"worker": {"phase": {"Running": 4}}},
        "controlledResources": {"plugin-ssh": "ssh"},
        "conditions": [{"status": "Running", "lastTransitionTime": "1970-01-01T00:01:00Z"}],
    },
}

CRONJOB: dict[str, Any] = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "CronJob",
    "metadata": {"name": "nightly", "namespace": "team-a"},
    "spec": {
        "schedule": "0 2 * * *",
        "timeZone": "Europe/Rome",
        "startingDeadlineSeconds": 300,
        "jobTemplate": {
            "metadata": {"labels": {"kind": "nightly"}},
            "spec": {"tasks": [{"name": "t", "replicas": 1, "template": POD_TEMPLATE}]},
        },
    },
    "status": {
        "active": [{"kind": "Job", "name": "nightly-29000000", "namespace": "team-a"}],
        "lastScheduleTime": "1970-01-01T02:00:00Z",
    },
}

COMMAND: dict[str, Any] = {
    "apiVersion": "bus.volcano.sh/v1alpha1",
    "kind": "Command",
    "metadata": {"generateName": "mpi-job-abortjob-", "namespace": "team-a"},
    "action": "AbortJob",
    "target": {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "mpi-job",
        "uid": "1234",
        "controller": True,
    },
    "reason": "by user",
    "message": "aborted from vcctl",
}

JOBTEMPLATE: dict[str, Any] = {
    "apiVersion": "flow.volcano.sh/v1alpha1",
    "kind": "JobTemplate",
    "metadata": {"name": "prepare", "namespace": "team-a"},
    "spec": {"tasks": [{"name": "t", "replicas": 1, "template": POD_TEMPLATE}]},
    "status": {"jobDependsOnList": ["flow-train"]},
}

JOBFLOW: dict[str, Any] = {
    "apiVersion": "flow.volcano.sh/v1alpha1",
    "kind": "JobFlow",
    "metadata": {"name": "flow", "namespace": "team-a"},
    "spec": {
        "jobRetainPolicy": "delete",
        "flows": [
            {"name": "prepare"},
            {
                "name": "train",
                "dependsOn": {
                    "targets": ["prepare"],
                    "probe": {
                        "httpGetList": [
                            {
                                "taskName": "t",
                                "path": "/ready",
                                "port": 8080,
                                "httpHeader": {"name": "X", "value": "1"},
                            }
                        ],
                        "tcpSocketList": [{"taskName": "t", "port": 22}],
                        "taskStatusList": [{"taskName": "t", "phase": "Running"}],
                    },
                },
                "patch": {"jobSpec": {"minAvailable": 1}},
            },
        ],
    },
    "status": {
        "pendingJobs": ["flow-train"],
        "completedJobs": ["flow-prepare"],
        "unKnowJobs": [],
        "jobStatusList": [
            {
                "name": "flow-prepare",
                "state": "Completed",
                "startTimestamp": "1970-01-01T00:00:00Z",
                "restartCount": 0,
                "runningHistories": [{"state": "Running"}],
            }
        ],
        "conditions": {"flow-prepare": {"phase": "Completed", "runningDuration": "5s"}},
        "state": {"phase": "Running"},
    },
}

HYPERNODE: dict[str, Any] = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "rack-1"},
    "spec": {
        "tier": 1,
        "tierName": "rack",
        "members": [
            {"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-[2-4]$"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "1"}}}},
        ],
    },
    "status": {
        "nodeCount": 4,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Synced", "message": ""}],
    },
}

NUMATOPOLOGY: dict[str, Any] = {
    "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
    "kind": "Numatopology",
    "metadata": {"name": "node-1"},
    "spec": {
        "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "best-effort"},
        "resReserved": {"cpu": "1000m"},
        "numares": {"cpu": {"allocatable": "0-3", "capacity": 4}},
        "cpuDetail": {"0": {"numa": 0, "socket": 0, "core": 0}},
    },
}

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "mpi-job-worker-0",
        "namespace": "team-a",
        "annotations": {"scheduling.k8s.io/group-name": "pg1", "volcano.sh/task-spec": "worker"},
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {
        "schedulerName": "volcano",
        "priority": 100,
        "priorityClassName": "high",
        "nodeName": "node-1",
        "nodeSelector": {"disk": "ssd"},
        "overhead": {"cpu": "100m"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "2"}}}],
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                "ports": [{"containerPort": 22, "hostPort": 2222, "hostIP": "0.0.0.0"}],
            }
        ],
        "hostNetwork": False,
    },
    "status": {"phase": "Running", "startTime": "1970-01-01T00:00:10Z"},
}

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
    "spec": {
        "unschedulable": False,
        "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        "podCIDR": "10.0.0.0/24",
    },
    "status": {
        "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        "allocatable": {"cpu": "31500m", "memory": "250Gi", "pods": 110},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}

PRIORITY_CLASS: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
    "globalDefault": False,
    "preemptionPolicy": "PreemptLowerPriority",
    "description": "important jobs",
}

NAMESPACE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "team-a", "annotations": {"scheduling.volcano.sh/queue-name": "q"}},
}

RESOURCE_QUOTA: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "quota", "namespace": "team-a"},
    "spec": {"hard": {"requests.cpu": "10", "count/pods": "20"}},
    "status": {"used": {"requests.cpu": "2"}},
}

ALL: tuple[dict[str, Any], ...] = (
    QUEUE,
    PODGROUP,
    JOB,
    CRONJOB,
    COMMAND,
    JOBTEMPLATE,
    JOBFLOW,
    HYPERNODE,
    NUMATOPOLOGY,
    POD,
    NODE,
    PRIORITY_CLASS,
    NAMESPACE,
    RESOURCE_QUOTA,
)
"""One object of every kind that has a model."""

VOLCANO: tuple[dict[str, Any], ...] = ALL[:9]
"""The objects of our own CRDs."""
