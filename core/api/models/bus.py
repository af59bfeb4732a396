"""``bus.volcano.sh/v1alpha1``: Command, a one-shot request to a controller (vcctl's verbs)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stromboli.core.api.constants import BUS_V1ALPHA1
from stromboli.core.api.models.common import OwnerReference, Resource


class Command(Resource):
    """Asks the job or queue controller to run ``action`` on ``target``, then is deleted.

    Commands carry their fields at the top level: there is no spec and no status.
    """

    api_version: Literal["bus.volcano.sh/v1alpha1"] = BUS_V1ALPHA1
    kind: Literal["Command"] = "Command"
    action: str | None = Field(None, description="A bus action such as AbortJob or OpenQueue.")
    target: OwnerReference | None = Field(None, description="The Job or Queue to act on.")
    reason: str | None = None
    message: str | None = None
