"""Export: TFLite conversion and inspection (more in the export issue)."""

from tfdptext.export.tflite import ConversionError
from tfdptext.export.tflite import check_unseeded_builtins
from tfdptext.export.tflite import convert
from tfdptext.export.tflite import convert_signatures
from tfdptext.export.tflite import operators
from tfdptext.export.tflite import signature_keys
