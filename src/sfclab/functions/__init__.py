"""Network functions: one module per kind, each a :class:`~sfclab.functions.base.NetworkFunction`
subclass registered by name.  A function node forwards like a router and adds its behaviour."""

from .base import REGISTRY, FunctionContext, NetworkFunction, get, kinds, register  # noqa: F401
from . import load_all as _load_all  # noqa: F401  (imports every function module once)
