"""Exit statuses of the ``sfclab`` command: the CLI's whole contract with shells and CI."""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """0 success, 1 failure (kernel, tool or measurement), 2 bad input, 130 interrupted.

    ``exec`` passes the command's own status through instead."""

    OK = 0
    FAILURE = 1
    BAD_INPUT = 2
    INTERRUPTED = 130
