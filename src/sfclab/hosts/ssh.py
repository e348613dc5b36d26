"""Reaching a real host over SSH (asyncssh): one agent command per call, JSON in and out.

A call opens an SSH connection to the host's underlay address as ``user`` with ``key``, checks
the host's key against ``known_hosts`` (no unknown host is ever trusted), runs
``SFCLAB_STATE_DIR=<state> <python> -m sfclab.realize.agent <verb>`` there with the request as
JSON on stdin, and returns the agent's JSON answer.  The connection leaves from namespace
``netns`` of this machine when one is given (sockets stay in the namespace they were opened
in), so a test's SSH traffic never leaves the lab's underlay.

An unreachable host (refused, timed out, unknown host key, authentication refused) raises
:class:`HostUnreachable`; an agent that answers with a failure raises :class:`AgentError` with
its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import RealizeError
from ..kernel import netns as kernel_netns

AGENT_MODULE = "sfclab.realize.agent"


class HostUnreachable(RealizeError):
    """A host that could not be reached over SSH (its part is left for a later retry)."""


class AgentError(RealizeError):
    """A host's agent that answered with a failure."""


@dataclass
class SshTarget:
    """Where and how to reach one host (everything a later ``down`` needs: journaled)."""

    host: str
    address: str
    user: str = "root"
    key: str | None = None
    port: int = 22
    python: str = "python3"
    state: str = "/run/sfclab"
    netns: str | None = None
    known_hosts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SshTarget:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def command(self, verb: str, module: str = AGENT_MODULE) -> str:
        return (f"SFCLAB_STATE_DIR={shlex.quote(self.state)} {shlex.quote(self.python)} "
                f"-m {module} {shlex.quote(verb)}")


def call(t: SshTarget, verb: str, request: dict[str, Any], *, timeout: float = 120,
         connect_timeout: float = 10, module: str = AGENT_MODULE) -> dict[str, Any]:
    """Run agent ``verb`` on host ``t`` with ``request``; its JSON answer.  ``module``: the
    agent's module (the chain verbs of a running lab: :mod:`sfclab.steer.agent_chain`)."""
    ctx = kernel_netns.entered(t.netns) if t.netns else contextlib.nullcontext()
    with ctx:  # the socket is opened in this thread, so in the namespace
        status, out, err = asyncio.run(_run(t, t.command(verb, module), json.dumps(request), timeout,
                                            connect_timeout))
    if status != 0:
        msg = (err or out).strip().splitlines()
        raise AgentError(f"host {t.host}: agent {verb} failed (exit {status}): "
                         f"{msg[-1] if msg else 'no message'}")
    try:
        answer = json.loads(out)
    except json.JSONDecodeError:
        raise AgentError(f"host {t.host}: agent {verb} answered no JSON: {out[:200]!r}") \
            from None
    if not isinstance(answer, dict):
        raise AgentError(f"host {t.host}: agent {verb} answered {type(answer).__name__}")
    return answer


async def _run(t: SshTarget, command: str, stdin: str, timeout: float,
               connect_timeout: float) -> tuple[int, str, str]:
    import asyncssh  # light start-up: only labs with real hosts load it

    options: dict[str, Any] = {
        "port": t.port, "username": t.user, "connect_timeout": connect_timeout,
        "agent_path": None, "config": None,
    }
    if t.known_hosts:  # else asyncssh's default: ~/.ssh/known_hosts
        options["known_hosts"] = t.known_hosts
    if t.key:
        options["client_keys"] = [t.key]
    try:
        async with asyncssh.connect(t.address, **options) as conn:
            r = await conn.run(command, input=stdin, check=False, timeout=timeout)
    except (OSError, asyncio.TimeoutError, asyncssh.Error) as e:
        raise HostUnreachable(f"host {t.host} ({t.user}@{t.address}:{t.port}) unreachable "
                              f"over SSH: {e or type(e).__name__}") from None
    out = r.stdout if isinstance(r.stdout, str) else (r.stdout or b"").decode()
    err = r.stderr if isinstance(r.stderr, str) else (r.stderr or b"").decode()
    status = r.exit_status if r.exit_status is not None else 255
    return status, out, err
