"""Names of kernel objects, always within the kernel's 15 characters.

- A node's namespace is ``sfclab:<lab>:<node>``: the name itself is the ownership mark, and
  since names cannot contain ``:`` (:mod:`sfclab.spec.names`), two (lab, node) pairs never share
  one.
- Interfaces inside a namespace are ``eth0``, ``eth1`` ... in link order, unless the lab file
  names them (``node:ifname``).
- Objects in the root namespace (OVS bridges, veth ends attached to OVS, internal ports, patch
  ports) share the OVS and kernel name spaces of the whole host, so they carry the lab's *tag*,
  ``sf`` plus five base-32 characters of a hash of the lab name, then a letter for the object
  kind (``b`` bridge, ``v`` veth end, ``i`` internal port, ``p`` patch port) and a counter:
  ``sf3kq7zb1``, ``sf3kq7zv12``.  Tag + letter + up to 7 digits = 15 characters at most.
- A node's container (podman's names allow no ``:``) is ``sfclab-<length of lab>-<lab>-<node>``:
  ``sfclab-4-demo-h1``.  The length fixes where the lab's name ends, so two (lab, node) pairs
  never share one even though names may contain ``-``.  It carries the labels
  ``sfclab.lab=<lab>``, ``sfclab.node=<node>`` and its owner mark
  ``sfclab.mark=sfclab:<lab>:<node>:container`` (:func:`container_labels`).
"""

from __future__ import annotations

import base64
import hashlib

NETNS_PREFIX = "sfclab:"
#: the namespace where interfaces bound for the root namespace are born and marked (see
#: realize.build); node names cannot start with "-", so it never collides with a node
STAGING_NODE = "-stage"
IFNAMSIZ = 15


def lab_tag(lab: str) -> str:
    digest = hashlib.sha256(lab.encode()).digest()
    return "sf" + base64.b32encode(digest).decode().lower()[:5]


def netns_name(lab: str, node: str) -> str:
    return f"{NETNS_PREFIX}{lab}:{node}"


def container_name(lab: str, node: str) -> str:
    return f"sfclab-{len(lab)}-{lab}-{node}"


#: the labels of a node's container: its lab (found by it), its node, its owner mark
LABEL_LAB, LABEL_NODE, LABEL_MARK = "sfclab.lab", "sfclab.node", "sfclab.mark"


def container_labels(lab: str, node: str) -> dict[str, str]:
    return {LABEL_LAB: lab, LABEL_NODE: node, LABEL_MARK: f"{alias(lab, node)}:container"}


def root_name(lab: str, letter: str, counter: int) -> str:
    name = f"{lab_tag(lab)}{letter}{counter}"
    if len(name) > IFNAMSIZ:
        raise ValueError(f"too many objects for one lab: {name} exceeds {IFNAMSIZ} characters")
    return name


def alias(lab: str, node: str, link: int | None = None) -> str:
    """The ownership mark written as the interface alias (``ip link`` shows it)."""
    return f"sfclab:{lab}:{node}" + (f":link{link}" if link is not None else "")


#: a host context's namespace is ``sfclab:<lab>:@<host>`` and the underlay's
#: ``sfclab:<lab>:-underlay``: node names start with a letter or digit, so neither collides
HOST_PREFIX = "@"
UNDERLAY_NODE = "-underlay"


def host_netns(lab: str, host: str) -> str:
    return f"{NETNS_PREFIX}{lab}:{HOST_PREFIX}{host}"


def host_cgroup(lab: str, host: str) -> str:
    """The cgroup (cpuset and memory) of a host's nodes; ':' is in no name: never another lab's."""
    return f"sfclab:{lab}:{HOST_PREFIX}{host}"
