"""Machines reached over SSH, without a second machine: emulated hosts that run ``sshd``.

:func:`ssh_machines` builds a lab of emulated hosts (the *machines*: ``m1``, ``m2``, ``m3`` and
``ctl``, joined by their underlay), generates a host key and a client key into a temp dir, and
starts Debian's ``sshd`` with ``-f`` on a test config in each machine's context namespace,
listening on that machine's underlay address only.  ``ctl``'s context is where the SSH client
connects from, so SSH traffic never leaves the underlay.  Each ``sshd`` is ended by its PID.

The machines share this machine's users, so a command sent over SSH would run root's login
shell with root's ``~/.bashrc`` (bash reads it for a command from ``sshd`` when it is the first
shell level): on the machines this suite runs on, a ``pyenv init`` there cost every agent call
about 0.25 s.  The machines' ``sshd`` starts sessions with ``SHLVL=1`` (``SetEnv``), so bash
takes itself for a nested shell and reads no start-up file: a call costs what the machine's
SSH and the agent cost, not what the person running the tests keeps in their shell.  They also
set ``PYTHONPATH`` to the source of the sfclab under test, so the agents run that code (from a
worktree, its own rather than the checkout the Python was installed from).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import sfclab
from sfclab.kernel import netns

SSHD = "/usr/sbin/sshd"
ADDRESSES = {"m1": "198.19.255.11", "m2": "198.19.255.12", "m3": "198.19.255.13",
             "ctl": "198.19.255.20"}
#: the sfclab under test (its ``src``): the agents the machines run import it, not the one a
#: Python of ``ssh.python`` would find first (a worktree's tests test its own agent)
SOURCE = Path(sfclab.__file__).resolve().parents[1]
#: a machine started only when asked (``ssh_machines(..., spare=True)``): one to join a running
#: lab with ``sfclab host add --ssh``
SPARE = {"m4": "198.19.255.14"}
ALL = {**ADDRESSES, **SPARE}


@dataclass
class Machines:
    lab: str
    dir: Path
    key: Path
    known_hosts: Path
    sshd: dict[str, subprocess.Popen] = field(default_factory=dict)

    def context(self, m: str) -> str:
        return f"sfclab:{self.lab}:@{m}"

    def ssh(self, m: str) -> dict:
        """The ``ssh`` section of a lab host that is machine ``m``."""
        return {"user": "root", "key": str(self.key), "port": 22, "python": sys.executable,
                "state": str(self.dir / f"state-{m}"), "netns": self.context("ctl"),
                "known_hosts": str(self.known_hosts)}

    def start(self, m: str, authorized_keys: Path | None = None) -> None:
        """Start ``sshd`` on machine ``m`` (trusting the client key, or ``authorized_keys``)."""
        cfg = self.dir / f"sshd-{m}.conf"
        cfg.write_text("\n".join([
            f"ListenAddress {ALL[m]}", "Port 22", f"HostKey {self.dir / 'host_key'}",
            f"PidFile {self.dir / f'sshd-{m}.pid'}",
            f"AuthorizedKeysFile {authorized_keys or self.dir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "UseDNS no", "PrintMotd no", "Subsystem sftp internal-sftp",
            f"SetEnv SHLVL=1 PYTHONPATH={SOURCE}", ""]))  # no ~/.bashrc; the agent tested
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        self.sshd[m] = netns.popen(self.context(m), [SSHD, "-D", "-e", "-f", str(cfg)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            out = netns.run(self.context(m), ["ss", "-Hltn"]).stdout
            if f"{ALL[m]}:22 " in out:
                return
            if self.sshd[m].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd on {m} did not start")
            time.sleep(0.05)

    def stop(self, m: str) -> None:
        """Stop machine ``m``'s ``sshd`` and close the connections this process keeps to it
        (:mod:`sfclab.hosts.ssh_pool`): the host is gone, not only its listener."""
        from sfclab.hosts import ssh_pool

        ssh_pool.forget(ALL[m])
        p = self.sshd.pop(m, None)
        if p is not None:
            p.terminate()  # by its PID
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@contextlib.contextmanager
def ssh_machines(name: str, tmp: Path, spare: bool = False):
    """Three machines running ``sshd`` (and ``ctl``, the client's place; with ``spare`` a
    fourth, ``m4``); removed after."""
    addresses = {**ADDRESSES, **(SPARE if spare else {})}
    from sfclab.realize import lifecycle
    from sfclab.realize.kinds import load_lab_dict

    lab = load_lab_dict({
        "name": name,
        "hosts": {m: {"address": a} for m, a in addresses.items()},
        "nodes": {"x": {"kind": "host", "host": "ctl"}},
    })
    for what in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sfclab-test",
                        "-f", str(tmp / what)], check=True)
    (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
    pub = (tmp / "host_key.pub").read_text().split()
    kh = tmp / "known_hosts"
    kh.write_text("".join(f"{a} {pub[0]} {pub[1]}\n" for m, a in addresses.items()
                          if m != "ctl"))
    lifecycle.up(lab)
    ms = Machines(name, tmp, tmp / "client_key", kh)
    try:
        for m in ("m1", "m2", "m3", *(SPARE if spare else ())):
            ms.start(m)
        yield ms
    finally:
        try:
            left = _labs_on_machines(name)
        finally:
            for m in list(ms.sshd):
                ms.stop(m)
            lifecycle.down(name)
    assert not left, f"a test left labs on the SSH machines (removed by their marks): {left}"


def _labs_on_machines(machines: str) -> dict[str, list[str]]:
    """The test's own labs on these machines (``t``/``d`` + the machines' suffix) that a test
    did not remove (its ``down`` failed with the test, or was partial): ``down`` again while the
    machines still answer; then whatever remains of them here, namespaces, cgroups and bpffs
    pins, is removed after its mark is checked.  What had to be removed, by lab (empty: nothing)."""
    from sfclab.kernel import cgroups
    from sfclab.plan.names import netns_name
    from sfclab.realize import dataplane, lifecycle
    from sfclab.realize.state import LabState
    from sfclab.realize.teardown import remove_namespace

    from .labtools import cgroups_of, leftovers

    out: dict[str, list[str]] = {}
    for lab in (f"{p}{machines[1:]}" for p in "td"):
        if LabState(lab).exists:
            lifecycle.down(lab)
        found = [*leftovers(lab)["namespaces"]]
        for ns in found:
            remove_namespace(lab, ns)
        groups = cgroups_of(lab)
        cgroups.remove(groups, netns_name(lab, ""))
        found += [str(d) for d in groups]
        if dataplane.lab_dir(lab).is_dir():
            found.append(str(dataplane.lab_dir(lab)))
            dataplane.remove_dir(dataplane.lab_dir(lab))
        if found:
            out[lab] = found
    return out
