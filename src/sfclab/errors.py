"""Typed exceptions of the library.  The CLI maps them to exit codes; nothing else does.

``SpecError`` (bad input, exit status 2) carries the file, the place in the document
(``links[3].endpoints[1]``), the line where known, and what was expected; it always reads as
one line (control characters of a name it quotes are shown escaped).
``LabError`` covers lifecycle misuse (a lab already up, an unknown lab: exit 2).
``RealizeError`` is a kernel or OVSDB failure while building (exit 1, after rollback).
"""

from __future__ import annotations


class SfclabError(Exception):
    """Base of every error sfclab raises on purpose."""

    exit_status = 1


class SpecError(SfclabError):
    """A lab, experiment or measurement request that is not valid."""

    exit_status = 2

    def __init__(self, message: str, *, file: str | None = None, place: str | None = None,
                 line: int | None = None, column: int | None = None):
        self.message = message
        self.file = file
        self.place = place
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.file:
            loc = self.file
            if self.line is not None:
                loc += f":{self.line}"
                if self.column is not None:
                    loc += f":{self.column}"
            where.append(loc)
        if self.place:
            where.append(self.place)
        return _one_line(": ".join(where + [self.message]))


def _one_line(text: str) -> str:
    """``text`` with line breaks and other control characters shown escaped (``\\n``), so a
    name from a file that holds them never splits the one line of an error."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class LabError(SfclabError):
    """A lifecycle request that cannot be honoured (lab already up, unknown lab or node)."""

    exit_status = 2


class RealizeError(SfclabError):
    """The kernel or OVSDB refused to make an object; what was made has been rolled back."""

    def __init__(self, message: str, *, obj: str | None = None, errno: int | None = None):
        self.obj = obj
        self.errno = errno
        super().__init__(f"{obj}: {message}" if obj else message)


class ToolError(SfclabError):
    """An external program (iperf3, nft, ovs-vsctl, ...) failed; carries its argv and stderr."""

    def __init__(self, argv: list[str], status: int, stderr: str):
        self.argv = list(argv)
        self.status = status
        self.stderr = stderr.strip()
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        said = " / ".join(lines[:2]) + (f" ({len(lines) - 2} more lines)" if len(lines) > 2 else "")
        super().__init__(f"{argv[0]} exited with status {status}: {said or '(no output)'}")


class MeasurementError(SfclabError):
    """A measurement failed (a client died, a server never answered)."""


class ClusterUnreachable(SfclabError):
    """A Kubernetes API server that did not answer (refused, timed out, TLS failed): exit 1."""


class ClusterRefused(SfclabError):
    """A Kubernetes API server that answered no: a kubeconfig it does not accept, credentials
    without the rights the request needs, or an object it refuses (exit 2).  ``status`` is the
    HTTP status (0 for a kubeconfig refused before any request)."""

    exit_status = 2

    def __init__(self, message: str, *, status: int = 0):
        self.status = status
        super().__init__(_one_line(message))
