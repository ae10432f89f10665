// What each task type's outputs mean, as tfm_cls/runtime/heads.py: scores, decisions and the
// prediction fields of a `tfm-cls infer` JSONL row.
//
//   single_label   softmax probabilities; the most probable label
//   multi_label    one sigmoid per label; every label whose probability reaches its threshold
//                  (a row with none gets its most probable label unless ensure_label is off)
//   regression     one value

const f32 = Math.fround;

/** Python's round(x, 6): correctly rounded from x's exact binary value, ties to even. */
export function round6(x) {
  if (!Number.isFinite(x)) return x;
  const near = Number(x.toFixed(6)); // exact-value rounding, ties away from zero
  if (Math.abs(x) >= 1e15) return x;
  // Only an exact tie (x * 1e6 ending in .5 exactly) rounds otherwise, and the float product is
  // within 1.2e-4 of the exact one below 1e12: far from .5, toFixed's answer is Python's. The exact
  // expansion below costs 10x more (1.8 us a value; 7 a row of a 6-label model).
  const scaled = Math.abs(x) * 1e6;
  if (scaled < 1e12 && Math.abs(scaled - Math.floor(scaled) - 0.5) > 1e-3) return near;
  const exact = Math.abs(x).toFixed(100); // the exact decimal expansion of |x| (|x| >= 2^-47 or rounds to 0)
  const dot = exact.indexOf(".");
  const rest = exact.slice(dot + 7);
  if (!/^50*$/.test(rest)) return near;
  // a tie: keep the even sixth decimal
  const kept = exact.slice(0, dot + 7);
  const last = Number(kept[kept.length - 1]);
  const down = Number(kept);
  const value = last % 2 === 0 ? down : Number((down + 1e-6).toFixed(6));
  return x < 0 ? -value : value;
}

/** Softmax of one row in float32 arithmetic, as numpy does on float32 logits. */
export function softmax32(row) {
  let m = -Infinity;
  for (const x of row) m = Math.max(m, x);
  const e = Array.from(row, (x) => f32(Math.exp(f32(x - m))));
  let s = 0;
  for (const x of e) s = f32(s + x);
  return e.map((x) => f32(x / s));
}

export function sigmoid32(row) {
  return Array.from(row, (x) => f32(1 / (1 + Math.exp(-Math.min(Math.max(x, -60), 60)))));
}

function argmax(scores) {
  let best = 0;
  for (let j = 1; j < scores.length; j++) if (scores[j] > scores[best]) best = j;
  return best;
}

/** Label indices by score, highest first; ties in label order (numpy's stable argsort of -scores). */
function order(scores) {
  return Array.from(scores.keys()).sort((i, j) => scores[j] - scores[i]);
}

function probabilities(labels, scores) {
  const out = {};
  labels.forEach((label, j) => { out[label] = round6(scores[j]); });
  return out;
}

export class SingleLabel {
  static task = "single_label";
  static scoreOutput = "probabilities";
  static chunkable = true;

  constructor(meta) {
    this.temperature = meta.temperature === undefined || meta.temperature === null ? 1.0 : Number(meta.temperature);
    this.task = this.constructor.task;
    this.scoreOutput = this.constructor.scoreOutput;
    this.chunkable = this.constructor.chunkable;
  }

  numOutputs(numLabels) {
    return numLabels;
  }

  scaled(row) {
    if (this.temperature === 1.0) return row;
    const t = f32(this.temperature);
    return Array.from(row, (x) => f32(x / t));
  }

  /** Scores of one row of logits (what the graph's score output holds). */
  scores(row) {
    return softmax32(this.scaled(row));
  }

  decide() {
    return null;
  }

  /** The prediction fields of one row (scores null: an empty input, no guess). */
  fields(scores, chosen, labels) {
    if (scores === null) return { label: null, score: null, probabilities: null };
    const best = argmax(scores);
    return { label: labels[best], score: round6(scores[best]), probabilities: probabilities(labels, scores) };
  }

  /** Every label as {label, score}, highest first; with decisions, whether each was selected. */
  labelScores(scores, chosen, labels) {
    return order(scores).map((j) => ({ label: labels[j], score: scores[j], ...(chosen ? { selected: chosen[j] } : {}) }));
  }
}

export class MultiLabel extends SingleLabel {
  static task = "multi_label";
  static chunkable = false;

  constructor(meta) {
    super(meta);
    this.fixedThreshold = Number(meta.fixed_threshold ?? 0.5);
    this.ensureLabel = Boolean(meta.ensure_label ?? true);
    this.thresholds = Array.isArray(meta.thresholds) ? meta.thresholds.map(Number) : null;
  }

  scores(row) {
    return sigmoid32(this.scaled(row));
  }

  currentThresholds(n) {
    return this.thresholds ?? new Array(n).fill(this.fixedThreshold);
  }

  decide(scores) {
    const t = this.currentThresholds(scores.length);
    const chosen = Array.from(scores, (p, j) => p >= t[j]);
    if (this.ensureLabel && !chosen.some(Boolean)) chosen[argmax(scores)] = true;
    return chosen;
  }

  fields(scores, chosen, labels) {
    if (scores === null) return { labels: null, scores: null, probabilities: null };
    const picked = order(scores).filter((j) => chosen[j]);
    return { labels: picked.map((j) => labels[j]), scores: picked.map((j) => round6(scores[j])),
      probabilities: probabilities(labels, scores) };
  }
}

export class Regression extends SingleLabel {
  static task = "regression";
  static scoreOutput = "value";
  static chunkable = false;

  numOutputs() {
    return 1;
  }

  scores(row) {
    return row[0];
  }

  fields(scores) {
    return { value: scores === null ? null : round6(scores) };
  }

  labelScores(scores, chosen, labels) {
    return [{ label: labels.length ? labels[0] : "value", score: scores }];
  }
}

export const HEADS = { single_label: SingleLabel, multi_label: MultiLabel, regression: Regression };
