// npm run build: web/dist/ holds what `tfm-cls export --web` copies beside the model: the page
// (index.html, page.js), the worker that runs the model, the runtime as one ES module for pages
// of your own (tfm-cls.js), and onnxruntime-web's WASM binary; and build.json, the digest of what
// it was built from (package-lock.json, this file, src/, page/), which setup.py compares before a
// wheel takes the bundle (it builds again where they differ).
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");
mkdirSync(dist, { recursive: true });
const common = { bundle: true, format: "esm", platform: "browser", target: "es2022", minify: true,
  external: ["node:*"], logLevel: "warning", legalComments: "none" };
await build({ ...common, entryPoints: { "tfm-cls-worker": join(here, "src/worker.js"), "tfm-cls": join(here, "src/index.js"),
  page: join(here, "page/page.js") }, outdir: dist });
copyFileSync(join(here, "page/index.html"), join(dist, "index.html"));
copyFileSync(join(here, "node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.wasm"), join(dist, "ort-wasm-simd-threaded.wasm"));

// The digest setup.py computes the same way (sources_digest): each file's path and bytes, in path order.
export function sourcesDigest(root) {
  const files = ["package-lock.json", "build.mjs",
    ...["src", "page"].flatMap((d) => readdirSync(join(root, d)).map((f) => `${d}/${f}`))].sort();
  const hash = createHash("sha256");
  for (const f of files) hash.update(`${f}\0`).update(readFileSync(join(root, f))).update("\0");
  return hash.digest("hex");
}
writeFileSync(join(dist, "build.json"), JSON.stringify({ sources_sha256: sourcesDigest(here) }) + "\n");
