"""Offload switches through the SIOCETHTOOL ioctl, inside a namespace, without ethtool(8).

Uses the legacy single-feature commands (still mapped onto netdev features by the kernel):
``tso``, ``gso``, ``gro`` and ``tx-checksum`` (turning tx checksumming off also drops the
segmentation offloads that depend on it, as ``ethtool -K IF tx off`` does).
"""

from __future__ import annotations

import array
import fcntl
import socket
import struct

SIOCETHTOOL = 0x8946
_SET = {"tx-checksum": 0x17, "tso": 0x1F, "gso": 0x24, "gro": 0x2C}
_GET = {"tx-checksum": 0x16, "tso": 0x1E, "gso": 0x23, "gro": 0x2B}


def _ioctl(sock: socket.socket, ifname: str, cmd: int, value: int = 0) -> int:
    buf = array.array("B", struct.pack("II", cmd, value))
    addr, _ = buf.buffer_info()
    ifreq = struct.pack("16sP", ifname.encode(), addr)
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
    return struct.unpack("II", buf.tobytes())[1]


def set_offloads(ifname: str, offloads: dict[str, bool]) -> None:
    """Set offloads of ``ifname`` in the calling thread's current namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name, on in offloads.items():
            _ioctl(s, ifname, _SET[name], 1 if on else 0)


def get_offloads(ifname: str) -> dict[str, bool]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        return {name: bool(_ioctl(s, ifname, cmd)) for name, cmd in _GET.items()}
