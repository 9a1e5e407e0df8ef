// attnlab serve: the page. Every number comes from the server (attnlab.serve.views); this script only
// asks for it and draws it. Text from the model or the user is set with textContent, never as markup.
(function () {
  "use strict";
  var D = window.attnDraw;
  var $ = function (id) { return document.getElementById(id); };
  var MIN_WEIGHT = 0.01; // lines thinner than this are not drawn
  var SENTENCE = "The animal didn't cross the street because it was too tired.";
  var S = {
    models: [], guide: {}, model: 0, text: "", seq: 0, att: null, w: null, L: 0, H: 0, T: 0, tokens: [],
    layer: 0, head: -1, query: null, detector: "previous", off: {}, edges: [], geo: null, data: {},
    timings: { first: null, last: null }, mathSeq: 0, math: null
  };

  // ---- small helpers ------------------------------------------------------------------------
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmt(x, d) { return x === null || x === undefined ? "\u2013" : Number(x).toFixed(d === undefined ? 3 : d); }
  function model() { return S.models[S.model]; }
  function has(view) { return model().views.indexOf(view) >= 0; }
  function setState(view, state) { $("v-" + view).dataset.state = state; }
  function status(text) { $("status").textContent = text; }
  function showError(err) {
    var message = String(err && err.message || err), fits = /its first (\d+) characters fit/.exec(message);
    $("error").textContent = message;
    $("error").hidden = false;
    $("cut-offer").hidden = !fits;
    if (fits) {
      S.cut = Number(fits[1]);
      $("cut").textContent = "Cut the text to its first " + S.cut + " characters";
      $("cut-note").textContent = "(what this model can read: the results below are from the previous text)";
    }
  }
  function hideError() { $("error").hidden = true; $("cut-offer").hidden = true; }
  // a token's text as shown: spaces, newlines and tabs made visible (a character model's " " is a token)
  function vis(t) {
    return String(t).replace(/ /g, "\u2423").replace(/\n/g, "\u23ce").replace(/\t/g, "\u21e5").replace(/\r/g, "\u240d");
  }
  function row(cells, tag) {
    var tr = el("tr");
    cells.forEach(function (c) { tr.appendChild(c instanceof Node ? c : el(tag || "td", c)); });
    return tr;
  }

  // ---- requests: JSON in, JSON out; a busy server (503) is asked again after Retry-After ------------
  function serverMs(header) {
    var m = /dur=([0-9.]+)/.exec(header || "");
    return m ? Number(m[1]) : null;
  }
  function api(view, body, tries) {
    body.model = S.model;
    var t0 = performance.now();
    return fetch("/api/" + view, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().catch(function () { return { error: "the server answered " + r.status }; }).then(function (data) {
        if (r.status === 503 && (tries || 0) < 5) {
          var wait = 1000 * Number(r.headers.get("Retry-After") || 1);
          status("the server is busy; asking again in " + wait / 1000 + " s");
          return new Promise(function (ok) { setTimeout(ok, wait); }).then(function () {
            return api(view, body, (tries || 0) + 1);
          });
        }
        if (!r.ok) throw new Error(data.error || "the server answered " + r.status);
        hideError();
        return { data: data, server: serverMs(r.headers.get("Server-Timing")), total: performance.now() - t0 };
      });
    });
  }
  // ask for one view of the current text; show() draws it unless a newer run has started
  function load(view, show, body) {
    var seq = S.seq;
    setState(view, "loading");
    return api(view, body || { text: S.text }).then(function (res) {
      if (seq !== S.seq) return;
      S.data[view] = res.data;
      show(res.data);
      setState(view, "done");
    }, function (err) { if (seq === S.seq) { setState(view, "error"); showError(err); } });
  }

  // ---- the run: attention first (tokens, weights, detectors), then the other views ------------------
  function run() {
    S.seq += 1;
    S.text = $("text").value;
    S.data = {};
    hideError();
    var seq = S.seq, t0 = performance.now();
    setState("tokens", "loading");
    setState("attention", "loading");
    return api("attention", { text: S.text }).then(function (res) {
      if (seq !== S.seq) return;
      var r0 = performance.now();
      S.data.attention = res.data;
      showAttention(res.data);
      var done = performance.now();
      S.timings.last = { server: res.server, request: res.total, render: done - r0, total: done - t0 };
      if (S.timings.first === null) S.timings.first = done; // ms since the page started loading
      status(model().label + ": " + S.T + " tokens; computed in " + fmt(res.server, 0) + " ms, answered in " +
        fmt(res.total, 0) + " ms, drawn in " + fmt(done - r0, 0) + " ms");
      ["tokens", "attention", "heads"].forEach(function (v) { setState(v, "done"); });
      document.body.dataset.ready = "true";
      var rest = [load("audit", showAudit)];
      if (has("next")) rest.push(load("next", showNext));
      if (has("lens")) rest.push(load("lens", showLens));
      if (Object.keys(S.off).length) rest.push(ablate());
      if (S.query !== null) rest.push(loadMath());
      return Promise.all(rest);
    }, function (err) {
      if (seq !== S.seq) return;
      // what is on screen is the previous text's: marked stale, never passed off as this text's
      var sections = document.querySelectorAll("main section");
      for (var k = 0; k < sections.length; k++) {
        if (!sections[k].hidden && sections[k].dataset.state !== "idle") sections[k].dataset.state = "stale";
      }
      showError(err);
      document.body.dataset.ready = "true";
    });
  }

  // ---- tokens and attention -----------------------------------------------------------------
  function weight(l, h, i, j) { return S.w[((l * S.H + h) * S.T + i) * S.T + j]; }
  function heads() {
    if (S.head >= 0) return [S.head];
    var hs = [];
    for (var h = 0; h < S.H; h++) hs.push(h);
    return hs;
  }
  function matrix() { // one head's [T, T], or the mean over heads
    var n = S.T * S.T, off = (S.layer * S.H + Math.max(S.head, 0)) * n;
    if (S.head >= 0) return S.w.subarray(off, off + n);
    var m = new Float32Array(n);
    for (var h = 0; h < S.H; h++) for (var k = 0; k < n; k++) m[k] += S.w[(S.layer * S.H + h) * n + k] / S.H;
    return m;
  }

  function showTokens(data) {
    var box = clear($("tokens"));
    data.tokens.forEach(function (t, i) {
      var b = el("button", vis(t.text), "tok" + (t.unk ? " unk" : ""));
      b.type = "button";
      b.dataset.index = String(i);
      b.setAttribute("role", "option");
      b.title = "id " + t.id + (t.unk ? ": stands for characters this tokenizer cannot represent" : "");
      b.addEventListener("click", function () { selectQuery(i); });
      box.appendChild(b);
    });
    $("unknown").hidden = !data.unknown.length;
    $("unknown").textContent = data.unknown.length ? "Text this tokenizer cannot represent (<unk> or dropped): " +
      data.unknown.join(" ") : "";
  }

  function fillSelect(sel, options, value) {
    clear(sel);
    options.forEach(function (o) { var e = el("option", o[1]); e.value = String(o[0]); sel.appendChild(e); });
    sel.value = String(value);
  }

  function showAttention(data) {
    S.att = data;
    S.w = D.decode(data.weights);
    S.L = data.weights.shape[0]; S.H = data.weights.shape[1]; S.T = data.weights.shape[2];
    S.tokens = data.tokens.map(function (t) { return vis(t.text); });
    S.layer = Math.min(S.layer, S.L - 1);
    S.head = Math.min(S.head, S.H - 1);
    S.query = S.query !== null && S.query < S.T ? S.query : null;
    showTokens(data);
    var layers = [], hs = [[-1, "all " + S.H + " heads"]], legend = clear($("legend"));
    for (var l = 0; l < S.L; l++) layers.push([l, String(l)]);
    for (var h = 0; h < S.H; h++) {
      hs.push([h, String(h)]);
      var s = el("span", String(h), "swatch");
      s.style.background = D.headColour(h, S.H);
      legend.appendChild(s);
    }
    fillSelect($("layer-select"), layers, S.layer);
    fillSelect($("head-select"), hs, S.head);
    drawAttention();
    showHeads(data.heads);
    buildAblateGrid();
  }

  function drawAttention() {
    var q = S.query;
    S.edges = D.lines($("lines"), S.tokens, q, heads(), S.H, function (h, j) { return weight(S.layer, h, q, j); }, MIN_WEIGHT);
    $("lines-title").textContent = q === null ? "Click a token (or a heatmap row): where does it attend?" :
      "Where \u201c" + S.tokens[q] + "\u201d attends: layer " + S.layer + ", " +
      (S.head < 0 ? "every head (colour = head)" : "head " + S.layer + "." + S.head);
    var causal = S.att.causal, m = matrix(), top = 0;
    for (var k = 0; k < m.length; k++) top = Math.max(top, m[k]);
    S.geo = D.heatmap($("heatmap"), m, S.tokens, S.tokens, function (v) { return D.shade(top > 0 ? v / top : 0); },
      causal ? function (i, j) { return j > i; } : null, q);
    $("heatmap").dataset.layer = String(S.layer);
    $("heatmap").dataset.head = String(S.head);
    $("heatmap-title").textContent = "Heatmap A [T_q, T_k], layer " + S.layer + ", " +
      (S.head < 0 ? "mean of " + S.H + " heads" : "head " + S.layer + "." + S.head) +
      "; darkest = " + top.toFixed(3) + (causal ? "; hatched: masked by the causal mask" : "");
    topKeys();
    var buttons = $("tokens").children;
    for (var i = 0; i < buttons.length; i++) buttons[i].setAttribute("aria-selected", i === q ? "true" : "false");
  }

  function topKeys() {
    var list = clear($("top-keys")), q = S.query;
    if (q === null) return;
    heads().forEach(function (h) {
      var order = [];
      for (var j = 0; j < S.T; j++) order.push(j);
      var w = function (j) { return weight(S.layer, h, q, j); };
      order.sort(function (a, b) { return w(b) - w(a); });
      var li = el("li", S.layer + "." + h + ": " + order.slice(0, 3).map(function (j) {
        return S.tokens[j] + " " + w(j).toFixed(3);
      }).join(", "));
      li.dataset.head = String(h);
      li.dataset.top = String(order[0]);
      li.style.color = D.headColour(h, S.H);
      list.appendChild(li);
    });
  }

  function selectQuery(i) { S.query = i; drawAttention(); loadMath(); }

  function hover(ev) {
    var tip = $("tooltip"), ij = S.geo && D.cellAt($("heatmap"), S.geo, ev);
    if (!ij) { tip.hidden = true; return; }
    var w = matrix()[ij[0] * S.T + ij[1]];
    tip.textContent = S.tokens[ij[0]] + " \u2192 " + S.tokens[ij[1]] + ": " + w.toPrecision(4);
    tip.dataset.query = String(ij[0]);
    tip.dataset.key = String(ij[1]);
    tip.dataset.weight = String(w);
    var wrap = $("heatmap-wrap").getBoundingClientRect();
    tip.style.left = (ev.clientX - wrap.left + 12) + "px";
    tip.style.top = (ev.clientY - wrap.top + 12) + "px";
    tip.hidden = false;
  }

  // ---- heads: the detector grid ---------------------------------------------------------------
  function showHeads(hd) {
    if (hd.detectors.indexOf(S.detector) < 0) S.detector = hd.detectors[0];
    fillSelect($("detector-select"), hd.detectors.map(function (d) { return [d, d]; }), S.detector);
    $("applies").textContent = hd.applies;
    var grid = clear($("head-grid")), scores = hd.scores[S.detector];
    var head = [el("th", "layer \\ head")];
    for (var h = 0; h < S.H; h++) head.push(el("th", String(h)));
    grid.appendChild(row(head));
    scores.forEach(function (r, l) {
      var cells = [el("th", String(l))];
      r.forEach(function (v, h) {
        var td = el("td", v.toFixed(2), v > hd.threshold ? "above" : "");
        td.style.background = D.shade(v);
        if (v > 0.6) td.style.color = "#fff";
        td.dataset.layer = String(l);
        td.dataset.head = String(h);
        td.title = "head " + l + "." + h + ": " + S.detector + " score " + v.toFixed(4) + "; click to show its attention";
        td.addEventListener("click", function () {
          S.layer = l; S.head = h;
          $("layer-select").value = String(l); $("head-select").value = String(h);
          drawAttention();
          $("v-attention").scrollIntoView({ block: "start" });
        });
        cells.push(td);
      });
      grid.appendChild(row(cells));
    });
    var groups = {};
    hd.named.forEach(function (n) { (groups[n.detector] = groups[n.detector] || []).push(n.head + " " + n.score.toFixed(2)); });
    var box = clear($("named"));
    box.appendChild(el("span", hd.named.length ? "Named heads (score above " + hd.threshold + "), best first:" :
      "No head scores above " + hd.threshold + " on this text."));
    hd.detectors.forEach(function (d) {
      if (!groups[d]) return;
      var more = groups[d].length > 8 ? " and " + (groups[d].length - 8) + " more" : "";
      var line = el("span", d + ": " + groups[d].slice(0, 8).join(", ") + more, "named");
      line.dataset.detector = d;
      box.appendChild(line);
    });
  }

  // ---- language models: next token, logit lens, generation -----------------------------------
  function topText(top) { return top.map(function (t) { return vis(t.text) + " " + fmt(t.p); }).join(" \u00b7 "); }

  function showNext(data) {
    var table = clear($("next-table"));
    table.appendChild(row(["#", "token", "next token: top 5 (p)", "p(what follows)"], "th"));
    data.positions.forEach(function (p, t) {
      var tr = row([String(t), vis(data.tokens[t].text), topText(p.top), fmt(p.follows)]);
      tr.dataset.position = String(t);
      table.appendChild(tr);
    });
    $("loss").textContent = data.loss === null ? "One token: no next token to score." :
      "Loss over the text: " + fmt(data.loss) + " nats per token (perplexity " + fmt(Math.exp(data.loss), 1) + ").";
  }

  function showLens(data) {
    var table = clear($("lens-table")), n = data.cells[0].length, head = [el("th", "layer \\ position")];
    for (var t = 0; t < n; t++) head.push(el("th", vis(data.tokens[data.first + t].text)));
    table.appendChild(row(head));
    data.cells.forEach(function (cells, l) {
      var name = l === 0 ? "0 (embeddings)" : l === data.cells.length - 1 ? l + " (output)" : String(l);
      var tr = row([el("th", name)]);
      cells.forEach(function (top, t) {
        var td = el("td", vis(top[0].text), data.final_rank[l][t] === 0 ? "final" : "");
        td.style.background = D.shade(top[0].p);
        td.title = topText(top) + "; the output's token ranks " + (data.final_rank[l][t] + 1) + " here";
        td.dataset.layer = String(l);
        td.dataset.position = String(data.first + t);
        tr.appendChild(td);
      });
      table.appendChild(tr);
    });
    $("lens-note").textContent = (data.first > 0 ? "Positions " + data.first + " to " + (data.first + n - 1) +
      " (the last that fit in memory). " : "") + "Each cell: the most likely next token read at that layer; " +
      "shade = its probability; bold: already the output's choice. Hover for the top " + data.cells[0][0].length + ".";
  }

  function showGeneration(data) {
    [["greedy", "gen-greedy"], ["beam", "gen-beam-out"], ["sample", "gen-sample"]].forEach(function (p) {
      var out = clear($(p[1]));
      out.appendChild(el("span", S.text, "prompt"));
      out.appendChild(el("span", data[p[0]].text, "new"));
      out.dataset.ids = JSON.stringify(data[p[0]].ids);
    });
    $("gen-beam-out").title = "score " + fmt(data.beam.score) + " (mean log-probability per token)";
    if (data.beam.note) { $("gen-beam-out").appendChild(el("span", " (" + data.beam.note + ")", "note")); }
  }

  function generate(ev) {
    ev.preventDefault();
    var num = function (id) { var v = $(id).value; return v === "" ? null : Number(v); };
    load("generate", showGeneration, {
      text: S.text, n: num("gen-n"), beam: num("gen-beam"), temperature: num("gen-temperature"),
      top_k: num("gen-top-k"), seed: num("gen-seed")
    });
  }

  // ---- ablation -------------------------------------------------------------------------------
  function buildAblateGrid() {
    var grid = clear($("ablate-grid"));
    var head = [el("th", "layer \\ head")];
    for (var h = 0; h < S.H; h++) head.push(el("th", String(h)));
    grid.appendChild(row(head));
    for (var l = 0; l < S.L; l++) {
      var cells = [el("th", String(l))];
      for (h = 0; h < S.H; h++) cells.push(toggle(l, h));
      grid.appendChild(row(cells));
    }
  }
  function toggle(l, h) {
    var key = l + "." + h, td = el("td"), b = el("button", key, S.off[key] ? "off" : "");
    b.type = "button";
    b.dataset.head = key;
    b.setAttribute("aria-pressed", S.off[key] ? "true" : "false");
    b.addEventListener("click", function () {
      if (S.off[key]) delete S.off[key]; else S.off[key] = true;
      b.classList.toggle("off", !!S.off[key]);
      b.setAttribute("aria-pressed", S.off[key] ? "true" : "false");
      ablate();
    });
    td.appendChild(b);
    return td;
  }
  function ablate() {
    var body = { text: S.text, heads: Object.keys(S.off) };
    if (has("similarity") && $("text-b").value.trim()) body.text_b = $("text-b").value;
    return load("ablate", showAblation, body);
  }
  function showAblation(data) {
    var table = clear($("ablate-table")), off = data.off.length ? data.off.join(", ") : "none";
    if (data.positions) {
      var d = data.loss_after !== null ? data.loss_after - data.loss_before : null;
      $("ablate-summary").textContent = "Heads off: " + off + ". Loss " + fmt(data.loss_before) + " \u2192 " +
        fmt(data.loss_after) + (d === null ? "" : " (" + (d >= 0 ? "+" : "") + fmt(d) + ")") + ".";
      table.appendChild(row(["#", "token", "KL(before \u2016 after)", "top next tokens: p before \u2192 after", "top after"], "th"));
      data.positions.forEach(function (p, t) {
        var change = p.top.map(function (x) { return vis(x.text) + " " + fmt(x.p) + "\u2192" + fmt(x.p_after); }).join(" \u00b7 ");
        var tr = row([String(t), vis(data.tokens[t].text), fmt(p.kl, 4), change, vis(p.argmax_after.text)]);
        tr.dataset.position = String(t);
        tr.dataset.kl = String(p.kl);
        table.appendChild(tr);
      });
      return;
    }
    var text = "Heads off: " + off + ". Cosine of the sentence vector (mean over tokens) with and without them: " +
      fmt(data.vector_cosine, 4) + ".";
    if (data.similarity_before !== undefined) {
      text += " Similarity to the second sentence: " + fmt(data.similarity_before, 4) + " \u2192 " + fmt(data.similarity_after, 4) + ".";
    }
    $("ablate-summary").textContent = text;
    table.appendChild(row(["#", "token", "cosine with and without"], "th"));
    data.token_cosine.forEach(function (c, t) { table.appendChild(row([String(t), vis(data.tokens[t].text), fmt(c, 4)])); });
  }

  // ---- encoders: similarity; every model: audit ------------------------------------------------
  function showSimilarity(data) {
    $("cosine").textContent = "cosine " + fmt(data.cosine, 4) + " = the sum of the " + data.tokens_a.length + " \u00d7 " +
      data.tokens_b.length + " token-pair terms (rows: your text, columns: the second sentence).";
    var list = clear($("pairs"));
    data.top.forEach(function (p) {
      list.appendChild(el("li", p.a + " \u2194 " + p.b + ": " + (p.term >= 0 ? "+" : "") + p.term.toFixed(4) + " (" +
        (100 * p.share).toFixed(1) + "% of the cosine)"));
    });
    var flat = [], scale = 0;
    data.terms.forEach(function (r) { r.forEach(function (v) { flat.push(v); scale = Math.max(scale, Math.abs(v)); }); });
    $("terms").hidden = false;
    D.heatmap($("terms"), flat, data.tokens_a, data.tokens_b, D.diverging(scale), null, null);
  }

  function showAudit(data) {
    var table = clear($("params"));
    table.appendChild(row(["group", "parameters", "formula"], "th"));
    Object.keys(data.by_group).forEach(function (g) {
      table.appendChild(row([g, data.by_group[g].toLocaleString("en-US"), data.group_formulas[g] || ""]));
    });
    $("params-total").textContent = "total " + data.total.toLocaleString("en-US") + " = " + data.formula +
      "; the loaded tensors hold " + data.loaded_total.toLocaleString("en-US") +
      (data.loaded_total === data.total ? " (equal)." : " (the audit counts the configuration's parts).");
    var block = clear($("block"));
    $("block-title").textContent = "Shapes in the first block, B = 1, T = " + data.seq;
    block.appendChild(row(["where", "step", "shape"], "th"));
    data.block.forEach(function (s) { block.appendChild(row([s.where, s.step, "[" + s.shape.join(", ") + "]"])); });
  }

  // ---- the notes, live: one query of one head, every number from the server's math view ------------
  function loadMath() {
    if (S.query === null || !has("math")) return Promise.resolve();
    var n = ++S.mathSeq, seq = S.seq;
    setState("math", "loading");
    return api("math", { text: S.text, layer: S.layer, head: Math.max(S.head, 0), position: S.query }).then(function (res) {
      if (n !== S.mathSeq || seq !== S.seq) return;
      S.math = res.data;
      showMath(res.data);
      setState("math", "done");
    }, function (err) { if (n === S.mathSeq) { setState("math", "error"); showError(err); } });
  }
  function vec(xs, n) { // the first n entries of a vector, as text
    var shown = xs.slice(0, n).map(function (x) { return fmt(x, 3); }).join(" ");
    return "[" + shown + (xs.length > n ? " \u2026 " + xs.length + " entries" : "") + "]";
  }
  function norm(xs) { return Math.sqrt(xs.reduce(function (a, x) { return a + x * x; }, 0)); }
  function bar(w, alt) { var b = el("span", null, "bar" + (alt ? " alt" : "")); b.style.width = Math.round(120 * w) + "px"; return b; }
  function stepBox(id, extra) { // one step: its title, its formula (MathML from the server), its concept pages
    var st = null;
    S.guide.math.steps.forEach(function (x) { if (x.id === id) st = x; });
    var box = el("div", null, "step" + (extra ? " " + extra : ""));
    box.dataset.step = id;
    box.appendChild(el("h3", st.title));
    var m = el("div", null, "mathml");
    // the server's fixed formulas (latex2mathml of attnlab's own LaTeX), parsed as XML: no markup is
    // ever assigned as HTML (a MathML namespace keeps the browser drawing it)
    var doc = new DOMParser().parseFromString(st.mathml, "application/xml");
    if (doc.documentElement && doc.documentElement.localName === "math") {
      m.appendChild(document.importNode(doc.documentElement, true));
    }
    box.appendChild(m);
    var p = el("p", "Concept: ", "concepts");
    st.concepts.forEach(function (c, k) {
      var a = el("a", c.title);
      a.href = "/" + c.href;
      if (k) p.appendChild(document.createTextNode(", "));
      p.appendChild(a);
    });
    box.appendChild(p);
    return box;
  }
  function para(box, text, cls) { var p = el("p", text, cls); box.insertBefore(p, box.lastChild); return p; }
  function rowsOf(packedT) { // a packed [T, d] as an array of rows
    var flat = D.decode(packedT), d = packedT.shape[1], out = [];
    for (var i = 0; i < packedT.shape[0]; i++) out.push(Array.prototype.slice.call(flat.subarray(i * d, (i + 1) * d)));
    return out;
  }

  function showMath(m) {
    var box = clear($("math-steps")), tok = function (j) { return vis(m.tokens[j].text); };
    var unscaled = $("math-unscaled").checked, unmasked = $("math-unmasked").checked && m.unmasked;
    $("math-unmasked-label").hidden = !m.unmasked;
    $("math-temperature-label").hidden = !m.temperature;
    $("math-title").textContent = "Head " + m.name + " at query " + m.position + " (\u201c" + tok(m.position) + "\u201d): d_k = " +
      m.d_k + ", " + m.heads + " heads, " + (m.causal ? "a decoder (causal" + (m.window ? ", window " + m.window : "") + ")" : "an encoder") +
      ", " + m.norm_place + "-norm (" + m.norm + "), positions: " + m.positions + ".";
    $("math-title").dataset.head = m.name;
    $("math-title").dataset.position = String(m.position);
    // q, K, V
    var s1 = stepBox("qkv");
    para(s1, "q [" + m.d_k + "] = " + vec(m.q_pre, 8) + ",  \u2016q\u2016 = " + fmt(norm(m.q_pre)), "vec");
    para(s1, "K, V [" + m.tokens.length + ", " + m.d_k + "]: one row per key; key/value head " + m.kv_head +
      (m.group.length > 1 ? " is shared by the GQA group " + m.group.join(", ") : " belongs to this head alone") + ".");
    box.appendChild(s1);
    if (m.rotated) { // RoPE: before and after
      var s2 = stepBox("rope"), kp = rowsOf(m.k_pre), kr = rowsOf(m.k), j0 = m.top[0].key;
      para(s2, "q before " + vec(m.q_pre, 6), "vec");
      para(s2, "q after  " + vec(m.q, 6), "vec");
      para(s2, "k_" + j0 + " (\u201c" + tok(j0) + "\u201d) before " + vec(kp[j0], 6), "vec");
      para(s2, "k_" + j0 + " after  " + vec(kr[j0], 6), "vec");
      para(s2, "Lengths are kept (\u2016q\u2016 " + fmt(norm(m.q_pre)) + " \u2192 " + fmt(norm(m.q)) + "); q\u00b7k depends on the offset " +
        m.position + " \u2212 j only.");
      box.appendChild(s2);
    }
    // scores and the top keys: q.k, the scaled score, the weight side by side
    var s3 = stepBox("scores");
    para(s3, "scale = 1/\u221ad_k = " + fmt(m.scale, 4) + (m.positions === "alibi" ? "; b: the ALiBi bias of this head" : "; b = 0"));
    var t3 = el("table", null, "list");
    t3.id = "math-top";
    t3.appendChild(row(["key", "token", "q\u00b7k", "q\u00b7k/\u221ad_k + b", "weight", ""], "th"));
    m.top.forEach(function (r) {
      var tr = row([String(r.key), el("td", tok(r.key), "tokcell"), fmt(r.raw), fmt(r.score), fmt(r.weight, 4), el("td")]);
      tr.lastChild.appendChild(bar(r.weight));
      tr.dataset.key = String(r.key);
      tr.dataset.weight = String(r.weight);
      t3.appendChild(tr);
    });
    s3.insertBefore(t3, s3.lastChild);
    box.appendChild(s3);
    // mask and softmax: every key's weight, and the what-ifs the server computed
    var s4 = stepBox("weights", "wide");
    var gap = m.checks.softmax;
    para(s4, "Recomputed by the library: softmax(K q \u00b7 scale + b + M) equals the forward's weights (largest gap " +
      gap.toExponential(1) + ")." + (m.causal ? " Keys after " + m.position + " are masked (M = \u2212\u221e)." : " An encoder masks nothing."));
    var alt = unscaled ? m.unscaled.weights : unmasked ? m.unmasked.weights : null;
    var t4 = el("table", null, "list");
    t4.id = "math-weights";
    t4.appendChild(row(["key", "token", "score", "weight", ""].concat(alt ? [unscaled ? "without the scale" : "without the mask", ""] : []), "th"));
    m.weights.forEach(function (w, j) {
      var cells = [String(j), el("td", tok(j), "tokcell"), m.mask[j] ? fmt(m.scores[j]) : "masked", fmt(w, 4), el("td")];
      if (alt) cells.push(el("td", fmt(alt[j], 4), "alt"), el("td"));
      var tr = row(cells, "td");
      tr.children[4].appendChild(bar(w));
      if (alt) tr.lastChild.appendChild(bar(alt[j], true));
      tr.dataset.key = String(j);
      tr.dataset.weight = String(w);
      if (alt) tr.dataset.alt = String(alt[j]);
      if (!m.mask[j]) tr.className = m.causal ? "masked future" : "masked";
      t4.appendChild(tr);
    });
    var wrap = el("div", null, "scroll tall");
    wrap.appendChild(t4);
    s4.insertBefore(wrap, s4.lastChild);
    box.appendChild(s4);
    if (unscaled) {
      var s5 = stepBox("unscaled"), u = m.unscaled;
      var p5 = para(s5, "Entropy " + fmt(u.entropy[0]) + " \u2192 " + fmt(u.entropy[1]) + " nats; largest weight " + fmt(u.max[0]) +
        " \u2192 " + fmt(u.max[1]) + ". Over the keys it sees, Var(q\u00b7k) = " + fmt(u.var_raw, 2) + " and Var(q\u00b7k/\u221ad_k) = " +
        fmt(u.var_scaled, 2) + " (d_k = " + u.d_k + ").");
      p5.id = "math-unscaled-summary";
      para(s5, "Week 1's argument: if the entries of q and k are independent with mean 0 and variance 1, q\u00b7k adds d_k " +
        "products and has variance d_k, so dividing by \u221ad_k brings it back to 1 and keeps softmax from saturating. " +
        "Trained projections need not meet those assumptions: the variances above are this head's own.");
      box.appendChild(s5);
    }
    if (unmasked) {
      var s6 = stepBox("unmasked"), f = m.unmasked;
      var p6 = para(s6, f.future.length ? "Without the mask the future keys would take " + fmt(100 * f.future_share, 1) + "% of the weight: " +
        f.future.map(function (x) { return tok(x.key) + " " + fmt(x.weight); }).join(", ") + "." :
        "The last token has no future key: the mask changes nothing here.");
      p6.id = "math-unmasked-summary";
      box.appendChild(s6);
    }
    // z = a V
    var s7 = stepBox("z");
    para(s7, "z [" + m.d_k + "] = " + vec(m.z, 8), "vec");
    para(s7, "a V recomputed: largest gap " + m.checks.av.toExponential(1) + "; \u2016z\u2016 = " + fmt(norm(m.z)));
    box.appendChild(s7);
    // the layer at this position
    var s8 = stepBox("concat");
    para(s8, "Concat of the " + m.heads + " heads [" + m.heads * m.d_k + "]: \u2016\u00b7\u2016 = " + fmt(m.norms.concat) +
      "; W^O's output o [" + m.d_model + "]: \u2016o\u2016 = " + fmt(m.norms.attn_out));
    box.appendChild(s8);
    var s9 = stepBox(m.norm_place === "pre" ? "residual_pre" : "residual_post");
    var names = m.norm_place === "pre" ?
      [["resid_pre", "x (residual before)"], ["attn_in", "N\u2081(x), what attention read"], ["attn_out", "o"], ["resid_mid", "u = x + o"],
        ["ffn_in", "N\u2082(u), what the FFN read"], ["ffn_out", "FFN(N\u2082(u))"], ["resid_post", "y (residual after)"]] :
      [["resid_pre", "x (residual before)"], ["attn_out", "o"], ["resid_mid", "u = N\u2081(x + o)"], ["ffn_out", "FFN(u)"],
        ["resid_post", "y = N\u2082(u + FFN(u))"]];
    var t9 = el("table", null, "list");
    t9.appendChild(row(["vector [" + m.d_model + "]", "\u2016\u00b7\u2016", "first entries"], "th"));
    names.forEach(function (nm) {
      if (!m.vectors[nm[0]]) return;
      var v = Array.prototype.slice.call(D.decode(m.vectors[nm[0]]));
      t9.appendChild(row([nm[1], fmt(m.norms[nm[0]]), el("td", vec(v, 5), "vec")]));
    });
    s9.insertBefore(t9, s9.lastChild);
    box.appendChild(s9);
    if (m.temperature) { // the next token at the slider's temperature (each one computed by the library)
      var k = Math.min(Number($("math-temperature").value), m.temperature.length - 1), T = m.temperature[k];
      $("math-temperature").max = String(m.temperature.length - 1);
      $("math-temperature-value").textContent = String(T.temperature);
      var s10 = stepBox("next"), t10 = el("table", null, "list");
      t10.id = "math-next";
      t10.dataset.temperature = String(T.temperature);
      t10.appendChild(row(["next token after \u201c" + tok(m.position) + "\u201d", "p at \u03c4 = " + T.temperature, ""], "th"));
      T.top.forEach(function (x) {
        var tr = row([el("td", vis(x.text), "tokcell"), fmt(x.p, 4), el("td")]);
        tr.lastChild.appendChild(bar(x.p));
        tr.dataset.p = String(x.p);
        t10.appendChild(tr);
      });
      s10.insertBefore(t10, s10.lastChild);
      para(s10, "Entropy " + fmt(T.entropy) + " nats: lower \u03c4 sharpens the distribution, higher flattens it.");
      box.appendChild(s10);
    }
  }

  // ---- set-up --------------------------------------------------------------------------------
  function explain() {
    Object.keys(S.guide).forEach(function (view) {
      var section = $("v-" + view);
      if (!section) return;
      var p = clear(section.querySelector(".explain")), g = S.guide[view];
      // {layer}: what one layer of the chosen model is (the server asks the model: decoder or encoder)
      p.appendChild(document.createTextNode(g.text.split("{layer}").join(model().layer) + " "));
      g.concepts.forEach(function (c, k) {
        var a = el("a", c.title);
        a.href = "/" + c.href;
        p.appendChild(document.createTextNode(k ? ", " : "Concept: "));
        p.appendChild(a);
      });
    });
  }

  function chooseModel(i) {
    S.model = i;
    S.off = {};
    S.layer = 0; S.head = -1; S.query = null; S.math = null;
    clear($("math-steps"));
    var sections = document.querySelectorAll("main section");
    for (var k = 0; k < sections.length; k++) {
      var v = sections[k].dataset.view;
      sections[k].hidden = v !== "tokens" && v !== "attention" && !has(v);
      sections[k].dataset.state = "idle";
    }
    $("text").maxLength = 2000;
    $("gen-n").max = String(model().max_new);
    $("gen-beam").max = String(model().max_beam);
    explain();
  }

  $("input-form").addEventListener("submit", function (ev) { ev.preventDefault(); run(); });
  $("text").addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); run(); }
  });
  $("model-select").addEventListener("change", function (ev) { chooseModel(Number(ev.target.value)); run(); });
  $("layer-select").addEventListener("change", function (ev) {
    S.layer = Number(ev.target.value); drawAttention(); if (S.query !== null) loadMath();
  });
  $("head-select").addEventListener("change", function (ev) {
    S.head = Number(ev.target.value); drawAttention(); if (S.query !== null) loadMath();
  });
  ["math-unscaled", "math-unmasked", "math-temperature"].forEach(function (id) {
    $(id).addEventListener("input", function () { if (S.math) showMath(S.math); });
  });
  $("cut").addEventListener("click", function () {
    $("text").value = Array.from($("text").value).slice(0, S.cut).join(""); // code points, as the server counts
    run();
  });
  $("detector-select").addEventListener("change", function (ev) { S.detector = ev.target.value; showHeads(S.att.heads); });
  $("heatmap").addEventListener("mousemove", hover);
  $("heatmap").addEventListener("mouseleave", function () { $("tooltip").hidden = true; });
  $("heatmap").addEventListener("click", function (ev) { var ij = S.geo && D.cellAt($("heatmap"), S.geo, ev); if (ij) selectQuery(ij[0]); });
  $("lines").addEventListener("click", function (ev) {
    var c = ev.currentTarget, r = c.getBoundingClientRect();
    var i = Math.floor((ev.clientY - r.top - 8) / Number(c.dataset.row));
    if (ev.clientX - r.left < Number(c.dataset.x0) && i >= 0 && i < S.T) selectQuery(i);
  });
  $("generate-form").addEventListener("submit", generate);
  $("similarity-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    load("similarity", showSimilarity, { text: S.text, text_b: $("text-b").value });
  });
  $("ablate-clear").addEventListener("click", function () { S.off = {}; buildAblateGrid(); ablate(); });

  // a small read-only handle for tests and the curious: what is drawn and the numbers behind it
  window.attnServe = {
    state: function () {
      return { model: S.model, layer: S.layer, head: S.head, query: S.query, off: Object.keys(S.off).sort() };
    },
    drawnEdges: function () { return S.edges.slice(); },
    weight: function (l, h, i, j) { return weight(l, h, i, j); },
    weights: function () { return Array.prototype.slice.call(S.w); },
    shape: function () { return [S.L, S.H, S.T, S.T]; },
    timings: function () { return JSON.parse(JSON.stringify(S.timings)); },
    math: function () { return S.math; },
    run: run
  };

  // the models and the guide come with the page (JSON data, not a script): the first view is asked for at once
  try {
    var info = JSON.parse($("served").textContent);
    S.models = info.models;
    S.guide = info.guide;
    fillSelect($("model-select"), S.models.map(function (m) { return [m.index, m.name + ": " + m.label]; }), 0);
    $("text").value = SENTENCE;
    $("text-b").value = "A tired dog lay down in the shade.";
    chooseModel(0);
    run();
  } catch (err) { showError(err); document.body.dataset.ready = "true"; }
})();
