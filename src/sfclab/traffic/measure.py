"""From a typed request (:mod:`sfclab.spec.measurement`) to a measurement in a running lab.

The command line and experiment files both hand a validated request here; this is where it is
checked against the lab: an unknown lab or node, a node without a namespace (a bridge), nodes
with no path between them, or a frame size over the path's MTU (+ 18 bytes of Ethernet header
and FCS) are ``SpecError``/``LabError`` (exit 2) before any process starts.

Each end runs where its node is (:mod:`.place`): in its namespace here, or on its host through
the lab's runtime (a host driven over SSH, a Kubernetes Node: the host's agent runs the sender
and holds the receiver).  A packet measurement between nodes of such hosts (``rate``, ``ndr``,
``latency``) runs without what only this machine's kernel allows -- pinned cores, the first
hop steered, the loss locator, the xdp engine (refused) -- and says so in its warnings.
``iperf`` runs there too, either end or both: the iperf3 servers are started in the
destination node's namespace on its host and held there by the host's agent until they
listen, the clients run in the source node's namespace on its host, their JSON comes back, and
the servers are ended and read (:mod:`.iperf`; a failure at any point ends what was started).
Its result is the one of a run here (the same fields and units); its ends there are not
pinned to cores, and its warnings say so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from ..errors import LabError, SpecError
from ..plan.paths import NoPath, hops, path_mtu
from ..realize.lifecycle import load_plan
from ..realize.runtime import runtime_at
from ..spec.measurement import (MAX, AnyRequest, IperfRequest, LatencyRequest, NdrRequest,
                                PacketRequest, RateRequest)
from ..kernel import cpus
from ..kernel.stall import MAX_THREADS, StallMeter, stall_binary
from . import cores, xdp_path
from .cpu import CpuMonitor, ksoftirqd
from .family import MIN_FRAME_OF, address_of, interface_address
from .first_hop import FirstHopPinning
from .generator import PacketGenerator
from .loss import LossLocator, droptrace_binary
from .place import Place
from .result import Measurement
from .wrappers import (CeilingGenerator, CoreWatchedGenerator, LocatedGenerator, PairedGenerator,
                       PlacedGenerator, StallWatchedGenerator)

Progress = Callable[[dict[str, Any]], None]

ETH_OVERHEAD = 18  # Ethernet header (14) + FCS (4): RFC 2544 frame sizes include both
MIN_FRAME = 64


class Endpoints:
    """The two ends of a measurement inside a running lab; ``dst_ip`` is the receiver's address
    of ``family`` (4 or 6, :mod:`.family`)."""

    def __init__(self, lab: str, src: str, dst: str, family: int | None = 4):
        """``family``: the address family to measure over (4 or 6); None: the lab's (IPv4
        unless the lab is IPv6-only)."""
        self.state, self.plan = load_plan(lab)
        self.lab = lab
        self.src, self.dst = src, dst
        if family is None:
            family = 6 if self.plan.families == (6,) else 4
        if family not in self.plan.families:
            raise SpecError(f"lab '{lab}' has no IPv{family} addresses (its 'ip:' is "
                            f"{self.plan.ip})", place="--ip")
        self.family = family
        if src == dst:
            raise SpecError(f"expected two different nodes, got '{src}' twice", place="--to")
        self.src_at = self._place(src)
        self.dst_at = self._place(dst)
        self.src_netns, self.dst_netns = self.src_at.ns, self.dst_at.ns
        #: both ends are in this machine's kernel (what pinning and the locator need)
        self.here = self.src_at.here and self.dst_at.here
        for node, option in ((src, "--from"), (dst, "--to")):
            if not self.plan.addresses_of(node, 4) and not self.plan.addresses_of(node, 6):
                raise SpecError(f"expected a node with an address (a host or a function), got "
                                f"'{node}', which has none (a bridge?)", place=option)
        dst_addr = address_of(self.plan, lab, dst, family)
        self.dst_ip = str(dst_addr)
        try:
            self.hops = hops(self.plan, src, dst_addr)
        except NoPath as e:
            raise LabError(f"no path from '{src}' to '{dst}' in lab '{lab}': {e}") from None
        self.mtu = path_mtu(self.plan, self.hops)

    def _place(self, node: str) -> Place:
        try:
            ns = self.plan.netns_of(node)
        except KeyError:
            names = [n.node for n in self.plan.namespaces]
            raise LabError(f"lab '{self.lab}' has no node '{node}' with a namespace "
                           f"(nodes: {', '.join(names)})") from None
        host = self.plan.host_of(node)
        rt = runtime_at(self.state, self.plan, host)
        return Place(rt, rt.reached_as(host), ns)

    def check_size(self, size: int | str) -> None:
        if size == "imix":
            if 1518 > self.mtu + ETH_OVERHEAD:
                raise SpecError(f"IMIX has 1518-byte frames, over this path's MTU of {self.mtu}",
                                place="size")
            return
        least = MIN_FRAME_OF[self.family]
        if not isinstance(size, int) or size < least or size > self.mtu + ETH_OVERHEAD:
            raise SpecError(f"expected a frame size from {least} to "
                            f"{self.mtu + ETH_OVERHEAD} bytes (path MTU {self.mtu} + Ethernet), "
                            f"or imix; got {size}", place="size")

    def first_hop_ingress(self) -> list[tuple[str, str, str]]:
        """(node, namespace, interface) where the chain first receives what the sender sends:
        the first routed hop's interfaces, those of Linux bridges next to the sender, and (labs
        with hosts) the sender's port in its host context, or the underlay's side of the
        sender's host when the tunnel ends in the sender itself (``attach: direct``)."""
        nxt = self.hops[1] if len(self.hops) > 1 else self.dst
        src_nets = [a.network for a in self.plan.addresses_of(self.src, self.family)]
        out = []
        for i in self.plan.interfaces_of(nxt):
            a = interface_address(i, self.family)
            if a is not None and any(a in n for n in src_nets):
                out.append((nxt, self.plan.netns_of(nxt), i.name))
        hosted = {hl.link: hl for hl in self.plan.host_links}
        for i in self.plan.interfaces_of(self.src):
            hl = hosted.get(i.link)
            if hl is not None:
                end = next(e for e in hl.ends if e.node == self.src and e.node_if == i.name)
                if end.port:
                    out.append((f"@{end.host}", end.netns, end.port))
                elif self.plan.underlay is not None:
                    host = next(h for h in self.plan.hosts if h.name == end.host)
                    out.append(("-underlay", self.plan.underlay.netns, host.underlay_peer))
            peer = next((b for b in self.plan.linux_bridges if b.node == i.peer), None)
            if peer is not None:
                out += [(peer.node, peer.netns, j.name) for j in self.plan.interfaces_of(peer.node)
                        if j.peer == self.src]
        return out

    def describe(self) -> dict[str, Any]:
        return {"lab": self.lab, "from": self.src, "to": self.dst, "dst_ip": self.dst_ip,
                "ip": self.family, "path": self.hops, "path_mtu": self.mtu}


def _finish(m: Measurement, ends: Endpoints, cpu: CpuMonitor | None) -> Measurement:
    m.params = {**ends.describe(), **m.params}
    if cpu is not None and not m.cpu:
        m.cpu = cpu.result
    return m


#: the warning of a measurement between nodes of hosts reached through their agents
FAR = ("the nodes are on hosts reached through their agents: the sender and the receiver ran "
       "there, not pinned to cores; no loss locator and no cores watched (this machine's "
       "kernel is not theirs)")

#: at most this many sending threads per generator core (pairs x threads)
SENDERS_PER_CORE = 4
#: each pair's sink listens on its own port, from here up
BASE_PORT = 7000


class PacketSetup:
    """What a packet measurement needs, for the length of a ``with`` block: one native
    generator per pair, the sender pinned apart from the chain (:mod:`.cores`) with the first
    hop's receive processing steered off its core, a loss locator over the lab's namespaces,
    each trial's cores watched and, with ``calibrated``, the stored calibration's ceiling
    (:mod:`.calibrate`).  ``gen`` is the generator to run trials on; everything is undone on
    exit.  ``changed`` names every setting of the machine it changed (each one restored on
    exit); when the block ends by Ctrl-C, the KeyboardInterrupt carries them as a note
    (``restored: ...``) for the command line to print."""

    def __init__(self, lab: str, r: PacketRequest, *, calibrated: bool = True):
        self.r = r
        self.changed: list[str] = []
        self.calibration: dict[str, Any] | None = None
        if calibrated:
            from . import calibrate  # light start-up; calibrate imports this module

            self.calibration = calibrate.stored()
        self.ends = [Endpoints(lab, p.from_, p.to, r.ip) for p in r.pairs_or_one()]
        self.names = [str(p) for p in r.pairs_or_one()]
        #: every end in this machine's kernel: cores pinned, first hop steered, losses located
        self.here = all(e.here for e in self.ends)
        if r.engine == "xdp" and not self.here:
            raise SpecError("the xdp engine runs the lab's first hop in this machine's kernel; "
                            "a node of this measurement is on a host reached through its "
                            "agent", place="--engine")
        self.layout = cores.layout()
        senders = len(self.ends) * r.threads
        if senders > SENDERS_PER_CORE * len(self.layout.generator):
            raise SpecError(f"expected at most {SENDERS_PER_CORE * len(self.layout.generator)} "
                            f"sending threads on this machine's {len(self.layout.generator)} "
                            f"generator core(s), got {len(self.ends)} pairs x {r.threads} "
                            "threads", place="--pair" if r.pairs else "--threads")
        for e in self.ends:
            e.check_size(r.size)
        #: per pair, the classifier the xdp engine runs in place of the sender's egress
        self.classifiers = [xdp_path.sender_classifier(e.plan, e.src) if r.engine == "xdp"
                            else None for e in self.ends]
        self.stack = contextlib.ExitStack()
        #: what the measurement could not do on hosts reached through their agents
        self.far: list[str] = []
        self.gen: PacketGenerator | None = None
        #: the native generators under ``gen``'s wrappers, one per pair
        self.natives: list[PacketGenerator] = []

    def __enter__(self) -> PacketSetup:
        from .native import NativeGenerator  # light start-up: only packet measurements

        try:
            if self.layout.separated and self.here:
                self._place_first_hop()
            sep = self.layout.separated and self.here
            gens: list[PacketGenerator] = [
                self.stack.enter_context(NativeGenerator(
                    e.src_netns, e.dst_netns, e.dst_ip, flows=self.r.flows,
                    threads=self.r.threads, engine=self.r.engine, sink=self.r.sink,
                    port=BASE_PORT + 100 * i, classify=self.classifiers[i],
                    send_cpus=cpus.cpu_list(self.layout.generator) if sep else None,
                    sink_cpus=cpus.cpu_list(self.layout.sink) if sep else None,
                    src_at=e.src_at, dst_at=e.dst_at))
                for i, e in enumerate(self.ends)]
            self.natives = gens
            gen = gens[0] if len(gens) == 1 else PairedGenerator(gens, self.names)
            if self.r.engine == "xdp":
                self.changed.append("GRO of the first hop's veth peer (the xdp engine)")
            if not self.here:
                self.far = [FAR]
            locator = self._locator() if self.here else None
            receivers = {e.dst: self.r.sink for e in self.ends}
            if locator is not None:
                gen = LocatedGenerator(gen, locator, receivers)
            meter = self._stall_meter() if self.here else None
            if meter is not None:
                gen = StallWatchedGenerator(gen, meter)
            if self.here:
                gen = CoreWatchedGenerator(gen, {"generator": self.layout.generator,
                                                 "receiver": self.layout.sink,
                                                 "chain": self.layout.chain},
                                           self._chain_threads())
            if self.calibration is not None:
                from .calibrate import ceiling_for  # light start-up

                cal = self.calibration
                gen = CeilingGenerator(gen, lambda size: ceiling_for(cal, size))
            self.gen = PlacedGenerator(gen, self.layout)
        except BaseException:
            self.stack.close()
            raise
        return self

    def _place_first_hop(self) -> None:
        """The first hop's receive processing on the chain's cores: RPS on its ingress
        interfaces, and their NAPI threaded and pinned there (:mod:`.first_hop`); with a core
        for the receiver, the receiving interfaces' NAPI pinned to it.  Undone on exit."""
        done: set[tuple[str, str]] = set()
        targets = []
        for e in self.ends:
            for node, ns, ifname in e.first_hop_ingress():
                if (ns, ifname) not in done:
                    before = self.stack.enter_context(
                        cpus.steered(ns, ifname, self.layout.chain))
                    self.layout.steered.append(f"{node}/{ifname}")
                    self.changed.append(f"RPS mask of {node}/{ifname} (back to {before or '0'})")
                    targets.append((node, ns, ifname))
                    done.add((ns, ifname))
        pins = [(targets, self.layout.chain, "first_hop")]
        if self.layout.sink != self.layout.chain:
            rx = [(e.dst, e.dst_netns, i.name) for e in self.ends
                  for i in e.plan.interfaces_of(e.dst) if (e.dst_netns, i.name) not in done]
            pins.append((rx, self.layout.sink, "receiver"))
        for where, on, role in pins:
            pin = FirstHopPinning(where, on)
            self.stack.callback(self._record_restored, pin)
            self.stack.enter_context(pin)
            self.layout.napi += [{**d, "role": role} for d in pin.describe()]
            self.layout.notes += pin.notes

    def _chain_threads(self) -> list[int]:
        """The threads the chain's work runs in: the first hop's pinned NAPI threads and the
        chain cores' ksoftirqd (none when the layout is not separated)."""
        if not self.layout.separated:
            return []
        napi = [p for n in self.layout.napi if n.get("role") == "first_hop"
                for p in n.get("kthreads", [])]
        if not napi:
            return []
        soft = [ksoftirqd(c) for c in self.layout.chain]
        return napi + [p for p in soft if p is not None]

    def _stall_meter(self) -> StallMeter | None:
        """A stall meter over the first hop's pinned NAPI threads (None: none pinned, or the
        meter is not built, said in the layout's notes)."""
        tids = [p for n in self.layout.napi if n.get("role") == "first_hop"
                for p in n.get("kthreads", [])]
        if not tids:
            return None
        if not os.access(stall_binary(), os.X_OK):
            self.layout.notes.append(f"no first-hop stall meter ({stall_binary()} is not built)")
            return None
        return self.stack.enter_context(StallMeter(tids[:MAX_THREADS]))

    def _record_restored(self, pin: FirstHopPinning) -> None:
        self.layout.restored += pin.restored
        self.changed += pin.restored

    def _locator(self) -> LossLocator | None:
        if not os.access(droptrace_binary(), os.X_OK):
            self.layout.notes.append(f"no loss locator ({droptrace_binary()} is not built)")
            return None
        return self.stack.enter_context(LossLocator(self.ends[0].plan))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        self.stack.close()
        if isinstance(exc, KeyboardInterrupt) and self.changed:
            exc.add_note("restored: " + "; ".join(self.changed))

    def describe(self) -> dict[str, Any]:
        out = self.ends[0].describe()
        if len(self.ends) > 1:
            out["pairs"] = [e.describe() for e in self.ends]
        out["cores"] = self.layout.to_dict()
        return out


def _packet_finish(m: Measurement, setup: PacketSetup, cpu: CpuMonitor) -> Measurement:
    m.params = {**setup.describe(), **m.params}
    if not m.cpu:
        m.cpu = cpu.result
    if not setup.layout.separated:
        m.extra.setdefault("warnings", []).extend(setup.layout.notes)
    if setup.far:
        m.extra.setdefault("warnings", []).extend(setup.far)
    if setup.calibration is not None:
        from .calibrate import summary  # light start-up

        m.environment = {**m.environment, "calibration": summary(setup.calibration)}
    return m


def iperf(lab: str, r: IperfRequest) -> Measurement:
    from .iperf import run_iperf  # light start-up: the iperf3 driver only when used

    from .iperf import Target

    every = [Endpoints(lab, p.from_, p.to, r.ip) for p in r.pairs_or_one()]
    ends = every[0]
    targets = [Target(str(p), e.src_netns, e.dst_netns, e.dst_ip, e.src_at, e.dst_at)
               for p, e in zip(r.pairs, every)] or None
    m = run_iperf(ends.src_netns, ends.dst_netns, ends.dst_ip, flows=r.flows, udp=r.udp,
                  length=r.length, bitrate=r.bitrate, zerocopy=r.zerocopy, duration=r.duration,
                  omit=r.omit, affinity=r.affinity, targets=targets, src_at=ends.src_at,
                  dst_at=ends.dst_at)
    if targets:
        m.extra["pairs"] = [e.describe() for e in every]
    return _finish(m, ends, None)


def rate(lab: str, r: RateRequest, progress: Progress | None = None) -> Measurement:
    from .ndr import rate_curve  # light start-up: the search code only when used

    with CpuMonitor() as cpu, PacketSetup(lab, r) as setup:
        assert setup.gen is not None
        offered: list[float] = []
        for x in r.rates:
            if x == MAX:  # the most the sender reaches on its core(s), per pair
                t = setup.gen.trial(None, r.duration, r.size)
                offered.append(t.sent_pps / max(len(t.pairs or []), 1))
            else:
                offered.append(float(x))
        m = rate_curve(setup.gen, offered, r.size, r.duration, progress=progress)
    return _packet_finish(m, setup, cpu)


def ndr(lab: str, r: NdrRequest, progress: Progress | None = None) -> Measurement:
    from .ndr import ndr_pdr  # light start-up: the search code only when used

    with CpuMonitor() as cpu, PacketSetup(lab, r) as setup:
        assert setup.gen is not None
        if r.method == "mlr":
            from .mlr import mlr_search  # light start-up: MLRsearch only when used

            m = mlr_search(setup.gen, r.size, duration=r.duration,
                           loss_goals=[r.ndr_loss / 100, r.pdr_loss / 100],
                           precision=r.precision / 100,
                           max_rate_pps=r.max_rate, progress=progress)
        else:
            m = ndr_pdr(setup.gen, r.size, duration=r.duration,
                        loss_goals=[r.ndr_loss / 100, r.pdr_loss / 100],
                        precision=r.precision / 100,
                        max_rate_pps=r.max_rate, progress=progress)
        if r.latency:
            _latency_at_ndr(m, setup, r, progress)
    return _packet_finish(m, setup, cpu)


def _latency_at_ndr(m: Measurement, setup: PacketSetup, r: NdrRequest,
                    progress: Progress | None) -> None:
    """Latency at 10/50/90 % of the NDR found (or of its lower bound), beside the latency
    floor of a direct link when calibrated."""
    from .ndrlatency import latency_at_shares, latency_metrics  # light start-up

    assert setup.gen is not None
    ndr = m.extra.get("ndr_pps") or m.metrics.get("ndr_lower_bound_pps")
    if not ndr:
        m.extra["latency_at_ndr"] = None
        m.extra.setdefault("warnings", []).append("no NDR found: no latency measured at it")
        return
    rows = latency_at_shares(setup.gen, float(ndr), r.size, r.duration, progress=progress)
    m.extra["latency_at_ndr"] = rows
    m.metrics.update(latency_metrics(rows))
    _latency_context(m, setup, [row["latency_source"] for row in rows])


def latency(lab: str, r: LatencyRequest, progress: Progress | None = None) -> Measurement:
    from .ndr import latency as run_latency  # light start-up: the search code only when used

    with CpuMonitor() as cpu, PacketSetup(lab, r) as setup:
        assert setup.gen is not None
        m = run_latency(setup.gen, r.rate, r.size, r.duration)
        _latency_context(m, setup, [m.extra.get("latency_source")])
    return _packet_finish(m, setup, cpu)


def _latency_context(m: Measurement, setup: PacketSetup, sources: list[str | None]) -> None:
    """The latency floor of a direct link beside a latency figure (from the calibration), and
    a warning when arrivals were timestamped after the receiver's socket queue."""
    if setup.calibration is not None:
        m.extra["latency_floor_us"] = setup.calibration.get("latency_floor_us")
    if "socket" in sources:
        m.extra.setdefault("warnings", []).append(
            "latency timestamped at the receiving socket includes the time probes waited in "
            "its queue; --sink xdp (or kernel) timestamps them in the receiver's softirq")


def run(lab: str, r: AnyRequest, progress: Progress | None = None) -> Measurement:
    """Run request ``r`` (of any kind) in the running lab ``lab``."""
    if isinstance(r, IperfRequest):
        return iperf(lab, r)
    if isinstance(r, RateRequest):
        return rate(lab, r, progress)
    if isinstance(r, NdrRequest):
        return ndr(lab, r, progress)
    return latency(lab, r, progress)


__all__ = ["Endpoints", "iperf", "rate", "ndr", "latency", "run"]
