/** A model or input the runtime refuses, with the message the Python runtime gives
 * (tfm_cls.errors.InferenceError): every rejected promise of this package is one of these. */
export class InferenceError extends Error {
  constructor(message) {
    super(message);
    this.name = "InferenceError";
  }
}
