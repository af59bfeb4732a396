"""The cluster store: one async interface over a real API server or an in-memory one.

``ClusterStore`` is the interface; ``MemoryStore`` the embedded backend used by the simulator and
tests. Errors mirror the API server's statuses; selectors are shared with the scheduler.
"""

from stromboli.core.cluster.errors import (
    AlreadyExistsError,
    ApiError,
    BadRequestError,
    ConflictError,
    GoneError,
    InternalError,
    InvalidError,
    NotFoundError,
    TooManyRequestsError,
    UnsupportedMediaTypeError,
)
from stromboli.core.cluster.memory import MemoryStore
from stromboli.core.cluster.store import (
    ADDED,
    BOOKMARK,
    DELETED,
    MODIFIED,
    ClusterStore,
    ObjectList,
    WatchEvent,
    WatchStream,
)

__all__ = [
    "ADDED",
    "BOOKMARK",
    "DELETED",
    "MODIFIED",
    "AlreadyExistsError",
    "ApiError",
    "BadRequestError",
    "ClusterStore",
    "ConflictError",
    "GoneError",
    "InternalError",
    "InvalidError",
    "MemoryStore",
    "NotFoundError",
    "ObjectList",
    "TooManyRequestsError",
    "UnsupportedMediaTypeError",
    "WatchEvent",
    "WatchStream",
]
