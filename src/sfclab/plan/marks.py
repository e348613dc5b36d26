"""The packet mark's layout in a lab node: two owners, each with its own bits.

The mark is one 32-bit word per packet (``skb->mark``, nftables ``meta mark``).  Two parts of
sfclab use it in the same namespace, so each owns a field and writes only that field:

======================  ===========  ==================================================
field                   bits         owner and meaning
======================  ===========  ==================================================
proxy tag               31..28       the SFC proxy (bpf/): ``TAG`` says a stack is parked
parked stack id         27..12       the SFC proxy: the id of the label stack it parked
tenant                  11..0        the tenancy rules (realize/tenancy.py): the tenant's
                                     routing table in a node shared by tenants
======================  ===========  ==================================================

The C side is ``include/sfc.h`` (``SFC_MARK_*``); a unit test reads the header and fails if the
two drift apart.  The tenancy rules set the tenant field with masked nftables statements
(``meta mark set meta mark and PROXY_MASK or N``) and route by ``fwmark N/TENANT_MASK``; the
BPF programs read and write only ``PROXY_MASK``.
"""

from __future__ import annotations

PROXY_MASK = 0xFFFFF000
TAG_MASK = 0xF0000000
TAG = 0x50000000
ID_SHIFT = 12
ID_MASK = 0xFFFF
TENANT_MASK = 0x00000FFF


def tenant_fits(value: int) -> bool:
    """Whether ``value`` (a tenant's table number) fits the tenant field and is not 0."""
    return 0 < value <= TENANT_MASK
