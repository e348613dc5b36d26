/* The sfclab page: labs (list; one lab's graph with live rates, a measurement, its loss) and
 * results (plots and the report's tables).  Data only from the API of the serving process;
 * drawing only through Cytoscape.js (graph.js) and Plotly.  State for tests: window.sfclab. */
(function () {
  "use strict";
  // The token is an HTTP-only cookie the server set when this page was opened with ?token=
  // (then redirected away from it): the browser sends it, no script here ever sees it.
  const params = new URLSearchParams(location.search);
  const state = window.sfclab = {graph: null, topology: null, rates: {}, links: {},
                                 loss: null, job: null, plots: []};
  let timers = [];
  const KIND_WORDS = {rate_curve: "rate curve", rate: "rate curve", ndr: "NDR/PDR search",
                      latency: "latency", iperf: "iperf3 throughput"};

  async function api(path, init) {
    init = Object.assign({credentials: "same-origin"}, init || {});
    const r = await fetch(path, init);
    const text = await r.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = text; }
    if (!r.ok) {
      const msg = body && body.error ? body.error : r.status + " " + r.statusText;
      throw new Error(msg);
    }
    return body;
  }
  function say(msg) { document.getElementById("status").textContent = msg || ""; }
  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }
  function show(id) {
    for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== id;
  }
  function stopTimers() { timers.forEach(clearInterval); timers = []; }

  // ---------------------------------------------------------------- labs
  async function home() {
    show("view-home");
    const labs = await api("/api/labs");
    const tb = document.querySelector("#labs tbody");
    tb.textContent = "";
    for (const l of labs) {
      const tr = document.createElement("tr");
      const a = document.createElement("a");
      a.href = "#/lab/" + encodeURIComponent(l.name);
      a.textContent = l.name;
      cell(tr, "").appendChild(a);
      cell(tr, l.status);
      cell(tr, l.nodes, "num");
      cell(tr, l.created ? new Date(l.created * 1000).toLocaleString() : "–");
      tb.appendChild(tr);
    }
  }

  function linkRates(topo, prev, now) {
    const dt = now.time - prev.time;
    const old = {};
    for (const i of prev.interfaces) old[i.node + "/" + i.ifname] = i;
    const per = {};
    for (const i of now.interfaces) {
      const o = old[i.node + "/" + i.ifname];
      if (!o || dt <= 0) continue;
      const d = f => Math.max(0, i[f] - o[f]) / dt;
      per[i.node + "/" + i.ifname] = {rx: d("rx_packets"), tx: d("tx_packets"),
                                      drops: d("rx_dropped") + d("tx_dropped") + d("qdisc_dropped")};
    }
    const links = {};
    for (const l of topo.links) {
      const rs = l.interfaces.map(i => per[i.node + "/" + i.ifname]).filter(Boolean);
      if (!rs.length) continue;
      const pps = rs.length > 1 ? rs.reduce((s, r) => s + r.tx, 0) : rs[0].rx + rs[0].tx;
      links[l.id] = {pps: pps, drops: rs.reduce((s, r) => s + r.drops, 0)};
    }
    return {interfaces: per, links: links};
  }

  function addressesOf(topo) {
    // node/ifname -> its addresses from the plan (IPv4, then IPv6 in a lab with IPv6)
    const out = {};
    for (const l of topo.links) {
      for (const i of l.interfaces) {
        out[i.node + "/" + i.ifname] = [i.address, i.address6].filter(Boolean).join(" ");
      }
    }
    return out;
  }

  function ratesTable(now, per, addrs) {
    const tb = document.querySelector("#rates tbody");
    tb.textContent = "";
    const f = window.SfclabGraph.fmtRate;
    for (const i of now.interfaces) {
      const r = per[i.node + "/" + i.ifname] || {rx: 0, tx: 0, drops: 0};
      const tr = document.createElement("tr");
      tr.dataset.node = i.node;
      tr.dataset.ifname = i.ifname;
      tr.dataset.rxPackets = i.rx_packets;
      if (r.drops > 0) tr.className = "dropping";
      cell(tr, i.node); cell(tr, i.ifname + (i.root ? " (root)" : ""));
      cell(tr, addrs[i.node + "/" + i.ifname] || "");
      cell(tr, f(r.rx), "num"); cell(tr, f(r.tx), "num"); cell(tr, f(r.drops), "num");
      cell(tr, i.rx_packets.toLocaleString(), "num"); cell(tr, i.tx_packets.toLocaleString(), "num");
      cell(tr, (i.rx_dropped + i.tx_dropped + i.qdisc_dropped).toLocaleString(), "num");
      tb.appendChild(tr);
    }
  }

  // where the last measurement's packets were lost, as a person reads it
  function lossWords(l) {
    if (l.measurement === null) return "no measurement finished yet";
    const n = v => Number(v).toLocaleString();
    const most = o => Object.entries(o || {}).filter(([, c]) => c > 0)
      .sort((a, b) => b[1] - a[1]).map(([k, c]) => k + " " + n(c)).join(", ") || "none";
    const share = l.sent ? " (" + (100 * l.lost / l.sent).toFixed(1) + " %)" : "";
    // drops are counted in the lab's namespaces, of every packet: more than were lost when
    // TCP sent a dropped segment again or packets other than the measurement's were dropped
    const more = l.dropped > l.lost ? "\n" + n(l.dropped) + " drops counted in the lab, more " +
      "than were lost: TCP sends a dropped segment again, and other packets count too" : "";
    const unplaced = l.unaccounted ? "\nnot located: " + n(l.unaccounted) + " packets" : "";
    return "measurement " + l.measurement + " (" + (KIND_WORDS[l.type] || l.type) + "): lost " +
      n(l.lost) + " of " + n(l.sent) + " packets" + share + "\nwhere: " +
      most(l.loss_by_node) + more + unplaced + "\nwhy (kernel drop reasons): " +
      most(l.loss_by_reason);
  }

  async function lab(name) {
    show("view-lab");
    document.getElementById("lab-name").textContent = name;
    const topo = await api("/api/labs/" + encodeURIComponent(name) + "/topology");
    state.topology = topo;
    state.graph = window.SfclabGraph.draw(document.getElementById("graph"), topo,
                                          {legend: document.getElementById("legend")});
    state.cy = state.graph.cy;
    let prev = null;
    async function tick() {
      try {
        const now = await api("/api/labs/" + encodeURIComponent(name) + "/counters");
        if (prev) {
          const r = linkRates(topo, prev, now);
          state.rates = r.interfaces;
          state.links = r.links;
          state.samples = (state.samples || 0) + 1;
          state.graph.setRates(r.links);
          ratesTable(now, r.interfaces, addressesOf(topo));
        }
        prev = now;
        say("");
      } catch (e) { say(e.message); }
    }
    async function loss() {
      try {
        const l = await api("/api/labs/" + encodeURIComponent(name) + "/loss");
        state.loss = l;
        if (!state.trialLoss) state.graph.setLoss(l.loss_by_node);  // else a trial's (measure.js)
        document.getElementById("loss").textContent = lossWords(l);
      } catch (e) { say(e.message); }
    }
    await tick();
    await loss();
    timers.push(setInterval(tick, 1000), setInterval(loss, 3000));
    window.SfclabMeasure.panel(document.getElementById("measure"), {
      lab: name, topo: topo, api: api, state: state, graph: () => state.graph, say: say,
      ended: loss, later: t => timers.push(t)});
  }

  // ---------------------------------------------------------------- results
  const P = window.SfclabPlot;
  const COLOURS = P.COLOURS;

  function plotDiv(container, title) {
    const d = document.createElement("div");
    d.className = "plot";
    d.dataset.title = title;
    container.appendChild(d);
    return d;
  }

  // the lab the experiment's runs ran on: a link to its lab view while it is up
  function ranOn(where) {
    const box = document.getElementById("ran-on");
    box.textContent = "";
    if (!where.labs.length) return;
    box.append("Ran on lab ");
    where.labs.forEach(function (l, i) {
      if (i) box.append(", ");
      if (l.up) {
        const a = document.createElement("a");
        a.href = "#/lab/" + encodeURIComponent(l.name);
        a.textContent = l.name;
        box.append(a, " (up: open the lab view)");
      } else box.append(l.name + " (not up now)");
    });
    if (where.experiment_file) box.append("; experiment file " + where.experiment_file);
    box.append(".");
  }

  async function drawResults(db, exp) {
    const q = db ? "?db=" + encodeURIComponent(db) : "";
    const plotsEl = document.getElementById("plots");
    const tablesEl = document.getElementById("tables");
    plotsEl.textContent = ""; tablesEl.textContent = "";
    state.plots = [];
    const p = await api("/api/results/experiments/" + exp + "/plots" + q);
    ranOn(p.ran_on);
    for (const m of p.metrics) {
      const traces = [];
      m.series.forEach(function (s, i) {
        const colour = COLOURS[i % COLOURS.length];  // a series and its fit share a colour
        traces.push({x: s.x, y: s.mean, name: s.name, type: "scatter", mode: "lines+markers",
                     error_y: Object.assign(P.bars(s.mean, s.ci_low, s.ci_high),
                                            {color: colour}),
                     line: {color: colour}, marker: {color: colour}, legendgroup: s.name,
                     text: s.n.map(n => "n = " + n), hovertemplate: "%{x}: %{y:.4g} (%{text})"});
        if (s.fit && s.x && !s.fit.error) {
          traces.push({x: s.fit.x, y: s.fit.y, type: "scatter", mode: "lines",
                       line: {dash: "dash", color: colour}, legendgroup: s.name,
                       name: "fit " + s.name + ": l = " + (100 * s.fit.loss).toFixed(1) +
                             " %/hop, R² = " + s.fit.r2.toFixed(3)});
        }
      });
      const d = plotDiv(plotsEl, m.metric);
      d.dataset.label = m.title;  // people's words, from the server (experiments/units.py)
      window.Plotly.newPlot(d, traces, {
        title: {text: m.title}, xaxis: P.xaxis(p.x_label, m.series.map(s => s.x)),
        yaxis: {title: {text: m.y_label}, rangemode: "tozero"}, margin: {t: 50}},
        {responsive: true});
      state.plots.push(m.metric);
    }
    if (p.curves.length) {
      const traces = p.curves.map(c => ({x: c.offered, y: c.received, name: c.name,
                                         type: "scatter", mode: "lines+markers"}));
      const top = Math.max(...p.curves.flatMap(c => c.offered));
      traces.push({x: [0, top], y: [0, top], name: "ideal (no loss)", mode: "lines",
                   line: {dash: "dot", color: "#999"}});
      const d = plotDiv(plotsEl, "offered vs received");
      d.dataset.label = p.curves_title;
      window.Plotly.newPlot(d, traces, {title: {text: p.curves_title},
        xaxis: {title: {text: p.curves_x_label}},
        yaxis: {title: {text: p.curves_y_label}}, margin: {t: 50}},
        {responsive: true});
      state.plots.push("offered vs received");
    }
    if (!p.metrics.length && !p.curves.length) {
      document.getElementById("results-note").textContent =
        "Nothing to plot: no parameter was swept and no rate curve was measured.";
    }
    const blocks = await api("/api/results/experiments/" + exp + "/tables" + q);
    for (const b of blocks) {
      let el;
      if (b.heading !== undefined) {
        el = document.createElement("h" + Math.min(6, b.heading + 1));
        el.textContent = b.text.replaceAll("`", "");
      } else if (b.para !== undefined) {
        el = document.createElement("p");
        el.textContent = b.para.replaceAll("`", "");
      } else {
        el = document.createElement("table");
        const hr = document.createElement("tr");
        for (const h of b.header) {
          const th = document.createElement("th");
          th.textContent = h;
          hr.appendChild(th);
        }
        el.appendChild(hr);
        for (const r of b.rows) {
          const tr = document.createElement("tr");
          for (const c of r) cell(tr, c);
          el.appendChild(tr);
        }
      }
      tablesEl.appendChild(el);
    }
  }

  async function results() {
    show("view-results");
    const dbIn = document.getElementById("db");
    if (params.get("db") && !dbIn.value) dbIn.value = params.get("db");
    async function load() {
      const db = dbIn.value.trim();
      const q = db ? "?db=" + encodeURIComponent(db) : "";
      const sel = document.getElementById("experiment");
      sel.textContent = "";
      const data = await api("/api/results/experiments" + q);
      document.getElementById("results-note").textContent = "Database " + data.db + ": " +
        data.experiments.length + " experiment(s).";
      for (const e of data.experiments) {
        const o = document.createElement("option");
        o.value = e.id;
        o.textContent = e.name + " (id " + e.id + ", " + e.counts.done + " runs done)";
        sel.appendChild(o);
      }
      async function pick() {
        const exp = sel.value;
        document.getElementById("export-csv").href = (
          "/api/results/export?format=csv&experiment=" + exp + (db ? "&db=" + encodeURIComponent(db) : ""));
        document.getElementById("export-json").href = (
          "/api/results/export?format=json&experiment=" + exp + (db ? "&db=" + encodeURIComponent(db) : ""));
        await drawResults(db, exp);
      }
      sel.onchange = () => pick().catch(e => say(e.message));
      window.SfclabCompare.setup(api, db, data.experiments);
      if (data.experiments.length) {
        const wanted = location.hash.split("/")[2];
        sel.value = wanted && data.experiments.some(e => String(e.id) === wanted)
          ? wanted : data.experiments[data.experiments.length - 1].id;
        await pick();
      }
    }
    document.getElementById("db-open").onclick = () => load().catch(e => say(e.message));
    await load();
  }

  async function route() {
    stopTimers();
    say("");
    const h = location.hash.replace(/^#\/?/, "");
    try {
      if (h.startsWith("lab/")) await lab(decodeURIComponent(h.slice(4)));
      else if (h.startsWith("results")) await results();
      else await home();
      document.body.dataset.ready = h || "home";
    } catch (e) { say(e.message); document.body.dataset.ready = "error"; }
  }
  window.addEventListener("hashchange", route);
  route();
})();
