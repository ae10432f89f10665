// tfm-cls-web: a tfm_cls .onnx export in the browser or in Node, the rows of `tfm-cls infer`.
export { load, Classifier, ort } from "./classifier.js";
export { InferenceError } from "./errors.js";
export { readModel } from "./protobuf.js";
export { fromProps, checkClassifier } from "./metadata.js";
export { LongText, isEmpty, pyRound } from "./text.js";
export { round6 } from "./heads.js";
