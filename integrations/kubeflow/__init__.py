"""Kubeflow: the training operators' jobs and Kubeflow Pipelines, scheduled as Volcano gangs."""
