"""The two ways a pipeline step that runs a vcjob fails, told apart for the pipeline's log.

A :class:`ParameterError` is raised before anything is created on the cluster, so a user can fix
the step's arguments and run it again; a :class:`JobFailed` comes from the job itself.
"""

from __future__ import annotations


class ParameterError(ValueError):
    """A component argument that cannot be used; the message starts with the parameter's name."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter
        self.detail = message


class JobFailed(RuntimeError):
    """The vcjob ended in a phase other than Completed, was deleted, or ran out of time."""

    def __init__(self, job: str, message: str) -> None:
        super().__init__(f"vcjob {job}: {message}")
        self.job = job
        self.detail = message


class Cancelled(BaseException):
    """SIGTERM or SIGINT reached the step (run cancelled, pod deadline): the job is deleted.

    A ``BaseException`` so that no ``except Exception`` on the way swallows the cancellation.
    """

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"step stopped by {signal_name}")
        self.signal_name = signal_name
