"""Connection-tracking entries moved from one namespace to another (``conntrack`` of Debian's
conntrack package, run inside each namespace).

An entry is read with ``conntrack -L`` (both tuples, protocol state, status flags, timeout) and
made again with ``conntrack -I``: the original tuple, the protocol state, ``ASSURED`` and
``SEEN_REPLY``, the time left, and the address translation the reply tuple shows -- a reply
addressed elsewhere than the original source is source NAT (``--src-nat ADDRESS:PORT``), one
coming from elsewhere than the original destination is destination NAT.  A NAT's clone thereby
keeps translating established flows to the *old* instance's address; its new flows use its own.

**Mid-stream flows.**  While a flow moves, each of the two instances sees only part of it:
the directions of a symmetric chain are switched at their own ingresses (over SSH, on two
hosts, a moment apart), and the clone's made entries carry no TCP window history.  An
instance that has not seen the packets a reply acknowledges finds it outside the TCP window,
leaves it untracked -- a NAT then does not translate it back, its own stack takes the packet
addressed to the NAT address and answers with a reset, which kills the connection.  So both
instances are told to be liberal about TCP windows (:func:`tolerate_midstream`:
``net.netfilter.nf_conntrack_tcp_be_liberal`` inside the function's namespace only) before
the switch: out-of-window packets stay tracked and translated.

What is not moved: expectations (helpers such as FTP), counters, marks and labels, and entries
made in the old instance between the copy and the switch that the clone has already made for
itself (the second pass skips entries that exist; the docs say so).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field

from ...kernel import netns

_PAIR = re.compile(r"(\w+)=(\S+)")


@dataclass
class Entry:
    proto: str
    timeout: int
    state: str | None
    orig: dict[str, str] = field(default_factory=dict)
    reply: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    def key(self) -> tuple[str, ...]:
        return (self.proto, self.orig.get("src", ""), self.orig.get("dst", ""),
                self.orig.get("sport", ""), self.orig.get("dport", ""))

    def argv(self) -> list[str]:
        o, r = self.orig, self.reply
        a = ["conntrack", "-I", "-p", self.proto, "-s", o["src"], "-d", o["dst"],
             "-t", str(max(self.timeout, 1))]
        if "sport" in o:
            a += ["--sport", o["sport"], "--dport", o["dport"]]
        if self.proto == "icmp" and "type" in o:
            a += ["--icmp-type", o["type"], "--icmp-code", o.get("code", "0"),
                  "--icmp-id", o.get("id", "0")]
        if self.state:
            a += ["--state", self.state]
        status = [f for f in ("ASSURED", "SEEN_REPLY") if f in self.flags]
        if "UNREPLIED" not in self.flags and "SEEN_REPLY" not in status:
            status.append("SEEN_REPLY")
        if status:
            a += ["-u", ",".join(status)]
        if r.get("dst") != o.get("src") or r.get("dport") != o.get("sport"):
            a += ["--src-nat", f"{r['dst']}:{r['dport']}" if "dport" in r else r["dst"]]
        if r.get("src") != o.get("dst") or r.get("sport") != o.get("dport"):
            a += ["--dst-nat", f"{r['src']}:{r['sport']}" if "sport" in r else r["src"]]
        return a


def parse(text: str) -> list[Entry]:
    """Entries of ``conntrack -L`` output (IPv4: tcp, udp, icmp)."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 4 or words[0] not in ("tcp", "udp", "icmp"):
            continue
        e = Entry(words[0], int(words[2]) if words[2].isdigit() else 30, None)
        if words[0] == "tcp" and not _PAIR.match(words[3]):
            e.state = words[3]
        side = e.orig
        for w in words[3:]:
            m = _PAIR.fullmatch(w)
            if m:
                k, v = m.groups()
                if k == "src" and "src" in side:
                    side = e.reply
                if k in ("src", "dst", "sport", "dport", "type", "code", "id"):
                    side[k] = v
            elif w.startswith("[") and w.endswith("]"):
                e.flags.append(w[1:-1])
        if "src" in e.orig and "src" in e.reply:
            out.append(e)
    return out


LIBERAL = "net.netfilter.nf_conntrack_tcp_be_liberal"


def tolerate_midstream(ns: str) -> list[str]:
    """Let namespace ``ns``'s connection tracking accept TCP packets outside the window it
    saw (its flows are handed over mid-stream, see the module's docstring); the error, if
    the setting could not be written."""
    try:
        netns.write_sysctl(ns, LIBERAL, "1")
    except OSError as e:
        return [f"{LIBERAL} in {ns}: {e.strerror or e}"]
    return []


def listing(ns: str) -> str:
    """``conntrack -L`` in namespace ``ns``: its text (what :func:`parse` reads)."""
    return netns.run(ns, ["conntrack", "-L"], check=False, timeout=30).stdout


def dump(ns: str) -> list[Entry]:
    return parse(listing(ns))


def make(ns: str, entries: list[Entry], skip: set[tuple[str, ...]] | None = None
         ) -> tuple[int, set[tuple[str, ...]], list[str]]:
    """Make ``entries`` in ``ns`` (those not in ``skip``); returns how many were made, the
    keys seen, and the errors of entries that could not be made (one that exists already is
    no error)."""
    made, errors = 0, []
    seen: set[tuple[str, ...]] = set()
    for e in entries:
        seen.add(e.key())
        if skip and e.key() in skip:
            continue
        try:
            cp = netns.run(ns, e.argv(), check=False, timeout=10)
        except (OSError, subprocess.SubprocessError) as err:
            errors.append(str(err))
            continue
        if cp.returncode == 0:
            made += 1
        elif "File exists" not in cp.stderr:
            errors.append(cp.stderr.strip().splitlines()[-1] if cp.stderr.strip() else
                          f"conntrack -I exited {cp.returncode}")
    return made, seen, errors


def copy(src_ns: str, dst_ns: str, skip: set[tuple[str, ...]] | None = None
         ) -> tuple[int, set[tuple[str, ...]], list[str]]:
    """Make ``src_ns``'s entries in ``dst_ns`` (both on this machine): :func:`make` of
    :func:`dump`, both instances tolerating mid-stream packets first
    (:func:`tolerate_midstream`).  Over SSH the two halves run on two hosts
    (:mod:`sfclab.live.runtime.agent_conntrack`)."""
    errors = tolerate_midstream(src_ns) + tolerate_midstream(dst_ns)
    made, seen, more = make(dst_ns, dump(src_ns), skip)
    return made, seen, errors + more
