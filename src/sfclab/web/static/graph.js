/* sfclab topology view: a lab's plan (GET /api/labs/LAB/topology) drawn with Cytoscape.js.
 * Used by the served page (index.html, with live rates and loss) and by the file that
 * `sfclab graph LAB --format html` writes (static).  Nodes sit in compound boxes per host and
 * tenant when the plan has them; a link's style says its kind; chains are highlighted as paths.
 * Exposes window.SfclabGraph = {draw}. */
(function () {
  "use strict";

  const KIND_SHAPE = {
    "host": "round-rectangle", "router": "diamond", "linux-bridge": "rectangle",
    "ovs-bridge": "barrel", "namespace": "ellipse"
  };
  const LINK_STYLE = {  // link kind -> [line style, colour]
    "veth": ["solid", "#5a6b7b"], "internal": ["dashed", "#7b5aa6"],
    "patch": ["dotted", "#a65a5a"], "vxlan": ["dashed", "#2f8f5b"]
  };
  const CHAIN_COLOURS = ["#e8710a", "#1a73e8", "#d01884", "#188038", "#9334e6", "#b06000"];

  function fmtRate(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    if (v >= 1e6) return (v / 1e6).toFixed(2) + " M";
    if (v >= 1e3) return (v / 1e3).toFixed(1) + " k";
    return v.toFixed(v < 10 ? 1 : 0);
  }

  // a count of packets: whole below a thousand (lost 7, never lost 7.0), then as a rate is
  function fmtCount(v) {
    return v < 1e3 ? String(Math.round(v)) : fmtRate(v);
  }

  function caption(n) {
    // the text under a node's name, as `sfclab graph` writes it: its kind (or function), and
    // for a lab-file node whose function `chain migrate` moved, where the function is now
    if (n.moved_to) return n.kind + ", moved to " + n.moved_to;
    const sub = n.function && n.function !== n.kind ? n.function : n.kind;
    return n.stands_for ? sub + " in place of " + n.stands_for : sub;
  }

  function elements(topo) {
    const els = [];
    for (const g of topo.groups) {
      els.push({group: "nodes", data: {id: g.id, label: g.kind + " " + g.name, kind: "group",
        groupKind: g.kind, parent: g.parent || undefined}, classes: "group " + g.kind});
    }
    for (const n of topo.nodes) {
      const sub = caption(n);
      els.push({group: "nodes", data: {id: n.id, name: n.id, kind: n.kind, sub: sub,
        base: n.id + "\n" + sub, label: n.id + "\n" + sub, parent: n.parent || undefined,
        shape: KIND_SHAPE[n.kind] || (n.function ? "hexagon" : "ellipse")},
        classes: "lab-node" + (n.moved_to ? " transit" : "")});
    }
    for (const l of topo.links) {
      const st = LINK_STYLE[l.kind] || ["solid", "#555"];
      // a tunnel of a function instance added to the running lab: its VNI, as in `sfclab graph`
      const text = l.vni != null ? l.kind + " vni " + l.vni : l.kind;
      els.push({group: "edges", data: {id: l.id, source: l.source, target: l.target,
        kind: l.kind, base: text, label: text, lineStyle: st[0], colour: st[1]},
        classes: "lab-link"});
    }
    return els;
  }

  const STYLE = [
    {selector: "node.lab-node", style: {
      "shape": "data(shape)", "label": "data(label)", "text-wrap": "wrap",
      "text-valign": "center", "text-halign": "center", "font-size": 11,
      "width": 78, "height": 46, "background-color": "#e8eef5", "border-width": 1.5,
      "border-color": "#5a6b7b", "color": "#1d2733"}},
    {selector: "node.lab-node.transit", style: {"border-style": "dashed",
      "background-color": "#f4f4f4", "color": "#5a6b7b"}},
    {selector: "node.group", style: {
      "label": "data(label)", "text-valign": "top", "text-halign": "center",
      "font-size": 12, "font-weight": "bold", "background-opacity": 0.06,
      "border-style": "dashed", "border-width": 1.5, "padding": 14, "shape": "round-rectangle"}},
    {selector: "node.group.host", style: {"background-color": "#1a73e8", "border-color": "#1a73e8"}},
    {selector: "node.group.tenant", style: {"background-color": "#188038",
      "border-color": "#188038"}},
    {selector: "edge.lab-link", style: {
      "width": 2, "line-color": "data(colour)", "line-style": "data(lineStyle)",
      "label": "data(label)", "font-size": 9, "text-wrap": "wrap", "color": "#333",
      "text-background-color": "#fff", "text-background-opacity": 0.85,
      "text-background-padding": 1, "curve-style": "bezier"}},
    {selector: "node.lab-node.on-chain", style: {"border-color": "data(chainColour)",
      "border-width": 4}},
    {selector: "edge.lab-link.on-chain", style: {"line-color": "data(chainColour)",
      "width": 5}},
    {selector: "node.lab-node.lossy", style: {"background-color": "#fbd3cf",
      "border-color": "#c5221f"}},
    {selector: "edge.lab-link.dropping", style: {"target-arrow-color": "#c5221f",
      "line-color": "#c5221f"}}
  ];

  function landscape(cy) {
    // a lab reads left to right: turn a layout taller than wide by a quarter turn
    const bb = cy.nodes(".lab-node").boundingBox();
    if (bb.h > bb.w * 1.1) {
      cy.nodes(".lab-node").forEach(n => {
        const p = n.position();
        n.position({x: p.y, y: -p.x});
      });
    }
    // and from the lab's first node (its first host, usually) toward its last
    const ns = cy.nodes(".lab-node");
    if (ns.length > 1 && ns[0].position().x > ns[ns.length - 1].position().x) {
      ns.forEach(n => { const p = n.position(); n.position({x: -p.x, y: p.y}); });
    }
    cy.fit(undefined, 30);
    if (cy.zoom() > 1.6) { cy.zoom(1.6); cy.center(); }
  }

  function edgeBetween(cy, a, b) {
    return cy.edges().filter(e => (e.data("source") === a && e.data("target") === b) ||
                                  (e.data("source") === b && e.data("target") === a));
  }

  function draw(container, topo, opts) {
    opts = opts || {};
    const cy = window.cytoscape({
      container: container, elements: elements(topo), style: STYLE,
      layout: {name: "cose", animate: false, randomize: false, nodeDimensionsIncludeLabels: true,
               idealEdgeLength: () => 90, nodeRepulsion: () => 9000, padding: 20}
    });
    landscape(cy);
    const chains = [];  // one entry per direction path
    topo.chains.forEach(function (d) {
      d.paths.forEach(function (p) {
        chains.push({chain: d.chain, reverse: d.reverse, path: p.index, nodes: p.nodes,
                     weight: p.weight,
                     label: d.chain + (d.reverse ? " (reverse)" : "") + " path " + p.index +
                            ": " + p.nodes.join(" › ")});
      });
    });
    const colourOf = {};
    [...new Set(chains.map(c => c.chain))].forEach((c, i) => {
      colourOf[c] = CHAIN_COLOURS[i % CHAIN_COLOURS.length];
    });

    function highlight(which) {  // which: index into chains, "all", or null
      cy.elements().removeClass("on-chain");
      const shown = which === "all" ? chains : (which === null ? [] : [chains[which]]);
      for (const c of shown) {
        for (let i = 0; i < c.nodes.length; i++) {
          cy.getElementById(c.nodes[i]).addClass("on-chain").data("chainColour", colourOf[c.chain]);
          if (i > 0) {
            edgeBetween(cy, c.nodes[i - 1], c.nodes[i]).addClass("on-chain")
              .data("chainColour", colourOf[c.chain]);
          }
        }
      }
    }

    function setRates(perLink, perNode) {
      // perLink: link id -> {pps, drops}; perNode: node -> drops per second
      cy.edges().forEach(function (e) {
        const r = perLink[e.id()];
        if (!r) { e.data("label", e.data("base")); return; }
        e.data("label", e.data("base") + "\n" + fmtRate(r.pps) + " pps" +
               (r.drops > 0 ? ", " + fmtRate(r.drops) + " drops/s" : ""));
        e.toggleClass("dropping", r.drops > 0);
        e.style("width", e.hasClass("on-chain") ? 5 : 2 + Math.min(6, Math.log10(1 + r.pps)));
      });
    }

    function setLoss(byNode) {
      cy.nodes(".lab-node").forEach(function (n) {
        const lost = byNode[n.id()] || 0;
        n.toggleClass("lossy", lost > 0);
        n.data("label", n.data("base") + (lost > 0 ? "\nlost " + fmtCount(lost) : ""));
      });
    }

    if (opts.legend) {
      legend(opts.legend, [...new Set(topo.links.map(l => l.kind))], chains, colourOf, highlight);
    }
    highlight(chains.length ? "all" : null);
    return {cy: cy, chains: chains, highlight: highlight, setRates: setRates, setLoss: setLoss};
  }

  function legend(el, kindsShown, chains, colourOf, highlight) {
    el.textContent = "";
    const kinds = document.createElement("div");
    kinds.className = "legend-kinds";
    for (const k of kindsShown) {
      const st = LINK_STYLE[k] || ["solid", "#555"];
      const s = document.createElement("span");
      s.className = "legend-link";
      s.style.borderBottom = "3px " + st[0] + " " + st[1];
      s.textContent = k;
      kinds.appendChild(s);
    }
    el.appendChild(kinds);
    if (!chains.length) return;
    const list = document.createElement("div");
    list.className = "legend-chains";
    const all = document.createElement("button");
    all.textContent = "all chains";
    all.onclick = () => highlight("all");
    list.appendChild(all);
    chains.forEach(function (c, i) {
      const b = document.createElement("button");
      b.textContent = c.label;
      b.style.borderLeft = "6px solid " + colourOf[c.chain];
      b.onclick = () => highlight(i);
      list.appendChild(b);
    });
    const none = document.createElement("button");
    none.textContent = "none";
    none.onclick = () => highlight(null);
    list.appendChild(none);
    el.appendChild(list);
  }

  window.SfclabGraph = {draw: draw, fmtRate: fmtRate};
})();
