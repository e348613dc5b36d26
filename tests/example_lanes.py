"""The help examples split into *lanes*: sequences of examples that touch nothing in common, so
that ``tests/integration/test_help_examples.py`` runs the lanes at once, each lane's examples in
order, and every example still runs and is checked.

Two examples share a lane when they name the same lab (by its name, or by the lab file that makes
it), the same file (``results.db``, ``report/``), or the same thing a command keeps in the state
directory (:data:`SHARED`: the API's token, the stored calibration).  Commands in :data:`SPREAD`
(measurements) leave a lab as they found it, so those naming one lab are dealt over ``copies``
lanes of their own, each of which runs that lab's ``up`` examples first and its ``down`` examples
last on a copy of the lab under a name of its own.  Each goes to the copy with the fewest of its
kind so far (``ndr``, ``iperf`` ...), then the fewest in all: the long NDR searches land on
different copies.  The lab's own lane keeps
every other example that names it, in order.

Pure: no file is read and nothing runs here (the unit tier checks the split,
``tests/unit/test_example_lanes.py``)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

#: command words that use one thing in the state directory, whatever they name: they never
#: run at once
SHARED: dict[tuple[str, ...], str] = {
    ("serve",): "the API's token file (serve.token) and its port",
    ("traffic", "calibrate"): "the stored calibration",
    ("image",): "podman's image store (a build tags what another lists)",
}
#: commands that leave the lab they measure as it was: spread over copies of that lab
SPREAD = ("traffic",)
#: what a word ends with when it names a file an example reads or writes
FILE_ENDINGS = (".db", ".yaml", ".yml", ".json", ".csv", "/")


def keys(cmd: str, lab_of: Mapping[str, str]) -> set[str]:
    """What example ``cmd`` touches: the labs it names (``lab_of`` maps lab files and lab names
    to lab names), the files it names, what it shares (:data:`SHARED`); a command that names
    none of these touches only itself."""
    argv = shlex.split(cmd)
    out = {"lab:" + lab_of[w] for w in argv if w in lab_of}
    out |= {"file:" + w for w in argv if w not in lab_of and w.endswith(FILE_ENDINGS)}
    out |= {"shared:" + what for words, what in SHARED.items()
            if tuple(argv[1:1 + len(words)]) == words}
    return out or {"cmd:" + cmd}


def lanes(cmds: list[str], lab_of: Mapping[str, str], copies: int) -> list[list[str]]:
    """``cmds`` (in the order they are meant to run) split into lanes; within a lane the
    examples keep that order.  Every example is in exactly one lane, except a lab's ``up`` and
    ``down`` examples, which also open and close each copy lane of that lab."""
    if copies < 1:
        raise ValueError(f"copies must be at least 1, got {copies}")
    spread: dict[str, list[int]] = {}  # lab -> indices of its SPREAD examples
    groups: list[tuple[set[str], list[int]]] = []  # (keys, indices): the lanes that share
    for i, cmd in enumerate(cmds):
        k = keys(cmd, lab_of)
        labs = [x for x in k if x.startswith("lab:")]
        if shlex.split(cmd)[1] in SPREAD and len(k) == 1 and labs:
            spread.setdefault(labs[0], []).append(i)
            continue
        joined = [g for g in groups if g[0] & k]
        for g in joined:
            groups.remove(g)
        groups.append((k.union(*(g[0] for g in joined)),
                       sorted([i, *(j for g in joined for j in g[1])])))
    out = [[cmds[i] for i in idx] for _, idx in groups]
    for lab, idx in spread.items():
        ups = [c for c in cmds if shlex.split(c)[1] == "up" and lab in keys(c, lab_of)]
        downs = [c for c in cmds if shlex.split(c)[1] == "down" and lab in keys(c, lab_of)]
        dealt: list[list[str]] = [[] for _ in range(min(copies, len(idx)))]
        for i in idx:
            kind = shlex.split(cmds[i])[2]
            to = min(dealt, key=lambda d: (sum(shlex.split(c)[2] == kind for c in d), len(d)))
            to.append(cmds[i])
        out += [[*ups, *d, *downs] for d in dealt]
    return out
