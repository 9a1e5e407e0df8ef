// attnlab serve: drawing on canvases (never one DOM node per weight). Token text is data: it is drawn
// with fillText or set with textContent, never parsed as markup.
(function () {
  "use strict";
  var FONT = "13px ui-monospace, Menlo, Consolas, monospace";
  var ROW = 20; // px per token in the lines view

  // {shape, base64} of little-endian float32 -> Float32Array (the server packs exactly what it computed)
  function decode(packed) {
    var bin = atob(packed.base64), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new Float32Array(bytes.buffer);
  }

  function headColour(h, n, alpha) {
    var hue = Math.round(360 * h / Math.max(n, 1));
    return "hsla(" + hue + ", 72%, 42%, " + (alpha === undefined ? 1 : alpha) + ")";
  }

  // a share in [0, 1] as a background: white to the accent blue
  function shade(t) {
    t = Math.max(0, Math.min(1, t));
    return "rgb(" + Math.round(255 - 219 * t) + "," + Math.round(255 - 169 * t) + "," + Math.round(255 - 89 * t) + ")";
  }

  function textWidth(ctx, tokens, most) {
    var m = 30;
    tokens.forEach(function (t) { m = Math.max(m, ctx.measureText(t).width); });
    return Math.min(m, most || 200);
  }

  // The lines view: tokens on both sides; from query `query` one curve per (head, key) with weight >= min.
  // weight(h, j) gives A[query, j] of head h. Returns the edges drawn: [{head, key, weight}].
  function lines(canvas, tokens, query, heads, nHeads, weight, min) {
    var ctx = canvas.getContext("2d");
    ctx.font = FONT;
    var w = textWidth(ctx, tokens), width = Math.round(2 * w + 300);
    canvas.width = width;
    canvas.height = tokens.length * ROW + 16;
    ctx = canvas.getContext("2d");
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    var x0 = w + 20, x1 = width - w - 20, edges = [];
    var y = function (i) { return 8 + i * ROW + ROW / 2; };
    if (query !== null) {
      ctx.fillStyle = "rgba(36, 86, 166, 0.12)";
      ctx.fillRect(0, y(query) - ROW / 2, x0, ROW);
      heads.forEach(function (h) {
        for (var j = 0; j < tokens.length; j++) {
          var a = weight(h, j);
          if (!(a > 0) || a < min) continue; // a zero weight (a masked key) is no edge
          edges.push({ head: h, key: j, weight: a });
          ctx.strokeStyle = headColour(h, nHeads, 0.25 + 0.75 * a);
          ctx.lineWidth = 0.5 + 7 * a;
          ctx.beginPath();
          ctx.moveTo(x0 + 4, y(query));
          ctx.bezierCurveTo((x0 + x1) / 2, y(query), (x0 + x1) / 2, y(j), x1 - 4, y(j));
          ctx.stroke();
        }
      });
    }
    ctx.fillStyle = "#1d2330";
    ctx.textAlign = "right";
    tokens.forEach(function (t, k) { ctx.fillText(t, x0 - 6, y(k), w); });
    ctx.textAlign = "left";
    tokens.forEach(function (t, k) { ctx.fillText(t, x1 + 6, y(k), w); });
    canvas.dataset.x0 = String(x0);
    canvas.dataset.row = String(ROW);
    canvas.dataset.count = String(edges.length);
    return edges;
  }

  // A heatmap of m [rows x cols] (row-major) with labels; colour(v) gives each cell's fill; masked(i, j)
  // cells are hatched grey (the causal mask). Returns the geometry {left, top, cell}.
  function heatmap(canvas, m, rowLabels, colLabels, colour, masked, mark) {
    var rows = rowLabels.length, cols = colLabels.length;
    var cell = Math.max(4, Math.min(26, Math.floor(560 / Math.max(rows, cols))));
    var labels = cell >= 9, ctx = canvas.getContext("2d");
    ctx.font = "11px ui-monospace, Menlo, Consolas, monospace";
    var left = labels ? textWidth(ctx, rowLabels, 150) + 10 : 4, top = labels ? textWidth(ctx, colLabels, 150) + 10 : 4;
    canvas.width = left + cell * cols + 4;
    canvas.height = top + cell * rows + 4;
    ctx = canvas.getContext("2d");
    for (var i = 0; i < rows; i++) {
      for (var j = 0; j < cols; j++) {
        var x = left + j * cell, yy = top + i * cell;
        if (masked && masked(i, j)) {
          ctx.fillStyle = "#eceef2";
          ctx.fillRect(x, yy, cell, cell);
          ctx.strokeStyle = "#b9bfcb";
          ctx.lineWidth = 1;
          ctx.beginPath();
          ctx.moveTo(x, yy + cell);
          ctx.lineTo(x + cell, yy);
          ctx.stroke();
        } else {
          ctx.fillStyle = colour(m[i * cols + j]);
          ctx.fillRect(x, yy, cell, cell);
        }
      }
    }
    if (labels) {
      ctx.font = "11px ui-monospace, Menlo, Consolas, monospace";
      ctx.fillStyle = "#1d2330";
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      rowLabels.forEach(function (t, r) { ctx.fillText(t, left - 4, top + (r + 0.5) * cell, left - 8); });
      ctx.save();
      ctx.translate(left, top - 4);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = "left";
      colLabels.forEach(function (t, c) { ctx.fillText(t, 0, (c + 0.5) * cell, top - 8); });
      ctx.restore();
    }
    if (mark !== null && mark !== undefined && mark < rows) {
      ctx.strokeStyle = "#d9480f";
      ctx.lineWidth = 1.5;
      ctx.strokeRect(left, top + mark * cell, cell * cols, cell);
    }
    canvas.dataset.left = String(left);
    canvas.dataset.top = String(top);
    canvas.dataset.cell = String(cell);
    return { left: left, top: top, cell: cell, rows: rows, cols: cols };
  }

  // the (row, column) under a mouse event on a heatmap drawn with geometry g, or null
  function cellAt(canvas, g, ev) {
    var r = canvas.getBoundingClientRect();
    var sx = canvas.width / r.width, sy = canvas.height / r.height;
    var j = Math.floor(((ev.clientX - r.left) * sx - g.left) / g.cell);
    var i = Math.floor(((ev.clientY - r.top) * sy - g.top) / g.cell);
    return (i >= 0 && i < g.rows && j >= 0 && j < g.cols) ? [i, j] : null;
  }

  // blue for positive, red for negative, white at 0, full colour at |v| = scale
  function diverging(scale) {
    return function (v) {
      var t = Math.max(-1, Math.min(1, scale > 0 ? v / scale : 0));
      if (t >= 0) return shade(t);
      var u = -t;
      return "rgb(" + Math.round(255 - 38 * u) + "," + Math.round(255 - 183 * u) + "," + Math.round(255 - 195 * u) + ")";
    };
  }

  window.attnDraw = {
    decode: decode, headColour: headColour, shade: shade, lines: lines, heatmap: heatmap, cellAt: cellAt,
    diverging: diverging
  };
})();
