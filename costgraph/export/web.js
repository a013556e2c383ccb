// costgraph's offline calculator (costgraph.export.web): builds the form from the page's
// JSON data and recomputes every figure with exact BigInt arithmetic on each input.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("cg-data").textContent);
  const CG = module.exports;                       // the generated functions (costgraph codegen --lang javascript)
  const app = document.getElementById("app");
  const inputs = {};                               // name -> <input> or <select>

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  // 1234567n -> "1,234,567"
  function grouped(n) {
    const s = (n < 0n ? -n : n).toString();
    return (n < 0n ? "-" : "") + s.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  // "0.45" -> [45n, 100n]; null when the text is not a plain decimal
  function decimal(text) {
    const m = /^\s*([0-9]{1,12})(?:\.([0-9]{1,12}))?\s*$/.exec(text);
    if (!m) return null;
    const frac = m[2] || "";
    return [BigInt(m[1] + frac), 10n ** BigInt(frac.length)];
  }

  // q / r (positive BigInts) rounded down to `digits` significant digits, as decimal text
  function significant(q, r, digits) {
    const lo = 10n ** BigInt(digits - 1), hi = lo * 10n;
    let k = digits - (q.toString().length - r.toString().length);
    const at = (k) => (k >= 0 ? (q * 10n ** BigInt(k)) / r : q / (r * 10n ** BigInt(-k)));
    let n = at(k);
    while (n >= hi) n = at(--k);
    while (n < lo) n = at(++k);
    if (k <= 0) return (n * 10n ** BigInt(-k)).toString();
    const s = n.toString().padStart(k + 1, "0");
    return (s.slice(0, s.length - k) + "." + s.slice(s.length - k)).replace(/\.?0+$/, "");
  }

  // n / 10^9 rounded to two decimals (half up), as costgraph train prints GB
  function gb(n) {
    const cents = (n * 100n + 500000000n) / 1000000000n;
    return (cents / 100n).toString() + "." + (cents % 100n).toString().padStart(2, "0") + " GB";
  }

  function field(name, meaning, value, pattern) {
    const input = el("input", {id: "in-" + name, "data-name": name, type: "text", inputmode: "numeric",
                               maxlength: "40", autocomplete: "off", spellcheck: "false", pattern: pattern});
    input.value = value === null || value === undefined ? "" : String(value);
    inputs[name] = input;
    return el("label", {}, el("span", {class: "name"}, name), input, el("span", {class: "meaning"}, meaning));
  }

  function select(name, label, options, value) {
    const s = el("select", {id: "in-" + name, "data-name": name});
    for (const [v, text] of options) s.append(el("option", {value: String(v)}, text));
    s.value = String(value);
    inputs[name] = s;
    return el("label", {}, el("span", {class: "name"}, label), s);
  }

  function outputRow(id, label, unit, formula) {
    return el("tr", {}, el("th", {scope: "row"}, label), el("td", {id: "v-" + id, class: "value"}, ""),
              el("td", {class: "unit"}, unit), el("td", {class: "formula"}, formula || ""));
  }

  function build() {
    app.textContent = "";
    app.append(el("h1", {}, "costgraph calculator: ", el("code", {}, DATA.model)));
    if (DATA.command) app.append(el("p", {class: "command"}, "Regenerate with ", el("code", {}, DATA.command)));
    const dims = el("fieldset", {}, el("legend", {}, "Model dimensions"));
    for (const d of DATA.dims) dims.append(field(d.name, d.meaning, d.value, "[0-9]+"));
    const layout = el("fieldset", {}, el("legend", {}, "Layout"));
    for (const d of DATA.layout) layout.append(field(d.name, d.meaning, d.value, "[0-9]+"));
    layout.append(select("zero", "ZeRO stage", DATA.zero.map((z) => [z.value, z.value + ": " + z.text]),
                         DATA.start.zero));
    layout.append(select("recompute", "recompute", DATA.recompute.map((r) => [r, r]), DATA.start.recompute));
    const hw = el("fieldset", {}, el("legend", {}, "Hardware"));
    hw.append(select("hardware", "device", DATA.hardware.map((h) => [h.key, h.key + " (" + h.name + ")"]),
                     DATA.start.hardware));
    hw.append(field("mfu", "model FLOPs utilization, a decimal in (0, 1]", DATA.start.mfu, "[0-9.]+"));
    app.append(el("form", {id: "inputs", autocomplete: "off"}, dims, layout, hw));

    const costs = el("table", {id: "costs"}, el("caption", {}, "Costs (exact)"),
                     el("tr", {}, el("th", {}, "quantity"), el("th", {}, "value"), el("th", {}, "unit"),
                        el("th", {}, "closed form")));
    for (const q of DATA.quantities) costs.append(outputRow(q.fn, q.scope + ": " + q.meaning, q.unit, q.formula));
    const train = el("table", {id: "training"}, el("caption", {}, "Training memory per device (bytes; GB = 10\u2079 bytes)"),
                     el("tr", {}, el("th", {}, "part"), el("th", {}, "value"), el("th", {}, "unit"),
                        el("th", {}, "closed form")));
    for (const c of ["weights", "gradients", "optimizer", "activations", "total"]) {
      train.append(outputRow("mem-" + c, c, "B", ""));
    }
    train.append(outputRow("stage", "most loaded stage", "", ""));
    train.append(outputRow("capacity", "device memory", "B", ""));
    train.append(outputRow("reserve", "kept free (" + DATA.reserve + " of it)", "B", ""));
    train.append(outputRow("fits", "verdict", "", ""));
    train.append(outputRow("flops", "model FLOPs per device per iteration", "FLOP", DATA.training.flops.formula));
    train.append(outputRow("time", "compute time per iteration at the MFU (no communication, no bubble; " +
                           "rounded down to " + DATA.time_digits + " significant digits)", "s", ""));
    app.append(costs, train);
    const conv = el("ul", {id: "conventions"});
    for (const c of DATA.conventions) conv.append(el("li", {}, c));
    app.append(el("h2", {}, "Conventions"), conv);
    for (const input of Object.values(inputs)) {
      input.addEventListener("input", update);
      input.addEventListener("change", update);
    }
  }

  // the typed dimensions as BigInts; an empty field or one that is not a whole number is null
  // (never the configuration's default: the generated functions refuse it and name it)
  function dimensions() {
    const dims = {};
    for (const d of DATA.dims.concat(DATA.layout)) {
      const text = inputs[d.name].value.trim();
      const ok = /^[0-9]{1,40}$/.test(text);
      dims[d.name] = ok ? BigInt(text) : null;
      inputs[d.name].classList.toggle("bad", !ok);
    }
    return dims;
  }

  function show(id, value, text) {
    const cell = document.getElementById("v-" + id);
    cell.classList.toggle("error", value === null);
    if (value === null) {
      cell.removeAttribute("data-value");
      cell.textContent = text;
    } else {
      cell.setAttribute("data-value", value.toString());
      cell.textContent = text === undefined ? grouped(value) : text;
    }
  }

  function compute(fn, dims) {
    try {
      return [CG[fn](dims), null];
    } catch (e) {
      if (!(e instanceof TypeError)) return [null, e.message];
      const name = /^(\S+) must be/.exec(e.message);
      return [null, name ? name[1] + ": not a whole number" : e.message];
    }
  }

  function update() {
    const dims = dimensions();
    for (const q of DATA.quantities) {
      const [v, err] = compute(q.fn, dims);
      show(q.fn, v, v === null ? err : undefined);
    }
    training(dims);
  }

  function training(dims) {
    const cell = DATA.training.memory[inputs.zero.value][inputs.recompute.value];
    const sets = dims.PP === 1n ? ["single"] : ["first", "last"];
    let best = null, bestSet = null, failure = null;
    if (dims.PP !== 1n && !cell.first) failure = "PP must be 1: the model has no repeated layers to split into stages";
    for (const set of failure ? [] : sets) {
      const [total, err] = compute(cell[set].total.fn, dims);
      if (total === null) { failure = err; break; }
      if (best === null || total > best) { best = total; bestSet = set; }
    }
    for (const c of ["weights", "gradients", "optimizer", "activations", "total"]) {
      const row = document.getElementById("v-mem-" + c).parentNode.lastChild;
      row.textContent = (cell[bestSet || sets[0]] || cell.single)[c].formula;
      if (failure) { show("mem-" + c, null, failure); continue; }
      const [v, err] = compute(cell[bestSet][c].fn, dims);
      show("mem-" + c, v, v === null ? err : grouped(v) + "  (" + gb(v) + ")");
    }
    const stage = document.getElementById("v-stage");
    stage.setAttribute("data-value", failure ? "" : bestSet);
    stage.textContent = failure ? "" : {single: "the whole model", first: "stage 0 (first)",
                                        last: "stage PP-1 (last)"}[bestSet];
    verdict(best, failure);
    const [flops, ferr] = compute(DATA.training.flops.fn, dims);
    show("flops", flops, flops === null ? ferr : undefined);
    timeRow(flops);
  }

  function verdict(total, failure) {
    const hw = DATA.hardware.find((h) => h.key === inputs.hardware.value);
    const capacity = BigInt(hw.memory);
    const [num, den] = decimal(DATA.reserve);
    const reserve = (capacity * num + den - 1n) / den;          // rounded up to a byte
    show("capacity", capacity, grouped(capacity) + "  (" + gb(capacity) + ")");
    show("reserve", reserve);
    if (failure || total === null) { show("fits", null, ""); return; }
    const room = capacity - reserve - total;
    show("fits", room >= 0n ? 1n : 0n, room >= 0n ? "fits (" + grouped(room) + " B to spare)"
                                                   : "does not fit (" + grouped(-room) + " B over)");
  }

  function timeRow(flops) {
    const hw = DATA.hardware.find((h) => h.key === inputs.hardware.value);
    const rate = decimal(inputs.mfu.value);
    inputs.mfu.classList.toggle("bad", rate === null || rate[0] === 0n || rate[0] > rate[1]);
    if (flops === null) { show("time", null, ""); return; }
    if (rate === null || rate[0] === 0n || rate[0] > rate[1]) { show("time", null, "MFU must be in (0, 1]"); return; }
    const q = flops * rate[1], r = BigInt(hw.peak) * rate[0];
    const text = significant(q, r, DATA.time_digits);
    const cell = document.getElementById("v-time");
    cell.classList.remove("error");
    cell.setAttribute("data-value", q.toString() + "/" + r.toString());
    cell.textContent = text;
  }

  // calc.html#h=4096&TP=2&zero=1: set the inputs as if typed
  function fromFragment() {
    const frag = location.hash.replace(/^#/, "");
    if (!frag || frag.length > 4000) return;
    for (const part of frag.split("&")) {
      const at = part.indexOf("=");
      if (at < 1) continue;
      let name, value;
      try {
        name = decodeURIComponent(part.slice(0, at));
        value = decodeURIComponent(part.slice(at + 1));
      } catch (e) {
        continue;
      }
      const input = Object.prototype.hasOwnProperty.call(inputs, name) ? inputs[name] : null;
      if (input === null) continue;
      input.value = value;
      input.dispatchEvent(new Event(input.tagName === "SELECT" ? "change" : "input", {bubbles: true}));
    }
  }

  build();
  update();
  fromFragment();
  window.addEventListener("hashchange", fromFragment);
})();
