#!/usr/bin/env python3
"""The steps of scripts/reproduce.sh that read or write its record and the page (the logic is
in sfclab.experiments.findings, .page and .reprorun):

    repro_page.py begin OUT                        record the environment, the start time and
                                                   the run id; copy FINDINGS into OUT
    repro_page.py budget OUT BUDGET_S NAME...      share BUDGET_S seconds of added repetitions
                                                   among the findings of groups NAME (run order)
    repro_page.py group OUT NAME start|end         record a group's time and load average (end:
                                                   its findings are done, their rest passes on)
    repro_page.py more OUT NAME DB...              print "FILE REPETITIONS IDS EST_S" lines:
                                                   files to bring up to their findings'
                                                   repetitions planned from the pilot (once,
                                                   kept in the record), within their shares
    repro_page.py round OUT NAME FILE REPS IDS T0  record a repetition round begun at T0 (unix
                                                   s) and charge its time to findings IDS
    repro_page.py finish OUT                       record the end and the wall time
    repro_page.py bundle OUT [--keep DIR]          make OUT a bundle: trials/*.json and
                                                   SHA256SUMS; --keep: copy it into DIR if
                                                   under 20 MB (else its checksums only)
    repro_page.py fill OUT [PAGE] [--partial]      rewrite the page's marked blocks from OUT
    repro_page.py render OUT [--page PAGE] [--partial]
                                                   the same (measures nothing: only reads
                                                   the bundle OUT); every block must come
                                                   from OUT, unless --partial (blocks of
                                                   groups not in OUT keep their text)
    repro_page.py check OUT [--page PAGE]          verify the bundle and every block of the
                                                   page against it: exit 1 naming the first
                                                   block (or file) that differs
    repro_page.py verdicts OUT                     print the findings table (no page change)

The findings file is OUT/findings.yaml (copied at begin: the ranges fixed before the run),
else FINDINGS (default scenarios/findings.yaml); PAGE defaults to docs/reproduction.md.
Exit 2 with one message on bad input.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sfclab.errors import SpecError
from sfclab.experiments.bundle import BundleError, keep, seal_databases, verify, write_sums, write_trials
from sfclab.experiments.findings import load_findings
from sfclab.experiments.page import check, comparisons, fill, render_findings
from sfclab.experiments.reprorun import (Record, full_environment, more_repetitions,
                                         render_environment)

ROOT = Path(__file__).resolve().parents[1]


def seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SpecError(f"expected a number of seconds, got {text!r}") from None


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, out = argv[0], Path(argv[1])
    given = Path(os.environ.get("FINDINGS", str(ROOT / "scenarios" / "findings.yaml")))
    findings_path = out / "findings.yaml" if (out / "findings.yaml").is_file() else given
    rec = Record(out)
    if cmd == "begin":
        print(f"run {rec.begin(full_environment(str(ROOT)), given)}")
    elif cmd == "budget" and len(argv) >= 4:
        rec.start_budget(seconds(argv[2]), load_findings(findings_path), argv[3:])
    elif cmd == "group" and len(argv) == 4:
        rec.group(argv[2], argv[3])
        if argv[3] == "end" and rec.budget is not None:
            f = load_findings(findings_path)
            mine = {x.id for x in f.findings if x.db == argv[2]}
            rec.close_group(argv[2], {fid: min(c.a.n, c.b.n) for fid, c in
                                      comparisons(f, out).items()
                                      if c is not None and fid in mine})
    elif cmd == "more" and len(argv) >= 4:
        allow = rec.allowances(argv[2])
        todo = more_repetitions(load_findings(findings_path), out, argv[3:], allow,
                                rec.data.setdefault("plan", {}))
        rec.save()
        for p in todo:
            print(p.file, p.repetitions, ",".join(p.findings), f"{p.estimate_s:.0f}")
    elif cmd == "round" and len(argv) == 7:
        rec.round(argv[2], argv[3], int(argv[4]), argv[5].split(","), seconds(argv[6]))
    elif cmd == "finish":
        rec.finish()
    elif cmd == "bundle" and len(argv) in (2, 4) and argv[2:3] in ([], ["--keep"]):
        if not rec.run_id:
            raise SpecError("expected the record of a run (repro_page.py begin first)",
                            file=str(rec.path))
        seal_databases(out)
        write_trials(out, rec.run_id)
        write_sums(out)
        print(f"bundle {verify(out)}: {out}")
        if len(argv) == 4:
            print(keep(out, Path(argv[3])))
    elif cmd in ("fill", "render", "check"):
        rest = argv[2:]
        partial = "--partial" in rest and cmd != "check"
        rest = [a for a in rest if a != "--partial"] if cmd != "check" else rest
        if cmd in ("render", "check") and rest[:1] == ["--page"] and len(rest) == 2:
            rest = rest[1:]
        elif cmd in ("render", "check") and rest:
            print(__doc__, file=sys.stderr)
            return 2
        if not out.is_dir():
            raise SpecError("expected the OUT_DIR of a scripts/reproduce.sh run", file=str(out))
        page = Path(rest[0]) if rest else ROOT / "docs" / "reproduction.md"
        try:
            before = page.read_text()
        except OSError as e:
            raise SpecError(f"expected a readable page ({e.strerror})", file=str(page)) from None
        if cmd == "check":
            try:
                rid = verify(out)
            except BundleError as e:
                print(f"repro_page: check: {e}", file=sys.stderr)
                return 1
            bad = check(before, load_findings(findings_path), out,
                        lambda: render_environment(rec), run_id=rid)
            if bad:
                print(f"repro_page: check: {page}: {bad}", file=sys.stderr)
                return 1
            print(f"page {page} matches bundle {rid}")
            return 0
        # a whole page comes from a verified bundle; a partial one may be rendered mid-run
        rid = rec.run_id if partial else verify(out)
        if not rid:
            raise SpecError("expected a record with a run id", file=str(rec.path))
        text = fill(before, load_findings(findings_path), out,
                    (lambda: render_environment(rec)) if rec.data else None, run_id=rid,
                    partial=partial)
        tmp = page.with_name(page.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(page)
        print(f"page rewritten from run {rid}: {page}")
    elif cmd == "verdicts":
        f = load_findings(findings_path)
        print(render_findings(comparisons(f, out), f.findings), end="")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SpecError as e:
        print(f"repro_page: error: {e}", file=sys.stderr)
        sys.exit(2)
