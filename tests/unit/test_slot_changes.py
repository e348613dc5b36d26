"""Failover's slot-table change (sfclab.live.chains.tables.change_slots) on a map held in
memory: only the slots whose path changes take new bytes, nothing is written when nothing
changes, and the slots of live paths keep their path."""

from __future__ import annotations

from typing import Any

from sfclab.live.chains import tables
from sfclab.plan import maglev
from sfclab.plan.steering import DirectionPlan, PathPlan
from sfclab.realize.dataplane import decode_chain, encode_chain


class ChainMap:
    """The ``sfc_chains`` array as bytes per key, recording each update."""

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}
        self.writes: list[bytes] = []

    def lookup(self, key: bytes) -> bytes | None:
        return self.values.get(key)

    def update(self, key: bytes, value: bytes) -> None:
        self.values[key] = value
        self.writes.append(value)


class Maps:
    def __init__(self) -> None:
        self.maps: dict[str, Any] = {"sfc_chains": ChainMap()}


def direction() -> DirectionPlan:
    d = DirectionPlan(3, "natted", False, "src", "dst", False, 64)
    d.paths = [PathPlan(i, [], [f"nat-{i + 1}"], [], "", "", "") for i in range(3)]
    d.slots = maglev.table([f"nat-{i + 1}" for i in range(3)], [1, 1, 1])
    return d


def test_failover_writes_only_the_dead_paths_slots() -> None:
    dp, d = Maps(), direction()
    m = dp.maps["sfc_chains"]
    full = tables.slots_over(d, 100, [1, 1, 1])
    assert tables.change_slots(dp, d, full) == maglev.SIZE  # none yet: written whole
    before = m.writes[-1]
    out = tables.slots_over(d, 100, [1, 0, 1])
    moved = tables.change_slots(dp, d, out)
    assert moved == d.slots.count(1)
    after = m.writes[-1]
    diff = {(k - tables.SLOT_OFFSET) // 4 for k in range(len(after)) if after[k] != before[k]}
    assert diff <= {s for s, p in enumerate(d.slots) if p == 1} and len(diff) == moved
    _, _, slots = decode_chain(after)
    assert 101 not in slots and all(slots[s] == full[s] for s in range(len(slots))
                                     if full[s] != 101)
    n = len(m.writes)
    assert tables.change_slots(dp, d, out) == 0 and len(m.writes) == n  # nothing to change
    assert tables.change_slots(dp, d, full) == moved  # back: exactly its slots again
    assert m.writes[-1] == before


def test_a_table_of_another_size_is_written_whole() -> None:
    dp, d = Maps(), direction()
    dp.maps["sfc_chains"].values[(3).to_bytes(4, "little")] = encode_chain(256, 0, [7] * 256)
    assert tables.change_slots(dp, d, tables.slots_over(d, 0, [1, 1, 1])) == maglev.SIZE


def test_paths_rewritten_on_a_running_lab_keep_their_padding() -> None:
    """``write_paths`` (chain add, migration, failover) writes a padded path as ``up`` does:
    its stack with the chain's padding entries below it."""
    from sfclab.realize.dataplane import Iface, encode_path

    dp = Maps()
    dp.maps["sfc_paths"] = ChainMap()
    d = DirectionPlan(3, "padded", False, "src", "dst", False, 64)
    d.paths = [PathPlan(0, ["src", "r1", "dst"], ["r1"], [20, 21], "eth0", "r1", "eth0", pad=9)]
    here = Iface(4, b"\x02\x00\x00\x00\x00\x01")
    there = Iface(7, b"\x02\x00\x00\x00\x00\x02")
    tables.write_paths(dp, d, 100, {("src", "eth0"): here, ("r1", "eth0"): there})
    written = dp.maps["sfc_paths"].values[(100).to_bytes(4, "little")]
    assert written == encode_path([20, 21], 64, here, there.mac, 9)
    assert written != encode_path([20, 21], 64, here, there.mac)
