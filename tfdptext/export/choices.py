"""The export's choices, as constants (pure Python: a program's flags and
`--help` read them without importing TensorFlow)."""

from tfdptext.privacy import randomness

# "input" (the default): the phone model takes `random_words` from the
# app's secure generator. "internal": the model's own RANDOM_* ops, keyed
# from 32 bits per app process (predictable; opt-in only).
NOISE_INPUT = "input"
NOISE_INTERNAL = "internal"
NOISE_SOURCES = (NOISE_INPUT, NOISE_INTERNAL)
RANDOMNESS = {NOISE_INPUT: randomness.APP_SECURE_RNG,
              NOISE_INTERNAL: randomness.TFLITE_INTERNAL}
QUANTIZATIONS = ("int8", "float32", "int4")
# int4 (`tfdptext.export.int4`): only for the splits whose guarantee does not
# read the weights (noise on a normalized vector, a code by randomized
# response); the token-level ones privatize rows of an embedding table that
# 4-bit weights would change (d_chi's metric, BRR's codes).
INT4_SPLITS = ("sequence_representation", "code")
