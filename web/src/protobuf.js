// The few fields of an ONNX ModelProto this runtime needs, read from the file's own bytes:
// onnxruntime-web has no API for metadata_props. Wire format: protobuf's (varints, length-
// delimited fields); every length is checked against the end of its message, so a truncated
// file is an error here rather than a hang or a half-read model.
//
//   ModelProto      7: graph (GraphProto)          14: metadata_props (StringStringEntryProto)
//   GraphProto     11: input (ValueInfoProto)      12: output (ValueInfoProto)
//   ValueInfoProto  1: name  2: type (TypeProto: 1 tensor_type: 1 elem_type, 2 shape: 1 dim: 1 value, 2 param)
//   StringStringEntryProto  1: key  2: value

export class ProtobufError extends Error {}

const decoder = new TextDecoder("utf-8", { fatal: false });

class Reader {
  constructor(bytes, start = 0, end = bytes.length) {
    this.bytes = bytes;
    this.pos = start;
    this.end = end;
  }

  varint() {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtobufError(`truncated varint at byte ${this.pos}`);
      const b = this.bytes[this.pos++];
      value += (b & 0x7f) * scale; // doubles: exact up to 2^53, enough for every length here
      if (b < 0x80) return value;
      scale *= 128;
    }
    throw new ProtobufError(`malformed varint ending at byte ${this.pos}`);
  }

  /** [field, wireType] of the next field, or null at the end of the message. */
  tag() {
    if (this.pos >= this.end) return null;
    const key = this.varint();
    const field = Math.floor(key / 8);
    if (field === 0) throw new ProtobufError(`field number 0 at byte ${this.pos}`);
    return [field, key & 7];
  }

  /** A sub-reader over the next length-delimited field's bytes. */
  sub() {
    const n = this.varint();
    const start = this.pos;
    if (start + n > this.end) {
      throw new ProtobufError(`a field of ${n} bytes at byte ${start} runs past the end (${this.end})`);
    }
    this.pos += n;
    return new Reader(this.bytes, start, start + n);
  }

  string() {
    const r = this.sub();
    return decoder.decode(this.bytes.subarray(r.pos, r.end));
  }

  /** The rest of this (sub-)message as UTF-8 text. */
  rest() {
    const text = decoder.decode(this.bytes.subarray(this.pos, this.end));
    this.pos = this.end;
    return text;
  }

  skip(wire) {
    if (wire === 0) this.varint();
    else if (wire === 1) this.advance(8);
    else if (wire === 2) this.sub();
    else if (wire === 5) this.advance(4);
    else throw new ProtobufError(`unsupported wire type ${wire} at byte ${this.pos}`);
  }

  advance(n) {
    if (this.pos + n > this.end) throw new ProtobufError(`truncated fixed-width field at byte ${this.pos}`);
    this.pos += n;
  }
}

function fields(reader, handlers) {
  for (let t = reader.tag(); t !== null; t = reader.tag()) {
    const [field, wire] = t;
    const handler = handlers[field];
    if (handler && wire === 2) handler(reader.sub());
    else reader.skip(wire);
  }
}

function valueInfo(r) {
  const info = { name: "", elemType: null, dims: null };
  fields(r, {
    1: (s) => { info.name = s.rest(); },
    2: (type) => fields(type, {
      1: (tensor) => {
        for (let t = tensor.tag(); t !== null; t = tensor.tag()) {
          const [field, wire] = t;
          if (field === 1 && wire === 0) info.elemType = tensor.varint();
          else if (field === 2 && wire === 2) {
            info.dims = [];
            fields(tensor.sub(), {
              1: (dim) => {
                let d = null;
                for (let u = dim.tag(); u !== null; u = dim.tag()) {
                  if (u[0] === 1 && u[1] === 0) d = dim.varint();
                  else if (u[0] === 2 && u[1] === 2) d = dim.string();
                  else dim.skip(u[1]);
                }
                info.dims.push(d);
              },
            });
          } else tensor.skip(wire);
        }
      },
    }),
  });
  return info;
}

/**
 * The metadata_props and the graph's declared inputs / outputs of an ONNX file's bytes.
 * @param {Uint8Array} bytes
 * @returns {{props: Object<string, string>, inputs: Array, outputs: Array, hasGraph: boolean}}
 */
export function readModel(bytes) {
  if (!(bytes instanceof Uint8Array)) throw new ProtobufError("expected the file's bytes (a Uint8Array)");
  if (bytes.length === 0) throw new ProtobufError("the file is empty");
  const props = {};
  const inputs = [];
  const outputs = [];
  let hasGraph = false;
  fields(new Reader(bytes), {
    7: (graph) => {
      hasGraph = true;
      fields(graph, {
        11: (v) => inputs.push(valueInfo(v)),
        12: (v) => outputs.push(valueInfo(v)),
      });
    },
    14: (entry) => {
      let key = "";
      let value = "";
      for (let t = entry.tag(); t !== null; t = entry.tag()) {
        if (t[0] === 1 && t[1] === 2) key = entry.string();
        else if (t[0] === 2 && t[1] === 2) value = entry.string();
        else entry.skip(t[1]);
      }
      props[key] = value;
    },
  });
  if (!hasGraph) throw new ProtobufError("no graph in the file");
  return { props, inputs, outputs };
}
