"""``dpi``: nDPI names HTTP, DNS and TLS flows made inside the lab, with packets and bytes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.chains import chain

NATIVE = Path(__file__).resolve().parents[2] / "native"

DNS_RESPONDER = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", 53))
print("ready", flush=True)
s.settimeout(10)
q, addr = s.recvfrom(512)
qid = q[:2]
question = q[12:]
end = question.index(b"\0") + 5
answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + bytes([198, 18, 2, 2])
s.sendto(qid + b"\x81\x80" + struct.pack("!HHHH", 1, 1, 0, 0) + question[:end] + answer, addr)
"""

DNS_QUERY = r"""
import socket, struct, sys
name = b"".join(bytes([len(p)]) + p for p in b"www.sfclab.example".split(b".")) + b"\0"
q = b"\x12\x34\x01\x00" + struct.pack("!HHHH", 1, 0, 0, 0) + name + struct.pack("!HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
s.sendto(q, (sys.argv[1], 53))
r = s.recv(512)
print(".".join(map(str, r[-4:])))
"""

HTTP_GET = r"""
import sys, urllib.request
print(urllib.request.urlopen("http://%s:8000/" % sys.argv[1], timeout=5).status)
"""


@pytest.fixture(scope="module")
def dpi_binary():
    r = subprocess.run(["make", "-s", "-C", str(NATIVE), "build/sfc-dpi"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"cannot build sfc-dpi: {r.stderr}")
    return NATIVE / "build" / "sfc-dpi"


def _wait_ready(p):
    assert p.stdout.readline().strip() == "ready"


def _wait_port(lab, node, port, proto="tcp"):
    flag = "-ltnH" if proto == "tcp" else "-lunH"
    for _ in range(100):
        if f":{port} " in lab.exec(node, ["ss", flag]).stdout:
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {proto} {port} in {node}")


def test_dpi_names_http_dns_tls(tmp_path, dpi_binary):
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("<html>sfclab</html>\n")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-subj", "/CN=tls.sfclab.example", "-days", "1"],
                   check=True, capture_output=True)
    with chain("dpi", {"interval": 0.5, "memory": "64M", "cpu": 0.5}, tmp_path / "state") as lab:
        dst = str(lab.address("dst"))
        http = lab.popen("dst", [sys.executable, "-m", "http.server", "8000", "--bind", dst,
                                 "--directory", str(www)])
        dns = lab.popen("dst", [sys.executable, "-c", DNS_RESPONDER])
        tls = lab.popen("dst", ["openssl", "s_server", "-accept", "4433", "-cert", str(cert),
                                "-key", str(key), "-naccept", "1", "-quiet"])
        _wait_ready(dns)
        _wait_port(lab, "dst", 8000)
        _wait_port(lab, "dst", 4433)

        assert lab.exec("src", [sys.executable, "-c", HTTP_GET, dst]).stdout.strip() == "200"
        assert lab.exec("src", [sys.executable, "-c", DNS_QUERY, dst]).stdout.strip() \
            == "198.18.2.2"
        out = lab.exec("src", ["openssl", "s_client", "-connect", f"{dst}:4433", "-servername",
                               "tls.sfclab.example"], input="", timeout=20)
        assert "BEGIN CERTIFICATE" in out.stdout
        dns.wait(timeout=5)

        info = lab.inspect()["nodes"]["fn"]
        assert info["running"]
        by_port = {f["dport"]: f for f in info["flows"]}
        for port, name in ((8000, "HTTP"), (53, "DNS"), (4433, "TLS")):
            f = by_port[port]
            assert name in (f["master"], f["app"]), f
            assert f["src"] == "198.18.1.2" and f["dst"] == dst
            assert f["packets"] >= 2 and f["bytes"] > 0
            assert f["packets_to_dst"] >= 1 and f["packets_to_src"] >= 1
        assert info["memory"]["limit_bytes"] == 64 << 20
        assert info["cpu"]["cores"] == 0.5
        flows_file = Path(info["flows_file"])
        assert json.loads(flows_file.read_text())["flow_count"] >= 3
        http.terminate()
        tls.terminate()
        # stop() (what down runs first) ends the classifier, which writes its final table,
        # and removes its cgroups; down then removes the lab's state, the table with it
        lab.function("fn").stop()
        final = json.loads(flows_file.read_text())
        assert final["final"] is True
        assert not Path(info["memory"]["cgroup"]).exists()
        assert not Path(info["cpu"]["cgroup"]).exists()


def test_dpi_bypass_when_classifier_dies(tmp_path, dpi_binary):
    from tests.integration.chains import udp_exchange
    with chain("dpi", {}, tmp_path) as lab:
        fn = lab.function("fn")
        for pid in fn.running_pids():
            os.kill(pid, 9)
        lab.wait_stopped("fn", timeout=5)
        res = udp_exchange(lab, "src", "dst", [7000], 10)
        assert res["counts"] == {7000: 10}          # queue ... bypass: traffic still flows
        assert lab.inspect()["nodes"]["fn"]["running"] is False
