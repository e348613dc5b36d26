"""The messages between health watchers of hosts driven over SSH and what an ingress host's
watcher makes of them (:mod:`sfclab.live.health.peermsg`, :mod:`sfclab.live.health.peertable`), with
a fake clock: only the lab's signed reports from its hosts count, replays change nothing, a host
silent for longer than the timeout has all its instances taken as dead until heard again."""

from __future__ import annotations

import json

from sfclab.live.health.peermsg import MAGIC, Report, decode, encode
from sfclab.live.health.peertable import PEER_TIMEOUT_S, Clock, PeerTable

SECRET = "ab" * 32
HOSTS = {"h1", "h2", "h3"}


class FakeClock(Clock):
    def __init__(self) -> None:
        self.t = 100.0

    def now(self) -> float:
        return self.t


def _report(seq: int = 1, host: str = "h2", alive=("a",), dead=(), epoch: int = 7,
            lab: str = "lab") -> Report:
    return Report(lab, host, epoch, seq, "beat", list(alive), list(dead))


def test_a_signed_report_round_trips():
    r = _report(alive=["a", "b"], dead=["c"])
    assert decode(encode(r, SECRET), "lab", SECRET, HOSTS) == r


def test_forged_altered_foreign_or_malformed_datagrams_are_ignored():
    data = encode(_report(), SECRET)
    assert decode(encode(_report(), "cd" * 32), "lab", SECRET, HOSTS) is None  # other secret
    altered = data.replace(b'"a"', b'"z"')
    assert altered != data and decode(altered, "lab", SECRET, HOSTS) is None
    assert decode(data, "other-lab", SECRET, HOSTS) is None
    assert decode(encode(_report(lab="other-lab"), SECRET), "lab", SECRET, HOSTS) is None
    assert decode(encode(_report(host="h9"), SECRET), "lab", SECRET, HOSTS) is None
    assert decode(data[:20], "lab", SECRET, HOSTS) is None
    assert decode(b"XXXX" + data[4:], "lab", SECRET, HOSTS) is None
    assert decode(data, "lab", "", HOSTS) is None  # no secret: nothing is trusted
    body = json.dumps({"lab": "lab", "host": "h2"}).encode()  # unsigned
    assert decode(MAGIC + b"\0" * 32 + body, "lab", SECRET, HOSTS) is None


def test_a_replayed_or_older_report_is_refused():
    t = PeerTable(FakeClock())
    assert t.heard(_report(seq=2, dead=["a"], alive=()))
    assert not t.heard(_report(seq=2, alive=["a"]))  # replayed
    assert not t.heard(_report(seq=1, alive=["a"]))  # older
    assert not t.heard(_report(seq=9, epoch=6, alive=["a"]))  # a watcher started before
    assert t.status() == {"a": False}
    assert t.heard(_report(seq=1, epoch=8, alive=["a"]))  # a watcher started again
    assert t.status() == {"a": True}


def test_a_silent_host_has_all_its_instances_out_until_heard_again():
    c = FakeClock()
    t = PeerTable(c)
    assert t.status() == {} and t.lost() == set()  # nothing reported: nothing known
    t.heard(_report(seq=1, alive=["a", "b"]))
    t.heard(_report(seq=1, host="h3", alive=["c"]))
    c.t += PEER_TIMEOUT_S * 0.9
    t.heard(_report(seq=2, host="h3", alive=["c"]))
    assert t.lost() == set() and t.status() == {"a": True, "b": True, "c": True}
    c.t += PEER_TIMEOUT_S * 0.2  # h2 silent for longer than the timeout, h3 not
    assert t.lost() == {"h2"}
    assert t.status() == {"a": False, "b": False, "c": True}
    assert t.host_of("a") == "h2" and t.host_of("zz") is None
    t.heard(_report(seq=3, alive=["a", "b"]))
    assert t.lost() == set() and t.status()["a"] is True


def test_a_moved_instance_counts_as_its_last_reporting_host_says():
    c = FakeClock()
    t = PeerTable(c)
    t.heard(_report(seq=1, dead=["a"], alive=()))
    c.t += 0.05
    t.heard(_report(seq=1, host="h3", alive=["a"]))
    assert t.status() == {"a": True} and t.host_of("a") == "h3"
    t.forget({"h2"})
    assert t.status() == {"a": False}
