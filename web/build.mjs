// npm run build: web/dist/ holds what `tfm-cls export --web` copies beside the model: the page
// (index.html, page.js), the worker that runs the model, the runtime as one ES module for pages
// of your own (tfm-cls.js), and onnxruntime-web's WASM binary.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
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
