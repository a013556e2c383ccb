// costgraph's offline calculator (costgraph.export.web): builds the form from the page's
// JSON data and recomputes every figure with exact BigInt arithmetic on each input.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("cg-data").textContent);
  // each function's closed form is written once (DATA.formulas, costgraph.export.web._writer): put it back
  // beside every {fn} of the training and serving tables (the step time's trees hold no functions)
  (function formulas(node) {
    if (Array.isArray(node)) { node.forEach(formulas); return; }
    if (node === null || typeof node !== "object") return;
    if (typeof node.fn === "string" && node.formula === undefined) node.formula = DATA.formulas[node.fn];
    for (const [k, v] of Object.entries(node)) if (k !== "step") formulas(v);
  })([DATA.training, DATA.serving]);
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

  // exact fractions [num, den] (den > 0) of BigInt, for the step time's tree (costgraph.export.web_tree)
  function bgcd(a, b) { a = a < 0n ? -a : a; b = b < 0n ? -b : b; while (b) [a, b] = [b, a % b]; return a; }
  function frac(n, d) { if (d < 0n) { n = -n; d = -d; } const g = bgcd(n, d) || 1n; return [n / g, d / g]; }
  function cmp(x, y) { const v = x[0] * y[1] - y[0] * x[1]; return v < 0n ? -1 : v > 0n ? 1 : 0; }
  function floorDiv(n, d) { const q = n / d; return (n % d !== 0n && (n < 0n) !== (d < 0n)) ? q - 1n : q; }

  // the value of a tree: a fraction, or (conditions) a boolean; dims: name -> BigInt; defs: shared parts
  // (an array, or a function of the index that evaluates a pool's part on demand)
  function evalTree(node, dims, defs) {
    if (typeof node === "number") return typeof defs === "function" ? defs(node) : defs[node];   // a pool part
    if (typeof node === "string" && !/^[-0-9]/.test(node)) {   // a dimension's or degree's name
      const v = dims[node];
      if (v === null || v === undefined) throw new TypeError(node + " must be a whole number");
      return [v, 1n];
    }
    if (typeof node === "string") {
      const [p, q] = node.split("/");
      return [BigInt(p), q === undefined ? 1n : BigInt(q)];
    }
    if (!Array.isArray(node)) return typeof defs === "function" ? defs(node.t) : defs[node.t];   // {"t": i}
    const op = node[0], args = node.slice(1);
    if (op === "pw") {
      for (const [value, cond] of args) if (evalTree(cond, dims, defs)) return evalTree(value, dims, defs);
      throw new Error("no piece of the step time applies");
    }
    if (op === "or") return args.some((a) => evalTree(a, dims, defs));
    if (op === "and") return args.every((a) => evalTree(a, dims, defs));
    if (op === "not") return !evalTree(args[0], dims, defs);
    const v = args.map((a) => evalTree(a, dims, defs));
    switch (op) {
      case "+": return v.reduce((x, y) => frac(x[0] * y[1] + y[0] * x[1], x[1] * y[1]));
      case "*": return v.reduce((x, y) => frac(x[0] * y[0], x[1] * y[1]));
      case "^": {
        const k = v[1][0];
        const [n, d] = k < 0n ? [v[0][1], v[0][0]] : v[0], e = k < 0n ? -k : k;
        return frac(n ** e, d ** e);
      }
      case "min": return v.reduce((x, y) => (cmp(y, x) < 0 ? y : x));
      case "max": return v.reduce((x, y) => (cmp(y, x) > 0 ? y : x));
      case "floor": return [floorDiv(v[0][0], v[0][1]), 1n];
      case "mod": {                                   // x - y floor(x / y): SymPy's sign, that of y
        const q = floorDiv(v[0][0] * v[1][1], v[0][1] * v[1][0]);
        return frac(v[0][0] * v[1][1] - q * v[1][0] * v[0][1], v[0][1] * v[1][1]);
      }
      case "<=": return cmp(v[0], v[1]) <= 0;
      case "<": return cmp(v[0], v[1]) < 0;
      case "==": return cmp(v[0], v[1]) === 0;
      case "!=": return cmp(v[0], v[1]) !== 0;
    }
    throw new Error("unknown operation " + op);
  }

  function evalProgram(prog, dims) {
    const defs = [];
    for (const d of prog.defs) defs.push(evalTree(d, dims, defs));
    return evalTree(prog.e, dims, defs);
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
    app.append(el("p", {class: "link"}, el("a", {id: "link", href: "#"}, "Link to these inputs"),
                  " (the address holds them: open it to see this page again)"));
    const dims = el("fieldset", {}, el("legend", {}, "Model dimensions"));
    for (const d of DATA.dims) dims.append(field(d.name, d.meaning, d.value, "[0-9]+"));
    const layout = el("fieldset", {}, el("legend", {}, "Layout"));
    for (const d of DATA.layout) layout.append(field(d.name, d.meaning, d.value, "[0-9]+"));
    layout.append(select("zero", "ZeRO stage", DATA.zero.map((z) => [z.value, z.value + ": " + z.text]),
                         DATA.start.zero));
    layout.append(select("recompute", "recompute", DATA.recompute.map((r) => [r, r]), DATA.start.recompute));
    layout.append(select("precision", "precision", DATA.precision.map((p) => [p, p]), DATA.start.precision));
    layout.append(select("optimizer", "optimizer", DATA.optimizer.map((o) => [o, o]), DATA.start.optimizer));
    const hw = el("fieldset", {}, el("legend", {}, "Hardware"));
    hw.append(select("hardware", "device", DATA.hardware.map((h) => [h.key, h.key + " (" + h.name + ")"]),
                     DATA.start.hardware));
    hw.append(field("mfu", "model FLOPs utilization, a decimal in (0, 1]", DATA.start.mfu, "[0-9.]+"));
    const serve = el("fieldset", {}, el("legend", {}, "Serving (costgraph infer)"));
    serve.append(field("prompt", "prompt tokens P per sequence", DATA.start.prompt, "[0-9]+"));
    serve.append(field("generate", "tokens generated G per sequence", DATA.start.generate, "[0-9]+"));
    serve.append(field("batch", "sequences served at once (b in infer's formulas)", DATA.start.batch, "[0-9]+"));
    serve.append(select("kv_dtype", "KV dtype", DATA.kv.map((k) => [k, k]), DATA.start.kv));
    serve.append(select("weights", "weight dtype", DATA.weights.map((w) => [w, w]), DATA.start.weights));
    serve.append(select("serve_tp", "TP (serving)", DATA.serve_tp.map((t) => [t, t]), DATA.start.serve_tp));
    app.append(el("form", {id: "inputs", autocomplete: "off"}, dims, layout, hw, serve));

    const costs = el("table", {id: "costs"}, el("caption", {}, "Costs (exact)"),
                     el("tr", {}, el("th", {}, "quantity"), el("th", {}, "value"), el("th", {}, "unit"),
                        el("th", {}, "closed form")));
    for (const q of DATA.quantities) costs.append(outputRow(q.fn, q.scope + ": " + q.meaning, q.unit, q.formula));
    const train = el("table", {id: "training"}, el("caption", {}, "Training memory per device (bytes; GB = 10\u2079 bytes)"),
                     el("tr", {}, el("th", {}, "part"), el("th", {}, "value"), el("th", {}, "unit"),
                        el("th", {}, "closed form")));
    for (const c of ["weights", "gradients", "optimizer", "activations", "fp8", "total"]) {
      train.append(outputRow("mem-" + c, c === "fp8" ? "FP8 buffers (Transformer Engine's weight copies, " +
                             "transposes, scales, amax history)" : c, "B", ""));
    }
    train.append(outputRow("stage", "most loaded stage", "", ""));
    train.append(outputRow("capacity", "device memory", "B", ""));
    train.append(outputRow("reserve", DATA.reserve.rule === "runtime" ? "kept free (as costgraph train " +
                           "--reserve runtime: CUDA context, cuBLAS and cuBLASLt workspaces, NCCL buffers of each " +
                           "parallel group of more than one device)" : "kept free (--reserve " + DATA.reserve.text +
                           (DATA.reserve.rule === "fraction" ? " of it)" : ")"), "B", ""));
    train.append(outputRow("fits", "verdict", "", ""));
    train.append(outputRow("flops", "model FLOPs per device per iteration", "FLOP", DATA.training.flops.formula));
    train.append(outputRow("step", "step time on the device, as costgraph train --hardware computes it (exact " +
                           "on every preset for every precision, optimizer, ZeRO " +
                           "stage and recompute; rounded down to " + DATA.time_digits + " significant digits)",
                           "s", ""));
    train.append(outputRow("time", "time per iteration at the MFU: FLOPs / (peak \u00d7 MFU), as costgraph train " +
                           "--mfu (the rate covers the whole step; rounded down to " + DATA.time_digits +
                           " significant digits)", "s", ""));
    const serving = el("table", {id: "serving"}, el("caption", {}, "Serving, memory of one device (the weight dtype, KV dtype and TP degree " +
                       "chosen; paged KV cache in blocks of 16 tokens; as costgraph infer --hardware --tp --weights --kv)"),
                       el("tr", {}, el("th", {}, "quantity"), el("th", {}, "value"), el("th", {}, "unit"),
                          el("th", {}, "closed form (P prompt, G generated, b batch)")));
    for (const [id, label] of [["kv_per_token", "KV cache per token"], ["kv", "KV cache of the batch (paged)"],
                               ["weights", "weights in memory"], ["memory", "memory at this batch"]]) {
      serving.append(outputRow("serve-" + id, label, "B", ""));
    }
    serving.append(outputRow("serve-capacity", "usable memory (device less the reserve)", "B", ""));
    serving.append(outputRow("serve-fits", "verdict", "", ""));
    serving.append(outputRow("serve-max_batch", "largest batch of P + G tokens that fits", "", ""));
    app.append(costs, train, serving);
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
    servingRows(dims);
    toFragment();
  }

  function whole(name) {
    const text = inputs[name].value.trim(), ok = /^[0-9]{1,40}$/.test(text) && !/^0+$/.test(text);
    inputs[name].classList.toggle("bad", !ok);
    return ok ? BigInt(text) : null;
  }

  // infer --tp --weights --kv (costgraph.export.web_serving): memory = weights(TP, dtype) + KV cache(TP, KV dtype)
  function servingRows(dims) {
    const S = DATA.serving, ids = ["kv_per_token", "kv", "weights", "memory"];
    const all = ids.concat(["capacity", "fits", "max_batch"]);
    const at = S.absent ? null : S.tp[inputs.serve_tp.value];
    const absent = S.absent || (at && at.absent);
    if (absent) { for (const id of all) show("serve-" + id, null, absent); return; }
    const cell = at.kv[inputs.kv_dtype.value], w = at.weights[inputs.weights.value];
    const d = Object.assign({}, dims, {P: whole("prompt"), G: whole("generate"), b: whole("batch")});
    const fns = {kv_per_token: cell.kv_per_token, kv: cell.kv, weights: w};
    const values = {};
    for (const id of ["kv_per_token", "kv", "weights"]) {
      document.getElementById("v-serve-" + id).parentNode.lastChild.textContent = fns[id].formula;
      const [v, err] = compute(fns[id].fn, d);
      values[id] = v;
      show("serve-" + id, v, v === null ? err : grouped(v) + "  (" + gb(v) + ")");
    }
    document.getElementById("v-serve-memory").parentNode.lastChild.textContent = "weights + KV cache of the batch";
    values.memory = values.kv === null || values.weights === null ? null : values.kv + values.weights;
    show("serve-memory", values.memory, values.memory === null ? "" : grouped(values.memory) + "  (" + gb(values.memory) + ")");
    const hw = DATA.hardware.find((h) => h.key === inputs.hardware.value);
    const [rn, rd] = S.reserve.map(BigInt);
    const capacity = BigInt(hw.serve_memory) * (rd - rn) / rd;      // rounded down to a byte, as infer's
    show("serve-capacity", capacity, grouped(capacity) + "  (" + gb(capacity) + "; device " + hw.serve_memory_from + ")");
    if (values.memory === null) { show("serve-fits", null, ""); show("serve-max_batch", null, ""); return; }
    const room = capacity - values.memory;
    show("serve-fits", room >= 0n ? 1n : 0n, room >= 0n ? "fits (" + grouped(room) + " B to spare)"
                                                        : "does not fit (" + grouped(-room) + " B over)");
    if (!cell.base) { show("serve-max_batch", null, "not linear in the batch: costgraph infer"); return; }
    const [base, berr] = compute(cell.base.fn, d), [per, perr] = compute(cell.per_sequence.fn, d);
    if (base === null || per === null) { show("serve-max_batch", null, berr || perr); return; }
    const fixed = base + values.weights;
    const most = capacity >= fixed ? (capacity - fixed) / per : 0n;
    show("serve-max_batch", most);
  }

  // the inputs in the address's fragment (#b=2&s=512&TP=2&zero=1...), so a link reproduces the page
  function toFragment() {
    const frag = Object.entries(inputs).map(([name, input]) =>
      encodeURIComponent(name) + "=" + encodeURIComponent(input.value)).join("&");
    document.getElementById("link").setAttribute("href", "#" + frag);
    if (location.hash.replace(/^#/, "") === frag) return;
    try {
      history.replaceState(null, "", "#" + frag);   // no hashchange event, no history entry
    } catch (e) {
      // a browser that refuses it (some local pages): the link above still holds the state
    }
  }

  const PARTS = ["weights", "gradients", "optimizer", "activations"];

  // one stage set's memory parts under the chosen precision, optimizer, ZeRO stage and recompute:
  // part -> {fn, formula} (costgraph.export.web_training); null when the model has no such stage set
  function parts(set) {
    const T = DATA.training, pol = inputs.precision.value, zero = inputs.zero.value;
    const states = T.states[pol][zero][set];
    if (!states) return null;
    return {weights: states.weights, gradients: states.gradients,
            optimizer: T.optimizer[pol][inputs.optimizer.value][zero][set],
            activations: T.activations[T.activation_precision[pol]][inputs.recompute.value][set],
            // the FP8 weight transpose Transformer Engine keeps on the preset, as train resolves it
            // (training.fp8.on_hardware: none on Blackwell)
            fp8: states.fp8 ? states.fp8[T.fp8_transpose[pol][inputs.hardware.value]] : null};
  }

  function training(dims) {
    const sets = dims.PP === 1n ? ["single"] : ["first", "last"];
    let best = null, bestSet = null, bestValues = null, failure = null;
    if (dims.PP !== 1n && !parts("first")) failure = "PP must be 1: the model has no repeated layers to split into stages";
    for (const set of failure ? [] : sets) {
      const p = parts(set), values = {};
      let total = 0n;
      for (const c of PARTS.concat(["fp8"])) {
        if (!p[c]) { values[c] = 0n; continue; }          // no FP8 buffers outside an FP8 policy
        const [v, err] = compute(p[c].fn, dims);
        if (v === null) { failure = err; break; }
        values[c] = v;
        total += v;
      }
      if (failure) break;
      if (best === null || total > best) { best = total; bestSet = set; bestValues = values; }
    }
    const shown = parts(bestSet || sets[0]) || parts("single");
    for (const c of PARTS.concat(["fp8", "total"])) {
      const row = document.getElementById("v-mem-" + c).parentNode.lastChild;
      row.textContent = c === "total" ? PARTS.concat(shown.fp8 ? ["fp8"] : []).join(" + ")
        : shown[c] ? shown[c].formula : "0 (not an FP8 policy)";
      if (failure) { show("mem-" + c, null, failure); continue; }
      const v = c === "total" ? best : bestValues[c];
      show("mem-" + c, v, grouped(v) + "  (" + gb(v) + ")");
    }
    const stage = document.getElementById("v-stage");
    stage.setAttribute("data-value", failure ? "" : bestSet);
    stage.textContent = failure ? "" : {single: "the whole model", first: "stage 0 (first)",
                                        last: "stage PP-1 (last)"}[bestSet];
    verdict(best, failure, dims);
    const [flops, ferr] = compute(DATA.training.flops.fn, dims);
    show("flops", flops, flops === null ? ferr : undefined);
    timeRow(flops);
    stepRow(dims, failure);
  }

  // the step time (costgraph.export.web_steps): rest(preset, policy, ZeRO, recompute, PP) plus, on a preset
  // with a kernel table, the optimizer step(preset, policy, optimizer, ZeRO, PP); the pool's parts evaluated
  // on demand, once per update
  function stepRow(dims, failure) {
    const S = DATA.training.step, hw = inputs.hardware.value, pol = inputs.precision.value;
    const row = document.getElementById("v-step").parentNode.lastChild;
    row.textContent = S.rate[hw] || "";
    const device = DATA.hardware.find((h) => h.key === hw);
    if (DATA.training.fp8.includes(pol) && !device.fp8) {
      show("step", null, hw + " has no FP8 peak: costgraph train refuses --precision " + pol);
      return;
    }
    const model = S.model[hw];
    if (S.failed[model]) { show("step", null, S.failed[model]); return; }
    if (!S.rest[model] || !S.rest[model][pol]) {
      show("step", null, "costgraph train refuses --precision " + pol + " on " + hw);
      return;
    }
    if (failure) { show("step", null, failure); return; }
    // the lists' indices (export/web_steps.py): ZeRO stage, recompute policy, stage set ("1", "PP")
    const stage = dims.PP === 1n ? 0 : 1, zero = DATA.zero.findIndex((z) => String(z.value) === inputs.zero.value);
    const recompute = DATA.recompute.indexOf(inputs.recompute.value);
    // a flat-efficiency preset: its peaks and links fill the symbols of its model's trees
    const values = Object.assign({}, dims);
    for (const [name, v] of Object.entries(S.numbers[hw] || {})) values[name] = BigInt(v);
    const cache = new Array(S.pool.length);
    const defs = (i) => (cache[i] !== undefined ? cache[i] : (cache[i] = evalTree(S.pool[i], values, defs)));
    let value;
    try {
      value = evalTree(S.rest[model][pol][zero][recompute][stage], values, defs);
      if (S.bandwidth[hw]) {        // bytes of the optimizer step / the preset's HBM bandwidth
        const o = evalTree(S.optimizer[pol][inputs.optimizer.value][zero][stage], values, defs);
        const d = o[1] * BigInt(S.bandwidth[hw]);
        value = frac(value[0] * d + o[0] * value[1], value[1] * d);
      }
    } catch (e) {
      const name = /^(\S+) must be/.exec(e.message);
      show("step", null, name ? name[1] + ": not a whole number" : e.message);
      return;
    }
    const cell = document.getElementById("v-step");
    cell.classList.remove("error");
    cell.setAttribute("data-value", value[0].toString() + "/" + value[1].toString());
    cell.textContent = value[0] > 0n ? significant(value[0], value[1], DATA.time_digits) : "0";
  }

  // [capacity, reserve, words] as costgraph train --reserve keeps it (export/web_reserve.py): runtime, a
  // fraction of the device memory (rounded up to a byte) or a size; the device memory as train reads it under
  // its default memory convention (what CUDA reports: runtime_memory.device_memory, the hardware's serve_memory)
  function reserveOf(hw, dims) {
    const R = DATA.reserve;
    if (R.rule === "runtime") {
      const p = R.presets[hw.key];
      let groups = 0n;                                            // one NCCL communicator per group of 2+ devices
      for (const d of ["TP", "PP", "DP"]) if (dims[d] !== null && dims[d] > 1n) groups += 1n;
      return [BigInt(p.capacity), BigInt(p.base) + groups * BigInt(p.group), p.capacity_from];
    }
    const capacity = BigInt(hw.serve_memory), from = hw.serve_memory_from;
    if (R.rule === "size") return [capacity, BigInt(R.bytes), from];
    const [num, den] = R.fraction.map(BigInt);
    return [capacity, (capacity * num + den - 1n) / den, from];
  }

  function verdict(total, failure, dims) {
    const hw = DATA.hardware.find((h) => h.key === inputs.hardware.value);
    const [capacity, reserve, from] = reserveOf(hw, dims);
    show("capacity", capacity, grouped(capacity) + "  (" + gb(capacity) + (from ? ", " + from : "") + ")");
    show("reserve", reserve, grouped(reserve) + "  (" + gb(reserve) + ")");
    if (reserve >= capacity) { show("fits", null, "--reserve " + DATA.reserve.text + " keeps the whole device " +
                                    "memory free"); return; }
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
    if (frag && frag.length <= 4000) applyFragment(frag);
    update();
  }

  function applyFragment(frag) {
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
      if (input.tagName === "SELECT" && ![...input.options].some((o) => o.value === value)) continue;
      input.value = value;        // as typed; update() recomputes once every input is set
    }
  }

  build();
  fromFragment();
  window.addEventListener("hashchange", fromFragment);
})();
