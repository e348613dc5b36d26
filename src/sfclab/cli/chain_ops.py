"""``sfclab chain add | rm | migrate | watch``: chains and instances changed on a running lab
(the library entry points are in :mod:`sfclab.live`; this file only parses and prints)."""

from __future__ import annotations

import argparse
from typing import Any

from .group import One
from .output import emit, progress
from .status import ExitStatus


def _add_text(d: dict[str, Any]) -> str:
    lines = [f"chain {d['chain']} added in {d['seconds']:.3f} s, attached at {d['attach']}; "
             f"labels {' '.join(map(str, d['labels'])) or '-'}"]
    for n, i in d["instances"].items():
        lines.append(f"  {n:<16} {i['kind']:<10} on {i['host']}  cpu {i['cpu']:g}, "
                     f"memory {i['memory'] // (1 << 20)}M")
    return "\n".join(lines)


def cmd_add(a: argparse.Namespace) -> int:
    from ..live.ops import add
    from ..live import request  # light start-up: load only what this command needs

    req = request.read_chain_file(a.name, a.file, wait_s=a.wait)
    emit(add.add_chain(req, progress=progress()), a.json, _add_text)
    return ExitStatus.OK


def cmd_rm(a: argparse.Namespace) -> int:
    from ..live.ops import add
    from ..live import request  # light start-up: load only what this command needs

    d = add.remove_chain(request.RemoveChain(a.name, a.chain, wait_s=a.wait))
    emit(d, a.json, lambda d: f"chain {d['chain']} removed in {d['seconds']:.3f} s "
                              f"({', '.join(d['removed'])})"
                              + "".join(f"\n  error: {e}" for e in d["errors"]))
    return ExitStatus.OK if not d["errors"] else ExitStatus.FAILURE


def cmd_migrate(a: argparse.Namespace) -> int:
    from ..live.ops import migrate
    from ..live import request  # light start-up: load only what this command needs

    d = migrate.migrate(request.MigrateInstance(a.name, a.instance, a.to, wait_s=a.wait,
                                                conntrack=not a.no_conntrack))
    emit(d, a.json, lambda d: f"{d['instance']} -> {d['clone']} on {d['host']}: switched in "
                              f"{1000 * d['switch_seconds']:.2f} ms, {d['conntrack_moved']} "
                              f"connections moved, total {d['seconds']:.3f} s")
    return ExitStatus.OK


def _pids(w: int | dict[str, int]) -> str:
    """One PID, or (hosts driven over SSH) each host's."""
    return ", ".join(f"{p} on {h}" for h, p in w.items()) if isinstance(w, dict) else str(w)


def cmd_watch(a: argparse.Namespace) -> int:
    from ..live.ops import health  # light start-up: load only what this command needs

    d = health.start(a.name)
    emit(d, a.json, lambda d: f"watcher of lab {d['lab']}: PID {_pids(d['watcher'])} "
                              f"({'started' if d['started'] else 'already running'}), "
                              f"{len(d['instances'])} instances")
    return ExitStatus.OK


def register(one: One) -> None:
    p = one("add", cmd_add, "add a chain of new functions from a chain file (YAML or JSON)",
            "sfclab chain add sfcweb scenarios/sfc-video-chain.yaml")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--wait", type=float, default=60.0, metavar="S",
                   help="wait this long for another command on the lab (default 60)")
    p = one("rm", cmd_rm, "remove a chain added with 'chain add'",
            "sfclab chain rm sfcweb video")
    p.add_argument("chain")
    p.add_argument("--wait", type=float, default=60.0, metavar="S",
                   help="wait this long for another command on the lab (default 60)")
    p = one("migrate", cmd_migrate,
            "move a function instance make-before-break (clone, switch, drain, stop)",
            "sfclab chain migrate sfcweb meter-1")
    p.add_argument("instance")
    p.add_argument("--to", metavar="HOST", help="the target host (default: the same host)")
    p.add_argument("--no-conntrack", action="store_true",
                   help="do not move connection-tracking entries")
    p.add_argument("--wait", type=float, default=60.0, metavar="S",
                   help="wait this long for another command on the lab (default 60)")
    one("watch", cmd_watch, "start the lab's health watcher (chain add starts it too)",
        "sfclab chain watch sfcweb")
