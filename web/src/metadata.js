// The metadata of a tfm_cls .onnx file, as tfm_cls/runtime/metadata.py reads it (ExportMetadata.
// from_props, require_classifier) and tfm_cls/runtime/session.py checks it against the graph
// (classifier_metadata): the same keys, the same refusals, the same messages.

import { InferenceError } from "./errors.js";
import { LongText } from "./text.js";

export const FORMAT_KEY = "tfm_cls.format";
export const FORMAT_VERSION = "tfm_cls-onnx/1";
export const TASK_KEY = "tfm_cls.task";

// metadata key -> field; JSON-valued and integer-valued fields as in metadata.py.
const KEYS = {
  "tfm_cls.format": "format", "tfm_cls.task": "task", "tfm_cls.model_class": "model_class",
  "tfm_cls.model_config": "model_config", "tfm_cls.max_length": "max_length",
  "tfm_cls.export_sizes": "export_sizes", "tfm_cls.version": "version", "torch.version": "torch_version",
  "onnx.opset": "opset", "tfm_cls.labels": "labels", "tfm_cls.tokenizer": "tokenizer",
  "tfm_cls.bos_id": "bos_id", "tfm_cls.eos_id": "eos_id", "tfm_cls.encoder_file": "encoder_file",
  "tfm_cls.decoder_file": "decoder_file", "tfm_cls.head": "head", "tfm_cls.ensure_label": "ensure_label",
  "tfm_cls.thresholds": "thresholds", "tfm_cls.fixed_threshold": "fixed_threshold",
  "tfm_cls.text_pair": "text_pair", "tfm_cls.temperature": "temperature",
  "tfm_cls.weights_sha256": "weights_sha256", "tfm_cls.long_text": "long_text", "tfm_cls.fusions": "fusions",
  "tfm_cls.quantization": "quantization",
};
const FIELD_KEYS = Object.fromEntries(Object.entries(KEYS).map(([k, v]) => [v, k]));
const JSON_FIELDS = new Set(["model_config", "export_sizes", "labels", "ensure_label", "thresholds",
  "fixed_threshold", "text_pair", "fusions", "quantization", "temperature"]);
const INT_FIELDS = new Set(["max_length", "opset", "bos_id", "eos_id"]);
const CLASSIFIER_REQUIRED = ["labels", "max_length", "model_config", "tokenizer"];
// export spec task -> task type (tfm_cls.runtime.heads.ONNX_TASKS)
export const ONNX_TASKS = {
  "text-classification": "single_label",
  "multi-label-classification": "multi_label",
  "text-regression": "regression",
};

const pyRepr = (s) => (s === undefined ? "'no such key'" : `'${String(s).replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`);

/** Python's int(str): optional sign and surrounding whitespace, digits (underscores between them). */
function pyInt(text) {
  const t = text.trim();
  if (!/^[+-]?\d+(_\d+)*$/.test(t)) throw new Error(`invalid literal for int() with base 10: ${pyRepr(text)}`);
  return Number(t.replace(/_/g, ""));
}

/** The metadata of a file's metadata_props (ExportMetadata.from_props). */
export function fromProps(props, where = "model") {
  if (props[FORMAT_KEY] !== FORMAT_VERSION) {
    throw new InferenceError(
      `${where} is not a tfm_cls model: metadata '${FORMAT_KEY}' should be '${FORMAT_VERSION}', ` +
      `found ${pyRepr(props[FORMAT_KEY])}. Export one with \`tfm-cls export --run RUN\`.`);
  }
  if (!(TASK_KEY in props)) throw new InferenceError(`${where} carries the tfm_cls marker but no '${TASK_KEY}'; re-export it`);
  const meta = { ensure_label: true, fixed_threshold: 0.5 };
  for (const [key, name] of Object.entries(KEYS)) {
    if (!(key in props)) continue;
    const text = props[key];
    try {
      if (name === "long_text") meta[name] = LongText.fromJSON(text);
      else if (JSON_FIELDS.has(name)) meta[name] = JSON.parse(text);
      else if (INT_FIELDS.has(name)) meta[name] = pyInt(text);
      else meta[name] = text;
    } catch (err) {
      throw new InferenceError(`${where}: unreadable tfm_cls metadata '${key}' (${err.message}); re-export it`);
    }
  }
  if (meta.fixed_threshold === null || meta.ensure_label === null) {
    throw new InferenceError(`${where}: unreadable tfm_cls thresholds (null); re-export it`);
  }
  if ("temperature" in meta) {
    const t = meta.temperature;
    if (!(typeof t === "number" && Number.isFinite(t) && t > 0)) {
      throw new InferenceError(`${where}: tfm_cls metadata '${FIELD_KEYS.temperature}' should be a positive ` +
        `number, found ${JSON.stringify(t)}; re-export it`);
    }
  }
  meta.pair = meta.task.endsWith("-pair");
  meta.spec_task = meta.pair ? meta.task.slice(0, -"-pair".length) : meta.task;
  return meta;
}

/** What session.py's classifier_metadata refuses: not a classifier, a missing key, values of the
 * wrong types, inputs or outputs that do not fit the metadata. `graph`: {inputs: [names], outputs:
 * [{name, dims}]} (inputs as the session lists them: initializers excluded). */
export function checkClassifier(meta, graph, where) {
  if (!(meta.spec_task in ONNX_TASKS)) {
    throw new InferenceError(`${where} is a tfm_cls '${meta.task}' model; this runs ` +
      `${pyList(Object.keys(ONNX_TASKS).sort())} models`);
  }
  const missing = CLASSIFIER_REQUIRED.filter((name) => meta[name] === undefined || meta[name] === null)
    .map((name) => FIELD_KEYS[name]);
  if (missing.length) {
    throw new InferenceError(`${where} carries the tfm_cls marker but lacks the metadata ${pyList(missing)}; ` +
      "re-export it with `tfm-cls export --run RUN`");
  }
  const labelsOk = Array.isArray(meta.labels) && meta.labels.every((x) => typeof x === "string");
  const configOk = meta.model_config && typeof meta.model_config === "object" && !Array.isArray(meta.model_config)
    && "pad_token_id" in meta.model_config;
  if (!labelsOk || !configOk) {
    throw new InferenceError(`${where}: unreadable tfm_cls metadata (labels or model_config); re-export it`);
  }
  const task = ONNX_TASKS[meta.spec_task];
  const wanted = ["input_ids", "attention_mask", ...(meta.pair ? ["token_type_ids"] : [])];
  const outputs = Object.fromEntries(graph.outputs.map((o) => [o.name, o.dims]));
  const problems = [];
  if (JSON.stringify(graph.inputs) !== JSON.stringify(wanted)) {
    problems.push(`its graph takes inputs ${pyList(graph.inputs)}, its metadata says ${pyList(wanted)}`);
  }
  for (const name of ["logits", ...(task === "regression" ? ["value"] : [])]) {
    if (!(name in outputs)) problems.push(`its graph has no '${name}' output (outputs: ${pyList(Object.keys(outputs).sort())})`);
  }
  const dims = outputs.logits || [null, null];
  const width = dims[dims.length - 1];
  const expected = task === "regression" ? 1 : meta.labels.length;
  if (typeof width === "number" && width !== expected) {
    problems.push(`its graph has ${width} outputs but its metadata lists ${meta.labels.length} labels ` +
      `(a ${task} model needs ${expected})`);
  }
  if (problems.length) {
    throw new InferenceError(`${where}: the metadata does not fit the graph: ${problems.join("; ")}; re-export it`);
  }
  return task;
}

function pyList(items) {
  return `[${items.map((x) => pyRepr(x)).join(", ")}]`;
}
