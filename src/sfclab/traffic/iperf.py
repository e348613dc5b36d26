"""iperf3 throughput: N independent server/client pairs between two namespaces, started together.

Model.  A *flow* is one iperf3 client in the sending namespace talking to its own one-off server
(``-s -1 -J``) in the receiving namespace on port ``base_port + i``; flows share nothing but the
path, so one slow flow cannot stall the others (unlike ``-P``, whose streams share one process
and one control connection).  With ``affinity="auto"`` client *i* is pinned (``-A``) to core
``i mod n`` and server *i* to core ``(i + 1) mod n``, so each pair spans two cores when there
are two.

Figures.  Throughput is what the *receivers* got: ``end.sum_received`` of each client's JSON
(the server reports it back to the client).  For UDP, loss is counted against the datagrams the
client actually sent (``end.sum_sent.packets``) minus those that arrived (receiver ``packets``
minus ``lost_packets``); iperf3's own ``lost_percent`` misses datagrams lost after the last one
that arrived, so it is kept only in the per-flow details.  Jain's fairness index is taken over
the per-flow received rates.  TCP retransmits come from the senders (Linux only reports there).

Failure.  iperf3 3.12 exits 0 after "unable to connect to server" when ``-J`` is given, so a flow
fails when its JSON has an ``error`` field, when stdout is not JSON, or when it exits non-zero;
any failed flow fails the measurement with :class:`~sfclab.errors.MeasurementError` carrying
iperf3's own message.  Servers are ended by PID in a ``finally`` (also on Ctrl-C); as a second
line of defence they run with ``--idle-timeout`` so a server orphaned by a SIGKILLed sfclab
exits on its own.  Readiness is checked by looking for the listening socket in the server's
own ``/proc/PID/net/tcp{,6}`` and checking that the socket is held by our server (so a
port already taken by another program is an error, not a silent hijack; no fixed sleep).

Where.  Each end runs where its node is (:mod:`.place`): the servers of one namespace are
started together there and held as one, the clients of one namespace likewise
(:meth:`~sfclab.realize.runtime.base.HostRuntime.spawn_all`: here, or on a host driven by its
agent, which holds them and ends them through pidfds; :mod:`sfclab.realize.runtime.process`),
with the iperf3 of that host (its version decides the timeouts given).  The same figures come
back either way; an end on another host is not pinned to cores, and the warnings say so
(:func:`far_warning`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import LabError, MeasurementError, RealizeError, SfclabError, SpecError
from ..kernel import netns
from ..realize.runtime.process import Ended, StartFailed
from .cpu import CpuMonitor
from .environment import environment
from .place import AnyPlace, NsPlace
from .result import Measurement

if TYPE_CHECKING:
    from ..realize.runtime.process import Programs

IPERF3 = "iperf3"
#: seconds to wait for all servers to listen
LISTEN_TIMEOUT_S = 5.0
#: client connect timeout (ms) passed as --connect-timeout
CONNECT_TIMEOUT_MS = 3000
#: seconds allowed beyond duration+omit for clients to finish and report
CLIENT_SLACK_S = 15.0
#: seconds servers get to exit on their own after the clients finished
SERVER_GRACE_S = 3.0


# ---------------------------------------------------------------------------------------------
# parsing (pure: tested on captured iperf3 output)

@dataclass
class FlowResult:
    """One client's view of its flow, receiver figures included."""

    protocol: str  # "TCP" or "UDP"
    received_bps: float
    sent_bps: float
    received_bytes: int
    sent_bytes: int
    seconds: float
    retransmits: int | None = None  # TCP, sender side
    sent_packets: int | None = None  # UDP
    received_packets: int | None = None
    lost_packets: int | None = None  # against packets sent
    iperf_lost_packets: int | None = None  # iperf3's own count (gaps seen by the receiver)
    jitter_ms: float | None = None
    out_of_order: int | None = None

    @property
    def loss_ratio(self) -> float | None:
        if self.sent_packets is None or self.lost_packets is None:
            return None
        return self.lost_packets / self.sent_packets if self.sent_packets else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["loss_ratio"] = self.loss_ratio
        return {k: v for k, v in d.items() if v is not None}


def load_client_output(stdout: str, stderr: str = "", returncode: int = 0) -> dict[str, Any]:
    """Parse one client's stdout; raise ``MeasurementError`` with iperf3's words if it failed."""
    doc: dict[str, Any] | None = None
    text = stdout.strip()
    if text:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None
    if isinstance(doc, dict) and doc.get("error"):
        raise MeasurementError(str(doc["error"]))
    if not isinstance(doc, dict):
        msg = stderr.strip() or text or "no output"
        if msg.startswith("iperf3: "):
            msg = msg[len("iperf3: "):]
        raise MeasurementError(f"{msg} (exit status {returncode})")
    if returncode != 0:
        raise MeasurementError(f"exited with status {returncode}: {stderr.strip() or 'no stderr'}")
    if not doc.get("end"):
        raise MeasurementError("iperf3 reported no end-of-test summary")
    return doc


def parse_flow(doc: dict[str, Any]) -> FlowResult:
    """A client's JSON (3.x) -> :class:`FlowResult`.  UDP without ``sum_received`` (iperf3
    before 3.5 or so) falls back to ``end.sum``, whose rate is the sender's, scaled by loss."""
    start = doc.get("start", {})
    end = doc["end"]
    proto = str(start.get("test_start", {}).get("protocol", "TCP")).upper()
    sent = end.get("sum_sent", {})
    if proto == "UDP":
        total = end.get("sum", {})
        recv = end.get("sum_received")
        sent_packets = int(sent.get("packets", total.get("packets", 0)))
        if recv and "packets" in recv:
            iperf_lost = int(recv.get("lost_packets", 0))
            received_packets = max(int(recv["packets"]) - iperf_lost, 0)
            received_bytes = int(recv.get("bytes", 0))
            received_bps = float(recv.get("bits_per_second", 0.0))
            seconds = float(recv.get("seconds", total.get("seconds", 0.0)))
            jitter = float(recv.get("jitter_ms", total.get("jitter_ms", 0.0)))
        else:
            iperf_lost = int(total.get("lost_packets", 0))
            pk = int(total.get("packets", 0))
            frac = 1.0 - (iperf_lost / pk if pk else 0.0)
            received_packets = max(pk - iperf_lost, 0)
            received_bytes = int(int(total.get("bytes", 0)) * frac)
            received_bps = float(total.get("bits_per_second", 0.0)) * frac
            seconds = float(total.get("seconds", 0.0))
            jitter = float(total.get("jitter_ms", 0.0))
        ooo = sum(int(s.get("udp", {}).get("out_of_order", 0)) for s in end.get("streams", []))
        sent_packets = max(sent_packets, received_packets)
        return FlowResult(
            protocol="UDP", received_bps=received_bps,
            sent_bps=float(sent.get("bits_per_second", total.get("bits_per_second", 0.0))),
            received_bytes=received_bytes, sent_bytes=int(sent.get("bytes", 0)), seconds=seconds,
            sent_packets=sent_packets, received_packets=received_packets,
            lost_packets=sent_packets - received_packets, iperf_lost_packets=iperf_lost,
            jitter_ms=jitter, out_of_order=ooo)
    recv = end.get("sum_received", {})
    return FlowResult(
        protocol="TCP", received_bps=float(recv.get("bits_per_second", 0.0)),
        sent_bps=float(sent.get("bits_per_second", 0.0)),
        received_bytes=int(recv.get("bytes", 0)), sent_bytes=int(sent.get("bytes", 0)),
        seconds=float(recv.get("seconds", 0.0)),
        retransmits=int(sent["retransmits"]) if "retransmits" in sent else None)


def jain_index(rates: list[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when equal, 1/n when one flow has all.

    All-zero rates (nothing arrived) give 0.0: there is no share to be fair about.
    """
    if not rates:
        raise ValueError("Jain's index needs at least one rate")
    if any(r < 0 for r in rates):
        raise ValueError("rates must be non-negative")
    sq = sum(r * r for r in rates)
    if sq == 0:
        return 0.0
    return sum(rates) ** 2 / (len(rates) * sq)


def summarize(flows: list[FlowResult]) -> dict[str, float]:
    """Flat metrics over all flows (the ``metrics`` of the measurement)."""
    rates = [f.received_bps for f in flows]
    m: dict[str, float] = {
        "throughput_bps": sum(rates),
        "sent_bps": sum(f.sent_bps for f in flows),
        "flows": len(flows),
        "jain_fairness": jain_index(rates),
        "flow_min_bps": min(rates),
        "flow_max_bps": max(rates),
    }
    if all(f.protocol == "UDP" for f in flows):
        sent = sum(f.sent_packets or 0 for f in flows)
        received = sum(f.received_packets or 0 for f in flows)
        lost = sum(f.lost_packets or 0 for f in flows)
        jit = [f.jitter_ms or 0.0 for f in flows]
        m.update(udp_sent_packets=sent, udp_received_packets=received, udp_lost_packets=lost,
                 udp_loss_ratio=lost / sent if sent else 0.0,
                 udp_jitter_ms=sum(jit) / len(jit), udp_jitter_max_ms=max(jit),
                 udp_out_of_order=sum(f.out_of_order or 0 for f in flows))
    else:
        rt = [f.retransmits for f in flows if f.retransmits is not None]
        if rt:
            m["retransmits"] = sum(rt)
    return m


# ---------------------------------------------------------------------------------------------
# running

def _version_at_least(v: str, want: tuple[int, ...]) -> bool:
    try:
        return tuple(int(x) for x in v.split(".")) >= want
    except ValueError:
        return False


def core_plan(flows: int, affinity: str) -> list[tuple[int | None, int | None]]:
    """(client core, server core) per flow; ``None`` means not pinned."""
    if affinity == "none":
        return [(None, None)] * flows
    cores = sorted(os.sched_getaffinity(0))
    n = len(cores)
    return [(cores[i % n], cores[(i + 1) % n]) for i in range(flows)]


def _check_params(flows: int, length: int | None, duration: float, omit: float, affinity: str,
                  base_port: int, bitrate: str | int | float | None) -> None:
    if flows < 1:
        raise SpecError(f"flows must be at least 1, not {flows}")
    # iperf3 reads -t and -O as whole seconds
    if duration < 1 or not float(duration).is_integer():
        raise SpecError(f"duration must be a whole number of seconds >= 1, not {duration}")
    if omit < 0 or not float(omit).is_integer():
        raise SpecError(f"omit must be a whole number of seconds >= 0, not {omit}")
    if length is not None and length <= 0:
        raise SpecError(f"length must be positive, not {length}")
    if affinity not in ("auto", "none"):
        raise SpecError(f"affinity must be 'auto' or 'none', not {affinity!r}")
    if not (1 <= base_port and base_port + flows - 1 <= 65535):
        raise SpecError(f"ports {base_port}..{base_port + flows - 1} are not all valid")
    if isinstance(bitrate, (int, float)) and bitrate < 0:
        raise SpecError(f"bitrate must not be negative, not {bitrate}")


@dataclass(frozen=True)
class Target:
    """One sender -> receiver pair of a several-pair measurement (e.g. one per tenant).

    ``src_at``/``dst_at``: where its clients and servers run (:mod:`.place`: a node's
    namespace on its host, through the lab's runtime); None: namespaces
    ``src_netns``/``dst_netns`` of this machine."""

    name: str  # the metrics' prefix: pair.<name>.throughput_bps
    src_netns: str
    dst_netns: str
    dst_ip: str
    src_at: AnyPlace | None = field(default=None, compare=False, repr=False)
    dst_at: AnyPlace | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "src_netns": self.src_netns, "dst_netns": self.dst_netns,
                "dst_ip": self.dst_ip}


def run_iperf(src_netns: str, dst_netns: str, dst_ip: str, *, flows: int = 1, udp: bool = False,
              length: int | None = None, bitrate: str | int | float | None = None,
              zerocopy: bool = False, duration: float = 5, omit: float = 0,
              affinity: str = "auto", base_port: int = 5201,
              targets: list[Target] | None = None, src_at: AnyPlace | None = None,
              dst_at: AnyPlace | None = None) -> Measurement:
    """Run ``flows`` iperf3 pairs from ``src_netns`` to ``dst_ip`` (an address in ``dst_netns``).

    ``src_at``/``dst_at``: where the clients and the servers run (:mod:`.place`: a node's
    namespace on its host -- this machine, or one driven by its agent); default: namespaces
    ``src_netns``/``dst_netns`` of this machine.  An end on another host is not pinned to
    cores (``affinity`` is this machine's), and the measurement's warnings say so.

    With ``targets`` the first three arguments (and the places) are ignored: each target gets
    ``flows`` flows of its own, all started together in one trial, and each target's received
    throughput is its own metric ``pair.<name>.throughput_bps`` (beside the totals over every
    flow).

    ``bitrate`` is iperf3's ``-b`` (a number in bit/s or a string such as ``"500M"``; per flow;
    ``0`` is unlimited; unset leaves iperf3's default, which is 1 Mbit/s for UDP).  ``length`` is
    ``-l`` (UDP payload bytes / TCP write size).  Returns a :class:`Measurement` of type
    ``"iperf3"``; raises ``MeasurementError`` if any flow fails, ``SpecError`` on bad options,
    ``LabError`` if a namespace does not exist.
    """
    pairs = targets or [Target("", src_netns, dst_netns, dst_ip, src_at, dst_at)]
    total = flows * len(pairs)
    _check_params(total, length, duration, omit, affinity, base_port, bitrate)
    named = {n for t in pairs for n, at in ((t.src_netns, t.src_at), (t.dst_netns, t.dst_at))
             if at is None}
    for ns in sorted(named):  # namespaces of this machine, named by the caller
        if not netns.exists(ns):
            raise LabError(f"no network namespace {ns!r}")
    owner = [pairs[i // flows] for i in range(total)]  # flow i belongs to this target
    clients_at = [t.src_at or NsPlace(t.src_netns) for t in owner]
    servers_at = [t.dst_at or NsPlace(t.dst_netns) for t in owner]
    where = {str(p): p for p in clients_at + servers_at}  # each place asked once
    version = {k: p.iperf3() for k, p in where.items()}
    plan = [(c if clients_at[i].here else None, s if servers_at[i].here else None)
            for i, (c, s) in enumerate(core_plan(total, affinity))]
    flow = _Flows(
        client_modern=[_version_at_least(version[str(p)], (3, 9)) for p in clients_at],
        server_modern=[_version_at_least(version[str(p)], (3, 9)) for p in servers_at],
        plan=plan, ports=[base_port + i for i in range(total)], owner=owner,
        udp=udp, length=length, bitrate=bitrate, zerocopy=zerocopy, duration=duration,
        omit=omit)
    params: dict[str, Any] = {
        "src_netns": src_netns, "dst_netns": dst_netns, "dst_ip": dst_ip, "flows": flows,
        "udp": udp, "length": length, "bitrate": bitrate, "zerocopy": zerocopy,
        "duration": duration, "omit": omit, "affinity": affinity, "base_port": base_port,
        "cores": [{"client": c, "server": s} for c, s in flow.plan],
    }
    servers: list[_Group] = []
    clients: list[_Group] = []
    mon = CpuMonitor()
    try:
        _start_servers(flow, servers_at, servers)
        with mon:
            client_ends = _run_clients(flow, clients_at, clients)
        docs = _client_docs(flow, client_ends)
        # one-off servers exit once their client is done; give them a moment, then end them
        server_ends = _ends(servers, time.monotonic() + SERVER_GRACE_S)
        m = _measurement(flow, params, targets, docs, client_ends, server_ends, mon)
        far = sorted({p.host or str(p) for p in where.values() if not p.here})
        if far:
            m.extra["warnings"] = [far_warning(far, affinity)]
        return m
    finally:
        for g in clients + servers:
            with contextlib.suppress(SfclabError):  # its host's agent did not answer: down
                g.held.end(0)                         # ends what it left there


def far_warning(hosts: list[str], affinity: str) -> str:
    """What differs from a run here when ends ran on ``hosts``, reached through their agents."""
    return (f"iperf3 ran on host(s) {', '.join(hosts)}, reached through their agents"
            + (": its servers and clients there were not pinned to cores" if affinity == "auto"
               else "")
            + "; the environment and the per-core CPU figures are this machine's, not theirs")


@dataclass
class _Flows:
    """One trial's flows: flow ``i`` runs on ``ports[i]`` with the cores ``plan[i]`` (client,
    server) for the target ``owner[i]``; the rest are iperf3's options, the same for all.
    ``client_modern``/``server_modern``: flow *i*'s client/server is iperf3 3.9 or later
    where it runs (idle and connect timeouts)."""
    client_modern: list[bool]
    server_modern: list[bool]
    plan: list[tuple[int | None, int | None]]
    ports: list[int]
    owner: list[Target]
    udp: bool
    length: int | None
    bitrate: str | int | float | None
    zerocopy: bool
    duration: float
    omit: float

    def server_argv(self, i: int) -> list[str]:
        argv = [IPERF3, "-s", "-1", "-J", "-p", str(self.ports[i])]
        if self.server_modern[i]:
            argv += ["--idle-timeout", str(int(self.duration + self.omit + 30))]
        if self.plan[i][1] is not None:
            argv += ["-A", str(self.plan[i][1])]
        return argv

    def client_argv(self, i: int) -> list[str]:
        argv = [IPERF3, "-c", self.owner[i].dst_ip, "-p", str(self.ports[i]), "-J",
                "-t", _num(self.duration), "-O", _num(self.omit)]
        if self.client_modern[i]:
            argv += ["--connect-timeout", str(CONNECT_TIMEOUT_MS)]
        if self.udp:
            argv.append("-u")
        if self.length is not None:
            argv += ["-l", str(self.length)]
        if self.bitrate is not None:
            argv += ["-b", self.bitrate if isinstance(self.bitrate, str) else _num(self.bitrate)]
        if self.zerocopy:
            argv.append("-Z")
        if self.plan[i][0] is not None:
            argv += ["-A", str(self.plan[i][0])]
        return argv


@dataclass
class _Group:
    """The flows ``flows`` (indices) whose servers, or clients, run at ``at``: held as one."""
    flows: list[int]
    at: AnyPlace
    held: Programs


def _by_place(places: list[AnyPlace]) -> list[tuple[AnyPlace, list[int]]]:
    """The flows by where their program runs: one group per namespace (of a host)."""
    groups: dict[str, tuple[AnyPlace, list[int]]] = {}
    for i, p in enumerate(places):
        groups.setdefault(str(p), (p, []))[1].append(i)
    return list(groups.values())


def _start_servers(flow: _Flows, places: list[AnyPlace], servers: list[_Group]) -> None:
    """A one-off server per flow, in its target's namespace where it is; return once all
    listen (each on its port, its own socket: a port another program holds is an error)."""
    for at, idx in _by_place(places):
        ports = [flow.ports[i] for i in idx]
        try:
            held = at.spawn_all([flow.server_argv(i) for i in idx], listen=ports,
                                timeout=LISTEN_TIMEOUT_S)
        except StartFailed as e:
            if e.index is None:
                raise MeasurementError(f"iperf3 servers in {at} not listening on {ports} "
                                       f"after {LISTEN_TIMEOUT_S:.0f} s") from None
            i = idx[e.index]
            label = f"server {i} (port {flow.ports[i]})"
            if e.ended is None:
                raise MeasurementError(f"iperf3 {label}: {e.why}") from None
            msg = (e.ended.stderr.strip() or e.ended.stdout.strip()
                   or f"exit status {e.ended.status}")
            with contextlib.suppress(json.JSONDecodeError, AttributeError):
                msg = json.loads(e.ended.stdout).get("error") or msg
            raise MeasurementError(f"iperf3 {label} stopped before listening: {msg}") from None
        except RealizeError as e:  # its host's agent, in one line
            raise MeasurementError(f"iperf3 servers in {at}: {e}") from e
        servers.append(_Group(idx, at, held))


def _run_clients(flow: _Flows, places: list[AnyPlace], clients: list[_Group]) -> list[Ended]:
    """Start every client together and wait for all to end (bounded); how each ended."""
    for at, idx in _by_place(places):
        try:
            held = at.spawn_all([flow.client_argv(i) for i in idx])
        except StartFailed as e:
            i = idx[e.index or 0]
            raise MeasurementError(f"iperf3 flow {i} (port {flow.ports[i]}): {e.why}") from None
        except RealizeError as e:
            raise MeasurementError(f"iperf3 clients in {at}: {e}") from e
        clients.append(_Group(idx, at, held))
    deadline = (time.monotonic() + flow.duration + flow.omit + CLIENT_SLACK_S
                + CONNECT_TIMEOUT_MS / 1e3)
    ends = _ends(clients, deadline)
    if not all(e.itself for e in ends):
        raise MeasurementError(f"iperf3 clients still running {CLIENT_SLACK_S:.0f} s "
                               "after the test should have ended")
    return ends


def _ends(groups: list[_Group], deadline: float) -> list[Ended]:
    """Each group given until ``deadline`` to end by itself, the rest ended; how each flow's
    program ended, in flow order."""
    by_flow: dict[int, Ended] = {}
    for g in groups:
        try:
            got = g.held.end(max(deadline - time.monotonic(), 0.0))
        except RealizeError as e:
            raise MeasurementError(f"iperf3 in {g.at}: {e}") from e
        by_flow.update(zip(g.flows, got))
    return [by_flow[i] for i in sorted(by_flow)]


def _client_docs(flow: _Flows, clients: list[Ended]) -> list[dict[str, Any]]:
    """Each client's JSON report; every flow that failed is named in one error."""
    docs, errors = [], []
    for i, c in enumerate(clients):
        try:
            docs.append(load_client_output(c.stdout, c.stderr, c.status or 0))
        except MeasurementError as e:
            errors.append(f"iperf3 flow {i} (port {flow.ports[i]}): {e}")
    if errors:
        raise MeasurementError("; ".join(errors))
    return docs


def _measurement(flow: _Flows, params: dict[str, Any], targets: list[Target] | None,
                 docs: list[dict[str, Any]], clients: list[Ended], servers: list[Ended],
                 mon: CpuMonitor) -> Measurement:
    """The trial's measurement: totals, per target and per flow, with the processes' CPU."""
    flow_results = [parse_flow(d) for d in docs]
    metrics = summarize(flow_results)
    if targets:
        for t in targets:
            metrics[f"pair.{t.name}.throughput_bps"] = sum(
                fr.received_bps for fr, o in zip(flow_results, flow.owner) if o is t)
        params["pairs"] = [t.to_dict() for t in targets]
    per_flow = []
    for i, (fr, (cc, sc)) in enumerate(zip(flow_results, flow.plan)):
        d = fr.to_dict()
        d.update(port=flow.ports[i], client_core=cc, server_core=sc,
                 pair=flow.owner[i].name or None, client_cpu_s=clients[i].cpu_s,
                 server_cpu_s=servers[i].cpu_s)
        per_flow.append(d)
    for i, (c, srv) in enumerate(zip(clients, servers)):
        mon.add_process(f"client{i}", c.pid, c.cpu_s)
        mon.add_process(f"server{i}", srv.pid, srv.cpu_s)
    server_docs = []
    for srv in servers:
        try:
            server_docs.append(json.loads(srv.stdout))
        except json.JSONDecodeError:
            server_docs.append({"unparsed": srv.stdout[-4000:]})
    return Measurement(
        type="iperf3", params=params, metrics=metrics, environment=environment(),
        cpu=mon.result, raw={"clients": docs, "servers": server_docs},
        extra={"per_flow_bps": [f.received_bps for f in flow_results], "per_flow": per_flow})


def _num(x: float | int) -> str:
    """iperf3 takes integers and decimals; avoid '5.0'."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))
