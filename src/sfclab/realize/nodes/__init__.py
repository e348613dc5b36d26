"""The node kinds: one module each, one table.  ``host``, ``linux-bridge``, ``ovs-bridge``, and
one entry per function class (``router``, ``firewall``, ``nat``, ``shaper``, ``dpi``, ``tun``).

- :mod:`.namespace`     what every node with a namespace of its own shares
- :mod:`.host`          ``host``: an endpoint namespace; it neither forwards nor bridges
- :mod:`.function`      a function node kind: a forwarding namespace plus one network function
- :mod:`.linux_bridge`  ``linux-bridge``: a Linux bridge ``br0`` in a namespace of its own
- :mod:`.ovs_bridge`    ``ovs-bridge``: an Open vSwitch bridge (no namespace)

To add a node kind: write a module here with one :class:`~sfclab.realize.part.Part` subclass
(its ``name``, ``attachment``, ``has_namespace``, ``forwards``, ``sfc_program``,
``params_model`` and the stages it takes part in), and add it to :data:`NODE_KINDS` below.  A new network function needs no entry
here: it registers itself in :mod:`sfclab.functions` and appears as a :class:`FunctionNode`.
"""

from __future__ import annotations

from ... import functions
from ..part import Registry
from .function import FunctionNode
from .host import Host
from .linux_bridge import LinuxBridge
from .ovs_bridge import OvsBridge

NODE_KINDS = Registry("node kind")
for _part in (Host(), LinuxBridge(), OvsBridge()):
    NODE_KINDS.add(_part)
for _kind in functions.kinds():
    NODE_KINDS.add(FunctionNode(_kind))
