"""``nat``: the receiver outside sees the translated source; a port forward reaches inside."""

import sys

from tests.integration.chains import chain, udp_exchange

TCP_SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1)
print("ready", flush=True)
s.settimeout(10)
c, addr = s.accept(); c.sendall(b"hello"); c.close()
print(addr[0], flush=True)
"""

TCP_CLIENT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
print(c.recv(100).decode())
"""


def test_masquerade_and_port_forward(tmp_path):
    params = {"outside": "dst", "forward": [{"proto": "tcp", "port": 8080, "to": "198.18.1.2:80"}]}
    with chain("nat", params, tmp_path) as lab:
        # inside → outside: the receiver sees the NAT's outside address
        res = udp_exchange(lab, "src", "dst", [7000], 5)
        assert res["counts"] == {7000: 5}
        assert res["sources"] == ["198.18.2.1"]
        srv = lab.popen("dst", [sys.executable, "-c", TCP_SERVER, "9000"])
        assert srv.stdout.readline().strip() == "ready"
        out = lab.exec("src", [sys.executable, "-c", TCP_CLIENT, "198.18.2.2", "9000"]).stdout
        assert out.strip() == "hello"
        assert srv.communicate(timeout=10)[0].strip() == "198.18.2.1"
        # outside → the NAT's port 8080 → inside 198.18.1.2:80, source unchanged
        srv = lab.popen("src", [sys.executable, "-c", TCP_SERVER, "80"])
        assert srv.stdout.readline().strip() == "ready"
        out = lab.exec("dst", [sys.executable, "-c", TCP_CLIENT, "198.18.2.1", "8080"]).stdout
        assert out.strip() == "hello"
        assert srv.communicate(timeout=10)[0].strip() == "198.18.2.2"
        info = lab.inspect()["nodes"]["fn"]
        assert info["interface"] == "eth1"
        assert info["connections"]["masquerade"]["packets"] == 2   # one UDP flow, one TCP
        assert info["connections"]["forward 0"]["packets"] == 1
