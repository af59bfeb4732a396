"""The Kubeflow training conversions, in one place: training-operator v1, MPI v2, Trainer v2."""

from stromboli.integrations.kubeflow.mpi import MPIJobAdapter
from stromboli.integrations.kubeflow.trainer import TrainJobAdapter
from stromboli.integrations.kubeflow.training import TrainingOperatorAdapter

__all__ = ["MPIJobAdapter", "TrainJobAdapter", "TrainingOperatorAdapter"]
