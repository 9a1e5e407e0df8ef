// attnlab attention explorer. Reads the weights A [L, h, T_q, T_k] embedded as JSON data and draws them
// on canvases (never one DOM node per weight). Token text is data: it is only ever set with textContent
// or drawn with fillText, never parsed as markup.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("attn-data").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var ROW = 20; // px per token row in the line view

  function decodeBase64(b64) {
    var bin = atob(b64);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes.buffer;
  }

  function halfToFloat(h) { // IEEE 754 binary16 -> number
    var s = (h & 0x8000) ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
    if (e === 0) return s * Math.pow(2, -14) * (f / 1024);
    if (e === 31) return f ? NaN : s * Infinity;
    return s * Math.pow(2, e - 15) * (1 + f / 1024);
  }

  function decodeWeights(view) {
    var buf = decodeBase64(view.weights);
    if (view.dtype === "float32") return new Float32Array(buf);
    var half = new Uint16Array(buf), out = new Float32Array(half.length);
    for (var i = 0; i < half.length; i++) out[i] = halfToFloat(half[i]);
    return out;
  }

  DATA.views.forEach(function (v) { v.w = decodeWeights(v); });

  var state = { view: 0, layer: 0, head: -1, query: null };

  function view() { return DATA.views[state.view]; }
  // the head's detector scores above 0.4 ("prev 0.93"), after a separator; "" when none
  function badge(v, l, h, sep) { var b = v.badges && v.badges[l][h]; return b ? sep + b : ""; }
  function weight(v, l, h, i, j) { return v.w[((l * v.heads + h) * v.tq + i) * v.tk + j]; }
  function headColour(h, n, alpha) {
    var hue = Math.round(360 * h / Math.max(n, 1));
    return "hsla(" + hue + ", 72%, 42%, " + (alpha === undefined ? 1 : alpha) + ")";
  }
  function selectedHeads(v) {
    if (state.head >= 0) return [state.head];
    var hs = [];
    for (var h = 0; h < v.heads; h++) hs.push(h);
    return hs;
  }
  // the matrix the heatmap shows: one head, or the mean over heads when "all heads" is chosen
  function matrix(v, l, head) {
    var n = v.tq * v.tk, out = new Float32Array(n);
    if (head >= 0) return v.w.subarray((l * v.heads + head) * n, (l * v.heads + head + 1) * n);
    for (var h = 0; h < v.heads; h++) {
      var off = (l * v.heads + h) * n;
      for (var k = 0; k < n; k++) out[k] += v.w[off + k] / v.heads;
    }
    return out;
  }
  function fmt(w) { return w.toPrecision(6); }

  // ---- controls ----------------------------------------------------------------------------
  function fillSelect(sel, labels, value) {
    while (sel.firstChild) sel.removeChild(sel.firstChild);
    labels.forEach(function (lab) {
      var o = document.createElement("option");
      o.value = String(lab[0]);
      o.textContent = lab[1];
      sel.appendChild(o);
    });
    sel.value = String(value);
  }

  // one name for a layer and a head everywhere: a layer is its module path ("blocks.1"), a head is
  // "layer.head", both counted from 0 ("1.3"), as the CLI and the report write them
  function layerName(v, l) { return (v.layerNames || [])[l] || "layer " + l; }
  function headName(l, h) { return l + "." + h; }

  // the head menu names each head's detector scores for the current layer ("head 1.3 · prev 0.93")
  function fillHeads(v) {
    var heads = [[-1, "all " + v.heads + " heads"]];
    for (var h = 0; h < v.heads; h++) {
      heads.push([h, "head " + headName(state.layer, h) + badge(v, state.layer, h, " · ")]);
    }
    fillSelect($("head-select"), heads, state.head);
  }

  function buildControls() {
    var v = view();
    fillSelect($("view-select"), DATA.views.map(function (x, i) { return [i, x.name]; }), state.view);
    var layers = [];
    for (var l = 0; l < v.layers; l++) layers.push([l, layerName(v, l)]);
    fillSelect($("layer-select"), layers, state.layer);
    fillHeads(v);
    var h, legend = $("legend");
    while (legend.firstChild) legend.removeChild(legend.firstChild);
    for (h = 0; h < v.heads; h++) {
      var s = document.createElement("span");
      s.className = "swatch";
      s.textContent = "h" + h;
      s.style.background = headColour(h, v.heads);
      legend.appendChild(s);
    }
  }

  function buildTokens() {
    var v = view(), box = $("tokens");
    while (box.firstChild) box.removeChild(box.firstChild);
    v.queries.forEach(function (t, i) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "tok";
      b.dataset.index = String(i);
      b.textContent = t;
      b.addEventListener("click", function () { selectQuery(i); });
      box.appendChild(b);
    });
  }

  function updateMeta() {
    var v = view();
    $("model-name").textContent = DATA.model;
    $("view-name").textContent = v.name;
    $("layer-name").textContent = layerName(v, state.layer);
    $("head-name").textContent = state.head < 0 ? "all " + v.heads : headName(state.layer, state.head);
    $("explain").textContent = v.explanation;
    $("sentence").textContent = DATA.sentence;
    $("edge-note").textContent = "Click a token. Lines go to the tokens it attends to (weights of at least " +
      DATA.minWeight + " are drawn); thickness = weight, colour = head.";
    var buttons = $("tokens").children;
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].classList.toggle("selected", i === state.query);
      buttons[i].setAttribute("aria-selected", i === state.query ? "true" : "false");
    }
  }

  // ---- line view: query tokens left, key tokens right ----------------------------------------
  function textWidth(ctx, tokens) {
    var m = 40;
    tokens.forEach(function (t) { m = Math.max(m, ctx.measureText(t).width); });
    return Math.min(m, 220);
  }

  function drawLines() {
    var v = view(), canvas = $("lines"), ctx = canvas.getContext("2d");
    ctx.font = "13px ui-monospace, Menlo, Consolas, monospace";
    var wl = textWidth(ctx, v.queries), wr = textWidth(ctx, v.keys);
    var width = Math.round(wl + wr + 340), rows = Math.max(v.tq, v.tk);
    canvas.width = width;
    canvas.height = rows * ROW + 16;
    ctx = canvas.getContext("2d");
    ctx.font = "13px ui-monospace, Menlo, Consolas, monospace";
    ctx.textBaseline = "middle";
    var x0 = wl + 20, x1 = width - wr - 20;
    var y = function (i) { return 8 + i * ROW + ROW / 2; };
    var edges = [];
    if (state.query !== null) {
      var i = state.query, heads = selectedHeads(v);
      ctx.fillStyle = "rgba(36, 86, 166, 0.12)";
      ctx.fillRect(0, y(i) - ROW / 2, x0, ROW);
      heads.forEach(function (h) {
        for (var j = 0; j < v.tk; j++) {
          var w = weight(v, state.layer, h, i, j);
          if (w <= 0 || w < DATA.minWeight) continue; // a zero weight is no edge
          edges.push({ head: h, query: i, key: j, weight: w });
          ctx.strokeStyle = headColour(h, v.heads, 0.25 + 0.75 * w);
          ctx.lineWidth = 0.5 + 7 * w;
          ctx.beginPath();
          ctx.moveTo(x0 + 4, y(i));
          ctx.bezierCurveTo((x0 + x1) / 2, y(i), (x0 + x1) / 2, y(j), x1 - 4, y(j));
          ctx.stroke();
        }
      });
    }
    ctx.fillStyle = "#1d2330";
    ctx.textAlign = "right";
    v.queries.forEach(function (t, k) { ctx.fillText(t, x0 - 6, y(k), wl); });
    ctx.textAlign = "left";
    v.keys.forEach(function (t, k) { ctx.fillText(t, x1 + 6, y(k), wr); });
    canvas.dataset.x0 = String(x0);
    canvas.dataset.edges = JSON.stringify(edges);
    canvas.dataset.count = String(edges.length);
    drawn = edges;
  }
  var drawn = [];

  // the three heaviest keys of the selected token in each shown head, as text
  function listTopKeys() {
    var v = view(), list = $("top-keys");
    while (list.firstChild) list.removeChild(list.firstChild);
    $("top-title").hidden = state.query === null;
    if (state.query === null) return;
    $("top-title").textContent = "Where \u201c" + v.queries[state.query] + "\u201d looks most (" +
      layerName(v, state.layer) + ")";
    selectedHeads(v).forEach(function (h) {
      var order = [];
      for (var j = 0; j < v.tk; j++) order.push(j);
      var w = function (j) { return weight(v, state.layer, h, state.query, j); };
      order.sort(function (a, b) { return w(b) - w(a); });
      var li = document.createElement("li");
      li.value = h;
      li.dataset.head = String(h);
      li.dataset.top = String(order[0]);
      li.textContent = "head " + headName(state.layer, h) + ": " + order.slice(0, 3).map(function (j) {
        return v.keys[j] + " " + w(j).toFixed(3);
      }).join(", ");
      li.style.color = headColour(h, v.heads);
      list.appendChild(li);
    });
  }

  // ---- heatmap with exact values on hover --------------------------------------------------
  var heat = { cell: 1, left: 0, top: 0 };

  function paint(ctx, m, tq, tk, x, y, w, h) {
    var max = 0;
    for (var k = 0; k < m.length; k++) if (m[k] > max) max = m[k];
    var off = document.createElement("canvas");
    off.width = tk;
    off.height = tq;
    var octx = off.getContext("2d"), img = octx.createImageData(tk, tq);
    for (k = 0; k < m.length; k++) {
      var t = max > 0 ? m[k] / max : 0; // colour scaled to the largest weight shown
      img.data[4 * k] = Math.round(255 - 219 * t);
      img.data[4 * k + 1] = Math.round(255 - 169 * t);
      img.data[4 * k + 2] = Math.round(255 - 89 * t);
      img.data[4 * k + 3] = 255;
    }
    octx.putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = w < tk;
    ctx.drawImage(off, x, y, w, h);
    return max;
  }

  function drawHeatmap() {
    var v = view(), canvas = $("heatmap");
    var cell = Math.max(1, Math.min(28, Math.floor(640 / Math.max(v.tq, v.tk))));
    var labels = cell >= 10;
    var ctx = canvas.getContext("2d");
    ctx.font = "11px ui-monospace, Menlo, Consolas, monospace";
    var left = labels ? textWidth(ctx, v.queries) + 10 : 4, top = labels ? textWidth(ctx, v.keys) + 10 : 4;
    canvas.width = left + cell * v.tk + 4;
    canvas.height = top + cell * v.tq + 4;
    ctx = canvas.getContext("2d");
    var m = matrix(v, state.layer, state.head);
    var max = paint(ctx, m, v.tq, v.tk, left, top, cell * v.tk, cell * v.tq);
    if (labels) {
      ctx.font = "11px ui-monospace, Menlo, Consolas, monospace";
      ctx.fillStyle = "#1d2330";
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      v.queries.forEach(function (t, i) { ctx.fillText(t, left - 4, top + (i + 0.5) * cell, left - 8); });
      ctx.save();
      ctx.translate(left, top - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "left";
      v.keys.forEach(function (t, j) { ctx.fillText(t, 0, (j + 0.5) * cell, top - 8); });
      ctx.restore();
    }
    if (state.query !== null) {
      ctx.strokeStyle = "#d9480f";
      ctx.lineWidth = 1.5;
      ctx.strokeRect(left, top + state.query * cell, cell * v.tk, cell);
    }
    heat = { cell: cell, left: left, top: top };
    $("heatmap-title").textContent = "(" + layerName(v, state.layer) + ", " +
      (state.head < 0 ? "mean of " + v.heads + " heads" : "head " + headName(state.layer, state.head)) +
      "; darkest = " + fmt(max) + ")";
    canvas.dataset.layer = String(state.layer);
    canvas.dataset.head = String(state.head);
    canvas.dataset.left = String(left);
    canvas.dataset.top = String(top);
    canvas.dataset.cell = String(cell);
  }

  function cellAt(ev) {
    var v = view(), r = $("heatmap").getBoundingClientRect();
    var sx = $("heatmap").width / r.width, sy = $("heatmap").height / r.height;
    var j = Math.floor(((ev.clientX - r.left) * sx - heat.left) / heat.cell);
    var i = Math.floor(((ev.clientY - r.top) * sy - heat.top) / heat.cell);
    return (i >= 0 && i < v.tq && j >= 0 && j < v.tk) ? [i, j] : null;
  }

  function hover(ev) {
    var tip = $("tooltip"), ij = cellAt(ev);
    if (!ij) { tip.hidden = true; return; }
    var v = view(), m = matrix(v, state.layer, state.head), w = m[ij[0] * v.tk + ij[1]];
    tip.textContent = v.queries[ij[0]] + " \u2192 " + v.keys[ij[1]] + ": " + fmt(w) +
      (state.head < 0 ? " (mean of heads)" : "");
    tip.dataset.query = String(ij[0]);
    tip.dataset.key = String(ij[1]);
    tip.dataset.weight = String(w);
    var wrap = $("heatmap-wrap").getBoundingClientRect();
    tip.style.left = (ev.clientX - wrap.left + 12) + "px";
    tip.style.top = (ev.clientY - wrap.top + 12) + "px";
    tip.hidden = false;
  }

  // ---- model view: layers x heads as small heatmaps ----------------------------------------
  function buildModelView() {
    var v = view(), grid = $("model-view");
    while (grid.firstChild) grid.removeChild(grid.firstChild);
    var size = Math.max(28, Math.min(72, Math.floor(900 / v.heads) - 8));
    $("badge-legend").hidden = !(v.badges || []).some(function (row) { return row.some(Boolean); });
    grid.style.gridTemplateColumns = "max-content repeat(" + v.heads + ", " + (size + 2) + "px)";
    var corner = document.createElement("div");
    grid.appendChild(corner);
    for (var h = 0; h < v.heads; h++) {
      var c = document.createElement("div");
      c.className = "col-label";
      c.textContent = "head " + h;
      grid.appendChild(c);
    }
    for (var l = 0; l < v.layers; l++) {
      var lab = document.createElement("div");
      lab.className = "row-label";
      lab.textContent = layerName(v, l);
      grid.appendChild(lab);
      for (h = 0; h < v.heads; h++) {
        var cv = document.createElement("canvas");
        cv.width = size;
        cv.height = size;
        cv.className = "thumb";
        cv.dataset.layer = String(l);
        cv.dataset.head = String(h);
        cv.title = "head " + headName(l, h) + " (" + layerName(v, l) + ")" + badge(v, l, h, ": ") +
          ": click to enlarge";
        if (badge(v, l, h, "")) cv.classList.add("badged");
        paint(cv.getContext("2d"), matrix(v, l, h), v.tq, v.tk, 0, 0, size, size);
        cv.addEventListener("click", enlarge);
        grid.appendChild(cv);
      }
    }
  }

  function enlarge(ev) {
    state.layer = Number(ev.currentTarget.dataset.layer);
    state.head = Number(ev.currentTarget.dataset.head);
    $("layer-select").value = String(state.layer);
    fillHeads(view());
    render();
    $("heatmap-section").scrollIntoView({ block: "start" });
  }

  function markThumbs() {
    var thumbs = $("model-view").querySelectorAll("canvas.thumb");
    for (var k = 0; k < thumbs.length; k++) {
      var t = thumbs[k];
      var on = Number(t.dataset.layer) === state.layer && (state.head < 0 || Number(t.dataset.head) === state.head);
      t.classList.toggle("current", on);
    }
  }

  // ---- state changes -----------------------------------------------------------------------
  function render() { updateMeta(); drawLines(); listTopKeys(); drawHeatmap(); markThumbs(); }

  function selectQuery(i) { state.query = i; render(); }

  function setView(k) {
    state.view = k;
    state.layer = Math.min(state.layer, DATA.views[k].layers - 1);
    state.head = -1;
    state.query = null;
    buildControls();
    buildTokens();
    buildModelView();
    render();
  }

  $("view-select").addEventListener("change", function (e) { setView(Number(e.target.value)); });
  $("layer-select").addEventListener("change", function (e) {
    state.layer = Number(e.target.value);
    fillHeads(view());
    render();
  });
  $("head-select").addEventListener("change", function (e) { state.head = Number(e.target.value); render(); });
  $("heatmap").addEventListener("mousemove", hover);
  $("heatmap").addEventListener("mouseleave", function () { $("tooltip").hidden = true; });
  $("lines").addEventListener("click", function (ev) {
    var r = ev.currentTarget.getBoundingClientRect(), x = ev.clientX - r.left;
    var i = Math.floor((ev.clientY - r.top - 8) / ROW);
    if (x < Number(ev.currentTarget.dataset.x0) && i >= 0 && i < view().tq) selectQuery(i);
  });

  // a small read-only handle for tests and the curious: what is drawn, and the weights behind it
  window.attnExplorer = {
    state: function () { return { view: state.view, layer: state.layer, head: state.head, query: state.query }; },
    drawnEdges: function () { return drawn.slice(); },
    weight: function (l, h, i, j) { return weight(view(), l, h, i, j); },
    views: function () {
      return DATA.views.map(function (v) {
        return { name: v.name, kind: v.kind, layers: v.layers, heads: v.heads, tq: v.tq, tk: v.tk };
      });
    }
  };

  // open on something: the view, layer, head and token chosen by attnlab (opening_focus)
  var init = DATA.initial || { view: 0, layer: 0, head: -1, query: null };
  setView(init.view);
  state.layer = init.layer;
  state.head = init.head;
  state.query = init.query;
  buildControls();
  render();
  if (DATA.back) {
    var a = $("back-link");
    a.href = DATA.back.href;
    a.textContent = DATA.back.text;
    $("back-line").hidden = false;
  }
  (DATA.links || []).forEach(function (link) {
    var a = document.createElement("a");
    a.href = link.href;
    a.textContent = link.text;
    $("links-line").appendChild(a);
    $("links-line").hidden = false;
  });
  document.body.dataset.ready = "true";
})();
