// The page's Web Worker: the model is loaded and run here, off the page's main thread.
// Messages in: {id, op: "load", url} | {id, op: "classify", inputs, topK}; out: {id, ok, result | error}.
import { load, ort } from "./classifier.js";

let classifier = null;

// ort's .wasm lies beside this file (the folder `tfm-cls export --web` writes).
ort.env.wasm.wasmPaths = { wasm: new URL("ort-wasm-simd-threaded.wasm", self.location.href).href };

self.onmessage = async ({ data }) => {
  const { id, op } = data;
  try {
    let result;
    if (op === "load") {
      if (classifier) await classifier.release();
      classifier = null;
      classifier = await load(new URL(data.url, self.location.href).href, { name: data.url });
      result = classifier.facts();
    } else if (op === "classify") {
      if (!classifier) throw new Error("no model loaded");
      const start = performance.now();
      const rows = await classifier.classify(data.inputs, { topK: data.topK ?? null });
      result = { rows, ms: performance.now() - start };
    } else {
      throw new Error(`unknown operation ${op}`);
    }
    self.postMessage({ id, ok: true, result });
  } catch (err) {
    self.postMessage({ id, ok: false, error: err && err.message ? err.message : String(err) });
  }
};
