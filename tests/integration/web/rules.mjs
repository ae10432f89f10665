// node rules.mjs IN.json OUT.json: the JS runtime's small rules on given values, for
// test_js_rules.py to compare with Python's: isEmpty (str.strip()), round6 (round(x, 6)),
// pyRound (round(x)), and the rows' "top" (topK) of one model.
import { readFileSync, writeFileSync } from "node:fs";
import { isEmpty, load, pyRound, round6 } from "../../../web/src/index.js";

const input = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const out = {
  empty: input.chars.map((c) => isEmpty(String.fromCodePoint(c))),
  round6: input.floats.map(round6),
  round: input.halves.map(pyRound),
};
const clf = await load(input.model);
out.rows = await clf.classify(input.texts, { topK: 2 });
writeFileSync(process.argv[3], JSON.stringify(out));
