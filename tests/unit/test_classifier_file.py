"""The classifier file's bulk path (``chain classify --from-file``): the fast check accepts only
what the model accepts and gives the same result, the line reader reads what YAML reads (or
hands the file on), bad entries are refused with file, place and line, and the compact entries
are the planner's entries."""

from __future__ import annotations

import itertools
import json
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from sfclab.errors import SpecError
from sfclab.plan.classifier_rows import mask_of, rows_of
from sfclab.plan.sfc import entries_of, mask_key, reversed_classifier
from sfclab.spec import classifier_file
from sfclab.spec.classifier_file import Rule, fast_rule
from sfclab.spec.sfc import ClassifierSpec

ODD: list[Any] = [None, True, False, 0, 1, -1, 80, 65535, 65536, 7.0, "", " ", "80", "080",
                  " 80", "80-90", "90-80", "0-65535", "1-65536", "80 - 90", "x", "tcp", "udp",
                  "icmp", "any", "TCP", "10.0.0.0/8", "10.0.0.1/8", "10.0.0.1", "10.0.0.0/08",
                  "010.0.0.0/8", "256.0.0.0/8", "10.0.0.0/33", "0.0.0.0/0", "10.0.0.0/255.0.0.0",
                  "1.2.3.4/32", "1.2.3.4/ 32", [1, 2], [80, 90], {"a": 1}, 167772160, "src",
                  "２", "8０"]


def model(d: Any) -> Rule | None:
    try:
        return Rule.of(ClassifierSpec.model_validate(d))
    except ValidationError:
        return None


def test_the_fast_check_never_accepts_what_the_model_refuses_and_agrees_on_the_rest() -> None:
    base = {"ingress": "src", "proto": "udp"}
    cases: list[Any] = [base, {**base, "extra": 1}, {"proto": "udp"}, [], "x", None]
    for key in ("ingress", "proto", "src", "dst", "sport", "dport", "priority"):
        cases += [{**base, key: v} for v in ODD]
    for proto, port in itertools.product(["tcp", "udp", "icmp", "any", "gre"], [None, 80, "1-9"]):
        cases.append({"ingress": "src", "proto": proto, "dport": port})
    accepted = 0
    for d in cases:
        fast, slow = fast_rule(d), model(d)
        if fast is not None:
            accepted += 1
            assert slow == fast, d
    assert accepted > 50  # the fast check is not a no-op


def test_rule_and_spec_round_trip() -> None:
    c = ClassifierSpec.model_validate({"ingress": "a", "proto": "tcp", "src": "10.1.0.0/16",
                                       "dport": "80-90", "priority": 7})
    assert Rule.of(c).spec() == c


@pytest.mark.parametrize("text", [
    "- {ingress: src, proto: udp, src: 10.0.0.1/32, dport: 9999}\n"
    "- {ingress: src, proto: tcp, dport: 80-8080, priority: 10}  # web\n",
    "# entries\n\n- ingress: src\n  proto: udp\n  dport: 7000-7100\n-   ingress: src\n"
    "    priority: 3\n",
    "- {ingress: src,proto: udp}\n- {}\n",
    # YAML would turn these into booleans, octal, floats, dates or nulls: handed on
    "- {ingress: yes, proto: udp}\n", "- {ingress: src, proto: udp, dport: 0123}\n",
    "- {ingress: src, priority: 1.5}\n", "- {ingress: 2024-01-01}\n", "- {ingress: ~}\n",
    "- {ingress: src, on: 1}\n", "- {ingress: src, proto: udp, dport: 1_000}\n",
    "- {ingress: src}\r\n", "- [1, 2]\n", "---\n- {ingress: src}\n",
])
def test_the_line_reader_reads_what_yaml_reads_or_hands_the_file_on(text: str) -> None:
    try:
        read = classifier_file._read_lines(text)
    except classifier_file._NotPlain:
        return
    assert read.items == yaml.safe_load(text)
    assert len(read.at) == len(read.items) == len(read.keys)


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_json_yaml_flow_and_block_give_the_same_rules(tmp_path: Path) -> None:
    rows = [{"ingress": "src", "proto": "udp", "src": f"10.0.{i}.0/24", "dport": 7000 + i}
            for i in range(50)] + [{"ingress": "src", "proto": "tcp", "dport": "80-90",
                                    "priority": 2}]
    files = {
        "a.json": json.dumps(rows),
        "b.json": json.dumps({"classifiers": rows}, indent=2),
        "c.yaml": yaml.safe_dump(rows, default_flow_style=None, width=300),
        "d.yaml": yaml.safe_dump(rows, default_flow_style=False),
        "e.yaml": yaml.safe_dump({"classifiers": rows}),
    }
    want = [model(r) for r in rows]
    for name, text in files.items():
        assert classifier_file.read(write(tmp_path, name, text)) == want, name


@pytest.mark.parametrize("name,text,place,line", [
    ("bad.json", '[\n {"ingress": "src"},\n {"ingress": "src", "proto": "udp",\n'
     '  "dport": "9-1"}\n]', "[1].dport", 4),
    ("bad2.json", json.dumps([{"ingress": "src"}] * 5 + [{"ingress": "src", "x": 1}]),
     "[5].x", 1),
    ("bad.yaml", "- {ingress: src}\n- {ingress: src, proto: gre}\n", "[1].proto", 2),
    ("bad2.yaml", "- ingress: src\n  proto: udp\n- ingress: src\n  proto: icmp\n  dport: 80\n",
     "[1]", 3),
    ("bad3.yaml", "- ingress: src\n- ingress: src\n  src: 10.0.0.1/8\n", "[1].src", 3),
    ("bad4.yaml", "- {ingress: src, dport: 0123, proto: udp}\n"
     "- {ingress: src, proto: udp, src: 10.0.0.1/8}\n", "[1].src", 2),
    ("dup.yaml", "- {ingress: src}\n- ingress: src\n  proto: udp\n  proto: tcp\n",
     "[1].proto", 4),
    ("bad5.yaml", "classifiers:\n  - {ingress: src}\n  - {ingress: src, priority: -1}\n",
     "classifiers[1].priority", 3),
])
def test_a_bad_entry_is_refused_with_file_place_and_line(tmp_path: Path, name: str, text: str,
                                                          place: str, line: int) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(SpecError) as e:
        classifier_file.read(path)
    assert (e.value.file, e.value.place, e.value.line) == (path, place, line)
    assert e.value.exit_status == 2


def test_a_file_that_is_not_a_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="expected a list of classifiers"):
        classifier_file.read(write(tmp_path, "x.yaml", "a: 1\n"))
    with pytest.raises(SpecError, match="duplicate key 'ingress'"):
        classifier_file.read(write(tmp_path, "d.yaml", "- {ingress: src, ingress: dst}\n"))
    with pytest.raises(SpecError, match="cannot read"):
        classifier_file.read(str(tmp_path / "none.yaml"))


@pytest.mark.parametrize("d", [
    {"ingress": "s", "proto": "udp", "src": "10.0.0.0/8", "dport": "7000-7100", "priority": 3},
    {"ingress": "s", "proto": "tcp", "sport": "1-1000", "dport": 80, "dst": "1.2.3.4/32"},
    {"ingress": "s"},
    {"ingress": "s", "proto": "udp", "src": "2001:2::/48", "dport": "7000-7100"},
    {"ingress": "s", "family": "ipv6", "proto": "icmpv6"},
    {"ingress": "s", "family": "any", "proto": "tcp", "dport": 443},
])
def test_compact_rows_are_the_planners_entries(d: dict[str, Any]) -> None:
    c = ClassifierSpec.model_validate(d)

    def as_row(e: dict[str, Any]) -> tuple[Any, ...]:
        s, t = ip_network(e["src"]), ip_network(e["dst"])
        return (e["ingress"], int(s.network_address), s.prefixlen, int(t.network_address),
                t.prefixlen, *e["sport"], *e["dport"], e["proto"], e["priority"],
                e.get("family", 4))

    for rev in (None, "d"):
        spec = reversed_classifier(c, rev) if rev else c
        entries = entries_of(spec)
        rows = rows_of(Rule.of(c), reverse_at=rev)
        assert rows == [as_row(e) for e in entries]
        assert [mask_of(r) for r in rows] == [mask_key(e) for e in entries]
