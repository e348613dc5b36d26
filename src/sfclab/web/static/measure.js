/* The lab view's measurement form: a kind (iperf, rate curve, NDR/PDR, latency), its fields,
 * checked as they are typed; started, followed trial by trial, stoppable.
 *
 * The form is a table of fields (FIELDS), each shown for the kinds that take it.  A field's
 * text goes to the server as typed, as the command line's options do, so the server's check
 * (POST /api/labs/LAB/measurements/check) answers with the command line's very words; the
 * message is shown at the field its place names ("rates[1]" -> the rates field, "pairs[1]" ->
 * the second pair).  The request as JSON (an experiment file's measure: section) is shown
 * below the form, and may be edited there; Start sends what it holds.
 *
 * A started measurement is followed by polling GET /api/measurements/ID: one row per trial as
 * it ends (offered, received, loss, the interval an NDR/PDR search narrowed to) and the
 * trial's per-node loss painted on the graph as the row arrives (state.painted keeps, per
 * trial, the nodes painted for it).  Stop sends DELETE, which returns once the job has ended;
 * the job is then shown as stopped, with its trials so far.
 *
 * Entry point: SfclabMeasure.panel(element, {lab, topo, api, state, graph, ended}). */
(function () {
  "use strict";
  const ALL = ["iperf", "rate", "ndr", "latency"];
  const PACKET = ["rate", "ndr", "latency"];
  const KINDS = [["rate", "rate curve"], ["ndr", "NDR/PDR search"], ["latency", "latency"],
                 ["iperf", "iperf3 throughput"]];
  // key (the request's), label, kinds that take it, first value, help; choices for a select
  const FIELDS = [
    {key: "size", label: "frame size", kinds: PACKET, value: "64",
     help: "bytes, 64 to the path MTU + 18 (IPv6: from 84), or imix"},
    {key: "rates", label: "offered rates", kinds: ["rate"], value: "20k, 50k",
     help: "packets per second, comma-separated: 100000, 250k, 1.5M or max"},
    {key: "rate", label: "offered rate", kinds: ["latency"], value: "10k",
     help: "packets per second"},
    {key: "ndr_loss", label: "NDR loss goal", kinds: ["ndr"], value: "0", help: "%"},
    {key: "pdr_loss", label: "PDR loss goal", kinds: ["ndr"], value: "0.5", help: "%"},
    {key: "precision", label: "precision", kinds: ["ndr"], value: "",
     help: "% width of the final interval (default 1)"},
    {key: "max_rate", label: "top of the search", kinds: ["ndr"], value: "",
     help: "packets per second (default: what the sender reaches)"},
    {key: "method", label: "search", kinds: ["ndr"], choices: ["mlr", "binary"]},
    {key: "duration", label: "duration", kinds: ALL, value: "1",
     help: "seconds per trial (iperf: of the run)"},
    {key: "flows", label: "flows", kinds: ALL, value: "",
     help: "UDP flows (iperf: parallel pairs); default 1"},
    {key: "ip", label: "IP family", kinds: ALL, choices: ["4", "6"], dualStack: true},
  ];
  const POLL_MS = 500;
  const CHECK_DELAY_MS = 200;

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "dataset") Object.assign(e.dataset, v); else e.setAttribute(k, v);
    }
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function fmt(v) { return window.SfclabGraph.fmtRate(v); }

  function nodeSelect(nodes, chosen, role) {
    const s = el("select", {"aria-label": role, dataset: {role: role}});
    for (const n of nodes) {
      const o = el("option", {value: n}, n);
      if (n === chosen) o.selected = true;
      s.appendChild(o);
    }
    return s;
  }

  function panel(root, ctx) {
    const state = ctx.state;
    const nodes = ctx.topo.nodes.filter(n => n.netns).map(n => n.id);
    const hosts = ctx.topo.nodes.filter(n => n.netns && n.kind === "host").map(n => n.id);
    const ends = hosts.length >= 2 ? hosts : nodes;
    const dualStack = ctx.topo.links.some(l => l.interfaces.some(i => i.address6)) &&
                      ctx.topo.links.some(l => l.interfaces.some(i => i.address));
    root.textContent = "";
    const form = el("form", {id: "measure-form", novalidate: ""});
    const kind = el("select", {id: "measure-kind", name: "type"});
    for (const [k, label] of KINDS) kind.appendChild(el("option", {value: k}, label));
    form.appendChild(row("type", "kind", kind));

    // sender -> receiver pairs: the first always there, more where the kind takes them
    const pairsBox = el("div", {id: "measure-pairs"});
    const addPair = el("button", {type: "button", id: "measure-add-pair"}, "+ pair");
    const pairsRow = row("pairs", "sender → receiver", pairsBox, addPair);
    form.appendChild(pairsRow);
    function pairRow(from, to) {
      const r = el("div", {class: "measure-pair"});
      r.appendChild(nodeSelect(nodes, from, "sender"));
      r.appendChild(document.createTextNode(" → "));
      r.appendChild(nodeSelect(nodes, to, "receiver"));
      if (pairsBox.children.length) {
        const rm = el("button", {type: "button", title: "remove this pair",
                                 class: "measure-remove-pair"}, "×");
        rm.onclick = () => { r.remove(); changed(); };
        r.appendChild(rm);
      }
      r.appendChild(el("span", {class: "measure-error"}));
      pairsBox.appendChild(r);
    }
    pairRow(ends[0], ends[ends.length - 1]);
    addPair.onclick = () => { pairRow(ends[0], ends[ends.length - 1]); changed(); };

    const inputs = {};
    for (const f of FIELDS) {
      if (f.dualStack && !dualStack) continue;
      let input;
      if (f.choices) {
        input = el("select", {name: f.key});
        for (const c of f.choices) input.appendChild(el("option", {value: c}, c));
      } else {
        input = el("input", {name: f.key, size: f.key === "rates" ? 24 : 10,
                             placeholder: f.value ? "" : "default"});
        input.value = f.value;
      }
      inputs[f.key] = input;
      const r = row(f.key, f.label, input, f.help ? el("small", {class: "hint"}, f.help) : null);
      r.dataset.kinds = f.kinds.join(" ");
      form.appendChild(r);
    }
    const general = el("p", {class: "measure-error", id: "measure-general"});
    form.appendChild(general);
    const startB = el("button", {type: "submit", id: "measure-start"}, "start");
    const stopB = el("button", {type: "button", id: "measure-stop", disabled: ""}, "stop");
    const buttons = el("p");
    buttons.append(startB, " ", stopB, " ", el("span", {id: "measure-status"}));
    form.appendChild(buttons);
    const json = el("details", {class: "measure-json"});
    json.appendChild(el("summary", {}, "the request as JSON (an experiment file's measure:)"));
    const ta = el("textarea", {id: "measure-request", rows: 3, spellcheck: "false"});
    json.appendChild(ta);
    json.open = true;
    form.appendChild(json);
    root.appendChild(form);
    const table = el("table", {id: "measure-trials"});
    root.appendChild(table);

    function row(key, label, ...parts) {
      const r = el("div", {class: "measure-field", dataset: {key: key}});
      r.appendChild(el("label", {}, label));
      for (const p of parts) if (p) r.appendChild(p);
      r.appendChild(el("span", {class: "measure-error", dataset: {for: key}}));
      return r;
    }

    function request() {
      const k = kind.value;
      const out = {type: k};
      const pairs = [...pairsBox.querySelectorAll(".measure-pair")].map(r =>
        [...r.querySelectorAll("select")].map(s => s.value));
      if (pairs.length > 1) out.pairs = pairs.map(p => p[0] + ":" + p[1]);
      else { out.from = pairs[0][0]; out.to = pairs[0][1]; }
      for (const f of FIELDS) {
        const input = inputs[f.key];
        if (!input || !f.kinds.includes(k)) continue;
        const v = input.value.trim();
        if (v === "") continue;
        out[f.key] = f.key === "rates" ? v.split(",").map(x => x.trim()).filter(Boolean) : v;
      }
      return out;
    }

    function showKind() {
      const k = kind.value;
      for (const r of form.querySelectorAll(".measure-field[data-kinds]")) {
        r.hidden = !r.dataset.kinds.split(" ").includes(k);
      }
      addPair.hidden = k === "latency";  // a latency measurement has one pair
      while (k === "latency" && pairsBox.children.length > 1) pairsBox.lastChild.remove();
    }

    function clearErrors() {
      for (const e of root.querySelectorAll(".measure-error")) e.textContent = "";
      for (const e of root.querySelectorAll(".invalid")) e.classList.remove("invalid");
    }

    // the message at the field its place names: "rates[1]" -> rates, "pairs[1]" -> pair 2
    function showError(body) {
      clearErrors();
      const place = body.place || "";
      const key = place.replace(/\[.*$/, "");
      const index = /^pairs\[(\d+)\]/.exec(place);
      let at = null;
      if (index) at = pairsBox.children[Number(index[1])];
      else if (key === "from" || key === "to") at = pairsBox.children[0];
      else if (key) at = form.querySelector(`.measure-field[data-key="${CSS.escape(key)}"]`);
      if (at && !at.hidden) {
        at.classList.add("invalid");
        at.querySelector(":scope > .measure-error").textContent = body.message || body.error;
      } else {
        general.textContent = body.error;
      }
      state.formError = {place: body.place || null, message: body.message || body.error};
    }

    let checks = 0;
    let timer = null;
    async function check(body) {
      const mine = ++checks;
      let r;
      try {
        r = await fetch("/api/labs/" + encodeURIComponent(ctx.lab) + "/measurements/check",
          {method: "POST", credentials: "same-origin",
           headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
      } catch (e) { return; }
      const answer = await r.json().catch(() => ({error: r.status + " " + r.statusText}));
      if (mine !== checks) return;  // a newer check is under way
      if (r.ok) {
        clearErrors();
        state.formError = null;
        startB.disabled = running();
      } else {
        showError(answer);
        startB.disabled = true;
      }
      state.checked = (state.checked || 0) + 1;
    }
    function changed() {
      showKind();
      ta.value = JSON.stringify(request());
      clearTimeout(timer);
      timer = setTimeout(() => check(request()), CHECK_DELAY_MS);
    }
    form.addEventListener("input", e => { if (e.target !== ta) changed(); });
    form.addEventListener("change", e => { if (e.target !== ta) changed(); });
    ta.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        let body;
        try { body = JSON.parse(ta.value); } catch (e) {
          showError({error: "not JSON: " + e.message});
          startB.disabled = true;
          return;
        }
        check(body);
      }, CHECK_DELAY_MS);
    });

    // ------------------------------------------------------------ following a measurement
    function running() { return !!(state.job && state.job.status === "running"); }

    function interval(r) {
      if (!r.intervals) return "";
      return Object.entries(r.intervals).map(([g, [lo, hi]]) =>
        g.toUpperCase() + " [" + (lo === null ? "–" : fmt(lo)) + ", " +
        (hi === null ? "–" : fmt(hi)) + "]" + ((r.done || []).includes(g) ? " done" : ""))
        .join("; ") + (r.bracketed ? " (bracketed by the trials)" : "");
    }

    function trials(job) {
      table.textContent = "";
      const head = el("tr");
      for (const h of ["trial", "purpose", "offered (pps)", "sent (pps)", "received (pps)",
                       "loss (%)", job.type === "ndr" ? "interval (pps)" : null,
                       "lost at (packets)"]) {
        if (h !== null) head.appendChild(el("th", {}, h));
      }
      table.appendChild(head);
      for (const r of job.rows || []) {
        const tr = el("tr", {dataset: {index: r.index}});
        if (r.lost > 0) tr.className = "dropping";
        const lostAt = Object.entries(r.loss_by_node || {}).filter(([, c]) => c > 0)
          .map(([n, c]) => n + " " + c.toLocaleString()).join(", ");
        const cells = [String(r.index), r.purpose || "",
                       r.offered_pps === null ? "max" : fmt(r.offered_pps), fmt(r.sent_pps),
                       fmt(r.received_pps),
                       r.loss_ratio === null || r.loss_ratio === undefined ? "–"
                         : (100 * r.loss_ratio).toFixed(3) + (r.measurement_limited ? " (limited)" : ""),
                       job.type === "ndr" ? interval(r) : null, lostAt];
        for (const c of cells) if (c !== null) tr.appendChild(el("td", {}, c));
        table.appendChild(tr);
      }
    }

    function shown(job) {
      state.job = job;
      const n = (job.rows || []).length;
      const words = {running: "running", done: "done", stopped: "stopped", failed: "failed"};
      const kinds = Object.fromEntries(KINDS);
      document.getElementById("measure-status").textContent =
        "measurement " + job.id + " (" + (kinds[job.type] || job.type) + "): " +
        (words[job.status] || job.status) +
        ", " + n + " trial" + (n === 1 ? "" : "s") +
        (job.error && job.status !== "stopped" ? ": " + job.error.error : "");
      trials(job);
      const last = (job.rows || [])[n - 1];
      if (last) {
        state.trialLoss = last.loss_by_node;
        ctx.graph().setLoss(last.loss_by_node || {});  // where this trial's packets were lost
        state.painted = state.painted || [];
        if (!state.painted.length || state.painted[state.painted.length - 1].index !== last.index) {
          state.painted.push({index: last.index, status: job.status,
                              nodes: ctx.graph().cy.nodes(".lossy").map(n => n.id()).sort()});
        }
      }
      stopB.disabled = job.status !== "running";
      startB.disabled = job.status === "running" || !!state.formError;
    }

    async function follow(id) {
      const j = await ctx.api("/api/measurements/" + id);
      shown(j);
      if (j.status === "running") {
        ctx.later(setTimeout(() => follow(id).catch(e => ctx.say(e.message)), POLL_MS));
      } else {
        state.trialLoss = null;
        ctx.ended();
      }
    }

    form.onsubmit = async function (e) {
      e.preventDefault();
      let body;
      try { body = JSON.parse(ta.value); } catch (err) {
        showError({error: "not JSON: " + err.message});
        return;
      }
      try {
        startB.disabled = true;
        const job = await ctx.api("/api/labs/" + encodeURIComponent(ctx.lab) + "/measurements",
          {method: "POST", headers: {"Content-Type": "application/json"},
           body: JSON.stringify(body)});
        state.painted = [];
        shown(Object.assign({rows: []}, job));
        await follow(job.id);
      } catch (err) {
        general.textContent = err.message;
        startB.disabled = false;
      }
    };
    stopB.onclick = async function () {
      if (!running()) return;
      stopB.disabled = true;
      document.getElementById("measure-status").textContent += ", stopping…";
      try {
        await ctx.api("/api/measurements/" + state.job.id, {method: "DELETE"});
        await follow(state.job.id);
      } catch (err) { ctx.say(err.message); }
    };

    showKind();
    ta.value = JSON.stringify(request());
    check(request());
    return {request: request};
  }

  window.SfclabMeasure = {panel: panel, fields: FIELDS};
})();
