"""The privatizer's table as the phone model holds it, read back from the
.tflite, and the guarantee over that table.

Dynamic-range int8 export quantizes every large constant, the embedding
tables that GATHER reads included: the phone then privatizes the
dequantized rows s * q (q int8, s the tensor's scale), not the float32
rows the model was trained with. For d_chi (token_representation, and
d_chi text-to-text) the guarantee is metric DP in the distance between
rows, so it must be stated over the rows that ship: the export reads the
table back out of user/privatizer.tflite, dequantizes it as the TFLite
kernel does (float32 s * (q - zero_point)), and states the guarantee over
it (its SHA-256, its quantization, how far it moved from the float
table), in the manifest and the guarantee. For BRR the int8 table holds
+-127 with scale 1/127, which dequantizes to exactly +-1: the export
checks that the signs read back are the codes (the guarantee is over the
codes, unchanged) and refuses the export otherwise.

`read_table(tflite_bytes, shape)` and `read_export_table(export_dir)` give
the table to anyone computing the metric (e.g.
`tfdptext.privacy.sequence_distance`) for an export.

Reads the flatbuffer with TensorFlow Lite's schema (no interpreter).
"""

import dataclasses
import hashlib

import numpy as np

from tfdptext.errors import TfdptextError

# TFLite tensor types (schema TensorType).
_FLOAT32, _FLOAT16, _INT8 = 0, 1, 9
_DTYPES = {_FLOAT32: "float32", _FLOAT16: "float16", _INT8: "int8"}


class TableError(TfdptextError):
    """The privatizer's table cannot be read back as expected."""


@dataclasses.dataclass(frozen=True)
class Table:
    """A table that a GATHER op reads, as stored and as dequantized.

    Attributes:
        name: the tensor's name.
        dtype: "float32", "float16" or "int8" (as stored).
        values: the (rows, width) float32 values the kernel computes with.
        scale: int8: the scale(s); None otherwise.
        subgraphs: how many signatures gather it.
    """

    name: str
    dtype: str
    values: np.ndarray
    scale: tuple = None
    subgraphs: int = 1

    @property
    def sha256(self):
        """SHA-256 of the float32 values (C order, little endian)."""
        data = np.ascontiguousarray(self.values, dtype="<f4").tobytes()
        return hashlib.sha256(data).hexdigest()


def gathered_tables(tflite_bytes):
    """Every constant 2-d tensor that a GATHER op reads as its params, in
    every subgraph, dequantized: {buffer index: Table}."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(
        bytearray(tflite_bytes))
    gather = schema.BuiltinOperator.GATHER
    found = {}
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            if max(code.builtinCode, code.deprecatedBuiltinCode) != gather:
                continue
            tensor = subgraph.tensors[op.inputs[0]]
            data = model.buffers[tensor.buffer].data
            if data is None or len(tensor.shape) != 2:
                continue
            if tensor.buffer in found:
                table = found[tensor.buffer]
                found[tensor.buffer] = dataclasses.replace(
                    table, subgraphs=table.subgraphs + 1)
                continue
            found[tensor.buffer] = _dequantize(tensor, bytes(data))
    return found


def _dequantize(tensor, data):
    shape = tuple(int(d) for d in tensor.shape)
    name = tensor.name.decode() if isinstance(tensor.name, bytes) else \
        str(tensor.name)
    if tensor.type == _FLOAT32:
        return Table(name, "float32",
                     np.frombuffer(data, "<f4").reshape(shape).copy())
    if tensor.type == _FLOAT16:
        return Table(name, "float16", np.frombuffer(data, "<f2").reshape(
            shape).astype(np.float32))
    if tensor.type != _INT8:
        raise TableError(f"Gathered table {name} has TFLite type "
                         f"{tensor.type}, not float32, float16 or int8.")
    q = tensor.quantization
    scale = np.asarray(q.scale, np.float32)
    zero = np.asarray(q.zeroPoint if q.zeroPoint is not None else [0],
                      np.float32)
    values = np.frombuffer(data, np.int8).reshape(shape).astype(np.float32)
    if scale.size > 1:  # per channel along quantizedDimension
        axis = int(q.quantizedDimension)
        view = [1, 1]
        view[axis] = -1
        scale, zero = scale.reshape(view), zero.reshape(view)
    # The DEQUANTIZE kernel: float32 scale * (q - zero_point).
    return Table(name, "int8", (scale * (values - zero)).astype(np.float32),
                 scale=tuple(float(s) for s in np.ravel(scale)))


def read_table(tflite_bytes, shape):
    """The one gathered table of `shape` (rows, width) in a .tflite, as
    the phone model computes with it; TableError if there is none, or
    several that differ."""
    shape = tuple(int(d) for d in shape)
    tables = [t for t in gathered_tables(tflite_bytes).values()
              if t.values.shape == shape]
    if not tables:
        raise TableError(f"No GATHER in the model reads a {shape} table.")
    if any(not np.array_equal(t.values, tables[0].values)
           for t in tables[1:]):
        raise TableError(f"The model holds several different {shape} "
                         "tables; which one the privatizer reads is "
                         "ambiguous.")
    return tables[0]


def record(table, trained):
    """The manifest's record of the table the phone holds, against the
    float32 table it was trained with."""
    change = np.abs(table.values - np.asarray(trained, np.float32))
    out = {"tensor": table.name, "shape": list(table.values.shape),
           "dtype": table.dtype, "sha256_float32": table.sha256,
           "max_abs_change": float(change.max()),
           "mean_abs_change": float(change.mean())}
    if table.scale is not None:
        out["scale"] = (table.scale[0] if len(table.scale) == 1
                        else list(table.scale))
    return out


def read_export_table(export_dir):
    """The privatizer's table of an export, as its phone model holds it
    (float32 numpy), from the manifest's user.privatizer_table record;
    None when the export has none (sequence and code splits)."""
    import os

    from tfdptext import rundir

    export = rundir.ExportDir(export_dir, TableError)
    manifest = export.read_manifest()
    info = manifest["user"].get("privatizer_table")
    if info is None:
        return None
    with open(os.path.join(export_dir, manifest["user"]["file"]), "rb") as f:
        table = read_table(f.read(), info["shape"])
    if table.sha256 != info["sha256_float32"]:
        raise TableError(f"{export_dir}: the phone model's table does not "
                         "match the manifest's SHA-256.")
    return table.values
