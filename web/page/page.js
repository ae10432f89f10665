// The page of `tfm-cls export --web`: type or paste texts, see labels and scores, the model's
// facts. The model runs in a Web Worker (tfm-cls-worker.js). window.tfmCls is the page's API:
// ready (a promise of the facts), load(url), classify(inputs, {topK}).

const $ = (id) => document.getElementById(id);
const worker = new Worker(new URL("tfm-cls-worker.js", import.meta.url), { type: "module" });
const pending = new Map();
let nextId = 0;

worker.onmessage = ({ data }) => {
  const p = pending.get(data.id);
  pending.delete(data.id);
  if (data.ok) p.resolve(data.result);
  else p.reject(new Error(data.error));
};
worker.onerror = (event) => {
  event.preventDefault();
  const err = new Error(`the model's worker failed: ${event.message || "could not start (is this page served over HTTP?)"}`);
  for (const p of pending.values()) p.reject(err);
  pending.clear();
};

function call(op, payload = {}) {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, op, ...payload });
  });
}

let facts = null;

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

const pct = (x) => `${(100 * x).toFixed(1)} %`;
const kb = (n) => (n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MB` : `${(n / 1024).toFixed(0)} KB`);

function architecture(c) {
  if (c.architecture === "bag_of_terms") {
    const grams = { 2: "token pairs", 3: "token pairs and triples" }[c.wide_ngrams];
    const pairs = grams ? ` + ${c.wide_buckets} buckets of ${grams}` : "";
    return `bag of terms, no encoder (${c.vocab_size} tokens${pairs}, ${c.wide_weighting ?? "count"})`;
  }
  return `${c.num_layers ?? "?"} layers, d_model ${c.d_model ?? "?"}`;
}

function showFacts(f, seconds) {
  const kind = { single_label: "single-label classification", multi_label: "multi-label classification",
    regression: "regression" }[f.task];
  $("title").textContent = `tfm_cls · ${kind}`;
  $("subtitle").textContent = `${f.pair ? "Sentence pairs, " : ""}${f.task === "regression" ? "one value" : `${f.labels.length} labels`}` +
    ` · runs in this page: no text leaves it`;
  $("pair-box").hidden = !f.pair;
  const lt = f.longText;
  const policy = lt.chunk ? `windows (stride ${lt.stride ?? "budget/4"}), ${lt.aggregate} of ${lt.scores}` : `truncation: ${lt.truncation}`;
  const items = [
    ["task", `${f.task}${f.pair ? " (sentence pairs)" : ""}`],
    ["labels", f.labels.length > FOLD_FROM ? folded(`${f.labels.length} labels`, f.labels.map((l) => [l])) : f.labels.join(", ")],
    ["max length", `${f.maxLength} tokens; long texts: ${policy}`],
    ...(f.thresholds ? [["thresholds", thresholds(f.labels, f.thresholds)]] : []),
    ...(f.temperature ? [["temperature", String(f.temperature)]] : []),
    ["model", `${architecture(f.modelConfig)}, ${kb(f.sizeBytes)}${f.quantization ? " (int8)" : ""}`],
    ["exported by", `tfm_cls ${f.version ?? "?"}`],
    ["loaded in", `${seconds.toFixed(2)} s (onnxruntime-web, WebAssembly, one thread)`],
  ];
  $("facts-card").hidden = false;
  $("facts").replaceChildren(...items.flatMap(([k, v]) => {
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = k;
    if (typeof v === "string") dd.textContent = v;
    else dd.append(v);
    return [dt, dd];
  }));
}

// A many-label model's labels and thresholds: named, and folded behind one line past FOLD_FROM of them.
const FOLD_FROM = 8;

function folded(summary, cells) {
  const details = document.createElement("details");
  const head = document.createElement("summary");
  head.textContent = summary;
  const grid = document.createElement("div");
  grid.className = "thresholds";
  grid.append(...cells.map((parts) => Object.assign(document.createElement("span"), { textContent: parts.join(" "), title: parts.join(" ") })));
  details.append(head, grid);
  return details;
}

function thresholds(labels, values) {
  const named = labels.map((label, i) => [label, values[i].toFixed(2)]);
  if (labels.length <= FOLD_FROM) return named.map(([l, t]) => `${l} ${t}`).join(", ");
  const lo = Math.min(...values), hi = Math.max(...values);
  return folded(`one a label, ${lo.toFixed(2)} to ${hi.toFixed(2)} (show all ${labels.length})`, named);
}

function bar(label, score, chosen) {
  const row = document.createElement("div");
  row.className = `bar${chosen ? " chosen" : ""}`;
  row.innerHTML = '<span class="label"></span><span class="track"><span class="fill" style="display:block"></span></span><span class="num"></span>';
  row.querySelector(".label").textContent = label;
  row.querySelector(".fill").style.width = `${(100 * Math.max(0, Math.min(1, score))).toFixed(1)}%`;
  row.querySelector(".num").textContent = score.toFixed(3);
  return row;
}

function showRows(texts, rows, ms) {
  const box = $("results");
  box.replaceChildren(...rows.map((row, i) => {
    const div = document.createElement("div");
    div.className = "result";
    const text = document.createElement("div");
    text.className = "text";
    text.title = texts[i];
    // each text's number: its line in the box above, so a result is never taken for another text's
    text.append(Object.assign(document.createElement("span"), { className: "n", textContent: `${i + 1}.` }), texts[i]);
    const top = document.createElement("div");
    top.className = "top";
    if (row.empty) top.textContent = "(empty: no label)";
    else if ("value" in row) top.textContent = `value ${row.value}`;
    else if ("labels" in row) top.textContent = row.labels.join(", ");
    else {
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = row.label;
      top.append(name);
      const s = document.createElement("span");
      s.className = "score";
      s.textContent = pct(row.score);
      top.append(s);
    }
    div.append(text, top);
    if (row.probabilities) {
      const chosen = new Set(row.labels ?? [row.label]);
      Object.entries(row.probabilities).sort((a, b) => b[1] - a[1]).slice(0, 8)
        .forEach(([label, p]) => div.append(bar(label, p, chosen.has(label))));
    }
    if (row.truncated) div.append(Object.assign(document.createElement("div"), { className: "note", textContent: "truncated" }));
    return div;
  }));
  const note = document.createElement("p");
  note.className = "note";
  note.textContent = `${rows.length} text${rows.length === 1 ? "" : "s"} in ${ms.toFixed(1)} ms`;
  box.append(note);
  box.hidden = false;
}

async function loadModel(url) {
  const start = performance.now();
  $("go").disabled = true;
  try {
    facts = await call("load", { url });
  } catch (err) {
    facts = null;
    $("facts-card").hidden = true;
    $("subtitle").textContent = "The model could not be loaded.";
    $("status").textContent = "";
    showError(err.message);
    throw err;
  }
  showError("");
  showFacts(facts, (performance.now() - start) / 1000);
  $("status").textContent = "Ready";
  $("go").disabled = false;
  return facts;
}

async function classify(inputs, options = {}) {
  const { rows, ms } = await call("classify", { inputs, topK: options.topK ?? null });
  window.tfmCls.lastMs = ms;
  return rows;
}

function boxTexts() {
  const texts = $("text").value.split("\n");
  if (texts.length && texts[texts.length - 1] === "") texts.pop();
  return texts;
}

$("text").addEventListener("input", () => {
  const n = boxTexts().length;
  $("count").textContent = n ? `${n} text${n === 1 ? "" : "s"}, one a line` : "";
});

$("go").addEventListener("click", async () => {
  const texts = boxTexts();
  if (!texts.length) return;
  const pairs = facts && facts.pair ? $("pair").value.split("\n") : null;
  const inputs = pairs ? texts.map((t, i) => [t, pairs[i] ?? ""]) : texts;
  $("go").disabled = true;
  $("status").textContent = "Classifying…";
  try {
    const start = performance.now();
    const rows = await classify(inputs);
    showError("");
    showRows(texts, rows, performance.now() - start);
    $("status").textContent = "Ready";
  } catch (err) {
    showError(err.message);
    $("status").textContent = "";
  } finally {
    $("go").disabled = false;
  }
});

const model = new URLSearchParams(location.search).get("model") || "model.onnx";
window.tfmCls = { load: loadModel, classify, ready: loadModel(model) };
window.tfmCls.ready.catch(() => {}); // shown on the page; callers awaiting `ready` see the rejection
