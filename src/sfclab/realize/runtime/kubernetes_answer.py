"""The agent's side of the requests to it (``LabRequest``, :mod:`.kubernetes_requests`): each
answered by running the host agent's verb on this machine, in a thread of its own.

A request is the host agent's verb and its JSON input, as SSH would run it
(``python -m sfclab.live.runtime.agent_verbs VERB``, :func:`run_verb`: in this machine's
context, the network namespace ``--netns`` names in the tests); its output (a JSON object) or
its one-line error is written to the request's status, with how long it took:

- a new request (no phase yet, its ``spec.node`` this Node's) is ``Running`` at once, then
  ``Done`` with the ``output``, or ``Failed`` with the ``error``;
- an ``armed`` request's verb is started with the request on its input; once it answers
  ``armed`` the request is ``Armed``; when the caller sets ``go`` the verb is told ``go`` and
  its answer written; if the request is deleted first, the verb's input is closed and it
  changes nothing (:func:`sfclab.realize.agent.main`);
- a request this agent finds ``Running`` or ``Armed`` that no thread of it runs (the agent was
  restarted meanwhile) is ``Failed``: its verb was cut off, and the caller is told so rather
  than left waiting;
- answered requests are left alone (the caller deletes them; the controller deletes those
  whose caller is gone).

At most :data:`MAX_RUNNING` requests run at once; the others wait their turn.  An answer
larger than :data:`~.kubernetes.MAX_OBJECT` is ``Failed``, saying so.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ...errors import ClusterRefused, ClusterUnreachable, RealizeError
from ...kernel import netns as kernel_netns
from .kubernetes import MAX_OBJECT
from .kubernetes_api import KubeApi
from .kubernetes_requests import ANSWERED, requests_path

#: how many requests run at once
MAX_RUNNING = 16
#: how long one verb may take (seconds)
VERB_SECONDS = 600.0
#: how long an armed verb waits for ``go`` (seconds)
GO_SECONDS = 120.0
#: the longest error written to a request's status (its schema's limit)
MAX_ERROR = 4096


def verb_argv(verb: str, netns: str | None) -> list[str]:
    """The host agent's ``verb`` as a command line of this machine: in network namespace
    ``netns`` when given (by ``nsenter``: safe from a thread, where ``preexec_fn`` is not)."""
    argv = [sys.executable, "-m", "sfclab.live.runtime.agent_verbs", verb]
    return (["nsenter", f"--net={kernel_netns.path(netns)}", "--"] + argv) if netns else argv


def _failure(verb: str, code: int, stderr: str) -> RealizeError:
    lines = (stderr or "").strip().splitlines()
    return RealizeError(lines[-1] if lines else f"{verb} exited {code}")


def run_verb(verb: str, req: dict[str, Any], netns: str | None,
             timeout: float = VERB_SECONDS) -> dict[str, Any]:
    """The host agent's ``verb`` with ``req``; its answer, or :class:`RealizeError` with its
    one line."""
    try:
        cp = subprocess.run(verb_argv(verb, netns), input=json.dumps(req), capture_output=True,
                            text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RealizeError(f"{verb} took more than {timeout:g} s") from e
    if cp.returncode != 0:
        raise _failure(verb, cp.returncode, cp.stderr)
    answer = json.loads(cp.stdout or "{}")
    return answer if isinstance(answer, dict) else {}


class Job:
    """One request being answered: its thread, and the caller's ``go`` or deletion."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.gone = threading.Event()


class Answerer:
    """The requests to Node ``node``'s agent (see the module); ``answered(lab)`` is called
    after each request of lab ``lab`` is done (the agent reports its part's nodes)."""

    def __init__(self, api: KubeApi, node: str, netns: str | None,
                 say: Callable[[str], None], answered: Callable[[str], None]):
        self.api, self.node, self.netns, self.say = api, node, netns, say
        self.answered = answered
        self.jobs: dict[str, Job] = {}  # request uid -> its job
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(MAX_RUNNING)

    def listed(self, items: list[dict[str, Any]]) -> None:
        for obj in items:
            self.changed("ADDED", obj)

    def changed(self, kind: str, obj: dict[str, Any]) -> None:
        """Take in one request as the watch saw it."""
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        status = obj.get("status") or {}
        uid = str(meta.get("uid"))
        with self.lock:
            job = self.jobs.get(uid)
            if kind == "DELETED":
                if job is not None:
                    job.gone.set()
                return
            if spec.get("node") != self.node or status.get("phase") in ANSWERED:
                return
            if job is not None:
                if spec.get("go"):
                    job.go.set()
                return
            if status.get("phase"):  # Running or Armed, and no thread of ours runs it
                threading.Thread(target=self._write, daemon=True, args=(
                    meta["name"], "Failed", "", "the agent was restarted while this request "
                    "ran: its verb was cut off", 0.0)).start()
                return
            job = self.jobs[uid] = Job()
        threading.Thread(target=self._run, args=(obj, job, uid), daemon=True).start()

    def _write(self, name: str, phase: str, output: str, error: str, seconds: float) -> bool:
        """The request's status; False when it is gone (or the cluster refused)."""
        status: dict[str, Any] = {"phase": phase, "agent": self.node}
        if phase in ANSWERED:
            status.update(output=output, error=error[:MAX_ERROR], seconds=round(seconds, 4))
        try:
            self.api.merge(requests_path(name, "status"), {"status": status})
        except (ClusterRefused, ClusterUnreachable) as e:
            self.say(f"request {name}: its status not written: {e}")
            return False
        return True

    def _run(self, obj: dict[str, Any], job: Job, uid: str) -> None:
        name, spec = obj["metadata"]["name"], obj["spec"]
        try:
            with self.slots:
                if job.gone.is_set() or not self._write(name, "Running", "", "", 0.0):
                    return
                t0 = time.monotonic()
                try:
                    req = json.loads(spec.get("input") or "{}")
                    if spec.get("armed"):
                        answer = self._armed(name, spec["verb"], req, job)
                    else:
                        answer = run_verb(spec["verb"], req, self.netns)
                    output, error = json.dumps(answer), ""
                    if len(output) > MAX_OBJECT:
                        output, error = "", f"the answer of {spec['verb']} is {len(output)} " \
                            f"bytes, more than the {MAX_OBJECT} an object may hold"
                except (RealizeError, ValueError, OSError) as e:
                    output, error = "", str(e)
                if job.gone.is_set():
                    return
                self._write(name, "Failed" if error else "Done", output, error,
                            time.monotonic() - t0)
                self.say(f"request {name}: {spec['verb']} "
                         f"{'failed: ' + error if error else 'done'}")
                if not error:
                    self.answered(str(spec.get("lab")))
        finally:
            with self.lock:
                self.jobs.pop(uid, None)

    def _armed(self, name: str, verb: str, req: dict[str, Any], job: Job) -> dict[str, Any]:
        """An armed verb (see the module): ready, ``Armed``, then ``go`` or nothing."""
        proc = subprocess.Popen(verb_argv(verb, self.netns), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
            first = proc.stdout.readline()
            if first.strip() != json.dumps({"armed": True}):
                proc.stdin.close()
                proc.wait(timeout=VERB_SECONDS)
                raise _failure(verb, proc.returncode, proc.stderr.read())
            self._write(name, "Armed", "", "", 0.0)
            deadline = time.monotonic() + GO_SECONDS
            while not job.go.wait(0.05):
                if job.gone.is_set() or time.monotonic() > deadline:
                    proc.stdin.close()  # not told to go: it changes nothing
                    proc.wait(timeout=VERB_SECONDS)
                    raise RealizeError(f"{verb} not told to go: nothing changed")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            answer = proc.stdout.readline()
            proc.stdin.close()
            if proc.wait(timeout=VERB_SECONDS) != 0:
                raise _failure(verb, proc.returncode, proc.stderr.read())
            got = json.loads(answer or "{}")
            return got if isinstance(got, dict) else {}
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for f in (proc.stdout, proc.stderr):
                f.close()
            if not proc.stdin.closed:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
