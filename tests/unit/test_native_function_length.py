"""The generator's C functions stay short enough to read (issue 24, item 5).

A function definition in C here starts at column 0 and its body runs from a ``{`` alone at
column 0 to the next ``}`` alone at column 0 (the kernel style the native tools follow).  Its
length counts from the signature's first line to that closing brace.  ``cmd_send`` used to be
358 lines; the split into parse, set-up, run and report keeps every sfcgen function at or under
80 lines.
"""

from __future__ import annotations

import re
from pathlib import Path

NATIVE = Path(__file__).resolve().parents[2] / "native"
LIMIT = 80
SIGNATURE = re.compile(r"^[A-Za-z_][^;]*\b(\w+)\s*\(")


def function_lengths(source: str) -> dict[str, int]:
    """Name of each function defined in source -> its length in lines."""
    lengths: dict[str, int] = {}
    signature: tuple[int, str] | None = None
    start: tuple[int, str] | None = None
    for number, line in enumerate(source.split("\n")):
        match = SIGNATURE.match(line)
        if match and not line.startswith(("#", "typedef")) and not line.rstrip().endswith(";"):
            signature = (number, match.group(1))
        if line == "{" and signature and start is None:
            start = signature
        if line == "}" and start is not None:
            lengths[start[1]] = number - start[0] + 1
            start = signature = None
    return lengths


def test_counter_measures_a_function() -> None:
    body = "\n".join(f"\tx += {i};" for i in range(5))
    source = f"static int f(int x)\n{{\n{body}\n\treturn x;\n}}\n\nint g(void)\n{{\n}}\n"
    assert function_lengths(source) == {"f": 9, "g": 3}


def test_no_sfcgen_function_exceeds_the_limit() -> None:
    long = {
        f"{path.name}:{name}": n
        for path in sorted(NATIVE.glob("sfcgen*.c"))
        for name, n in function_lengths(path.read_text()).items()
        if n > LIMIT
    }
    assert not long, f"functions over {LIMIT} lines: {long}"
