"""4-bit weights for a float32 .tflite: the phone model's weights, and
nothing else, stored as signed 4-bit integers with one scale per row.

    int4_bytes, record = rewrite(float32_bytes)

`rewrite` reads a float32 .tflite (what `tflite.convert_signatures`
writes without quantization) and replaces, in every subgraph:

- the weights of every FULLY_CONNECTED (input 1, shape [out, in]) by an
  INT4 tensor with one scale per output channel (per row; zero point 0),
  which the kernel takes directly: as with dynamic-range int8 weights, it
  quantizes the activations on the fly and computes in integers;
- the params of every GATHER (input 0, an embedding table [rows, width])
  by an INT4 tensor with one scale per row, read by a DEQUANTIZE op whose
  float32 output the GATHER reads instead.

Only constant float32 2-d tensors of at least `min_elements` values are
rewritten (1,024 by default, the TFLite converter's threshold for
dynamic-range quantization). Every other operator, tensor and buffer of
the file stays byte for byte as it was: the ops after the encoder (the
normalization, the noise, the sampler, the checks of the random words,
the release) are the float32 model's. Weights that no operator reads any
more lose their float32 data.

The math is in small pure functions: `quantize_rows` (per-row scale
max|w| / 7, values round(w / scale) in [-7, 7], so that every weight moves
by at most scale / 2), `dequantize_rows` (what the kernels compute with:
float32 scale * q), and `pack` / `unpack` (two values per byte, the first
in the low nibble: TFLite's INT4 layout).

Measured on the README quickstart's MiniLM phone model (code release,
lengths 16/32/64; docs/benchmarks.md): 13.2 MiB with 4-bit weights against
22.8 MiB int8, and the releases of 200 test texts equal to the int8 and
float32 models' on the same inputs.

Example:

>>> import numpy as np
>>> q, scale = quantize_rows(np.array([[1.4, -0.5, 0.2]], np.float32))
>>> q.tolist(), round(float(scale[0]), 6)
([[7, -2, 1]], 0.2)
>>> unpack(pack(q), q.size).tolist()
[7, -2, 1]
"""

import numpy as np

QMAX = 7
"""Largest magnitude of a 4-bit value used (symmetric: -7 to 7)."""
MIN_ELEMENTS = 1024
SCHEME = ("INT4 weights, symmetric, one scale per row (per output channel "
          "of FULLY_CONNECTED weights, per row of GATHER tables, read "
          "through DEQUANTIZE), zero point 0; values in [-7, 7]")


def quantize_rows(weights):
    """(q, scale) of a 2-d float array: scale[i] = max_j |w[i, j]| / 7
    (1 for an all-zero row), q = round(w / scale[:, None]) as int8 in
    [-7, 7]. |w - scale[:, None] * q| <= scale / 2 (up to float32
    rounding of the scale)."""
    w = np.asarray(weights, np.float64)
    if w.ndim != 2:
        raise ValueError(f"`weights` must be 2-d, got shape {w.shape}.")
    if not np.isfinite(w).all():
        raise ValueError("`weights` hold NaN or inf.")
    peak = np.abs(w).max(axis=1)
    scale = np.where(peak > 0, peak / QMAX, 1.0).astype(np.float32)
    q = np.clip(np.rint(w / scale.astype(np.float64)[:, None]), -QMAX, QMAX)
    return q.astype(np.int8), scale


def dequantize_rows(q, scale):
    """The float32 values the kernels compute with: scale[i] * q[i, j]."""
    return (np.asarray(scale, np.float32)[:, None]
            * np.asarray(q, np.float32)).astype(np.float32)


def pack(values):
    """Signed 4-bit `values` (-8 to 7), flattened in C order, two per byte,
    the first in the low nibble; an odd count is padded with 0: uint8."""
    flat = np.asarray(values).reshape(-1).astype(np.int16)
    if flat.size and (flat.min() < -8 or flat.max() > 7):
        raise ValueError("`values` must lie in [-8, 7] (4 bits, signed).")
    if flat.size % 2:
        flat = np.append(flat, 0)
    nibbles = (flat & 0xF).astype(np.uint8)
    return nibbles[0::2] | (nibbles[1::2] << 4)


def unpack(packed, count):
    """The first `count` signed 4-bit values of `pack`'s bytes: int8."""
    data = np.asarray(packed, np.uint8)
    if not 0 <= count <= 2 * data.size:
        raise ValueError(f"`count` must be 0 to {2 * data.size} (two values "
                         f"per byte), got {count}.")
    nibbles = np.stack([data & 0xF, data >> 4], axis=1).reshape(-1)
    values = nibbles.astype(np.int8)
    values[values > 7] -= 16
    return values[:count]


def rewrite(tflite_bytes, min_elements=MIN_ELEMENTS):
    """The float32 .tflite `tflite_bytes` with 4-bit weights (module doc).

    Returns (bytes, record): record = {"scheme", "min_elements",
    "fully_connected": weights rewritten, "gather": tables rewritten}
    (distinct buffers; signatures share them).
    """
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(
        bytearray(tflite_bytes))
    ops = schema.BuiltinOperator
    slots = {ops.FULLY_CONNECTED: 1, ops.GATHER: 0}
    quantized = {}  # float32 buffer -> (INT4 buffer, scale)
    kinds = {ops.FULLY_CONNECTED: set(), ops.GATHER: set()}

    def add_buffer(data):
        buffer = schema.BufferT()
        buffer.data = data
        model.buffers.append(buffer)
        return len(model.buffers) - 1

    def add_tensor(graph, like, suffix, tensor_type, buffer):
        tensor = schema.TensorT()
        tensor.shape, tensor.type, tensor.buffer = list(like.shape), \
            tensor_type, buffer
        tensor.name = like.name + suffix
        graph.tensors.append(tensor)
        return tensor, len(graph.tensors) - 1

    def int4_tensor(graph, weight):
        if weight.buffer not in quantized:
            values = np.frombuffer(bytes(model.buffers[weight.buffer].data),
                                   "<f4").reshape(list(weight.shape))
            q, scale = quantize_rows(values)
            quantized[weight.buffer] = add_buffer(pack(q)), scale
        buffer, scale = quantized[weight.buffer]
        tensor, index = add_tensor(graph, weight, b"/int4",
                                   schema.TensorType.INT4, buffer)
        tensor.quantization = schema.QuantizationParametersT()
        tensor.quantization.scale = [float(s) for s in scale]
        tensor.quantization.zeroPoint = [0] * len(scale)
        tensor.quantization.quantizedDimension = 0
        return index

    def eligible(graph, index):
        weight = graph.tensors[index]
        data = model.buffers[weight.buffer].data
        return (weight.type == schema.TensorType.FLOAT32 and data is not None
                and len(weight.shape) == 2
                and int(np.prod(weight.shape)) >= max(min_elements, 1))

    dequantize = _opcode(model, schema, ops.DEQUANTIZE)
    for graph in model.subgraphs:
        replaced = {}  # float32 tensor -> what the op reads instead
        rewritten = []
        for op in graph.operators:
            builtin = _builtin(model, op)
            slot = slots.get(builtin)
            index = None if slot is None else op.inputs[slot]
            if index is None or index < 0 or not eligible(graph, index):
                rewritten.append(op)
                continue
            key = (builtin, index)
            if key not in replaced:
                source = int4_tensor(graph, graph.tensors[index])
                if builtin == ops.GATHER:  # per-row scales: dequantize
                    _, table = add_tensor(graph, graph.tensors[index],
                                          b"/dequantized",
                                          schema.TensorType.FLOAT32,
                                          add_buffer(None))
                    step = schema.OperatorT()
                    step.opcodeIndex, step.inputs, step.outputs = \
                        dequantize, [source], [table]
                    rewritten.append(step)
                    source = table
                replaced[key] = source
            kinds[builtin].add(graph.tensors[index].buffer)
            op.inputs = list(op.inputs)
            op.inputs[slot] = replaced[key]
            rewritten.append(op)
        graph.operators = rewritten
    read = {graph.tensors[i].buffer for graph in model.subgraphs
            for op in graph.operators for i in op.inputs if i >= 0}
    for buffer in quantized:
        if buffer not in read:
            model.buffers[buffer].data = None
    record = {"scheme": SCHEME, "min_elements": int(min_elements),
              "fully_connected": len(kinds[ops.FULLY_CONNECTED]),
              "gather": len(kinds[ops.GATHER])}
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model)), record


def _builtin(model, op):
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def _opcode(model, schema, builtin):
    """The index of `builtin`'s operator code in `model`, added if
    missing."""
    for i, code in enumerate(model.operatorCodes):
        if max(code.builtinCode, code.deprecatedBuiltinCode) == builtin:
            return i
    code = schema.OperatorCodeT()
    code.builtinCode = builtin
    code.deprecatedBuiltinCode = min(builtin, 127)
    code.version = 1
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1
