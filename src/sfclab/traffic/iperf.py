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
exits on its own.  Readiness is checked by looking for the listening socket in the receiving
namespace's ``/proc/net/tcp{,6}`` and checking that the socket is held by our server (so a
port already taken by another program is an error, not a silent hijack; no fixed sleep).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import IO, Any

from ..errors import LabError, MeasurementError, SpecError
from ..kernel import netns
from .cpu import CpuMonitor, process_cpu_seconds, reap
from .environment import environment, tool_version
from .result import Measurement

IPERF3 = "iperf3"
#: seconds to wait for all servers to listen
LISTEN_TIMEOUT_S = 5.0
#: client connect timeout (ms) passed as --connect-timeout
CONNECT_TIMEOUT_MS = 3000
#: seconds allowed beyond duration+omit for clients to finish and report
CLIENT_SLACK_S = 15.0
#: seconds servers get to exit on their own after the clients finished
SERVER_GRACE_S = 3.0
POLL_S = 0.02


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


def _listening_sockets(ns: str) -> dict[int, set[int]]:
    """TCP port -> inodes of the sockets in LISTEN state on it inside namespace ``ns``
    (read from the namespace's own /proc/net tables)."""
    found: dict[int, set[int]] = {}
    with netns.entered(ns):
        for table in ("tcp", "tcp6"):
            try:
                with open(f"/proc/thread-self/net/{table}") as f:
                    next(f, None)
                    for line in f:
                        cols = line.split()
                        if len(cols) > 9 and cols[3] == "0A":
                            port = int(cols[1].rsplit(":", 1)[1], 16)
                            found.setdefault(port, set()).add(int(cols[9]))
            except FileNotFoundError:  # no IPv6 in this kernel
                continue
    return found


def _socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process ``pid`` holds open."""
    out: set[int] = set()
    with contextlib.suppress(FileNotFoundError, ProcessLookupError, PermissionError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    out.add(int(link[8:-1]))
    return out


class _Proc:
    """A started iperf3 process: Popen plus its output files, reaped with rusage."""

    def __init__(self, label: str, ns: str, argv: list[str], owner: list["_Proc"]):
        self.label = label
        self.argv = argv
        self.returncode: int | None = None
        self.cpu_s: float | None = None
        self.out: IO[str] = tempfile.TemporaryFile("w+")
        self.err: IO[str] = tempfile.TemporaryFile("w+")
        try:
            self.popen = netns.popen(ns, argv, stdout=self.out, stderr=self.err,
                                     stdin=subprocess.DEVNULL, text=True)
        except (OSError, subprocess.SubprocessError) as e:
            self.close()
            raise MeasurementError(f"cannot start {argv[0]} ({label}) in {ns}: {e}") from e
        # registered at once, so a Ctrl-C right after the fork still finds it to end
        self.pid = self.popen.pid
        owner.append(self)

    def poll(self) -> bool:
        """Reap if exited; True once it has."""
        if self.returncode is not None:
            return True
        try:
            r = reap(self.pid)
        except ChildProcessError:  # reaped elsewhere; status unknown
            r = (self.popen.returncode or 0, self.cpu_s or 0.0)
        if r is None:
            return False
        self.returncode, self.cpu_s = r
        self.popen.returncode = self.returncode
        return True

    def output(self) -> tuple[str, str]:
        self.out.seek(0)
        self.err.seek(0)
        return self.out.read(), self.err.read()

    def close(self) -> None:
        self.out.close()
        self.err.close()


def _end(procs: list[_Proc]) -> None:
    """End by PID every process not yet reaped; sample CPU time first; reap them all."""
    alive = [p for p in procs if not p.poll()]
    for p in alive:
        p.cpu_s = process_cpu_seconds(p.pid)
    if alive:
        netns.end_processes([p.pid for p in alive])
    for p in alive:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.popen.wait(timeout=2)
        if p.popen.returncode is None:  # survived SIGKILL's grace: should not happen
            continue
        p.returncode = p.popen.returncode


def _wait_listening(dst: str, servers: list[_Proc], ports: list[int]) -> None:
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while True:
        for s in servers:
            if s.poll():
                out, err = s.output()
                msg = err.strip() or out.strip() or f"exit status {s.returncode}"
                with contextlib.suppress(json.JSONDecodeError, AttributeError):
                    msg = json.loads(out).get("error") or msg
                raise MeasurementError(f"iperf3 {s.label} stopped before listening: {msg}")
        # ready when each port's listening socket is *our* server's (not some other program's)
        listening = _listening_sockets(dst)
        if all(listening.get(port, set()) & _socket_inodes(s.pid)
               for port, s in zip(ports, servers)):
            return
        if time.monotonic() > deadline:
            raise MeasurementError(f"iperf3 servers in {dst} not listening on {ports} "
                                   f"after {LISTEN_TIMEOUT_S:.0f} s")
        time.sleep(POLL_S)


@dataclass(frozen=True)
class Target:
    """One sender -> receiver pair of a several-pair measurement (e.g. one per tenant)."""

    name: str  # the metrics' prefix: pair.<name>.throughput_bps
    src_netns: str
    dst_netns: str
    dst_ip: str


def run_iperf(src_netns: str, dst_netns: str, dst_ip: str, *, flows: int = 1, udp: bool = False,
              length: int | None = None, bitrate: str | int | float | None = None,
              zerocopy: bool = False, duration: float = 5, omit: float = 0,
              affinity: str = "auto", base_port: int = 5201,
              targets: list[Target] | None = None) -> Measurement:
    """Run ``flows`` iperf3 pairs from ``src_netns`` to ``dst_ip`` (an address in ``dst_netns``).

    With ``targets`` the first three arguments are ignored: each target gets ``flows`` flows
    of its own, all started together in one trial, and each target's received throughput is
    its own metric ``pair.<name>.throughput_bps`` (beside the totals over every flow).

    ``bitrate`` is iperf3's ``-b`` (a number in bit/s or a string such as ``"500M"``; per flow;
    ``0`` is unlimited; unset leaves iperf3's default, which is 1 Mbit/s for UDP).  ``length`` is
    ``-l`` (UDP payload bytes / TCP write size).  Returns a :class:`Measurement` of type
    ``"iperf3"``; raises ``MeasurementError`` if any flow fails, ``SpecError`` on bad options,
    ``LabError`` if a namespace does not exist.
    """
    pairs = targets or [Target("", src_netns, dst_netns, dst_ip)]
    total = flows * len(pairs)
    _check_params(total, length, duration, omit, affinity, base_port, bitrate)
    for ns in {n for t in pairs for n in (t.src_netns, t.dst_netns)}:
        if not netns.exists(ns):
            raise LabError(f"no network namespace {ns!r}")
    version = tool_version(IPERF3)
    if version == "absent":
        raise MeasurementError("iperf3 is not installed")
    flow = _Flows(
        modern=_version_at_least(version, (3, 9)), plan=core_plan(total, affinity),
        ports=[base_port + i for i in range(total)],
        owner=[pairs[i // flows] for i in range(total)],  # flow i belongs to this target
        udp=udp, length=length, bitrate=bitrate, zerocopy=zerocopy, duration=duration,
        omit=omit)
    params: dict[str, Any] = {
        "src_netns": src_netns, "dst_netns": dst_netns, "dst_ip": dst_ip, "flows": flows,
        "udp": udp, "length": length, "bitrate": bitrate, "zerocopy": zerocopy,
        "duration": duration, "omit": omit, "affinity": affinity, "base_port": base_port,
        "cores": [{"client": c, "server": s} for c, s in flow.plan],
    }
    servers: list[_Proc] = []
    clients: list[_Proc] = []
    mon = CpuMonitor()
    try:
        _start_servers(flow, servers)
        with mon:
            _run_clients(flow, clients)
        docs = _client_docs(clients)
        # one-off servers exit once their client is done; give them a moment, then end them
        grace = time.monotonic() + SERVER_GRACE_S
        while not all(srv.poll() for srv in servers) and time.monotonic() < grace:
            time.sleep(POLL_S)
        _end(servers)
        return _measurement(flow, params, targets, docs, clients, servers, mon)
    finally:
        _end(clients + servers)
        for proc in clients + servers:
            proc.close()


@dataclass
class _Flows:
    """One trial's flows: flow ``i`` runs on ``ports[i]`` with the cores ``plan[i]`` (client,
    server) for the target ``owner[i]``; the rest are iperf3's options, the same for all."""
    modern: bool  # iperf3 3.9 or later: idle and connect timeouts
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
        if self.modern:
            argv += ["--idle-timeout", str(int(self.duration + self.omit + 30))]
        if self.plan[i][1] is not None:
            argv += ["-A", str(self.plan[i][1])]
        return argv

    def client_argv(self, i: int) -> list[str]:
        argv = [IPERF3, "-c", self.owner[i].dst_ip, "-p", str(self.ports[i]), "-J",
                "-t", _num(self.duration), "-O", _num(self.omit)]
        if self.modern:
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


def _start_servers(flow: _Flows, servers: list[_Proc]) -> None:
    """A one-off server per flow, in its target's namespace; return once all listen."""
    for i, port in enumerate(flow.ports):
        _Proc(f"server {i} (port {port})", flow.owner[i].dst_netns, flow.server_argv(i), servers)
    for ns in dict.fromkeys(t.dst_netns for t in flow.owner):
        mine = [i for i in range(len(flow.ports)) if flow.owner[i].dst_netns == ns]
        _wait_listening(ns, [servers[i] for i in mine], [flow.ports[i] for i in mine])


def _run_clients(flow: _Flows, clients: list[_Proc]) -> None:
    """Start every client together and wait for all to end (bounded)."""
    for i, port in enumerate(flow.ports):
        _Proc(f"flow {i} (port {port})", flow.owner[i].src_netns, flow.client_argv(i), clients)
    deadline = (time.monotonic() + flow.duration + flow.omit + CLIENT_SLACK_S
                + CONNECT_TIMEOUT_MS / 1e3)
    while not all(c.poll() for c in clients):
        if time.monotonic() > deadline:
            raise MeasurementError(f"iperf3 clients still running {CLIENT_SLACK_S:.0f} s "
                                   "after the test should have ended")
        time.sleep(POLL_S)


def _client_docs(clients: list[_Proc]) -> list[dict[str, Any]]:
    """Each client's JSON report; every flow that failed is named in one error."""
    docs, errors = [], []
    for c in clients:
        out, err = c.output()
        try:
            docs.append(load_client_output(out, err, c.returncode or 0))
        except MeasurementError as e:
            errors.append(f"iperf3 {c.label}: {e}")
    if errors:
        raise MeasurementError("; ".join(errors))
    return docs


def _measurement(flow: _Flows, params: dict[str, Any], targets: list[Target] | None,
                 docs: list[dict[str, Any]], clients: list[_Proc], servers: list[_Proc],
                 mon: CpuMonitor) -> Measurement:
    """The trial's measurement: totals, per target and per flow, with the processes' CPU."""
    flow_results = [parse_flow(d) for d in docs]
    metrics = summarize(flow_results)
    if targets:
        for t in targets:
            metrics[f"pair.{t.name}.throughput_bps"] = sum(
                fr.received_bps for fr, o in zip(flow_results, flow.owner) if o is t)
        params["pairs"] = [asdict(t) for t in targets]
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
        out, _ = srv.output()
        try:
            server_docs.append(json.loads(out))
        except json.JSONDecodeError:
            server_docs.append({"unparsed": out[-4000:]})
    return Measurement(
        type="iperf3", params=params, metrics=metrics, environment=environment(),
        cpu=mon.result, raw={"clients": docs, "servers": server_docs},
        extra={"per_flow_bps": [f.received_bps for f in flow_results], "per_flow": per_flow})


def _num(x: float | int) -> str:
    """iperf3 takes integers and decimals; avoid '5.0'."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))
