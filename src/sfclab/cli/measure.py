"""``sfclab traffic iperf|rate|ndr|latency|calibrate``: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ..experiments.units import reading
from .status import ExitStatus


def _progress(d: dict[str, Any]) -> None:
    """One line per trial as it ends (stderr): what was offered, sent and received, the loss,
    and for a search the interval each goal is narrowed to (``[lo, hi]``, ``-``: not yet)."""
    t = d.get("trial", d)
    offered = t.get("offered_pps")
    loss = t.get("loss_ratio")
    limited = t.get("measurement_limited")
    what = f" ({d['purpose']})" if d.get("purpose") else ""
    narrowed = "; ".join(
        f"{goal} in [{lo:,.0f}, {'-' if hi is None else f'{hi:,.0f}'}] pps"
        + (" (done)" if goal in d.get("done", []) else "")
        for goal, (lo, hi) in (d.get("intervals") or {}).items())
    print(f"  trial {d.get('index', '')}{what}: offered "
          f"{'max' if offered is None else f'{offered:,.0f}'}"
          f" pps, sent {t.get('sent_pps', 0):,.0f}, received {t.get('received_pps', 0):,.0f}"
          + (f", loss {loss * 100:.4f} %" if loss is not None else "")
          + (f", LIMITED ({limited})" if limited else "")
          + (f"; {narrowed}" if narrowed else ""), file=sys.stderr, flush=True)


def _marks(p: dict[str, Any]) -> str:
    """The words a trial row carries: LIMITED (the tools set its figures), BOUND (offered
    above 90 % of the calibrated ceiling)."""
    return " ".join(w for w, on in (("LIMITED", p.get("measurement_limited")),
                                   ("BOUND", p.get("generator_bound"))) if on)


def rate_rows(points: list[dict[str, Any]]) -> list[str]:
    """The rate curve's table: every figure over the trial's one window, so RECEIVED <= SENT
    and LOSS = 1 - RECEIVED/SENT on every row; the reasons of LIMITED rows follow the table."""
    out = [f"{'OFFERED pps':>14} {'SENT pps':>14} {'RECEIVED pps':>14} {'LOSS %':>10}  NOTE"]
    why = []
    for p in points:
        offered = p["offered_pps"]
        out.append((f"{'max' if offered is None else f'{offered:,.0f}':>14} "
                    f"{p['sent_pps']:>14,.0f} {p['received_pps']:>14,.0f} "
                    f"{p['loss_ratio'] * 100:>10.4f}  {_marks(p)}").rstrip())
        if p.get("measurement_limited"):
            why.append(f"  LIMITED at {'max' if offered is None else f'{offered:,.0f}'} pps: "
                       f"{p['measurement_limited']}")
    return out + (["measurement-limited trials (the tools, not the chain, set them):"] + why
                  if why else [])


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
            lines.append(f"  {reading(k, m[k])}")
    for i, bps in enumerate(d.get("per_flow_bps", [])):
        lines.append(f"  flow {i}: {_bps(bps)}")
    return "\n".join(lines)


def _request(a: argparse.Namespace, kind: str, keys: tuple[str, ...]) -> Any:
    """The typed request from the options (errors name the option, exit status 2)."""
    from ..spec.measurement import from_options  # light start-up: pydantic only to measure

    values: dict[str, Any] = {"type": kind, "from": a.src, "to": a.dst}
    values.update({k: getattr(a, k) for k in keys if getattr(a, k, None) is not None})
    return from_options(values)


def _explain(points: list[dict[str, Any]]) -> list[str]:
    """Where each trial's lost packets died, one line per trial that lost any."""
    out = []
    for p in points:
        where = p.get("located")
        if not where or not p.get("lost"):
            continue
        nodes = ", ".join(f"{n} {c:,}" for n, c in sorted(where["loss_by_node"].items(),
                                                          key=lambda x: -x[1])) or "none"
        reasons = ", ".join(f"{r} {c:,}" for r, c in sorted(where["loss_by_reason"].items(),
                                                            key=lambda x: -x[1])) or "none"
        out.append(f"  at {p['offered_pps']:,.0f} pps: lost {p['lost']:,}; by node: {nodes}; "
                   f"by reason: {reasons}; unaccounted {where.get('unaccounted', 0):,}")
    return ["where the packets were lost:"] + out if out else []


def _measure(a: argparse.Namespace, r: Any, text: Callable[[dict[str, Any]], str]) -> int:
    from ..traffic import measure  # light start-up: the traffic code only to measure

    try:
        d = measure.run(a.lab, r, progress=None if a.json else _progress).to_dict()
    except KeyboardInterrupt as e:
        _say_restored(e)
        raise
    for w in d.get("warnings", []):
        print(f"sfclab: warning: {w}", file=sys.stderr)

    def full(d: dict[str, Any]) -> str:
        lines = [text(d)]
        if getattr(a, "explain", False):
            lines += _explain(d.get("points") or d.get("trials") or [])
        return "\n".join(lines)
    _emit(d, a.json, full)
    return ExitStatus.OK


def _say_restored(e: BaseException) -> None:
    """What an interrupted measurement put back (the notes PacketSetup adds), on stderr."""
    for note in getattr(e, "__notes__", []):
        print(f"sfclab: interrupted; {note}", file=sys.stderr)


PACKET = ("duration", "ip", "size", "flows", "threads", "engine", "sink", "pairs")


def cmd_iperf(a: argparse.Namespace) -> int:
    keys = ("flows", "udp", "zerocopy", "duration", "omit", "affinity", "length", "bitrate",
            "ip")
    return _measure(a, _request(a, "iperf", keys), _iperf_text)


def cmd_rate(a: argparse.Namespace) -> int:
    a.rates = [x for x in a.rates.split(",") if x.strip()] if a.rates else a.rates
    r = _request(a, "rate", PACKET + ("rates",))

    def text(d: dict[str, Any]) -> str:
        return "\n".join(rate_rows(d.get("points", [])))
    return _measure(a, r, text)


def cmd_ndr(a: argparse.Namespace) -> int:
    if a.loss is not None:
        goals = [g.strip() for g in a.loss.split(",") if g.strip()]
        if len(goals) != 2:
            from ..errors import SpecError  # light start-up

            raise SpecError(f"expected two loss goals NDR,PDR such as '0%,0.5%', got "
                            f"{a.loss!r}", place="--loss")
        a.ndr_loss, a.pdr_loss = goals
    r = _request(a, "ndr", PACKET + ("ndr_loss", "pdr_loss", "precision", "max_rate",
                                     "method", "latency"))

    def text(d: dict[str, Any]) -> str:
        def fig(k: str) -> str:
            v = d.get(k)
            lb = d["metrics"].get(k.replace("_pps", "_lower_bound_pps"))
            if v is not None:
                return f"{v:,.0f} pps"
            return f">= {lb:,.0f} pps (generator-limited)" if lb else "not found"
        limited = d["metrics"].get("measurement_limited_trials", 0)
        above = d.get("not_measurable_above_pps")
        return (f"NDR {fig('ndr_pps')}\nPDR {fig('pdr_pps')}\n"
                + (f"not measurable on this machine above {above:,.0f} pps\n" if above else "")
                + f"generator limited: {'yes' if d.get('generator_limited') else 'no'}, "
                f"{len(d.get('trials', []))} trials ({limited:.0f} measurement-limited, re-run)"
                + "".join("\n" + line for line in _latency_lines(d)))
    return _measure(a, r, text)


def _pcts(lat: dict[str, Any] | None) -> str:
    if not lat:
        return "not measured"
    return ", ".join(f"{k} {lat[k]:,.1f}" for k in ("p50", "p90", "p99", "p99.9", "max")
                     if k in lat) + " µs"


def _latency_lines(d: dict[str, Any]) -> list[str]:
    """``ndr --latency``: one line per share of the NDR, the direct link's floor beside."""
    rows = d.get("latency_at_ndr")
    if not rows:
        return []
    out = [f"latency at {r['share'] * 100:.0f} % of NDR ({r['rate_pps']:,.0f} pps): "
           f"{_pcts(r['latency_us'])}" + (" LIMITED" if r["measurement_limited"] else "")
           for r in rows]
    floor = d.get("latency_floor_us")
    if floor:
        out.append(f"latency floor of a direct link (calibrated): {_pcts(floor)}")
    return out


def cmd_latency(a: argparse.Namespace) -> int:
    r = _request(a, "latency", PACKET + ("rate",))

    def text(d: dict[str, Any]) -> str:
        m = d["metrics"]
        keys = [k for k in m if k.startswith("latency_")]
        out = [reading(k, m[k]) for k in keys]
        out.append(f"timestamped at: {d.get('latency_source') or 'the sink'}"
                   + (", LIMITED: " + d["measurement_limited"]
                      if d.get("measurement_limited") else ""))
        if d.get("latency_floor_us"):
            out.append(f"floor of a direct link (calibrated): {_pcts(d['latency_floor_us'])}")
        return "\n".join(out)
    return _measure(a, r, text)


def _calibration_text(d: dict[str, Any]) -> str:
    out = [f"calibration ({d.get('lab')} lab, {d.get('from')} -> {d.get('to')}, engine "
           f"{d.get('engine')}, sink {d.get('sink')}, {d.get('duration_s'):g} s trials):",
           f"{'SIZE':>6} {'CEILING pps':>14} {'SENT pps':>14}  NOTE"]
    for size, c in d["sizes"].items():
        out.append(f"{size:>6} {c['ceiling_pps']:>14,.0f} {c['sent_pps']:>14,.0f}  "
                   f"{'LIMITED: ' + c['measurement_limited'] if c['measurement_limited'] else ''}"
                   .rstrip())
    f = d["latency_floor_us"]
    pcts = ", ".join(f"{k} {f[k]:.1f}" for k in ("p50", "p90", "p99", "p99.9", "max") if k in f)
    out.append(f"latency floor at {f['rate_pps']:,.0f} pps, {f['size']} bytes: "
               + (f"{pcts} µs" if pcts else "not measured"))
    out.append(f"stored in {d.get('stored_in')}; trials offered above 90 % of a ceiling are "
               "flagged generator_bound")
    return "\n".join(out)


def cmd_calibrate(a: argparse.Namespace) -> int:
    from ..traffic import calibrate  # light start-up: the traffic code only to measure

    req = calibrate.CalibrationRequest(sizes=calibrate.parse_sizes(a.sizes), lab=a.lab,
                                       src=a.src or "src", dst=a.dst or "dst")
    if a.duration is not None:
        try:
            req.duration_s = float(a.duration)
        except ValueError:
            from ..errors import SpecError  # light start-up

            raise SpecError(f"expected seconds, got {a.duration!r}", place="--duration") from None
    if a.lab is None and (a.src or a.dst):
        from ..errors import SpecError  # light start-up

        raise SpecError("--from and --to name nodes of a lab: give the lab too",
                        place="--from" if a.src else "--to")
    d = calibrate.calibrate(req)
    d["stored_in"] = str(calibrate.state_file())
    _emit(d, a.json, _calibration_text)
    return ExitStatus.OK


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    tp = sub.add_parser("traffic", help="measure: iperf3 flows, packet rates, NDR/PDR, latency",
                        description="Measure a running lab.",
                        epilog="examples:\n"
                        "  sfclab traffic iperf chain5 --from src --to dst --flows 4 --duration 3\n"
                        "  sfclab traffic rate chain5 --from src --to dst --size 64 --rates 100k,200k,max\n"
                        "  sfclab traffic ndr chain5 --from src --to dst --size 64 --precision 5 --json\n"
                        "  sfclab traffic latency chain5 --from src --to dst --rate 50k --size 64\n"
                        "  sfclab traffic rate chain5 --size 64 --rates max --sink xdp\n"
                        "  sfclab traffic calibrate --sizes 64,1518",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ts = tp.add_subparsers(dest="traffic_cmd", metavar="MEASUREMENT",
                           parser_class=sub._parser_class)
    tp.set_defaults(fn=lambda a: (tp.print_help(), ExitStatus.BAD_INPUT)[1])
    for parser in (_iperf, _rate, _ndr, _calibrate, _latency):  # in the order --help lists
        parser(ts)


def _common(ts: Any, name: str, fn: Callable, help: str,
            example: str) -> argparse.ArgumentParser:
    sp = ts.add_parser(name, help=help, description=help, epilog="example:\n  " + example,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.set_defaults(fn=fn)
    sp.add_argument("lab")
    sp.add_argument("--from", dest="src", metavar="NODE", help="sender (default src)")
    sp.add_argument("--to", dest="dst", metavar="NODE", help="receiver (default dst)")
    sp.add_argument("--json", action="store_true", help="print JSON")
    return sp


def _generator_options(sp: argparse.ArgumentParser, threads: bool = True) -> None:
    from ..spec.generator import ENGINES, SINKS  # the choices named in the help (no models)

    sp.add_argument("--flows", help="UDP flows (distinct source ports; default 1)")
    if threads:
        sp.add_argument("--threads", help="sending threads (default 1)")
    sp.add_argument("--engine", help=f"sender: one of {', '.join(ENGINES)} (default auto: "
                    "AF_PACKET; xdp: BPF_PROG_RUN live frames, the fastest)")
    sp.add_argument("--sink", help=f"receiver: one of {', '.join(SINKS)} (default kernel: "
                    "counted and dropped in the receiving namespace's softirq, at XDP or "
                    "tcx ingress; socket: a UDP socket read in user space)")


def _packet_options(sp: argparse.ArgumentParser, threads: bool = True) -> None:
    sp.add_argument("--ip", help="4 or 6: send to the receiver's IPv4 (default) or IPv6 "
                    "address")
    sp.add_argument("--size", help="frame bytes (64..MTU+18) or imix (default 64; with "
                    "--ip 6: 84..MTU+18, default 84)")
    sp.add_argument("--pair", dest="pairs", action="append", metavar="FROM:TO",
                    help="a sender:receiver pair; repeat for several at once (instead of "
                    "--from/--to)")
    sp.add_argument("--explain", action="store_true",
                    help="say where each trial's lost packets died (node, reason)")
    _generator_options(sp, threads)


def _iperf(ts: Any) -> None:
    sp = _common(ts, "iperf", cmd_iperf, "N independent iperf3 pairs on distinct ports",
                 "sfclab traffic iperf chain5 --from src --to dst --flows 4 --duration 3 --zerocopy --json")
    sp.add_argument("--flows", help="parallel iperf3 pairs (default 1)")
    sp.add_argument("--udp", action="store_true", default=None)
    sp.add_argument("--length", help="bytes per write (UDP: datagram payload)")
    sp.add_argument("--bitrate", help="per flow, iperf3 units (e.g. 500M); UDP default 1M")
    sp.add_argument("--zerocopy", action="store_true", default=None)
    sp.add_argument("--duration", metavar="S", help="seconds (default 10)")
    sp.add_argument("--omit", metavar="S", help="seconds left out at the start (default 0)")
    sp.add_argument("--affinity", help="auto (default: client and server on their own cores) "
                    "or none")
    sp.add_argument("--ip", metavar="4|6", help="address family to measure over (default: the "
                    "lab's; IPv4 unless the lab is 'ip: 6')")


def _rate(ts: Any) -> None:
    sp = _common(ts, "rate", cmd_rate, "offered-vs-received packet-rate curve (native generator)",
                 "sfclab traffic rate chain5 --size 64 --rates 50k,100k,200k,max")
    sp.add_argument("--rates", required=True,
                    help="comma-separated pps (k/M suffixes); 'max' is what the sender reaches")
    sp.add_argument("--duration", metavar="S", help="seconds per trial (default 2)")
    _packet_options(sp)


def _ndr(ts: Any) -> None:
    sp = _common(ts, "ndr", cmd_ndr, "NDR/PDR search: MLRsearch (default) or binary",
                 "sfclab traffic ndr chain5 --size 64 --loss 0%,0.5% --trial 1 --precision 5")
    sp.add_argument("--loss", help="loss goals NDR,PDR in percent (default 0%%,0.5%%)")
    sp.add_argument("--trial", "--duration", dest="duration", metavar="S",
                    help="seconds per trial (default 2)")
    sp.add_argument("--precision", help="stop when the interval is this many percent wide "
                    "(default 1)")
    sp.add_argument("--max-rate", dest="max_rate",
                    help="top of the search in pps (default: what the sender reaches)")
    sp.add_argument("--method", help="mlr (MLRsearch, RFC 9971; default) or binary")
    sp.add_argument("--latency", action="store_true", default=None,
                    help="then measure latency at 10, 50 and 90 %% of the NDR")
    _packet_options(sp)


def _calibrate(ts: Any) -> None:
    sp = ts.add_parser(
        "calibrate", help="measure what the generator and receiver can do by themselves",
        description="Measure the generator-to-receiver ceiling (packet rate per frame size) and "
        "the latency floor over a direct link, in a temporary two-node lab (or between two "
        "nodes of a running lab), and store it in the state directory: trials offered above "
        "90 % of the ceiling are then flagged generator_bound.",
        epilog="example:\n  sfclab traffic calibrate --sizes 64,1518 --duration 0.5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.set_defaults(fn=cmd_calibrate)
    sp.add_argument("lab", nargs="?", help="a running lab whose nodes to use (default: a "
                    "temporary two-node lab)")
    sp.add_argument("--from", dest="src", metavar="NODE", help="sender in LAB (default src)")
    sp.add_argument("--to", dest="dst", metavar="NODE", help="receiver in LAB (default dst)")
    sp.add_argument("--sizes", help="frame sizes in bytes, 64..MTU+18 (default 64,512,1518)")
    sp.add_argument("--duration", metavar="S", help="seconds per trial (default 1)")
    sp.add_argument("--json", action="store_true", help="print JSON")


def _latency(ts: Any) -> None:
    sp = _common(ts, "latency", cmd_latency, "latency percentiles at one offered rate",
                 "sfclab traffic latency chain5 --rate 50k --size 64")
    sp.add_argument("--rate", required=True, help="offered pps (k/M suffixes)")
    sp.add_argument("--duration", metavar="S", help="seconds (default 2)")
    _packet_options(sp, threads=False)
