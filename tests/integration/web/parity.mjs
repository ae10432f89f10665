// node parity.mjs JOBS.json: for each job {model, input, output, options} the rows of the JS runtime (web/)
// as JSONL, and with "ids" the model rows (token ids) of each text; for each {model, error} the
// message load() rejects with. One process for every job: onnxruntime-web starts once.
import { readFileSync, writeFileSync } from "node:fs";
import { load } from "../../../web/src/index.js";

const jobs = JSON.parse(readFileSync(process.argv[2], "utf-8"));
for (const job of jobs) {
  if (job.error) {
    try {
      await load(job.model);
      job.result = null;
    } catch (err) {
      job.result = `${err.name}: ${err.message}`;
    }
    continue;
  }
  const clf = await load(job.model, job.options || {});
  const inputs = readFileSync(job.input, "utf-8").split("\n").filter((l) => l).map((l) => JSON.parse(l));
  const rows = await clf.classify(inputs);
  writeFileSync(job.output, rows.map((r) => JSON.stringify(r) + "\n").join(""));
  if (job.ids) {
    const texts = inputs.map((r) => r.text);
    job.result = clf.pair ? texts.map((t, i) => clf.tokenizer.encodePair(t, inputs[i].text_pair, clf.maxLength).ids)
      : clf.encoder.encode(texts).ids;
  }
  await clf.release();
}
writeFileSync(process.argv[2], JSON.stringify(jobs));
