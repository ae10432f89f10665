// Texts -> model rows under a maximum length and a long-text policy, rule for rule as
// tfm_cls/runtime/text.py (LongText, TextEncoder, aggregate_windows) and what Python's
// str.strip() calls empty (runtime/readers.py Record.empty).

import { InferenceError } from "./errors.js";

const TRUNCATIONS = ["head", "tail", "head+tail"];
const AGGREGATES = ["mean", "max"];
const AGGREGATE_SCORES = ["logits", "probabilities"];

// Python's str.isspace(): JS's trim() keeps U+001C-U+001F and U+0085, and removes U+FEFF, which
// Python keeps.
const PY_SPACE = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** Nothing to classify: empty or whitespace only by Python's str.strip() (null counts as empty). */
export function isEmpty(text) {
  return text === null || text === undefined || PY_SPACE.test(text);
}

/** Python's round(x) of a float: to the nearest integer, ties to even. */
export function pyRound(x) {
  const f = Math.floor(x);
  const d = x - f; // exact for doubles below 2^52
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

export class LongText {
  constructor({ truncation = "head", head_fraction = 0.25, chunk = false, stride = null, aggregate = "mean",
    scores = "logits" } = {}) {
    Object.assign(this, { truncation, head_fraction, chunk, stride, aggregate, scores });
  }

  /** The policy of an export's metadata (`head` where it has none); unknown fields ignored. */
  static fromJSON(text) {
    if (!text) return new LongText();
    const fields = JSON.parse(text);
    const known = {};
    for (const k of ["truncation", "head_fraction", "chunk", "stride", "aggregate", "scores"]) {
      if (k in fields) known[k] = fields[k];
    }
    return new LongText(known);
  }

  problems() {
    const out = [];
    const list = (xs) => `[${xs.map((x) => `'${x}'`).join(", ")}]`;
    if (!TRUNCATIONS.includes(this.truncation)) out.push(`truncation must be one of ${list(TRUNCATIONS)}, got '${this.truncation}'`);
    if (!(this.head_fraction >= 0 && this.head_fraction <= 1)) out.push(`head_fraction must be in [0, 1], got ${this.head_fraction}`);
    if (this.stride !== null && this.stride < 0) out.push(`stride must be >= 0, got ${this.stride}`);
    if (!AGGREGATES.includes(this.aggregate)) out.push(`aggregate must be one of ${list(AGGREGATES)}, got '${this.aggregate}'`);
    if (!AGGREGATE_SCORES.includes(this.scores)) out.push(`aggregate scores must be one of ${list(AGGREGATE_SCORES)}, got '${this.scores}'`);
    return out;
  }

  isDefault() {
    const d = new LongText();
    return ["truncation", "head_fraction", "chunk", "stride", "aggregate", "scores"].every((k) => this[k] === d[k]);
  }
}

/** Token ids of single texts under one maximum length and LongText policy (text.py TextEncoder). */
export class LongTextEncoder {
  constructor(tokenizer, maxLength, policy = new LongText()) {
    const problems = policy.problems();
    if (problems.length) throw new InferenceError(problems.join("; "));
    this.tokenizer = tokenizer;
    this.policy = policy;
    this.prefix = tokenizer.prefix;
    this.suffix = tokenizer.suffix;
    this.maxLength = maxLength;
    this.budget = maxLength - this.prefix.length - this.suffix.length; // text tokens per row
    if (this.budget < 1) {
      throw new InferenceError(`max_length ${maxLength} leaves no room for text after ${this.prefix.length + this.suffix.length} special tokens`);
    }
    const stride = policy.stride === null ? Math.floor(this.budget / 4) : policy.stride;
    if (policy.chunk && stride >= this.budget) {
      throw new InferenceError(`stride ${stride} must be smaller than the window's ${this.budget} text tokens ` +
        `(max_length ${maxLength} minus ${maxLength - this.budget} special tokens)`);
    }
    this.stride = stride;
    const head = pyRound(this.budget * policy.head_fraction);
    this.head = { head: this.budget, tail: 0 }[policy.truncation] ?? head;
  }

  wrap(content) {
    return [...this.prefix, ...content, ...this.suffix];
  }

  /** The kept text tokens of one over-long text, by the truncation strategy. */
  cut(content) {
    const tail = this.budget - this.head;
    return [...content.slice(0, this.head), ...(tail ? content.slice(content.length - tail) : [])];
  }

  /** Start offsets of the windows over n text tokens (the last one ends at the text's end). */
  windowStarts(n) {
    if (n <= this.budget) return [0];
    const step = this.budget - this.stride;
    const starts = [];
    for (let s = 0; s < n - this.budget; s += step) starts.push(s);
    starts.push(n - this.budget);
    return starts;
  }

  /** {ids: rows, truncated: per text, windows: rows per text} */
  encode(texts) {
    const ids = [];
    const truncated = [];
    const windows = [];
    for (const text of texts) {
      const content = this.tokenizer.ids(text);
      if (content.length <= this.budget) {
        ids.push(this.wrap(content));
        truncated.push(false);
        windows.push(1);
      } else if (this.policy.chunk) {
        const starts = this.windowStarts(content.length);
        for (const s of starts) ids.push(this.wrap(content.slice(s, s + this.budget)));
        truncated.push(false);
        windows.push(starts.length);
      } else {
        ids.push(this.wrap(this.cut(content)));
        truncated.push(true);
        windows.push(1);
      }
    }
    return { ids, truncated, windows };
  }
}

/** Softmax over a row in float64 (aggregate_windows works in float64). */
function softmax64(row) {
  const m = Math.max(...row);
  const e = row.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

/**
 * Logits per text [texts x C] from those of their windows [rows x C] (text.py aggregate_windows):
 * the mean or max of the windows' logits, or the log of the mean / max of their probabilities;
 * one-window texts keep their logits bit for bit; the result is float32 as numpy's.
 */
export function aggregateWindows(logits, numClasses, windows, how = "mean", scores = "logits") {
  const out = new Float32Array(windows.length * numClasses);
  let row = 0;
  windows.forEach((w, t) => {
    if (w === 1) {
      out.set(logits.subarray(row * numClasses, (row + 1) * numClasses), t * numClasses);
      row += 1;
      return;
    }
    let acc = null;
    for (let k = 0; k < w; k++, row++) {
      let values = Array.from(logits.subarray(row * numClasses, (row + 1) * numClasses));
      if (scores === "probabilities") values = softmax64(values);
      if (acc === null) acc = values;
      else acc = acc.map((a, c) => (how === "mean" ? a + values[c] : Math.max(a, values[c])));
    }
    if (how === "mean") acc = acc.map((a) => a / w);
    if (scores === "probabilities") acc = acc.map((a) => Math.log(Math.max(a, 1e-30)));
    out.set(acc, t * numClasses);
  });
  return out;
}
