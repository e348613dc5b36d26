"""The native generator: ``sfcgen send`` in the source namespace, one ``sfcgen sink`` in the
destination namespace for the generator's whole life.

Each trial runs the sender to completion, waits ``drain_s`` for queues to empty, then peeks at
the sink (SIGUSR2) every ``DRAIN_STEP_S`` while probes of the measured window are still arriving
(a deep queue, e.g. an HTB shaper's 1000 packets at 3.3 kpps, holds 0.3 s of them), for at most
``DRAIN_MAX_S`` after the sending; then it asks the sink for a snapshot (SIGUSR1), which also
resets its counters for the next trial.  ``sent`` is
what the sender reports it handed to the kernel inside the measured window (a frame refused by a
qdisc of the sender's own interface counts as sent and lost); ``received`` is the sink's count of
distinct packets of that window (duplicates are reported apart); both rates are over the
window's length (:mod:`.window`); the whole trial's counts are ``sent_total``/``received_total``.  The sink is ended by PID in :meth:`NativeGenerator.close`.

The binary is ``$SFCLAB_SFCGEN`` if set, else ``<repo>/native/build/sfcgen`` (``make -C native``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import MeasurementError, SfclabError
from ..spec.generator import ENGINES, SINKS
from . import histogram
from .cpu import read_proc_stat, usage
from .generator import PacketGenerator, Trial
from .place import AnyPlace, NsPlace
from .window import window_counts

if TYPE_CHECKING:
    from ..realize.runtime.process import Process
    from . import xdp_path

#: UDP port of the sink unless told otherwise (any free port in the destination namespace)
DEFAULT_PORT = 7999
#: seconds between the sender's end and the sink's snapshot
DEFAULT_DRAIN_S = 0.2
#: while the window's probes still arrive after ``drain_s``: look again this often ...
DRAIN_STEP_S = 0.05
#: ... for at most this long after the sending ended (a queue is drained by then)
DRAIN_MAX_S = 2.0
ENV_BINARY = "SFCLAB_SFCGEN"
PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")


def repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def sfcgen_binary() -> str:
    """Path of the sfcgen executable, or a :class:`MeasurementError` that says how to get it."""
    env = os.environ.get(ENV_BINARY)
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise MeasurementError(f"${ENV_BINARY} is {env!r}, which is not an executable file")
        return env
    path = repo_root() / "native" / "build" / "sfcgen"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise MeasurementError(
            f"the native generator is not built ({path} is missing): run "
            f"`make -C {repo_root() / 'native'}` or set ${ENV_BINARY}")
    return str(path)


def receiver_facts(sink: str, ready: dict[str, Any], snap: dict[str, Any]) -> dict[str, Any]:
    """What a trial's consumer needs to know of the receiver itself: its kind, where it counted,
    the probes it dropped on its own (the socket's buffer overflows, read from the kernel by
    ``SO_RXQ_OVFL``: the measurement's loss, never the chain's) and whether it was saturated
    (it dropped any).  The in-kernel sinks count in the softirq that delivers the frame: they
    have no buffer of their own to overflow."""
    own = int(snap.get("socket_drops", 0)) if sink == "socket" else 0
    return {"sink": sink, "where": ready.get("xdp", "socket"), "own_drops": own,
            "saturated": own > 0}


def latency_of(sink: dict[str, Any]) -> dict[str, Any]:
    """The trial's latency percentiles: from the sink's histogram (:mod:`.histogram`) when it
    hands one over, else the sink's own figures."""
    h = histogram.from_sink(sink)
    if h is not None:
        return h.summary()
    lat = sink.get("latency_us", {})
    return lat if isinstance(lat, dict) else {}


def latency_source(sink: dict[str, Any]) -> str:
    """Where the probes were timestamped on arrival: ``softirq`` (the XDP/tcx sinks, before
    any receive queue) or ``socket`` (after the socket's queue: the receiver's wait included)."""
    return "socket" if sink.get("mode", "socket") == "socket" else "softirq"


class NativeGenerator(PacketGenerator):
    """UDP trials from ``src_netns`` to ``dst_ip`` (an address in ``dst_netns``), over IPv4 or
    IPv6 as ``dst_ip`` is (an IPv6 frame is at least 84 bytes, and never IMIX).

    ``engine`` picks the sender's technique (see ``sfcgen send --help``): ``packet`` (AF_PACKET
    ``sendmmsg``, the default through ``auto``), ``ring``, ``udp``, or ``xdp`` (BPF_PROG_RUN live
    frames: the fastest, skips the sender's qdisc and egress hooks; GRO is turned on at the first
    hop's veth peer for the generator's life, see :mod:`.xdp_path`).  ``qdisc_bypass`` skips the
    sender device's qdisc (faster, but a shaper on the sender's own interface is then ignored).
    ``sink`` is ``kernel`` (the default: an eBPF program counts and drops the probes in the
    receiving namespace's softirq, at XDP, or at tcx ingress where the interface already runs an
    XDP program, so no user-space thread can be starved of them), ``xdp`` or ``tc`` (one of those
    hooks only), or ``socket`` (a UDP socket read in user space; its own buffer drops are
    reported as the receiver's, ``raw["receiver"]``).
    ``send_cpus`` and ``sink_cpus`` pin threads (``"0-1"``), as ``taskset`` would.
    ``classify`` (the xdp engine on a node whose egress classifies for a chain): the generator
    classifies each frame with the lab's classifier and tables, as that egress would.
    """

    ENGINES = ENGINES
    SINKS = SINKS

    def __init__(self, src_netns: str, dst_netns: str, dst_ip: str, flows: int = 1,
                 threads: int = 1, port: int = DEFAULT_PORT, drain_s: float = DEFAULT_DRAIN_S,
                 *, src_ip: str | None = None, sink_threads: int | None = None,
                 engine: str = "auto", qdisc_bypass: bool = False, sink: str = "kernel",
                 send_cpus: str | None = None, sink_cpus: str | None = None,
                 binary: str | None = None, ready_timeout_s: float = 5.0,
                 classify: xdp_path.Classifier | None = None,
                 src_at: AnyPlace | None = None, dst_at: AnyPlace | None = None):
        """``src_at``/``dst_at``: where the sender and the receiver run (:mod:`.place`: a
        node's namespace on its host, through the lab's runtime); default: namespaces
        ``src_netns``/``dst_netns`` of this machine."""
        if flows < 1 or threads < 1:
            raise ValueError("flows and threads must be at least 1")
        if engine not in self.ENGINES:
            raise ValueError(f"engine must be one of {', '.join(self.ENGINES)}, not {engine!r}")
        if sink not in self.SINKS:
            raise ValueError(f"sink must be one of {', '.join(self.SINKS)}, not {sink!r}")
        self.src: AnyPlace = src_at or NsPlace(src_netns)
        self.dst: AnyPlace = dst_at or NsPlace(dst_netns)
        self.src_netns = src_netns
        self.dst_netns = dst_netns
        self.dst_ip = dst_ip
        self.src_ip = src_ip
        self.flows = flows
        self.threads = threads
        self.port = port
        self.drain_s = drain_s
        self._engine = "auto"
        self.qdisc_bypass = qdisc_bypass
        self.send_cpus = send_cpus
        self.classify = classify
        self.binary = binary or self.src.sfcgen()
        self.sink = sink
        self.final: dict[str, Any] | None = None
        self.sink_ready: dict[str, Any] = {}
        self._peer_change: xdp_path.PeerChange | None = None
        self._proc: Process | None = None
        argv = [binary or self.dst.sfcgen(), "sink", "--port", str(port), "--flows",
                str(flows), "--threads", str(sink_threads or threads)]
        if sink_cpus:
            argv += ["--cpus", sink_cpus]
        if sink != "socket":
            argv.append(f"--{sink}")
        try:
            self._proc = self.dst.spawn(argv)
            line = self._proc.readline(ready_timeout_s)
            ready = self._parse(line) if line else None
            if not ready or ready.get("event") != "ready":
                raise MeasurementError(
                    f"sfcgen sink in {self.dst} did not report ready within {ready_timeout_s} "
                    f"s: {self._sink_stderr() or line or '(no output)'}")
            self.sink_ready = ready
            self.engine = engine  # the setter prepares the first hop for the xdp engine
        except BaseException:
            self.close()
            raise

    @property
    def engine(self) -> str:
        return self._engine

    @engine.setter
    def engine(self, engine: str) -> None:
        """Switch engines between trials; the xdp engine needs the first hop's peer in NAPI mode."""
        from . import xdp_path  # light start-up: only the xdp engine changes the peer

        if engine not in self.ENGINES:
            raise ValueError(f"engine must be one of {', '.join(self.ENGINES)}, not {engine!r}")
        if engine == "xdp" and not self.src.here:
            raise MeasurementError(f"the xdp engine changes the first hop's peer in this "
                                   f"machine's kernel: {self.src} is on another host")
        if engine == "xdp" and self._engine != "xdp":
            self._peer_change = xdp_path.enable_peer_napi(self.src_netns, self.dst_ip)
        elif engine != "xdp" and self._engine == "xdp":
            xdp_path.restore(self._peer_change)
            self._peer_change = None
        self._engine = engine

    @staticmethod
    def _parse(line: str) -> dict[str, Any] | None:
        try:
            d = json.loads(line)
        except ValueError:
            return None
        return d if isinstance(d, dict) else None

    @property
    def sink_pid(self) -> int | None:
        """The receiver's PID (on its host)."""
        return self._proc.pid if self._proc is not None else None

    def _sink_stderr(self) -> str:
        return self._proc.stderr() if self._proc is not None else ""

    def _check_sink(self) -> None:
        if self._proc is None:
            raise MeasurementError("the generator is closed")
        if self._proc.poll() is not None:
            raise MeasurementError(f"sfcgen sink exited with status {self._proc.poll()}: "
                                   f"{self._sink_stderr() or '(no output)'}")

    def snapshot(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """The sink's counters since the last snapshot (and reset them)."""
        return self._ask(signal.SIGUSR1, "snapshot", timeout_s)

    def peek(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """The sink's counters since the last snapshot, without resetting them."""
        return self._ask(signal.SIGUSR2, "peek", timeout_s)

    def _ask(self, sig: signal.Signals, event: str, timeout_s: float) -> dict[str, Any]:
        self._check_sink()
        assert self._proc is not None  # _check_sink: running
        line = self._proc.ask(sig, timeout_s)
        while True:
            if line is None:
                self._check_sink()
                raise MeasurementError(f"sfcgen sink gave no {event} within {timeout_s} s")
            d = self._parse(line)
            if d and d.get("event") == event:
                return d
            line = self._proc.readline(timeout_s)

    def _drain(self, sent_window: int) -> None:
        """Wait ``drain_s``, then as long as the window's probes still arrive (see above)."""
        start = time.monotonic()
        time.sleep(self.drain_s)
        last = int(self.peek().get("received_window", 0))
        while last < sent_window and time.monotonic() - start < DRAIN_MAX_S:
            time.sleep(DRAIN_STEP_S)
            now = int(self.peek().get("received_window", 0))
            if now == last:
                break  # nothing more came: the queues are empty (or the rest is lost)
            last = now

    def send_argv(self, offered_pps: float | None, duration_s: float, size: int | str,
                  ramp_s: float | None = None) -> list[str]:
        argv = [self.binary, "send", "--dst", self.dst_ip, "--dport", str(self.port),
                "--flows", str(self.flows), "--threads", str(self.threads),
                "--size", str(size), "--duration", f"{duration_s:g}",
                "--rate", "max" if offered_pps is None else f"{offered_pps:.3f}",
                "--engine", self.engine]
        if ramp_s and offered_pps is not None and ramp_s < duration_s:
            argv += ["--ramp", f"{ramp_s:g}"]
        if self.src_ip:
            argv += ["--src", self.src_ip]
        if self.qdisc_bypass:
            argv.append("--qdisc-bypass")
        if self.send_cpus:
            argv += ["--cpus", self.send_cpus]
        if self.engine == "xdp" and self.classify is not None:
            argv += ["--classify-maps", self.classify.maps,
                     "--classify-node", str(self.classify.node_id)]
        return argv

    def trial(self, offered_pps: float | None, duration_s: float, size: int | str,
              ramp_s: float | None = None) -> Trial:
        if offered_pps is not None and offered_pps <= 0:
            raise ValueError("offered_pps must be positive (or None for the maximum)")
        self._check_sink()
        argv = self.send_argv(offered_pps, duration_s, size, ramp_s)
        cpu_before = read_proc_stat()
        try:
            cp = self.src.run(argv, timeout=duration_s + 30)
        except subprocess.TimeoutExpired as e:
            raise MeasurementError(f"sfcgen send did not finish within {duration_s + 30} s") from e
        except SfclabError as e:  # the host's agent: its one line
            raise MeasurementError(f"sfcgen send in {self.src}: {e}") from e
        sent = None
        for line in reversed(cp.stdout.splitlines()):
            sent = self._parse(line)
            if sent:
                break
        if cp.returncode != 0 or not sent or sent.get("event") != "sent":
            with contextlib.suppress(MeasurementError):
                self.snapshot()  # start the next trial from zero all the same
            raise MeasurementError(f"sfcgen send exited with status {cp.returncode}: "
                                   f"{cp.stderr.strip() or cp.stdout.strip() or '(no output)'}")
        # this machine's cores: a sender on another host is not seen here
        cores = usage(cpu_before, read_proc_stat())["cores"] if self.src.here else {}
        self._drain(int(sent.get("sent_window", 0)))
        sink = self.snapshot()
        w = window_counts(sent, sink)
        lat = latency_of(sink)
        facts = receiver_facts(self.sink, self.sink_ready, sink)
        return Trial(
            offered_pps=offered_pps,
            duration_s=duration_s,
            size=size,
            sent=w.sent,
            received=w.received,
            sent_pps=w.sent_pps,
            received_pps=w.received_pps,
            sent_total=int(sent["sent"]),
            received_total=max(int(sink["received"]) - int(sink["duplicated"]), 0),
            reordered=int(sink["reordered"]),
            duplicated=int(sink["duplicated"]),
            latency_us={k: float(lat[k]) for k in PERCENTILES if k in lat},
            latency_source=latency_source(sink),
            raw={"sender": sent, "sink": sink, "sender_stderr": cp.stderr, "argv": argv,
                 "receiver": facts,
                 "cores": {c: {k: round(u[k], 1) for k in ("softirq", "system", "busy")}
                           for c, u in cores.items()}},
            window_s=w.window_s,
            receiver_drops=facts["own_drops"],
            receiver_saturated=facts["saturated"],
            generator_behind=_count(sent, "max_behind"),
            generator_skipped=_count(sent, "skipped_window"),
        )

    def close(self) -> None:
        from . import xdp_path  # light start-up: only the xdp engine changes the peer

        xdp_path.restore(self._peer_change)  # None: nothing to undo
        self._peer_change = None
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                lines = proc.end(2.0)
            except SfclabError:  # its host's agent did not answer: down ends it there
                lines = []
            for line in lines:
                d = self._parse(line)
                if d and d.get("event") == "final":
                    self.final = d

    def __enter__(self) -> "NativeGenerator":
        return self


def _count(report: dict[str, Any], key: str) -> int | None:
    """A count the sender reported, or None (a paced rate only; an older sender)."""
    v = report.get(key)
    return int(v) if v is not None else None
