/* The results view's comparison: pick two or more experiments (or run sets, EXPERIMENT:RUNS),
 * and GET /api/results/compare draws them on one plot per metric (each side's means with 95 %
 * intervals), the ratio of each later side to the first with its 95 % interval, the published
 * bands of the reproduced studies beside our ratios, the environment differences and the labs
 * they ran on.  Every label comes from the server (experiments/units.py).  State for tests:
 * window.sfclab.compare (the last comparison). */
(function () {
  "use strict";
  const P = window.SfclabPlot;
  const COLOURS = P.COLOURS;
  const bars = P.bars;

  function el(tag, text, parent) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function plot(parent, title, traces, layout) {
    const d = el("div", undefined, parent);
    d.className = "plot";
    d.dataset.title = title;
    window.Plotly.newPlot(d, traces, Object.assign({title: {text: title}, margin: {t: 50}},
                                                   layout), {responsive: true});
    return d;
  }

  function overlaid(out, c, m) {
    const traces = m.series.map(s => ({
      x: s.x, y: s.mean, name: s.name, type: "scatter", mode: "lines+markers",
      line: {color: COLOURS[s.side % COLOURS.length]},
      error_y: Object.assign(bars(s.mean, s.ci_low, s.ci_high),
                             {color: COLOURS[s.side % COLOURS.length]}),
      text: s.n.map(n => "n = " + n), hovertemplate: "%{x}: %{y:.4g} (%{text})"}));
    const xs = m.series.map(s => s.x);
    plot(out, m.title, traces, {xaxis: P.xaxis(c.x_label, xs),
                                yaxis: {title: {text: m.y_label}, rangemode: "tozero"}});
    if (!m.ratios.length) return;
    // the axis holds every bounded end; an interval without an upper bound (the baseline's
    // own interval reaches 0) is drawn leaving the plot at its top, its point a triangle
    const all = v => [].concat(...m.ratios.map(v)).filter(x => x !== null);
    const top = 1.15 * Math.max(1, ...all(r => r.ratio), ...all(r => r.high));
    const bottom = 1.15 * Math.min(0, ...all(r => r.low));
    const unbounded = r => r.high.map((h, i) => h === null && r.low[i] !== null);
    const ratios = m.ratios.map(r => ({
      x: r.x, y: r.ratio, name: r.name, type: "scatter", mode: "lines+markers",
      line: {color: COLOURS[r.side % COLOURS.length]},
      marker: {symbol: unbounded(r).map(u => u ? "triangle-up" : "circle"), size: 8},
      error_y: bars(r.ratio, r.low, r.high.map((h, i) => unbounded(r)[i] ? 100 * top : h)),
      text: r.x.map((x, i) => r.low[i] === null
        ? "no interval (fewer than 2 repetitions, or no spread)"
        : "95 %: " + r.low[i].toPrecision(3) + " – " +
          (r.high[i] === null ? "no upper bound" : r.high[i].toPrecision(3))),
      hovertemplate: "%{x}: %{y:.3g}× (%{text})"}));
    const d = plot(out, "ratio: " + m.title, ratios, {
      xaxis: P.xaxis(c.x_label, m.ratios.map(r => r.x)),
      yaxis: {title: {text: "ratio to " + c.sides[0].label + " (95 % interval)"},
              range: [bottom, top]},
      shapes: [{type: "line", xref: "paper", x0: 0, x1: 1, y0: 1, y1: 1,
                line: {dash: "dot", color: "#999"}}]});
    d.classList.add("ratio");
  }

  function published(out, rows) {
    if (!rows.length) return;
    const shapes = [], xs = rows.map(p => p.id);
    rows.forEach(function (p, i) {
      if (p.band) shapes.push({type: "rect", xref: "x", yref: "y", x0: i - 0.3, x1: i + 0.3,
                               y0: p.band[0], y1: p.band[1], fillcolor: "#9ecae1",
                               opacity: 0.45, line: {width: 0}});
    });
    const ours = {x: xs, y: rows.map(p => p.ratio), name: "ours (95 % interval)",
                  type: "scatter", mode: "markers", marker: {color: "#d62728", size: 9},
                  error_y: bars(rows.map(p => p.ratio), rows.map(p => p.low),
                                rows.map(p => p.high)),
                  text: rows.map(p => (p.a_name || "a") + " / " + (p.b_name || "b") + ": " +
                                 p.claim + " — published " + p.published +
                                 (p.verdict ? "; " + p.verdict : "") + (p.note ? "; " + p.note : ""))};
    const band = {x: [null], y: [null], name: "published range", type: "scatter", mode: "markers",
                  marker: {color: "#9ecae1", symbol: "square", size: 12}};
    const d = plot(out, "published figures beside ours", [band, ours], {
      shapes: shapes, xaxis: {title: {text: "finding"}, type: "category"},
      yaxis: {title: {text: "ratio of each finding's a to its b"}, rangemode: "tozero"}});
    d.classList.add("published");
  }

  function table(parent, header, rows, id) {
    const t = el("table", undefined, parent);
    if (id) t.id = id;
    const hr = el("tr", undefined, t);
    for (const h of header) el("th", h, hr);
    for (const r of rows) {
      const tr = el("tr", undefined, t);
      for (const c of r) {
        const td = el("td", undefined, tr);
        if (c instanceof Node) td.appendChild(c); else td.textContent = c;
      }
    }
    return t;
  }

  function show(out, c) {
    out.textContent = "";
    el("h3", "Where they ran", out);
    table(out, ["side", "lab", "experiment file"], c.sides.map(function (s) {
      const labs = el("span");
      for (const l of s.ran_on.labs) {
        if (l.up) {
          const a = el("a", l.name + " (up: open the lab view)", labs);
          a.href = "#/lab/" + encodeURIComponent(l.name);
        } else el("span", l.name + " (not up) ", labs);
      }
      return [s.label, labs, s.ran_on.experiment_file || "–"];
    }), "compare-labs");
    el("h3", "Environment differences", out);
    if (c.environment.length) {
      const t = table(out, [""].concat(c.sides.map(s => s.label)),
                      c.environment.map(d => [d.label].concat(d.shown)), "compare-env");
      [...t.rows].slice(1).forEach((tr, i) => { tr.dataset.key = c.environment[i].key; });
    } else el("p", "The stored environments are the same on every side.", out);
    for (const m of c.metrics) overlaid(out, c, m);
    published(out, c.published);
  }

  async function run(api, db) {
    const picked = [...document.querySelectorAll("#compare-pick input:checked")].map(i => i.value);
    const more = document.getElementById("compare-more").value.split(/[\s,]+(?![0-9-])/)
      .map(s => s.trim()).filter(Boolean);
    const q = new URLSearchParams();
    for (const s of picked.concat(more)) q.append("side", s);
    if (db) q.set("db", db);
    const out = document.getElementById("compare-out");
    try {
      const c = await api("/api/results/compare?" + q.toString());
      window.sfclab.compare = c;
      show(out, c);
    } catch (e) {
      out.textContent = e.message;
      window.sfclab.compare = {error: e.message};
    }
  }

  /** Fill the picker with the database's experiments; called by app.js's results view. */
  function setup(api, db, experiments) {
    const pick = document.getElementById("compare-pick");
    pick.textContent = "";
    for (const e of experiments) {
      const label = el("label", undefined, pick);
      const box = el("input", undefined, label);
      box.type = "checkbox";
      box.value = String(e.id);
      label.appendChild(document.createTextNode(" " + e.name + " (id " + e.id + ", " +
                                                e.counts.done + " runs) "));
    }
    document.getElementById("compare-go").onclick = () => run(api, db);
  }

  window.SfclabCompare = {setup: setup};
})();
