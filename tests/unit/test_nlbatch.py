"""The rtnetlink requests ``kernel.nlbatch`` encodes, read back field by field."""

from __future__ import annotations

import struct

from sfclab.kernel import nlbatch
from sfclab.realize.nodes.namespace import _name_order


def _attrs(buf: bytes) -> dict[int, bytes]:
    out, off = {}, 0
    while off + 4 <= len(buf):
        length, kind = struct.unpack_from("HH", buf, off)
        out[kind] = buf[off + 4:off + length]
        off += (length + 3) & ~3
    return out


def _ends(body: bytes) -> list[tuple[str, int, int | None]]:
    """(name, index, mtu) of the first end, then of the peer."""
    ends = []
    for msg in (body, None):
        if msg is None:
            info = _attrs(_attrs(body[16:])[nlbatch.IFLA_LINKINFO])[nlbatch.IFLA_INFO_DATA]
            msg = _attrs(info)[nlbatch.VETH_INFO_PEER]
        index = struct.unpack_from("i", msg, 4)[0]
        a = _attrs(msg[16:])
        mtu = struct.unpack("I", a[nlbatch.IFLA_MTU])[0] if nlbatch.IFLA_MTU in a else None
        ends.append((a[nlbatch.IFLA_IFNAME].rstrip(b"\0").decode(), index, mtu))
    return ends


def test_a_veth_pair_carries_both_ends_indexes() -> None:
    b = nlbatch.Batch()
    b.veth("eth0", 3, "eth1", 4, "pair", mtu=1400, index=7, peer_index=8)
    assert _ends(b.msgs[0][2]) == [("eth0", 7, 1400), ("eth1", 8, 1400)]


def test_an_end_with_an_index_goes_first_when_its_peer_has_none() -> None:
    """The kernel takes the peer's index only when the first end has one: a root-bound end
    (index 0) and a lab end with its index are sent the other way round, MTUs kept."""
    b = nlbatch.Batch()
    b.veth("root0", 3, "eth0", 4, "pair", mtu=None, peer_mtu=9000, index=0, peer_index=12)
    assert _ends(b.msgs[0][2]) == [("eth0", 12, 9000), ("root0", 0, None)]


def test_interfaces_are_shown_in_name_order_numbers_as_numbers() -> None:
    names = ["eth10", "vx1001", "eth2", "br0", "eth0"]
    assert sorted(names, key=_name_order) == ["br0", "eth0", "eth2", "eth10", "vx1001"]
