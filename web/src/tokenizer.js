// The tokenizer of an export, built from the `tokenizers` JSON in its metadata with
// @huggingface/tokenizers (pure JS), corrected where that library and the Rust `tokenizers` the
// Python runtime uses disagree, and with the special tokens and pair truncation the JS library
// does not do (the Python runtime's rules: runtime/text.py special_affixes, encode_pairs).

import { Tokenizer } from "@huggingface/tokenizers";
import { InferenceError } from "./errors.js";

// Rust lower-cases char by char; String.prototype.toLowerCase applies Unicode's final-sigma rule
// (ΣΟΦΟΣ -> σοφος, not σοφοσ). U+03A3 is the only context-dependent mapping without a locale, so
// mapping it to σ before lower-casing gives Rust's result.
const lowerLikeRust = (text) => text.replaceAll("\u03a3", "\u03c3").toLowerCase();

function patchNormalizer(node) {
  if (!node || typeof node !== "function" && typeof node !== "object") return;
  const type = node.config && node.config.type;
  if (type === "Lowercase") node.normalize = lowerLikeRust;
  if (type === "BertNormalizer" && node.config.lowercase) {
    const original = node.normalize.bind(node);
    // clean_text and the CJK spacing leave U+03A3 alone, so it can be mapped before them.
    node.normalize = (text) => original(text.replaceAll("\u03a3", "\u03c3"));
  }
  for (const child of node.normalizers || []) patchNormalizer(child);
}

function findRun(full, part, from = 0) {
  for (let s = from; s + part.length <= full.length; s++) {
    if (part.every((id, k) => full[s + k] === id)) return s;
  }
  return -1;
}

export class TextTokenizer {
  /** @param {string} json the tokenizer as `tokenizers` JSON (the export's tfm_cls.tokenizer) */
  constructor(json, where = "model") {
    try {
      this.tokenizer = new Tokenizer(JSON.parse(json), {});
    } catch (err) {
      throw new InferenceError(`${where}: unreadable tfm_cls metadata (${err.message}); re-export it`);
    }
    patchNormalizer(this.tokenizer.normalizer);
    // The ids the post-processor puts around one text and around a pair, found by encoding probes
    // with and without them (runtime/text.py special_affixes).
    const a = this.ids("a");
    const b = this.ids("b");
    const single = this.tokenizer.encode("a").ids;
    const start = findRun(single, a);
    if (start < 0) throw new InferenceError("cannot find where the tokenizer's special tokens go (probe text not found in its encoding)");
    this.prefix = single.slice(0, start);
    this.suffix = single.slice(start + a.length);
    const pair = this.tokenizer.encode("a", { text_pair: "b", return_token_type_ids: true });
    const i = findRun(pair.ids, a);
    const j = i < 0 ? -1 : findRun(pair.ids, b, i + a.length);
    if (j >= 0) {
      const types = pair.token_type_ids || pair.ids.map(() => 0);
      this.pairTemplate = {
        prefix: pair.ids.slice(0, i), prefixTypes: types.slice(0, i), typeA: types[i] ?? 0,
        middle: pair.ids.slice(i + a.length, j), middleTypes: types.slice(i + a.length, j), typeB: types[j] ?? 0,
        suffix: pair.ids.slice(j + b.length), suffixTypes: types.slice(j + b.length),
      };
    } else {
      this.pairTemplate = null;
    }
  }

  /** Token ids of one text, without special tokens, nothing cut. */
  ids(text) {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /** How many special tokens a single text (or a pair) gets. */
  numSpecial(pair = false) {
    if (!pair) return this.prefix.length + this.suffix.length;
    const t = this.pairTemplate;
    return t.prefix.length + t.middle.length + t.suffix.length;
  }

  /**
   * Ids and token types of a sentence pair under `maxLength` tokens, special tokens included,
   * truncated as Rust's `tokenizers` does with strategy longest_first (the longer text
   * shortened first, then both to half), and whether it was truncated.
   */
  encodePair(text, pair, maxLength) {
    const t = this.pairTemplate;
    if (!t) throw new InferenceError("this tokenizer has no template for sentence pairs");
    let first = this.ids(text);
    let second = this.ids(pair);
    const budget = maxLength - this.numSpecial(true);
    let truncated = false;
    if (first.length + second.length > budget) {
      truncated = true;
      if (budget <= 0) {
        first = [];
        second = [];
      } else {
        let n1 = first.length;
        let n2 = second.length;
        const swap = n1 > n2;
        if (swap) [n1, n2] = [n2, n1];
        n2 = n1 > budget ? n1 : Math.max(n1, budget - n1);
        if (n1 + n2 > budget) {
          n1 = Math.floor(budget / 2);
          n2 = n1 + (budget % 2);
        }
        if (swap) [n1, n2] = [n2, n1];
        first = first.slice(0, n1);
        second = second.slice(0, n2);
      }
    }
    const ids = [...t.prefix, ...first, ...t.middle, ...second, ...t.suffix];
    const types = [...t.prefixTypes, ...first.map(() => t.typeA), ...t.middleTypes, ...second.map(() => t.typeB),
      ...t.suffixTypes];
    return { ids, types, truncated };
  }
}
