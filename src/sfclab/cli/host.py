"""``sfclab host add | rm | ls``: hosts of a running lab (the library:
:mod:`sfclab.live.ops.hostops`; this file only parses and prints)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..errors import SpecError
from .output import emit
from .group import command_group
from .status import ExitStatus

EXAMPLES = """\
examples:
  sfclab host add sfcweb edge2 --cpus 1 --memory 256M    an emulated host, its CPUs and memory
  sfclab host ls sfcweb                                   capacity, use, functions per host
  sfclab host rm sfcweb edge2 --drain                     its functions migrate, then it goes
(--ssh USER@ADDRESS [--key K] [--port P]: a real machine joins a lab whose hosts are driven
 over SSH, scanned first; see docs/hosts.md)
"""


def _mb(n: int) -> str:
    return f"{n // (1 << 20)}M"


def _ls_text(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'HOST':<12} {'CPU used/all':>13} {'memory used/all':>16}  INSTANCES"]
    for r in rows:
        lines.append(f"{r['host']:<12} {r['used_cpu']:>6g}/{r['cpus']:<6g} "
                     f"{_mb(r['used_memory']):>8}/{_mb(r['memory']):<7}  "
                     f"{', '.join(r['instances']) or '-'}"
                     + ("  (added)" if r["added"] else ""))
        for t in r.get("tunnels", []):
            vni = f"vni {t['vni']}" if t["vni"] is not None else "same host"
            lines.append(f"  tunnel {t['link']}: {' - '.join(t['ends'])}, {vni}, attach "
                         f"{t['attach']}, mtu {t['mtu']}"
                         + ("" if t["present"] else "  (missing)"))
    return "\n".join(lines)


def _size(v: str) -> int:
    from ..spec.quantities import parse_size  # light start-up

    try:
        return parse_size(v)
    except ValueError as e:
        raise SpecError(f"expected {e}, got {v!r}", place="--memory") from None


def cmd_add(a: argparse.Namespace) -> int:
    from ..live.ops import hostops  # light start-up: load only what this command needs

    if a.ssh is not None or a.key is not None or a.port is not None or a.agent_state:
        d = hostops.add_ssh_host(a.name, a.host, a.ssh, a.key, a.port, a.cpus,
                                 None if a.memory is None else _size(a.memory),
                                 agent_state=a.agent_state, wait_s=a.wait)
        emit(d, a.json, lambda d: f"host {d['host']} ({d['ssh']}) added: "
                                  f"{len(d['cpus'])} of its {d['scanned']['cpus']} CPUs, "
                                  f"memory {_mb(d['memory'])} of {_mb(d['scanned']['memory'])}, "
                                  f"underlay {d['address']} on {d['underlay_if']}")
        return ExitStatus.OK
    if a.cpus is None or a.memory is None:
        raise SpecError("expected --cpus N and --memory SIZE (an emulated host)",
                        place="--cpus" if a.cpus is None else "--memory")
    d = hostops.add_host(a.name, a.host, a.cpus, _size(a.memory), wait_s=a.wait)
    emit(d, a.json, lambda d: f"host {d['host']} added: CPUs {','.join(map(str, d['cpus']))}, "
                              f"memory {_mb(d['memory'])} (context {d['context']})")
    return ExitStatus.OK


def cmd_rm(a: argparse.Namespace) -> int:
    from ..live.ops import hostops  # light start-up: load only what this command needs

    d = hostops.remove_host(a.name, a.host, drain=a.drain, wait_s=a.wait)
    emit(d, a.json, lambda d: f"host {d['host']} removed in {d['seconds']:.3f} s"
                              + "".join(f"\n  {m['instance']} -> {m['clone']} on {m['host']}"
                                        for m in d["moved"])
                              + "".join(f"\n  error: {e}" for e in d["errors"]))
    return ExitStatus.OK if not d["errors"] else ExitStatus.FAILURE


def cmd_ls(a: argparse.Namespace) -> int:
    from ..live.ops import hostops  # light start-up: load only what this command needs

    if a.kube:
        from . import kube

        return kube.host_ls_kube(a)

    emit(hostops.list_hosts(a.name), a.json, _ls_text)
    return ExitStatus.OK


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``host`` command group."""
    one = command_group(add, "host", "hosts of a running lab (emulated): add, remove, list",
                        "sfclab host ls sfcweb", EXAMPLES)

    wait = "wait this long for another command on the lab (default 60)"
    p = one("add", cmd_add, "add an emulated host with its CPUs and memory",
            "sfclab host add sfcweb edge2 --cpus 1 --memory 256M")
    p.add_argument("host", metavar="NAME")
    p.add_argument("--cpus", type=int, metavar="N",
                   help="CPUs (a count; required, but with --ssh: default all it has)")
    p.add_argument("--memory", metavar="SIZE",
                   help="memory, e.g. 256M (required, but with --ssh: default all it has)")
    p.add_argument("--ssh", metavar="USER@ADDRESS",
                   help="a real machine driven over SSH, on a lab whose hosts are (its "
                        "address on the lab's underlay)")
    p.add_argument("--key", metavar="FILE", help="the SSH private key (with --ssh; default: "
                   "the lab's first host's)")
    p.add_argument("--port", type=int, metavar="N", help="the SSH port (with --ssh; 22)")
    p.add_argument("--agent-state", metavar="DIR", help="the agent's state directory on that "
                   "host (with --ssh; default: the lab's first host's)")
    p.add_argument("--wait", type=float, default=60.0, metavar="S", help=wait)
    p = one("ls", cmd_ls, "capacity, use and functions per host", "sfclab host ls sfcweb")
    from . import kube

    kube.add_arguments(p)
    p = one("rm", cmd_rm, "remove a host 'host add' made (refused while functions run there)",
            "sfclab host rm sfcweb edge2 --drain")
    p.add_argument("host", metavar="NAME")
    p.add_argument("--drain", action="store_true",
                   help="migrate its functions to other hosts first")
    p.add_argument("--wait", type=float, default=60.0, metavar="S", help=wait)
