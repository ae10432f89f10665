#!/usr/bin/env node
// node web/bin/infer.mjs --model M.onnx [--input in.jsonl] [--output out.jsonl]: the rows of
// `tfm-cls infer` from the JS runtime (JSONL in: {"text", "text_pair", "id"} a line; - = stdin).
import { readFileSync, writeFileSync } from "node:fs";
import { isEmpty, load } from "../src/index.js";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
if (!args.model) {
  process.stderr.write("usage: infer.mjs --model M.onnx [--input in.jsonl|-] [--output out.jsonl|-]\n");
  process.exit(2);
}
try {
  const clf = await load(args.model);
  // Lines as runtime/readers.py reads them: split at "\n" only, a "\r" before it dropped, a
  // byte-order mark at the start dropped, a blank line (Python's whitespace) an empty record.
  const raw = readFileSync(!args.input || args.input === "-" ? 0 : args.input, "utf-8").replace(/^\ufeff/, "");
  const lines = raw.split("\n").map((line) => line.replace(/\r$/, ""));
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  const inputs = lines.map((line, i) => {
    if (isEmpty(line)) return { text: "" };
    try {
      return JSON.parse(line);
    } catch (err) {
      throw new Error(`${args.input || "<stdin>"}, line ${i + 1}: not valid JSON (${err.message})`);
    }
  });
  const rows = await clf.classify(inputs);
  const out = rows.map((r) => JSON.stringify(r) + "\n").join("");
  if (!args.output || args.output === "-") process.stdout.write(out);
  else writeFileSync(args.output, out);
} catch (err) {
  process.stderr.write(`error: ${err.message}\n`);
  process.exit(1);
}
