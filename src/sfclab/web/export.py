"""``sfclab graph LAB --format html``: the page's topology view as one self-contained file.

The file holds Cytoscape.js (from the pinned npm package), the page's own ``graph.js`` and
``style.css``, and the lab's topology (:func:`.topology.topology`) as JSON, so it opens
anywhere without a server or a network.  It shows what the plan says (groups, link kinds,
chains, and a running lab's migrated lab-file nodes as transit nodes "moved to" their clones);
live rates and loss need ``sfclab serve``.
"""

from __future__ import annotations

import html
import json
from typing import Any

from .topology import topology
from .vendor import STATIC, library


def _script(text: str) -> str:
    return "<script>" + text.replace("</script", "<\\/script") + "</script>"


def html_page(plan: dict[str, Any], moved: dict[str, str] | None = None) -> str:
    """The self-contained HTML text for ``plan`` (a plan as stored); ``moved``: a running lab's
    migrated lab-file nodes -> their clones (:func:`sfclab.realize.moved.moved_nodes`)."""
    topo = topology(plan, moved)
    name = html.escape(str(topo["lab"]))
    data = json.dumps(topo).replace("</", "<\\/")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>sfclab lab {name}</title>",
        "<style>" + (STATIC / "style.css").read_text(encoding="utf-8") +
        "#graph{height:calc(100vh - 9em)}</style>",
        _script(library("cytoscape.min.js").read_text(encoding="utf-8")),
        _script((STATIC / "graph.js").read_text(encoding="utf-8")),
        "</head><body><main>",
        f"<h1>Lab {name}</h1>",
        '<div id="legend"></div><div id="graph"></div>',
        '<p class="hint">Drawn by <code>sfclab graph --format html</code> from the lab\'s plan; '
        "live rates and loss: <code>sfclab serve</code>.</p>",
        "</main>",
        f'<script type="application/json" id="topology">{data}</script>',
        _script("window.sfclab = {graph: SfclabGraph.draw(document.getElementById('graph'), "
                "JSON.parse(document.getElementById('topology').textContent), "
                "{legend: document.getElementById('legend')})};"
                "window.sfclab.cy = window.sfclab.graph.cy;"),
        "</body></html>", ""])
