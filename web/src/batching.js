// Length-sorted token-budget batches and their padding, as tfm_cls/runtime/batching.py (the
// defaults of `tfm-cls infer`: tokens, 256 padded tokens a batch, a run costs 16 tokens).

export const RUNTIME_MAX_TOKENS = 256;
export const RUNTIME_RUN_COST = 16;

/** Row indices grouped into batches, sorted by length (stable), as plan_batches. */
export function planBatches(lengths, { batching = "tokens", batchSize = 32, maxTokens = RUNTIME_MAX_TOKENS,
  runCost = RUNTIME_RUN_COST } = {}) {
  const order = Array.from(lengths.keys()).sort((a, b) => lengths[a] - lengths[b]);
  if (batching === "fixed") {
    const out = [];
    for (let i = 0; i < order.length; i += batchSize) out.push(order.slice(i, i + batchSize));
    return out;
  }
  const batches = [];
  let current = [];
  let longest = 0;
  for (const i of order) {
    const n = lengths[i];
    if (current.length && ((current.length + 1) * n > maxTokens || (runCost && current.length * (n - longest) > runCost))) {
      batches.push(current);
      current = [];
    }
    current.push(i);
    longest = n;
  }
  if (current.length) batches.push(current);
  return batches;
}

/** input_ids, attention_mask (and token_type_ids) [rows, longest] as BigInt64Array, row-major. */
export function padBatch(ids, rows, padId, types = null) {
  const width = Math.max(...rows.map((i) => ids[i].length));
  const inputIds = new BigInt64Array(rows.length * width).fill(BigInt(padId));
  const mask = new BigInt64Array(rows.length * width);
  const typeIds = types ? new BigInt64Array(rows.length * width) : null;
  rows.forEach((i, r) => {
    ids[i].forEach((id, k) => {
      inputIds[r * width + k] = BigInt(id);
      mask[r * width + k] = 1n;
      if (typeIds) typeIds[r * width + k] = BigInt(types[i][k]);
    });
  });
  return { inputIds, mask, typeIds, width };
}
