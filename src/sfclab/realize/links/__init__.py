"""The link forms: one module each, one table, tried in order (the first that selects a link
takes it; ``veth`` takes every link no other form claims).

- :mod:`.base`      what link forms share: the base class, an interface's stage-6 settings
- :mod:`.veth`      ``veth``: a veth pair, the form of every link no other form claims
- :mod:`.internal`  ``internal``: an OVS internal port moved into the node's namespace
- :mod:`.patch`     ``patch``: a pair of OVS patch ports between two OVS bridges
- :mod:`.hosted`    ``hosted``: a link joined in host contexts (labs with ``hosts``)

To add a link form: write a module here with one :class:`~sfclab.realize.links.base.LinkForm`
subclass (its ``name``; ``selects`` and ``check`` for validation; ``plan_link`` for the plan;
``journal``, the build stages it takes part in, ``teardown`` and ``inspect``), and add an
instance to :data:`LINK_FORMS` below, before the forms it must take precedence over.
"""

from __future__ import annotations

from ..part import Registry
from .base import LinkForm
from .hosted import Hosted
from .internal import Internal
from .patch import Patch
from .veth import Veth

LINK_FORMS = Registry("link form")
for _form in (Hosted(), Internal(), Patch(), Veth()):
    LINK_FORMS.add(_form)

__all__ = ["LINK_FORMS", "LinkForm"]
