"""The receiver's facts, the loss report's receiver drops, the placement record and finding a
veth's NAPI thread: logic without packets (the real parts are in tests/integration/
test_receiver.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sfclab.errors import SpecError

from sfclab.kernel.droptrace import DropCounts
from sfclab.spec.measurement import SINKS, RateRequest
from sfclab.traffic import cores
from sfclab.traffic.first_hop import napi_threads, threads_of
from sfclab.traffic.generator import PacketGenerator, Trial
from sfclab.traffic.loss import LossReport
from sfclab.traffic.native import receiver_facts
from sfclab.traffic.wrappers import LocatedGenerator, PlacedGenerator


def test_the_default_receiver_counts_in_the_kernel():
    assert RateRequest(rates=[1e5]).sink == "kernel"
    assert set(SINKS) == {"kernel", "xdp", "tc", "socket"}


def test_socket_receiver_overflow_is_its_own_drop_and_saturation():
    snap = {"socket_drops": 17}
    assert receiver_facts("socket", {}, snap) == {"sink": "socket", "where": "socket",
                                                  "own_drops": 17, "saturated": True}
    where = [{"dev": "eth0", "mode": "tcx"}]
    facts = receiver_facts("kernel", {"xdp": where}, {"socket_drops": 0})
    assert facts == {"sink": "kernel", "where": where, "own_drops": 0, "saturated": False}


def test_receiver_drops_are_not_unaccounted_loss():
    rep = LossReport(loss_by_node={"sh": 90}, receiver_drops={"dst": {"SOCKET_RCVBUFF": 10}})
    d = rep.to_dict(lost=100)
    assert d["located"] == 90 and d["unaccounted"] == 0
    assert d["receiver_drops"] == {"dst": {"SOCKET_RCVBUFF": 10}}


class _Locator:
    """Stands in for a LossLocator: records what since() was told to ignore and set apart."""

    def __init__(self) -> None:
        self.calls: list[tuple[set, set]] = []

    def mark(self) -> DropCounts:
        return DropCounts()

    def since(self, before, ignore, receiver):  # noqa: ANN001 - the locator's signature
        self.calls.append((ignore, receiver))
        return LossReport()


class _Gen(PacketGenerator):
    def trial(self, offered_pps, duration_s, size, ramp_s=None):  # noqa: ANN001
        return Trial(offered_pps, duration_s, size, 10, 10, 10.0, 10.0, raw={"x": 1})

    def close(self) -> None:
        pass


def test_each_receiver_kind_names_its_own_drop_reasons():
    loc = _Locator()
    gen = LocatedGenerator(_Gen(), loc, {"d1": "kernel", "d2": "socket", "d3": "tc"})  # type: ignore[arg-type]
    gen.trial(10.0, 1.0, 64)
    ignore, receiver = loc.calls[0]
    assert ignore == {("d1", "NOT_SPECIFIED"), ("d1", "TC_INGRESS"), ("d3", "TC_INGRESS")}
    assert receiver == {("d2", "SOCKET_RCVBUFF")}


def test_every_trial_records_where_its_parts_ran():
    lay = cores.layout([0, 1, 2])
    lay.steered.append("r1/eth0")
    lay.napi.append({"interface": "r1/eth0", "kthreads": [42], "cpus": [0], "role": "first_hop"})
    lay.napi.append({"interface": "dst/eth0", "kthreads": [43], "cpus": [1], "role": "receiver"})
    t = PlacedGenerator(_Gen(), lay).trial(10.0, 1.0, 64)
    p = t.raw["placement"]
    assert t.raw["x"] == 1
    assert (p["generator"], p["receiver"], p["chain"]) == ([2], [1], [0])
    assert p["first_hop"]["rps"] == ["r1/eth0"]
    assert [n["kthreads"] for n in p["first_hop"]["napi_threads"]] == [[42]]
    assert [n["kthreads"] for n in p["receiver_napi"]] == [[43]]


def _proc(tmp: Path, pid: int, name: str, ppid: int) -> None:
    (tmp / str(pid)).mkdir()
    (tmp / str(pid) / "stat").write_text(f"{pid} ({name}) S {ppid} 0 0 0\n")


def test_a_veths_napi_thread_is_the_new_one_of_its_name(tmp_path):
    _proc(tmp_path, 10, "napi/eth0-8193", 2)
    _proc(tmp_path, 11, "napi/eth1-8194", 2)
    _proc(tmp_path, 12, "napi/eth0-8195", 999)  # not a kernel thread: a process named so
    _proc(tmp_path, 13, "bash", 1)
    before = napi_threads(str(tmp_path))
    assert before == {10: "napi/eth0-8193", 11: "napi/eth1-8194"}
    _proc(tmp_path, 20, "napi/eth0-8200", 2)
    _proc(tmp_path, 21, "napi/a-long-nam", 2)  # "napi/a-long-name0-8201" cut to 15 bytes
    after = napi_threads(str(tmp_path))
    assert threads_of("eth0", before, after) == [20]
    assert threads_of("a-long-name0", before, after) == [21]
    assert threads_of("eth1", before, after) == []


def test_sfclab_cpus_lends_some_cores_to_the_measurement():
    assert cores.usable([0, 1, 2, 3, 4, 5], "2-5") == [2, 3, 4, 5]
    assert cores.usable([0, 1], None) == [0, 1]
    lay = cores.layout(cores.usable(list(range(8)), "2-5"))
    assert (lay.generator, lay.sink, lay.chain) == ([5], [4], [2, 3])


@pytest.mark.parametrize(("env", "words"), [
    ("2-9", "expected online CPUs (0,1), got '2-9' with 2,3"), ("x", "expected a CPU list"),
    ("3-1", "expected CPU ranges"), ("0-99999", "up to 4095")])
def test_a_bad_sfclab_cpus_is_one_clear_error(env, words):
    with pytest.raises(SpecError) as e:
        cores.usable([0, 1], env)
    assert words in str(e.value) and "$SFCLAB_CPUS" in str(e.value)
