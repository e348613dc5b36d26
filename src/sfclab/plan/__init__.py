"""Pure functions from a validated lab to a concrete plan: names, addresses, routes.
Nothing here touches the kernel, so all of it is tested without root."""

from .build import build_plan  # noqa: F401
from .model import Plan  # noqa: F401
