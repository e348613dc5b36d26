"""``tun``: transit traffic goes through the program (its counter matches what was sent);
a missing executable is a SpecError; an OOM-killed program is reported and the lab stays up."""

import os
import sys
import time
from pathlib import Path

import pytest

from tests.integration.chains import chain, udp_exchange
from tests.integration.labtools import nothing_left
from sfclab.errors import SpecError
from sfclab.realize.state import LabState

COUNTER = [sys.executable, "-m", "sfclab.functions.examples.tun_count"]


def _wait_running(fn, path: Path):
    for _ in range(100):
        if path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never written; log: {fn.log_path.read_text()}")


def test_tun_counter_matches_packets_sent(tmp_path):
    with chain("tun", {"exec": COUNTER, "cpu": 1}, tmp_path) as lab:
        fn = lab.function("fn")
        _wait_running(fn, fn.stats_path)
        res = udp_exchange(lab, "src", "dst", [7000, 7001], 25)
        assert res["counts"] == {7000: 25, 7001: 25}
        info = lab.inspect()["nodes"]["fn"]
        assert info["running"]
        assert info["program"]["packets"] == 50
        assert info["program"]["dropped"] == 0
        assert info["cpu"]["cores"] == 1.0
        # packets for the node itself are not detoured
        lab.exec("src", ["ping", "-c", "2", "-i", "0.2", "-W", "1", "198.18.1.1"])
        assert lab.inspect()["nodes"]["fn"]["program"]["packets"] == 50
    assert not (Path("/sys/fs/cgroup/cpu") / f"sfclab:{lab.lab}:fn").exists()


def test_tun_program_string_and_placeholder(tmp_path):
    cmd = " ".join(COUNTER) + " {tun}"
    with chain("tun", {"exec": cmd, "device": "tunx"}, tmp_path) as lab:
        fn = lab.function("fn")
        assert fn.program()[-1] == "tunx"
        _wait_running(fn, fn.stats_path)
        # -W 5: a userspace relay on a loaded machine may take its time (ping sends no
        # request twice, so the count below holds whatever the wait)
        lab.exec("src", ["ping", "-c", "3", "-i", "0.2", "-W", "5", str(lab.address("dst"))])
        deadline = time.monotonic() + 3  # the program writes its count a moment after the last
        while lab.inspect()["nodes"]["fn"]["program"]["packets"] < 6 and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        assert lab.inspect()["nodes"]["fn"]["program"]["packets"] == 6   # requests + replies


def test_missing_executable_is_a_spec_error(tmp_path, lab_name):
    for exe in ("/nonexistent/prog -x", ["no-such-program-sfclab"]):
        with pytest.raises(SpecError) as e:
            with chain("tun", {"exec": exe}, tmp_path, name=lab_name):
                pass
        assert e.value.place == "nodes.fn.exec"
        assert nothing_left(lab_name) and not LabState(lab_name).exists


# it opens its TUN device (up waits for that), runs a while, then grows: a program killed
# as it starts fails `up` instead
HOG = ("import fcntl, os, struct, sys, time; fd = os.open('/dev/net/tun', os.O_RDWR); "
       "fcntl.ioctl(fd, 0x400454CA, struct.pack('16sH', sys.argv[1].encode(), 0x1001)); "
       "sys.stdout.write('start\\n'); sys.stdout.flush(); "
       "time.sleep(0.5); b = bytearray(256 << 20); time.sleep(30)")


def test_up_waits_until_the_program_holds_its_device_and_fails_one_that_never_does(
        tmp_path, lab_name, monkeypatch):
    """A TUN device no program holds drops what is routed into it: ``up`` returns once the
    program opened it (the first datagrams after ``up`` all come through), and fails, naming
    the function and leaving nothing, when the program runs but never opens it."""
    with chain("tun", {"exec": COUNTER}, tmp_path) as lab:
        res = udp_exchange(lab, "src", "dst", [7000], 10)  # at once, no wait for the program
        assert res["counts"] == {7000: 10}
    from sfclab.errors import RealizeError
    from sfclab.functions import tun

    monkeypatch.setattr(tun, "ATTACH_WAIT_S", 1.0)
    with pytest.raises(RealizeError, match="function fn.*did not open its TUN device sfctun0 "
                                           "within 1 s"):
        idle = [sys.executable, "-c", "import time; time.sleep(30)"]  # runs, opens nothing
        with chain("tun", {"exec": idle}, tmp_path, name=lab_name):
            pass
    assert nothing_left(lab_name) and not LabState(lab_name).exists


def test_oom_kill_is_reported_and_lab_stays_up(tmp_path):
    with chain("tun", {"exec": [sys.executable, "-c", HOG], "memory": "48M"}, tmp_path) as lab:
        lab.wait_stopped("fn", timeout=20)
        info = lab.inspect()["nodes"]["fn"]
        assert info["running"] is False
        assert info["memory"]["oom_kills"] >= 1
        assert "failcnt" in info["memory"]           # 0 on this kernel even after the kill
        assert info["memory"]["limit_bytes"] == 48 << 20
        for node in ("src", "fn", "dst"):
            assert os.path.exists(f"/run/netns/{lab.netns(node)}")
        # the lab still forwards: at least one of three pings answered (one can be lost while the
        # kernel is still reclaiming the killed program)
        lab.exec("src", ["ping", "-c", "3", "-i", "0.2", "-W", "1", "198.18.1.1"])
