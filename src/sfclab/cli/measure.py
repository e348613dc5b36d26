"""``sfclab traffic iperf|rate|ndr|latency``: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from .status import ExitStatus


def _progress(d: dict[str, Any]) -> None:
    t = d.get("trial", d)
    offered = t.get("offered_pps")
    loss = t.get("loss_ratio")
    print(f"  trial {d.get('index', '')}: offered {offered if offered is None else f'{offered:,.0f}'}"
          f" pps, sent {t.get('sent_pps', 0):,.0f}, received {t.get('received_pps', 0):,.0f}"
          + (f", loss {loss * 100:.4f} %" if loss is not None else ""), file=sys.stderr)


def _emit(d: dict[str, Any], as_json: bool, text: Callable[[dict[str, Any]], str]) -> None:
    print(json.dumps(d, indent=2, default=str) if as_json else text(d))


def _bps(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e9:.3f} Gbit/s" if x >= 1e8 else f"{x / 1e6:.2f} Mbit/s"


def _iperf_text(d: dict[str, Any]) -> str:
    m = d["metrics"]
    lines = [f"iperf3 {d['params'].get('from')} -> {d['params'].get('to')} "
             f"({' > '.join(d['params'].get('path', []))}): {_bps(m.get('throughput_bps'))}"]
    for k in ("jain_fairness", "retransmits", "udp_loss_ratio", "jitter_ms"):
        if k in m:
            lines.append(f"  {k}: {m[k]:.6g}")
    for i, bps in enumerate(d.get("per_flow_bps", [])):
        lines.append(f"  flow {i}: {_bps(bps)}")
    return "\n".join(lines)


def cmd_iperf(a: argparse.Namespace) -> int:
    from ..traffic import measure

    opts: dict[str, Any] = {"flows": a.flows, "udp": a.udp, "zerocopy": a.zerocopy,
                            "duration": a.duration, "omit": a.omit, "affinity": a.affinity}
    if a.length is not None:
        opts["length"] = a.length
    if a.bitrate is not None:
        opts["bitrate"] = a.bitrate
    _emit(measure.iperf(a.lab, a.src, a.dst, **opts), a.json, _iperf_text)
    return ExitStatus.OK


def cmd_rate(a: argparse.Namespace) -> int:
    from ..traffic import measure

    rates = "max" if a.rates == "max" else [r for r in a.rates.split(",") if r]
    d = measure.rate(a.lab, a.src, a.dst, size=a.size, rates=rates, duration=a.duration,
                     flows=a.flows, threads=a.threads, engine=a.engine, sink=a.sink,
                     progress=_progress)

    def text(d: dict[str, Any]) -> str:
        out = [f"{'OFFERED pps':>14} {'SENT pps':>14} {'RECEIVED pps':>14} {'LOSS %':>10}"]
        for p in d.get("points", []):
            out.append(f"{p['offered_pps']:>14,.0f} {p['sent_pps']:>14,.0f} "
                       f"{p['received_pps']:>14,.0f} {p['loss_ratio'] * 100:>10.4f}")
        return "\n".join(out)
    _emit(d, a.json, text)
    return ExitStatus.OK


def cmd_ndr(a: argparse.Namespace) -> int:
    from ..traffic import measure

    d = measure.ndr(a.lab, a.src, a.dst, size=a.size, loss=a.loss, trial=a.trial,
                    precision=a.precision, max_rate=a.max_rate, flows=a.flows,
                    threads=a.threads, engine=a.engine, sink=a.sink, progress=_progress)

    def text(d: dict[str, Any]) -> str:
        def fig(k: str) -> str:
            v = d.get(k)
            lb = d["metrics"].get(k.replace("_pps", "_lower_bound_pps"))
            if v is not None:
                return f"{v:,.0f} pps"
            return f">= {lb:,.0f} pps (generator-limited)" if lb else "not found"
        return (f"NDR {fig('ndr_pps')}\nPDR {fig('pdr_pps')}\n"
                f"generator_limited: {str(d.get('generator_limited')).lower()}, "
                f"{len(d.get('trials', []))} trials")
    _emit(d, a.json, text)
    return ExitStatus.OK


def cmd_latency(a: argparse.Namespace) -> int:
    from ..traffic import measure

    d = measure.latency(a.lab, a.src, a.dst, rate=a.rate, size=a.size, duration=a.duration,
                        flows=a.flows, engine=a.engine, sink=a.sink)

    def text(d: dict[str, Any]) -> str:
        m = d["metrics"]
        keys = [k for k in m if k.startswith("latency_")]
        return "\n".join(f"{k[len('latency_'):]:>10}: {m[k]:.1f}" for k in keys)
    _emit(d, a.json, text)
    return ExitStatus.OK


def register(sub: Any, add: Callable) -> None:
    tp = sub.add_parser("traffic", help="measure: iperf3 flows, packet rates, NDR/PDR, latency",
                        description="Measure a running lab.",
                        epilog="examples:\n"
                        "  sfclab traffic iperf chain5 --from src --to dst --flows 4\n"
                        "  sfclab traffic rate chain5 --from src --to dst --size 64 --rates 100k,200k,max\n"
                        "  sfclab traffic ndr chain5 --from src --to dst --size 64 --json\n"
                        "  sfclab traffic latency chain5 --from src --to dst --rate 50k --size 64\n"
                        "  sfclab traffic rate chain5 --size 64 --rates max --engine xdp --sink xdp",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ts = tp.add_subparsers(dest="traffic_cmd", metavar="MEASUREMENT",
                           parser_class=sub._parser_class)
    tp.set_defaults(fn=lambda a: (tp.print_help(), ExitStatus.BAD_INPUT)[1])

    def common(name: str, fn: Callable, help: str, example: str) -> argparse.ArgumentParser:
        sp = ts.add_parser(name, help=help, description=help, epilog="example:\n  " + example,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(fn=fn)
        sp.add_argument("lab")
        sp.add_argument("--from", dest="src", default="src", metavar="NODE")
        sp.add_argument("--to", dest="dst", default="dst", metavar="NODE")
        sp.add_argument("--json", action="store_true", help="print JSON")
        return sp

    def generator_options(sp: argparse.ArgumentParser, threads: bool = True) -> None:
        sp.add_argument("--flows", type=int, default=1)
        if threads:
            sp.add_argument("--threads", type=int, default=1, help="sending threads")
        sp.add_argument("--engine", choices=["auto", "packet", "ring", "udp", "xdp"],
                        default="auto", help="sender: AF_PACKET (auto), TX ring, UDP sockets, or "
                        "xdp (BPF_PROG_RUN live frames, the fastest)")
        sp.add_argument("--sink", choices=["socket", "xdp"], default="socket",
                        help="receiver: a UDP socket, or an XDP program that counts and drops")

    sp = common("iperf", cmd_iperf, "N independent iperf3 pairs on distinct ports",
                "sfclab traffic iperf chain5 --from src --to dst --flows 4 --zerocopy --json")
    sp.add_argument("--flows", type=int, default=1)
    sp.add_argument("--udp", action="store_true")
    sp.add_argument("--length", type=int, help="bytes per write (UDP: datagram payload)")
    sp.add_argument("--bitrate", help="per flow, iperf3 units (e.g. 500M); UDP default 1M")
    sp.add_argument("--zerocopy", action="store_true")
    sp.add_argument("--duration", type=int, default=5, metavar="S")
    sp.add_argument("--omit", type=int, default=0, metavar="S")
    sp.add_argument("--affinity", choices=["auto", "none"], default="auto")

    sp = common("rate", cmd_rate, "offered-vs-received packet-rate curve (native generator)",
                "sfclab traffic rate chain5 --size 64 --rates 50k,100k,200k,max")
    sp.add_argument("--size", required=True, help="frame bytes (64..MTU+18) or imix")
    sp.add_argument("--rates", required=True, help="comma-separated pps (k/M suffixes) or max")
    sp.add_argument("--duration", type=float, default=2, metavar="S")
    generator_options(sp)

    sp = common("ndr", cmd_ndr, "RFC 2544 NDR/PDR binary search (native generator)",
                "sfclab traffic ndr chain5 --size 64 --loss 0.001%,0.1% --trial 2")
    sp.add_argument("--size", required=True, help="frame bytes (64..MTU+18) or imix")
    sp.add_argument("--loss", default="0.001%,0.1%", help="loss goals: NDR,PDR (default %(default)s)")
    sp.add_argument("--trial", type=float, default=2, metavar="S", help="seconds per trial")
    sp.add_argument("--precision", type=float, default=0.01, help="relative interval (0.01 = 1%%)")
    sp.add_argument("--max-rate", help="top of the search range in pps (default: measured)")
    generator_options(sp)

    sp = common("latency", cmd_latency, "latency percentiles at one offered rate",
                "sfclab traffic latency chain5 --rate 50k --size 64")
    sp.add_argument("--rate", required=True, help="offered pps (k/M suffixes)")
    sp.add_argument("--size", required=True, help="frame bytes or imix")
    sp.add_argument("--duration", type=float, default=2, metavar="S")
    generator_options(sp, threads=False)
