"""Every bound sfclab puts on its input, as named constants, checked before work grows.

A lab, chain, classifier or experiment file (or a pipe, or an API body) can ask for work that
grows faster than its size: a chain through a group of 3 visited 16 times is 3^16 paths, a
sweep of 8 keys by 40 values is 40^8 runs, a port range is many classifier entries.  Each step
that can grow is counted arithmetically against its limit here *before* it allocates, and a
refusal names the place and the limit (:class:`~sfclab.errors.SpecError`, exit status 2).

The data plane's map sizes are those of ``include/sfc.h`` (``enum sfc_limit``); this module is
their one copy on the Python side, and :mod:`sfclab.realize.contract` checks it against the
compiled objects' BTF (a unit test fails when the two drift).  docs/labs.md
lists every limit in one table.
"""

from __future__ import annotations

import os

# ------------------------------------------------------------------------- reading files
#: bytes read from any file, pipe, stdin or request body (a lab, chain, classifier or
#: experiment file)
MAX_BYTES = 16 * 1024 * 1024
#: nesting of mappings and lists in a YAML or JSON document (checked without recursion)
MAX_DEPTH = 64
#: values a YAML document may hold once its aliases are expanded
MAX_VALUES = 1_000_000

# ------------------------------------ the data plane (include/sfc.h's enum sfc_limit, one copy)
#: labels in one stack (``SFC_MAX_LABELS``): a path's labels, pushed at once
MAX_LABELS = 16
#: distinct wildcard masks in a lab's classifier entries (``SFC_MAX_MASKS``)
MAX_MASKS = 32
#: load-balancing slots of a chain direction (``SFC_MAX_SLOTS``, a power of two: the data
#: plane masks the index); a table uses the largest prime within it (:mod:`sfclab.plan.maglev`)
SLOTS = 1024
#: chain directions in a lab (``SFC_MAX_CHAINS``; a symmetric chain uses two)
MAX_DIRECTIONS = 256
#: entries of the path table (``SFC_MAX_PATHS``), over every chain of a lab
MAX_PATHS = 4096
#: classifier entries in a lab (``SFC_MAX_CLASSES``, the ``sfc_classes`` map)
MAX_CLASSES = 262_144
#: labels in a lab (``SFC_MAX_HOPS``, the ``sfc_labels`` map)
MAX_HOPS = 65_536

# ---------------------------------------------------------------------- chains, groups
#: paths of one chain direction: the product of its groups' instance counts
MAX_CHAIN_PATHS = 64
#: stops (functions or groups) of one chain
MAX_FUNCTIONS = 16
#: instances of one group (a chain file's ``instances``)
MAX_GROUP_INSTANCES = 64
#: labels every function stop takes at least: its proxy label and its forward label
LABELS_PER_FUNCTION = 2

# -------------------------------------------------------------------------- experiments
#: run points of an experiment: the product of the sweep's value counts, times its variants
MAX_SWEEP_POINTS = 10_000
#: runs of an experiment: its run points times its repetitions
MAX_RUNS = 100_000

# --------------------------------------------------------------------------------- hosts
#: CPUs a host may list or ask for (a lab file's ``cpus``, ``host add --ssh --cpus``)
MAX_HOST_CPUS = 1024
#: VXLAN over IPv4 adds 50 bytes to every frame (outer Ethernet 14, IP 20, UDP 8, VXLAN 8): a
#: tunnel's MTU is at most its underlay's less these
VXLAN_OVERHEAD = 50


def machine_cpus() -> int:
    """CPUs this process may run on: the most an emulated host here can be given."""
    return len(os.sched_getaffinity(0))


def machine_memory() -> int:
    """Bytes of memory of this machine (``MemTotal``): the most an emulated host can have."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f.read(4096).decode("ascii", "replace").splitlines():
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
