"""Benchmark: what the namespace ownership mark costs (issue 22), per namespace.

- **create**: :func:`sfclab.kernel.netns.create` of N namespaces (the mark, ``lo``'s alias, is
  one netlink request inside each); compare with the same script on a checkout without it.
- **marked**: :func:`sfclab.kernel.netns.marked` of each, the check ``down`` makes before it
  deletes a namespace (enter it from a thread, ask for ``lo``'s alias, go back).

Run as root: ``python bench/bench_netns_mark.py [--count 250] [--reps 3]``.  The namespaces are
named ``sfclab:benchmark-mark:nI`` and deleted after each repetition.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sfclab.kernel import netns


def once(count: int) -> tuple[float, float]:
    names = [f"sfclab:benchmark-mark:n{i}" for i in range(count)]
    made = []
    try:
        t = time.monotonic()
        for n in names:
            netns.create(n, iproute=False)
            made.append(n)
        create = time.monotonic() - t
        t = time.monotonic()
        ok = sum(netns.marked(n)[0] is not None for n in names)
        check = time.monotonic() - t
        assert ok == count, f"{count - ok} namespaces lack the mark"
    finally:
        for n in made:
            netns.delete(n)
    return create / count, check / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=250)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    runs = [once(a.count) for _ in range(a.reps)]
    print(f"{a.count} namespaces, {a.reps} repetitions, medians: "
          f"create {statistics.median(r[0] for r in runs) * 1e6:.0f} us, "
          f"marked {statistics.median(r[1] for r in runs) * 1e6:.0f} us per namespace")


if __name__ == "__main__":
    main()
