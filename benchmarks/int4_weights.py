#!/usr/bin/env python
"""Would 4-bit weights bring the web page under 12 MiB? A measurement, not
an export option.

    python benchmarks/int4_weights.py --int8_dir=DIR --float32_dir=DIR \
        --accuracy_file=examples/reviews_test.csv [--rounds=10 --block=5]

Both directories are tfdptext-export outputs of the SAME run (int8 and
float32). The float32 phone model is rewritten with 4-bit weights: every
FULLY_CONNECTED weight of more than MIN_BYTES becomes an INT4 tensor with
one scale per output channel, which the kernel takes directly (weights
int4, activations quantized on the fly, as int8 exports do with 8 bits);
every such GATHER table (the token and position embeddings) becomes INT4
with one scale per row, dequantized by a DEQUANTIZE op before the GATHER.
Nothing else changes (the noise, the release, the tokenizer contract are
the float32 model's ops). Reported: the files' sizes and zstd (level 3)
sizes, what the page's first load would transfer with it (page_size.json's
other files), and, on the CSV's texts with the SAME token ids and random
words, how many releases equal the int8 model's and each model's accuracy,
plus Python's interpreter latency of both (1 thread, interleaved rounds).
"""

import os
import random
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import browser_latency  # noqa: E402 (labelled_feeds; its flags)
import machine as host  # noqa: E402
import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("int8_dir", None, "The int8 export.", required=True)
flags.DEFINE_string("float32_dir", None, "The float32 export of the same "
                    "run.", required=True)
# --accuracy_file, --rounds and --block: browser_latency.py's flags.

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_BYTES = 100_000
PHONE = os.path.join("user", "privatizer.tflite")


def _int4_bytes(q):
    """Signed 4-bit values packed two per byte, the first in the low
    nibble (TFLite's INT4 layout)."""
    flat = q.reshape(-1).astype(np.int8)
    if flat.size % 2:
        flat = np.append(flat, np.int8(0))
    low = flat[0::2].astype(np.uint8) & 0xF
    high = flat[1::2].astype(np.uint8) & 0xF
    return (low | (high << 4)).astype(np.uint8)


def to_int4(path):
    """The float32 .tflite at `path` with 4-bit weights (module doc):
    bytes."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model(path)
    ops = schema.BuiltinOperator

    def opcode(builtin):
        for i, code in enumerate(model.operatorCodes):
            if max(code.builtinCode, code.deprecatedBuiltinCode) == builtin:
                return i
        code = schema.OperatorCodeT()
        code.builtinCode, code.deprecatedBuiltinCode = builtin, min(
            builtin, 127)
        code.version = 1
        model.operatorCodes.append(code)
        return len(model.operatorCodes) - 1

    dequantize = opcode(ops.DEQUANTIZE)
    packed = {}  # float buffer -> (int4 buffer, scales)

    def add_buffer(data):
        buffer = schema.BufferT()
        buffer.data = data
        model.buffers.append(buffer)
        return len(model.buffers) - 1

    def quantize(index, shape):
        if index not in packed:
            w = np.frombuffer(bytes(model.buffers[index].data),
                              np.float32).reshape(shape)
            scale = np.maximum(np.abs(w).max(axis=1), 1e-12) / 7
            q = np.clip(np.round(w / scale[:, None]), -7, 7)
            packed[index] = (add_buffer(_int4_bytes(q)), scale)
        return packed[index]

    for graph in model.subgraphs:
        rewritten = []
        for op in graph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            slot = {ops.FULLY_CONNECTED: 1, ops.GATHER: 0}.get(builtin)
            weight = None if slot is None else graph.tensors[op.inputs[slot]]
            data = None if weight is None else model.buffers[
                weight.buffer].data
            if weight is None or weight.type != schema.TensorType.FLOAT32 \
                    or data is None or len(data) <= MIN_BYTES:
                rewritten.append(op)
                continue
            buffer, scale = quantize(weight.buffer, list(weight.shape))
            q = schema.TensorT()
            q.shape, q.type, q.buffer = list(weight.shape), \
                schema.TensorType.INT4, buffer
            q.name = weight.name + b"/int4"
            q.quantization = schema.QuantizationParametersT()
            q.quantization.scale = scale.astype(np.float32).tolist()
            q.quantization.zeroPoint = [0] * len(scale)
            q.quantization.quantizedDimension = 0
            graph.tensors.append(q)
            inputs = list(op.inputs)
            inputs[slot] = len(graph.tensors) - 1
            if builtin == ops.GATHER:  # per-row scales: dequantize first
                table = schema.TensorT()
                table.shape, table.type = list(weight.shape), \
                    schema.TensorType.FLOAT32
                table.name, table.buffer = weight.name + b"/dequantized", \
                    add_buffer(None)
                graph.tensors.append(table)
                step = schema.OperatorT()
                step.opcodeIndex, step.inputs = dequantize, [inputs[slot]]
                step.outputs = [len(graph.tensors) - 1]
                rewritten.append(step)
                inputs[slot] = len(graph.tensors) - 1
            op.inputs = inputs
            rewritten.append(op)
        graph.operators = rewritten
    live = {graph.tensors[i].buffer for graph in model.subgraphs
            for op in graph.operators for i in op.inputs if i >= 0}
    for index in packed:
        if index not in live:
            model.buffers[index].data = None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def main(argv):
    del argv
    if not FLAGS.accuracy_file:
        raise SystemExit("int4_weights: give --accuracy_file (a CSV with "
                         "text and label columns).")
    import zstandard
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export.local import ExportedPipeline
    from tfdptext.models import secure

    pipeline = ExportedPipeline(FLAGS.int8_dir, num_threads=1)
    files = {"int8": os.path.join(FLAGS.int8_dir, PHONE),
             "float32": os.path.join(FLAGS.float32_dir, PHONE)}
    int4 = to_int4(files["float32"])
    interpreters = {name: Interpreter(model_path=path, num_threads=1)
                    for name, path in files.items()}
    interpreters["int4"] = Interpreter(model_content=int4, num_threads=1)
    sizes = {}
    for name in ("int8", "int4", "float32"):
        data = int4 if name == "int4" else open(files[name], "rb").read()
        sizes[name] = {"bytes": len(data), "zstd_3": len(
            zstandard.ZstdCompressor(level=3).compress(data))}
    page = host_json("page_size")
    model_sent = [f["transfer"] for f in page["first_load"]["files"]
                  if f["url"].endswith("/privatizer.tflite")][0]
    others = page["first_load"]["transfer_bytes"] - model_sent
    truth, feeds = browser_latency.labelled_feeds(pipeline,
                                                  FLAGS.accuracy_file)
    releases = {name: [] for name in interpreters}
    for model, feed in feeds:
        for name, interpreter in interpreters.items():
            releases[name].append(interpreter.get_signature_runner(
                model.signature)(**feed)[pipeline.spec.release])
    same = {}
    for name, released in releases.items():
        labels = pipeline.serve({pipeline.spec.release: np.concatenate(
            released)})["label"]
        same[name] = {
            "identical_to_int8": sum(bool(np.array_equal(a, b)) for a, b in
                                     zip(released, releases["int8"])),
            "accuracy": float(np.mean(np.array(labels) == truth))}
    latency = time_python(pipeline, interpreters, secure)
    result = {"sizes": sizes, "page_other_files_bytes": others,
              "first_load_with_int4_bytes": others + sizes["int4"]["zstd_3"],
              "texts": len(feeds), "file": FLAGS.accuracy_file,
              "same_inputs": same, "python_ms_round_medians": latency}
    host.write_json(None, result, name="web-int4-weights")
    print({k: result[k] for k in ("sizes", "first_load_with_int4_bytes",
                                  "same_inputs")})
    for key, values in latency.items():
        print(key, f"{np.median(values):.2f} ({min(values):.2f}-"
              f"{max(values):.2f})")


def host_json(name):
    import json

    with open(os.path.join(ROOT, "benchmarks", "results",
                           f"{name}.json")) as f:
        return json.load(f)["result"]


def time_python(pipeline, interpreters, secure):
    """{"LENGTH NAME": [round medians, ms]} for int8 and int4."""
    settings = [(m.length, name) for m in pipeline.models
                for name in ("int8", "int4")]
    medians = {f"{length} {name}": [] for length, name in settings}
    rng = random.Random(0)
    for _ in range(FLAGS.rounds):
        rng.shuffle(settings)
        for length, name in settings:
            model = pipeline.model_for(length)
            run = interpreters[name].get_signature_runner(model.signature)
            ids = np.full((1, length), 2307, np.int32)
            ids[0, 0], ids[0, -1] = 101, 102
            mask = np.ones((1, length), np.int32)
            times = []
            for i in range(FLAGS.block + 1):
                words = secure.os_random_words([1, model.random_words])
                start = time.perf_counter()
                run(token_ids=ids, padding_mask=mask, random_words=words)
                if i:
                    times.append(1000 * (time.perf_counter() - start))
            medians[f"{length} {name}"].append(float(np.median(times)))
    return medians


if __name__ == "__main__":
    app.run(main)
