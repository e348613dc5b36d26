#!/usr/bin/env python3
"""`sfclab up` and `down` of N router nodes in containers against the same N nodes bare, side by
side in one run: the two labs are brought up and down in turn (the order reversed every other
round), so a load that drifts over the run hits both alike.  Medians and the spread (lowest,
highest) of --reps rounds, in seconds and per node.

Run as root:  .venv/bin/python bench/bench_container_updown.py [--nodes 20] [--reps 5]
              [--image localhost/sfclab/base:latest] [--before SRC] [--json]

Both labs are N ``router`` nodes n0 .. n(N-1) linked in a line; in the container lab each node
has ``image:`` and ``cmd: [sleep, infinity]`` (the base image's own command, ``/bin/sh``, would
end at once); each container runs joined to its node's namespace, and ``down`` stops it (sleep,
its PID 1, ignores SIGTERM: podman's stop timeout, 1 s, then SIGKILL).  sfclab runs as the real command (``python -m sfclab.cli up FILE``, ``down NAME``),
its start-up included.

With ``--before SRC`` (a source tree, e.g. one made by ``git archive main src | tar -x -C DIR``,
then ``--before DIR/src``) the container lab is also brought up and down by that tree's sfclab
in the same rounds: the change's before and after, side by side.

containerlab needs about 0.13 s per container node (its published figure); the goal checked
here is the container lab's ``up`` per node against that.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

#: containerlab's figure, seconds of `deploy` per container node
CONTAINERLAB_S_PER_NODE = 0.13


def lab_file(name: str, nodes: int, image: str | None) -> str:
    extra = f", image: {{name: {image}, cmd: [sleep, infinity]}}" if image else ""
    body = "".join(f"  n{i}: {{kind: router{extra}}}\n" for i in range(nodes))
    links = "".join(f"  - endpoints: [n{i}, n{i + 1}]\n" for i in range(nodes - 1))
    return f"name: {name}\nnodes:\n{body}links:\n{links}"


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    cp = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True)
    dt = time.perf_counter() - t0
    if cp.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({cp.returncode}): {cp.stderr.strip()}")
    return dt


def stats(v: list[float], nodes: int) -> dict[str, float]:
    med = statistics.median(v)
    return {"median_s": round(med, 3), "min_s": round(min(v), 3), "max_s": round(max(v), 3),
            "median_s_per_node": round(med / nodes, 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--image", default="localhost/sfclab/base:latest")
    ap.add_argument("--before", metavar="SRC", help="another sfclab source tree, timed alongside")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tag = secrets.token_hex(2)
    here = dict(os.environ)
    setups: dict[str, tuple[str, str | None, dict[str, str]]] = {
        "bare": (f"bu{tag}b", None, here), "container": (f"bu{tag}c", a.image, here)}
    if a.before:
        setups["container-before"] = (f"bu{tag}o", a.image,
                                      {**here, "PYTHONPATH": os.path.abspath(a.before)})
    times: dict[str, dict[str, list[float]]] = {k: {"up": [], "down": []} for k in setups}
    sfclab = [sys.executable, "-m", "sfclab.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for k, (name, image, _env) in setups.items():
            files[k] = os.path.join(tmp, f"{k}.yaml")
            with open(files[k], "w") as f:
                f.write(lab_file(name, a.nodes, image))
        for rep in range(a.reps):
            order = list(setups) if rep % 2 == 0 else list(reversed(setups))
            for k in order:
                name, _image, env = setups[k]
                up = timed([*sfclab, "up", files[k]], env)
                down = timed([*sfclab, "down", name], env)
                times[k]["up"].append(up)
                times[k]["down"].append(down)
                print(f"rep {rep} {k:16}: up {up:6.2f} s, down {down:6.2f} s",
                      file=sys.stderr, flush=True)
    out = {"nodes": a.nodes, "reps": a.reps, "image": a.image,
           "load_average": os.getloadavg()[0],
           "setups": {k: {op: stats(v, a.nodes) for op, v in t.items()}
                      for k, t in times.items()}}
    per_node = out["setups"]["container"]["up"]["median_s_per_node"]
    out["containerlab_s_per_node"] = CONTAINERLAB_S_PER_NODE
    out["up_per_node_over_containerlab"] = round(per_node / CONTAINERLAB_S_PER_NODE, 2)
    out["goal_met"] = per_node <= CONTAINERLAB_S_PER_NODE
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{a.nodes} router nodes in a line, median (lowest - highest) of {a.reps} rounds, "
          f"load average {out['load_average']:.1f}")
    for k, d in out["setups"].items():
        print(f"{k:16} up {d['up']['median_s']:6.2f} s ({d['up']['min_s']:.2f} - "
              f"{d['up']['max_s']:.2f}; {d['up']['median_s_per_node']:.3f} s/node)   "
              f"down {d['down']['median_s']:6.2f} s ({d['down']['min_s']:.2f} - "
              f"{d['down']['max_s']:.2f})")
    print(f"container up per node {per_node:.3f} s against containerlab's "
          f"{CONTAINERLAB_S_PER_NODE} s: x{out['up_per_node_over_containerlab']} "
          f"({'met' if out['goal_met'] else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
