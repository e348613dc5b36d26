"""Experiment files: validation with file, place and line; expansion into run points."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sfclab.errors import SpecError
from sfclab.spec.experiment import (expand, load_experiment, load_experiment_text, set_path,
                                    trial_order)

BASIC = """\
name: chain-len
lab:
  name: cl
  chain: {length: 2}
measure:
  type: iperf
  flows: 2
  duration: 5
sweep:
  chain.length: [2, 3, 5]
  measure.flows: [1, 4]
repetitions: 3
warmup: 1.5
"""


def write(tmp_path: Path, text: str, name: str = "exp.yaml") -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return p


def error_of(tmp_path: Path, text: str) -> SpecError:
    p = write(tmp_path, text)
    with pytest.raises(SpecError) as ei:
        load_experiment(p)
    assert ei.value.file == str(p)
    return ei.value


def test_basic_file_resolves(tmp_path):
    exp = load_experiment(write(tmp_path, BASIC))
    assert exp.name == "chain-len"
    assert exp.sweep == {"lab.chain.length": [2, 3, 5], "measure.flows": [1, 4]}
    assert exp.measure["type"] == "iperf" and exp.measure["flows"] == 2
    assert exp.measure["duration"] == 5 and exp.measure["udp"] is False  # default filled in
    assert exp.warmup == 1.5 and exp.cooldown == 0 and exp.repetitions == 3
    assert exp.size() == 3 * 2 * 3
    # the seed is derived from the name when absent, the same every time
    assert exp.seed == load_experiment(write(tmp_path, BASIC, "again.yaml")).seed


def test_lab_file_relative_to_experiment(tmp_path):
    write(tmp_path, "name: lab1\nchain: {length: 3}\n", "labs/chain.yaml")
    p = write(tmp_path, """\
        name: e
        lab: ../labs/chain.yaml
        measure: {type: iperf}
        """, "exps/e.yaml")
    exp = load_experiment(p)
    assert exp.lab == {"name": "lab1", "chain": {"length": 3}}
    assert Path(exp.lab_source) == (tmp_path / "labs" / "chain.yaml").resolve()


def test_missing_lab_file(tmp_path):
    e = error_of(tmp_path, "name: e\nlab: nowhere.yaml\nmeasure: {type: iperf}\n")
    assert e.place == "lab" and e.line == 2


def test_unknown_top_level_key_has_place_and_line(tmp_path):
    e = error_of(tmp_path, BASIC + "colour: blue\n")
    assert e.place == "colour" and "unknown key" in e.message
    assert e.line == BASIC.count("\n") + 1


def test_unknown_measure_key(tmp_path):
    text = BASIC.replace("  flows: 2\n", "  flows: 2\n  flowz: 3\n")
    e = error_of(tmp_path, text)
    assert e.place == "measure.flowz"
    assert e.line == 8


def test_bad_measure_type(tmp_path):
    e = error_of(tmp_path, BASIC.replace("type: iperf", "type: ping"))
    assert e.place == "measure.type" and "iperf" in e.message


def test_bad_sweep_value_names_item_and_line(tmp_path):
    e = error_of(tmp_path, BASIC.replace("[1, 4]", "\n    - 1\n    - 4\n    - many"))
    assert e.place == "sweep.measure.flows[2]"
    assert e.line == 14
    assert "whole number" in e.message


def test_sweep_path_through_a_scalar(tmp_path):
    e = error_of(tmp_path, BASIC.replace("chain.length: [2, 3, 5]", "name.x: [1]"))
    assert e.place == "sweep.name.x[0]"


def test_sweep_same_path_twice(tmp_path):
    e = error_of(tmp_path, BASIC.replace("measure.flows: [1, 4]", "lab.chain.length: [7]"))
    assert e.place == "sweep.lab.chain.length" and "twice" in e.message


def test_sweep_empty_and_repeated_values(tmp_path):
    assert "at least one" in error_of(tmp_path, BASIC.replace("[1, 4]", "[]")).message
    assert "twice" in error_of(tmp_path, BASIC.replace("[1, 4]", "[4, 4]")).message


def test_duplicate_yaml_key(tmp_path):
    e = error_of(tmp_path, BASIC + "name: other\n")
    assert "duplicate" in e.message


def test_missing_required_and_bad_repetitions(tmp_path):
    assert error_of(tmp_path, "name: x\nlab: {name: a}\n").place == "measure"
    assert error_of(tmp_path, BASIC.replace("repetitions: 3", "repetitions: 0")).place \
        == "repetitions"


def test_rate_measure_parses_rates():
    exp = load_experiment_text("""\
name: r
lab: {name: a}
measure: {type: rate, rates: [1000, 250k, 1.5M], size: 128}
""")
    assert exp.measure["rates"] == [1000.0, 250000.0, 1500000.0]
    with pytest.raises(SpecError) as ei:
        load_experiment_text("name: r\nlab: {name: a}\nmeasure: {type: rate, rates: [fast]}\n")
    assert ei.value.place.startswith("measure.rates")


def test_set_path():
    d = {"nodes": {"fw": {"kind": "firewall"}}, "links": [{"mtu": 1500}]}
    set_path(d, "nodes.fw.generate.count", 100)
    set_path(d, "links.0.mtu", 9000)
    assert d == {"nodes": {"fw": {"kind": "firewall", "generate": {"count": 100}}},
                 "links": [{"mtu": 9000}]}
    with pytest.raises(ValueError):
        set_path(d, "links.3.mtu", 1)
    with pytest.raises(ValueError):
        set_path(d, "nodes.fw.kind.x", 1)


def test_expand_cartesian_product_and_keys(tmp_path):
    exp = load_experiment(write(tmp_path, BASIC))
    pts = expand(exp)
    assert len(pts) == 18
    combos = {(p.params["lab.chain.length"], p.params["measure.flows"], p.repetition)
              for p in pts}
    assert combos == {(n, f, r) for n in (2, 3, 5) for f in (1, 4) for r in range(3)}
    for p in pts:
        assert p.lab["chain"]["length"] == p.params["lab.chain.length"]
        assert p.measure["flows"] == p.params["measure.flows"]
        assert p.lab["name"] == "cl"
    assert len({p.key for p in pts}) == 18
    # the base experiment is left alone
    assert exp.lab["chain"]["length"] == 2
    # stable across loads
    assert [p.key for p in expand(load_experiment(write(tmp_path, BASIC, "b.yaml")))] == \
        [p.key for p in pts]


def test_key_follows_the_resolved_lab(tmp_path):
    a = expand(load_experiment(write(tmp_path, BASIC, "a.yaml")))
    b = expand(load_experiment(write(tmp_path, BASIC.replace("name: cl", "name: other"),
                                     "b.yaml")))
    assert [p.params for p in a] == [p.params for p in b]
    assert not {p.key for p in a} & {p.key for p in b}


def test_no_sweep_gives_repetitions_only():
    exp = load_experiment_text("name: e\nlab: {name: a}\nmeasure: {type: latency, rate: 2k}\n"
                               "repetitions: 4\n")
    pts = expand(exp)
    assert [p.repetition for p in pts] == [0, 1, 2, 3] and all(p.params == {} for p in pts)
    assert pts[0].measure["rate"] == 2000.0


def test_lab_validator_once_per_variant_and_errors_name_the_variant(tmp_path):
    exp = load_experiment(write(tmp_path, BASIC))
    seen = []

    def validate(d, source):
        seen.append(d["chain"]["length"])
        assert source == str(tmp_path / "exp.yaml")

    expand(exp, validate)
    assert sorted(seen) == [2, 3, 5]

    def refuse_long(d, source):
        if d["chain"]["length"] > 3:
            raise SpecError("chain too long", file=source, place="chain.length")

    with pytest.raises(SpecError) as ei:
        expand(exp, refuse_long)
    assert ei.value.place == "lab.chain.length" and "lab.chain.length=5" in ei.value.message


def test_trial_order_is_a_seeded_permutation(tmp_path):
    exp = load_experiment(write(tmp_path, BASIC))
    pts = expand(exp)
    a, b = trial_order(pts, 1), trial_order(pts, 1)
    assert [p.key for p in a] == [p.key for p in b]
    assert sorted(p.key for p in a) == sorted(p.key for p in pts)
    assert [p.key for p in a] != [p.key for p in pts]
    assert [p.key for p in trial_order(pts, 2)] != [p.key for p in a]


def test_generator_engine_and_sink_are_checked_and_sweepable(tmp_path):
    exp = load_experiment_text("""\
name: r
lab: {name: a}
measure: {type: ndr, engine: xdp, sink: xdp}
sweep:
  measure.engine: [packet, xdp]
""")
    assert exp.measure["engine"] == "xdp" and exp.measure["sink"] == "xdp"
    for text, place in (("{type: rate, rates: [1k], engine: warp}", "measure.engine"),
                        ("{type: latency, sink: nic}", "measure.sink"),
                        ("{type: iperf, engine: xdp}", "measure.engine")):
        with pytest.raises(SpecError) as ei:
            load_experiment_text(f"name: r\nlab: {{name: a}}\nmeasure: {text}\n")
        assert ei.value.place == place


VARIANTS = """\
name: setups
lab:
  name: vs
  hosts: {a: {}, b: {}}
  nodes: {src: {kind: host, host: a}, dst: {kind: host, host: b}}
  links: [{endpoints: [src, dst], attach: bridge}]
measure: {type: rate, rates: [max]}
variants:
  native: {hosts: null, nodes.src.host: null, nodes.dst.host: null, links.0.attach: null}
  short: {links.0.attach: shortbridge, measure.size: 128}
sweep:
  measure.duration: [1, 2]
repetitions: 2
"""


def test_variants_set_several_paths_and_are_crossed_with_the_sweep(tmp_path):
    exp = load_experiment(write(tmp_path, VARIANTS))
    assert list(exp.variants) == ["native", "short"]
    assert exp.variants["short"] == {"lab.links.0.attach": "shortbridge", "measure.size": 128}
    assert exp.size() == 2 * 2 * 2
    points = expand(exp)
    assert len(points) == 8 and len({p.key for p in points}) == 8
    native = [p for p in points if p.params["variant"] == "native"]
    assert "hosts" not in native[0].lab  # null removed the key
    assert "host" not in native[0].lab["nodes"]["src"] and "attach" not in native[0].lab["links"][0]
    assert native[0].measure["size"] == 64
    short = [p for p in points if p.params["variant"] == "short"]
    assert short[0].lab["links"][0]["attach"] == "shortbridge"
    assert short[0].measure["size"] == 128
    assert {p.params["measure.duration"] for p in short} == {1, 2}
    assert exp.lab["links"][0]["attach"] == "bridge"  # the base lab is untouched


def test_variant_errors_name_the_variant_and_path(tmp_path):
    e = error_of(tmp_path, VARIANTS.replace("measure.size: 128", "measure.size: 12"))
    assert e.place == "variants.short" and "size" in e.message
    e = error_of(tmp_path, VARIANTS.replace("short: {links.0.attach", "short: {links.5.attach"))
    assert e.place == "variants.short.links.5.attach" and "no item 5" in e.message
    e = error_of(tmp_path, VARIANTS.replace("measure.size: 128", "measure.duration: 3"))
    assert e.place == "variants.short.measure.duration" and "also swept" in e.message
    e = error_of(tmp_path, VARIANTS.replace("short: {links.0.attach: shortbridge, measure.size: 128}",
                                            "short: {}"))
    assert e.place == "variants.short"
