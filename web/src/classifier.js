// An exported tfm_cls classifier run by onnxruntime-web: one .onnx file is the whole model (the
// tokenizer, labels, long-text policy and decision rule travel in its metadata), in a browser or
// in Node. classify() returns the rows `tfm-cls infer` writes (tfm_cls/runtime/session.py,
// stream.py and writers.py are the reference, rule for rule).

import * as ort from "onnxruntime-web/wasm";
import { InferenceError } from "./errors.js";
import { readModel } from "./protobuf.js";
import { ONNX_TASKS, checkClassifier, fromProps } from "./metadata.js";
import { HEADS } from "./heads.js";
import { LongText, LongTextEncoder, aggregateWindows, isEmpty } from "./text.js";
import { TextTokenizer } from "./tokenizer.js";
import { RUNTIME_MAX_TOKENS, RUNTIME_RUN_COST, padBatch, planBatches } from "./batching.js";

export { ort };

const isNode = typeof process !== "undefined" && !!(process.versions && process.versions.node);

/** The bytes of a model: a Uint8Array / ArrayBuffer as it is, a URL fetched, in Node a file path read. */
async function modelBytes(source, name) {
  if (source instanceof Uint8Array) return { bytes: source, where: name || "model" };
  if (source instanceof ArrayBuffer) return { bytes: new Uint8Array(source), where: name || "model" };
  const where = name || String(source);
  if (isNode && !/^(https?|data|blob):/i.test(String(source))) {
    const { readFile } = await import("node:fs/promises");
    const path = String(source).startsWith("file:") ? new URL(String(source)) : String(source);
    try {
      return { bytes: new Uint8Array(await readFile(path)), where };
    } catch (err) {
      if (err.code === "ENOENT") throw new InferenceError(`model file not found: ${where}`);
      throw new InferenceError(`cannot read ${where}: ${err.message}`);
    }
  }
  let res;
  try {
    res = await fetch(source);
  } catch (err) {
    throw new InferenceError(`cannot fetch ${where}: ${err.message}`);
  }
  if (!res.ok) throw new InferenceError(`model file not found: ${where} (HTTP ${res.status})`);
  return { bytes: new Uint8Array(await res.arrayBuffer()), where };
}

/**
 * Load a tfm_cls .onnx export: its metadata read from the file's bytes and checked against its
 * graph, its tokenizer built, an onnxruntime-web session opened. Rejects with an InferenceError
 * (the Python runtime's message) for a file that is not a tfm_cls classifier, is truncated or
 * whose metadata does not fit its graph.
 *
 * @param {string|URL|Uint8Array|ArrayBuffer} source
 * @param {object} [options] maxLength, longText ({truncation, head_fraction, chunk, stride,
 *   aggregate, scores}), batching ("tokens" | "fixed"), batchSize, maxTokens, runCost, numThreads
 *   (1: no cross-origin isolation needed), wasmPaths (where ort's .wasm lies), name (for messages)
 */
export async function load(source, options = {}) {
  const { bytes, where } = await modelBytes(source, options.name);
  let info;
  try {
    info = readModel(bytes);
  } catch (err) {
    throw new InferenceError(`${where} is not a readable ONNX model: ${err.message}`);
  }
  const meta = fromProps(info.props, where);
  if (options.wasmPaths) ort.env.wasm.wasmPaths = options.wasmPaths;
  ort.env.wasm.numThreads = options.numThreads ?? 1;
  let session;
  try {
    session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
  } catch (err) {
    throw new InferenceError(`${where} is not a readable ONNX model: ${err.message || err}`);
  }
  const graph = { inputs: [...session.inputNames], outputs: info.outputs };
  try {
    checkClassifier(meta, graph, where);
  } catch (err) {
    await session.release();
    throw err;
  }
  return new Classifier(session, meta, { ...options, where, bytes: bytes.length });
}

export class Classifier {
  constructor(session, meta, options = {}) {
    const where = options.where || "model";
    this.session = session;
    this.metadata = meta;
    this.labels = meta.labels;
    this.modelMaxLength = meta.max_length;
    this.padId = Number(meta.model_config.pad_token_id);
    this.sizeBytes = options.bytes ?? null;
    this.tokenizer = new TextTokenizer(meta.tokenizer, where);
    const saved = meta.long_text || new LongText();
    const shortest = this.tokenizer.numSpecial(false) + 1;
    const maxLength = options.maxLength ?? null;
    if (maxLength !== null && !(shortest <= maxLength && maxLength <= this.modelMaxLength)) {
      throw new InferenceError(`--max-length must be in [${shortest}, ${this.modelMaxLength}] for ${where} ` +
        `(${shortest - 1} special tokens plus at least one text token), got ${maxLength}`);
    }
    this.maxLength = maxLength || this.modelMaxLength;
    const overrides = Object.fromEntries(Object.entries(options.longText || {}).filter(([, v]) => v !== null && v !== undefined));
    this.policy = new LongText({ ...saved, ...overrides });
    this.encoder = new LongTextEncoder(this.tokenizer, this.maxLength, this.policy);
    this.batching = { batching: options.batching ?? "tokens", batchSize: options.batchSize ?? 32,
      maxTokens: options.maxTokens ?? RUNTIME_MAX_TOKENS, runCost: options.runCost ?? RUNTIME_RUN_COST };
    this.head = new HEADS[ONNX_TASKS[meta.spec_task]](meta);
    this.task = this.head.task;
    this.pair = meta.pair;
    this.outputNames = [...session.outputNames];
    if (this.pair && !this.policy.isDefault()) {
      throw new InferenceError(`${where} classifies sentence pairs, truncated longer text first: ` +
        "--truncation / --chunk apply to single texts");
    }
    if (this.policy.chunk && !this.head.chunkable) {
      throw new InferenceError(`${where} is a ${this.task} model: --chunk applies to single-label models`);
    }
  }

  /** What the page shows about the model (as the serve page's facts). */
  facts() {
    const m = this.metadata;
    return { task: this.task, pair: this.pair, labels: this.labels, maxLength: this.maxLength,
      longText: { ...this.policy }, version: m.version ?? null, quantization: m.quantization ?? null,
      temperature: m.temperature ?? null, thresholds: this.task === "multi_label" ? this.head.currentThresholds(this.labels.length) : null,
      modelConfig: m.model_config, sizeBytes: this.sizeBytes };
  }

  /** Model rows of non-empty inputs: ids (types for pairs), truncated and windows per text. */
  encode(texts, pairs) {
    if (this.pair) {
      const ids = [];
      const types = [];
      const truncated = [];
      texts.forEach((t, i) => {
        const e = this.tokenizer.encodePair(t, pairs[i], this.maxLength);
        ids.push(e.ids);
        types.push(e.types);
        truncated.push(e.truncated);
      });
      return { ids, types, truncated, windows: texts.map(() => 1) };
    }
    return { ...this.encoder.encode(texts), types: null };
  }

  /** Scores of encoded texts in their order: an array per text (regression: a number). */
  async score({ ids, types, windows }) {
    const batches = planBatches(ids.map((x) => x.length), this.batching);
    const C = this.labels.length;
    const chunk = this.policy.chunk;
    const direct = !chunk && this.outputNames.includes(this.head.scoreOutput);
    const output = direct ? this.head.scoreOutput : "logits";
    const width = output === "value" ? 1 : this.head.numOutputs(C);
    const rows = new Float32Array(ids.length * width);
    for (const batch of batches) {
      const { inputIds, mask, typeIds, width: seq } = padBatch(ids, batch, this.padId, this.pair ? types : null);
      const dims = [batch.length, seq];
      const feeds = { input_ids: new ort.Tensor("int64", inputIds, dims), attention_mask: new ort.Tensor("int64", mask, dims) };
      if (this.pair) feeds.token_type_ids = new ort.Tensor("int64", typeIds, dims);
      const result = await this.session.run(feeds, [output]);
      const data = result[output].data;
      batch.forEach((i, r) => rows.set(data.subarray(r * width, (r + 1) * width), i * width));
      for (const t of Object.values(result)) t.dispose?.();
    }
    const perRow = (k) => rows.subarray(k * width, (k + 1) * width);
    if (chunk) {
      const texts = aggregateWindows(rows, C, windows, this.policy.aggregate, this.policy.scores);
      return windows.map((_, t) => this.head.scores(texts.subarray(t * C, (t + 1) * C)));
    }
    if (direct) return ids.map((_, k) => (output === "value" ? perRow(k)[0] : Array.from(perRow(k))));
    return ids.map((_, k) => this.head.scores(perRow(k)));
  }

  /**
   * The rows `tfm-cls infer` writes for these inputs, in their order: each input a text, a
   * [text, second text] pair, or {id, text, text_pair}. An empty (or whitespace-only) text gets
   * a row with "empty": true and no prediction. `topK`: each row also lists its best k labels
   * as {label, score} under "top".
   */
  async classify(inputs, { topK = null } = {}) {
    if (!Array.isArray(inputs)) throw new InferenceError("classify() takes an array of texts");
    const records = inputs.map((x, i) => {
      if (typeof x === "string" || x === null || x === undefined) return { id: String(i + 1), text: x ?? "", pair: null };
      if (Array.isArray(x)) return { id: String(i + 1), text: x[0] ?? "", pair: x[1] ?? null };
      if (typeof x === "object") return { id: x.id === undefined ? String(i + 1) : String(x.id), text: x.text ?? "", pair: x.text_pair ?? null };
      throw new InferenceError(`input ${i + 1}: expected a text, a [text, pair] or an object with "text", got ${typeof x}`);
    });
    records.forEach((r, i) => {
      if (typeof r.text !== "string") throw new InferenceError(`input ${i + 1}: the text is ${typeof r.text}, expected a string`);
    });
    const full = records.filter((r) => !isEmpty(r.text));
    if (this.pair) {
      full.forEach((r) => {
        if (typeof r.pair !== "string" || isEmpty(r.pair)) {
          throw new InferenceError(`input ${records.indexOf(r) + 1}: the pair's second text is missing or empty`);
        }
      });
    }
    const encoded = this.encode(full.map((r) => r.text), this.pair ? full.map((r) => r.pair) : null);
    const scores = full.length ? await this.score(encoded) : [];
    let k = 0;
    return records.map((record, i) => {
      const empty = isEmpty(record.text);
      const s = empty ? null : scores[k];
      const truncated = empty ? false : encoded.truncated[k];
      const windows = empty ? 0 : encoded.windows[k];
      if (!empty) k += 1;
      const chosen = s === null ? null : this.head.decide(s);
      const row = { id: record.id, line: i + 1, ...this.head.fields(s, chosen, this.labels), truncated };
      if (this.policy.chunk) row.windows = windows;
      row.empty = empty;
      if (topK !== null && s !== null) row.top = this.head.labelScores(s, chosen, this.labels).slice(0, topK);
      return row;
    });
  }

  async release() {
    await this.session.release();
  }
}
