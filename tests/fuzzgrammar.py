"""Bad inputs made from the grammar of sfclab's files, for the fuzz tests.

Objects and names:

* a *kind* of input: ``lab`` (a lab file), ``chain`` (a chain file for ``chain add`` and the
  body of ``POST /api/labs/{lab}/chains``), ``classifiers`` (``chain classify --from-file``),
  ``experiment`` (``sfclab run``), ``measure`` (an experiment's ``measure:`` and the body of
  ``POST /api/labs/{lab}/measurements``), ``host`` and ``migrate`` (the bodies of
  ``POST /api/labs/{lab}/hosts`` and ``.../chains/{chain}/migrate``);
* a *seed*: a valid document of a kind, taken from ``scenarios/`` (and the experiments' inline
  labs and measurements), loaded as plain YAML data;
* a *mutation*: one change that tends to make a document bad -- a value of the wrong type, a
  number out of range, a key dropped or unknown, a name that breaks the name rule, a reference
  to a node that does not exist, an entry duplicated -- applied at a place chosen in the tree;
* a *text mutation*: a change of the dumped YAML text itself -- a tab, a stray bracket or
  colon, a line twice (a duplicate key), an anchor and alias, a complex key, nesting a few
  levels too deep, the text cut short;
* a :class:`Case`: the kind, the seed's name, the mutations made (as words, for the report) and
  the text.

:func:`cases` is the Hypothesis strategy of cases of one kind.  Nothing here runs sfclab: the
tests decide what is bad by asking the validator and a sanity rule (:func:`insane_strings`).
Depths, sizes and counts are kept small so every case is cheap to validate.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"

KINDS = ("lab", "chain", "classifiers", "experiment", "measure", "host", "migrate")

#: the name rule of labs, nodes, chains, groups and functions, matched as a whole string
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


# --------------------------------------------------------------------------------- seeds

def _kind_of(data: Any) -> str | None:
    if isinstance(data, list):
        return "classifiers"
    if not isinstance(data, dict):
        return None
    if "measure" in data:
        return "experiment"
    if "functions" in data and "classifiers" in data:
        return "chain"
    if "nodes" in data or "chain" in data:
        return "lab"
    return None


def _load_seeds() -> dict[str, list[tuple[str, Any]]]:
    out: dict[str, list[tuple[str, Any]]] = {k: [] for k in KINDS}
    for path in sorted(SCENARIOS.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        kind = _kind_of(data)
        if kind is None:
            continue
        out[kind].append((path.name, data))
        if kind == "experiment":
            out["measure"].append((f"{path.name}:measure", data["measure"]))
            if isinstance(data["lab"], dict):
                out["lab"].append((f"{path.name}:lab", data["lab"]))
    # small documents whose every key is near the top, so mutations reach each one often
    out["lab"].append(("inline:bridges", {
        "name": "fz", "addressing": {"pool": "198.18.0.0/15", "prefix": 24}, "mtu": 1500,
        "nodes": {"a": {"kind": "host"}, "s": {"kind": "linux-bridge"},
                  "o": {"kind": "ovs-bridge", "datapath": "netdev"}, "b": {"kind": "host"}},
        "links": [{"endpoints": [{"node": "a", "address": "198.18.0.1/24", "tso": False}, "s"],
                   "mtu": 1400},
                  {"endpoints": ["s", "o"]},
                  {"endpoints": ["o", "b:eth9"], "port": "internal"}]}))
    out["lab"].append(("inline:functions", {
        "name": "fzf", "nodes": {
            "src": {"kind": "host"},
            "fw": {"kind": "firewall", "backend": "nftables", "policy": "accept",
                   "rules": [{"action": "drop", "proto": "tcp", "dport": "22-23",
                              "src": "10.0.0.0/8"}]},
            "sh": {"kind": "shaper", "rate": "10mbit", "burst": "32k", "toward": "dst"},
            "r": {"kind": "router", "ttl": 5},
            "dst": {"kind": "host"}},
        "links": [{"endpoints": ["src", "fw"]}, {"endpoints": ["fw", "sh"]},
                  {"endpoints": ["sh", "r"]}, {"endpoints": ["r", "dst"]}]}))
    # the API's other bodies: a host to add, an instance to move
    out["host"].append(("inline:host", {"name": "h9", "cpus": 1, "memory": "64M"}))
    out["migrate"].append(("inline:migrate", {"instance": "fw-1", "to": "h1",
                                              "conntrack": True}))
    out["classifiers"].append(("inline:wrapped", {"classifiers": [
        {"ingress": "src", "proto": "tcp", "src": "10.0.0.0/8", "dst": "198.18.4.0/24",
         "sport": 1024, "dport": "80-8080", "priority": 7}]}))
    return out


SEEDS = _load_seeds()


# ------------------------------------------------------------------------- bad values

#: names that break the name rule somewhere (and one, 'ghost', that names nothing)
BAD_NAMES = ["", "ghost", "x" * 33, "n" * 49, "y" * 300, "/", "a/b", "..", ".", "../../etc",
             "a\x00b", "caf\u00e9", "\u65e5\u672c", "a b", "a\n", "a\nb", "-a", "_a", ".a",
             "a:b", "a\tb", "$(id)", "a;b", "\u200bx", "A" * 16]

#: scalars of every type YAML has, at the edges of every range
BAD_SCALARS = [None, True, False, 0, -1, 1, 65536, 2**31, 2**63, 2**64, 10**40, -(10**40),
               0.5, -0.0, 1e308, float("nan"), float("inf"), float("-inf"), "", " ", "1e400",
               "0x10", "07", "1_000", "yes", "~", "2026-11-24", "max", "-5", "65536-1",
               "10.0.0.1/33", "300.1.1.1/24", "198.18.0.1/24", "0.0.0.0/0", "1tbit", "9999G"]


def bad_values(depth: int = 2) -> st.SearchStrategy[Any]:
    """A value of the wrong type or out of range: a scalar, a bad name, or a small container."""
    leaf = st.one_of(st.sampled_from(BAD_SCALARS), st.sampled_from(BAD_NAMES),
                     st.integers(min_value=-(2**70), max_value=2**70),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.text(max_size=12))
    if depth <= 0:
        return leaf
    inner = bad_values(depth - 1)
    return st.one_of(leaf, st.lists(inner, max_size=3),
                     st.dictionaries(st.sampled_from(["a", "kind", "name", "node", "0"]), inner,
                                     max_size=2))


# ---------------------------------------------------------------- places in a document

Path_ = tuple[Any, ...]


def places(doc: Any, at: Path_ = ()) -> list[Path_]:
    """Every place in ``doc`` (the root first), as key/index paths."""
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += places(v, at + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += places(v, at + (i,))
    return out


def get(doc: Any, at: Path_) -> Any:
    for p in at:
        doc = doc[p]
    return doc


def put(doc: Any, at: Path_, value: Any) -> Any:
    """``doc`` with the value at ``at`` replaced (the root itself when ``at`` is empty)."""
    if not at:
        return value
    get(doc, at[:-1])[at[-1]] = value
    return doc


def strings(doc: Any) -> list[str]:
    """Every string value in ``doc`` (the names it refers to among them)."""
    if isinstance(doc, dict):
        return [s for v in doc.values() for s in strings(v)]
    if isinstance(doc, list):
        return [s for v in doc for s in strings(v)]
    return [doc] if isinstance(doc, str) else []


# -------------------------------------------------------------------------- mutations

MUTATIONS = ("retype", "drop", "unknown-key", "bad-key", "dangling", "duplicate", "number",
             "swap-ref")


@st.composite
def mutate(draw: st.DrawFn, doc: Any) -> tuple[Any, str]:
    """One mutation of ``doc`` (changed in place, and returned) and its description.  The
    root itself is changed rarely (1 in 20): the rest of the tree is where the grammar is."""
    inner = places(doc)[1:]
    # (Hypothesis favours 0 and the ends of a range: the rare choice is a middle value)
    where = draw(st.sampled_from(inner)) if inner and draw(st.integers(0, 19)) != 7 else ()
    op = draw(st.sampled_from(MUTATIONS))
    here = get(doc, where)
    parent = get(doc, where[:-1]) if where else None
    shown = ".".join(map(str, where)) or "(root)"
    if op == "drop" and where:
        del parent[where[-1]]
        return doc, f"drop {shown}"
    if op == "unknown-key" and isinstance(here, dict):
        key = draw(st.sampled_from(["colour", "Kind", "kind ", "nodes", "name", "x" * 40, "0"]))
        if key not in here:
            here[key] = draw(bad_values(1))
            return doc, f"unknown key {key!r} in {shown}"
    if op == "bad-key" and isinstance(here, dict) and here:
        old = draw(st.sampled_from(list(here)))
        new = draw(st.sampled_from(BAD_NAMES))
        if new not in here:
            doc = put(doc, where, {new if k == old else k: v for k, v in here.items()})
            return doc, f"rename key {shown}.{old} to {new!r}"
    if op == "dangling" and isinstance(here, str):
        doc = put(doc, where, draw(st.sampled_from(["ghost", "", "src:", ":eth0", "dst:a/b",
                                                   "src:e0\n", "src:e\x00"])))
        return doc, f"dangling {shown}"
    if op == "swap-ref" and isinstance(here, str):
        others = [s for s in strings(doc) if s != here] or ["ghost"]
        doc = put(doc, where, draw(st.sampled_from(sorted(set(others)))))
        return doc, f"swap {shown}"
    if op == "duplicate" and isinstance(here, list) and here:
        i = draw(st.integers(0, len(here) - 1))
        here.insert(i, copy.deepcopy(here[i]))
        return doc, f"duplicate {shown}[{i}]"
    if op == "number" and isinstance(here, (int, float)) and not isinstance(here, bool):
        doc = put(doc, where, draw(st.sampled_from([-1, 0, 1, 2**16, 2**32, 2**63, 10**30,
                                                   -0.5, 1e308, float("nan"), float("inf"),
                                                   str(here), [here], {"n": here}])))
        return doc, f"number {shown}"
    doc = put(doc, where, draw(bad_values()))
    return doc, f"retype {shown}"


# ---------------------------------------------------------------------- the YAML text

def dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 16)


TEXT_MUTATIONS = ("tab", "stray", "line-twice", "cut", "alias", "complex-key", "deep", "drop-char")

STRAY = [": ", "[", "]", "{", "}", "- ", "'", '"', "&a ", "*a", "? ", "!!python/object:os.system ",
         "!!binary ", "%YAML 1.1\n", "---\n", "...\n", "<<: *a\n", "@", "`", "|\n", "\\"]


@st.composite
def mutate_text(draw: st.DrawFn, text: str) -> tuple[str, str]:
    """One change of the YAML ``text`` itself, and its description."""
    lines = text.splitlines(keepends=True) or ["\n"]
    op = draw(st.sampled_from(TEXT_MUTATIONS))
    i = draw(st.integers(0, len(lines) - 1))
    if op == "tab":
        lines[i] = "\t" + lines[i]
    elif op == "stray":
        s = draw(st.sampled_from(STRAY))
        col = draw(st.integers(0, len(lines[i])))
        lines[i] = lines[i][:col] + s + lines[i][col:]
        op = f"stray {s!r} at column {col}"
    elif op == "line-twice":
        lines.insert(i, lines[i])
    elif op == "cut":
        cut = draw(st.integers(1, max(1, len(text) - 1)))
        return text[:cut], f"cut at {cut}"
    elif op == "alias":
        # the first value gets an anchor, a later one becomes its alias (or a small bomb)
        j = draw(st.integers(i, len(lines) - 1))
        lines[i] = re.sub(r"(: |- )", r"\1&a ", lines[i], count=1)
        alias = draw(st.sampled_from(["*a", "[*a, *a, *a]", "*b", "{<<: *a}"]))
        lines[j] = re.sub(r"(: |- )(.*)$", lambda m: m.group(1) + alias, lines[j], count=1)
    elif op == "complex-key":
        key = draw(st.sampled_from(["? [a, b]\n: c\n", "? {k: v}\n: c\n", "[a]: 1\n",
                                    "{a: 1}: 2\n", "? - x\n: y\n"]))
        lines.insert(i if not lines[i].startswith(" ") else 0, key)
    elif op == "deep":
        d = draw(st.integers(1, 80))  # past the reader's 64 levels, but not by much
        lines.append(f"deep{d}: " + "[" * d + "]" * d + "\n")
    else:
        col = draw(st.integers(0, max(0, len(lines[i]) - 1)))
        lines[i] = lines[i][:col] + lines[i][col + 1:]
    return "".join(lines), f"text {op} at line {i + 1}"


# ------------------------------------------------------------------------------ cases

@dataclass
class Case:
    kind: str
    seed: str
    made: list[str] = field(default_factory=list)
    text: str = ""
    data: Any = None  # the mutated document before text mutations (for JSON bodies)

    def json_body(self) -> str:
        """The mutated document as JSON (what an API client posts)."""
        return json.dumps(self.data, allow_nan=True)

    def __repr__(self) -> str:  # what Hypothesis prints for a failing example
        return (f"Case(kind={self.kind!r}, seed={self.seed!r}, made={self.made!r},\n"
                f"     text={self.text!r})")


@st.composite
def cases(draw: st.DrawFn, kind: str, text_mutations: bool = True,
          lab_name: str | None = None) -> Case:
    """A structurally plausible bad document of ``kind``: a seed, one to three mutations and
    (sometimes) one mutation of the text.  ``lab_name`` renames a lab seed first (a test's own
    name, so whatever a case might make is recognised as the test's)."""
    seed, data = draw(st.sampled_from(SEEDS[kind]))
    doc = copy.deepcopy(data)
    if lab_name is not None and kind == "lab":
        doc["name"] = lab_name
    made = []
    for _ in range(draw(st.integers(1, 3))):
        doc, what = draw(mutate(doc))
        made.append(what)
    text = dump(doc)
    if text_mutations and draw(st.integers(0, 3)) == 2:  # 1 in 4 (a middle value: see mutate)
        text, what = draw(mutate_text(text))
        made.append(what)
    return Case(kind, seed, made, text, doc)


# ------------------------------------------------------------------- the sanity rule

#: keys whose values name a node of the running lab: a chain, classifier or measurement is
#: read before the lab is at hand, so these are checked later (``chain add``, the API ...)
LATER = ("ingress", "egress", "attach", "outside", "toward", "from", "to", "pairs")


#: keys whose values are written as text: an accepted document has a string there
TEXT_KEYS = ("src", "dst", "address", "pool", "subnet")


def insane_strings(names: list[Any], doc: Any, later: tuple[str, ...] = ()) -> list[str]:
    """What an accepted document must not hold: a name (of a lab, node, chain, group,
    function ...) that breaks the name rule, a NUL or a line break in any string (but in the
    values of the keys ``later``, and in a free text: a description), a float that is not
    finite, a number or boolean where an address or prefix is written (``TEXT_KEYS``).
    Returns the problems found (empty: sane)."""
    out = [f"name {n!r}" for n in names if not (isinstance(n, str) and NAME.fullmatch(n))]

    def walk(v: Any, at: str) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k, at + ".(key)")
                walk(x, f"{at}.{k}")
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{at}[{i}]")
        elif isinstance(v, str) and not re.sub(r"(\[\d+\])+$", "", at).endswith(
                later + ("description",)) and ("\x00" in v or "\n" in v):
            out.append(f"string {v!r} at {at}")
        elif isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            out.append(f"number {v!r} at {at}")
        if not isinstance(v, (str, dict, list)) and v is not None and \
                at.rsplit(".", 1)[-1] in TEXT_KEYS:
            out.append(f"{type(v).__name__} {v!r} taken as an address at {at}")

    walk(doc, "")
    return out
