"""``conntrack -L`` lines read back into ``conntrack -I`` commands: both tuples, TCP state,
status flags, time left, and the address translation the reply tuple shows (no root)."""

from __future__ import annotations

from sfclab.live.chains.conntrack import parse

LISTING = """\
udp      17 28 src=198.18.0.1 dst=198.18.2.2 sport=40000 dport=5005 src=198.18.2.2 dst=198.19.255.254 sport=5005 dport=40000 [ASSURED] mark=0 use=1
tcp      6 431999 ESTABLISHED src=198.18.0.1 dst=198.18.2.2 sport=51234 dport=6000 src=198.18.2.2 dst=198.18.0.1 sport=6000 dport=51234 [ASSURED] mark=0 use=1
udp      17 29 src=198.18.0.1 dst=198.18.2.2 sport=1 dport=2 [UNREPLIED] src=198.18.2.2 dst=198.18.0.1 sport=2 dport=1 mark=0 use=1
conntrack v1.4.7 (conntrack-tools): 3 flow entries have been shown.
"""


def test_listing_lines_become_insert_commands() -> None:
    nat, tcp, new = parse(LISTING)
    assert nat.argv() == ["conntrack", "-I", "-p", "udp", "-s", "198.18.0.1", "-d", "198.18.2.2",
                          "-t", "28", "--sport", "40000", "--dport", "5005",
                          "-u", "ASSURED,SEEN_REPLY", "--src-nat", "198.19.255.254:40000"]
    assert tcp.state == "ESTABLISHED" and "--src-nat" not in tcp.argv()
    assert tcp.argv()[tcp.argv().index("--state") + 1] == "ESTABLISHED"
    assert "UNREPLIED" in new.flags and "-u" not in new.argv()
    assert nat.key() == ("udp", "198.18.0.1", "198.18.2.2", "40000", "5005")


def test_destination_nat_is_kept() -> None:
    (e,) = parse("tcp 6 100 ESTABLISHED src=198.18.0.1 dst=198.18.9.1 sport=5 dport=80 "
                 "src=198.18.3.2 dst=198.18.0.1 sport=8080 dport=5 [ASSURED] use=1\n")
    a = e.argv()
    assert a[a.index("--dst-nat") + 1] == "198.18.3.2:8080" and "--src-nat" not in a
