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
QUANTIZATIONS = ("int8", "float32")
