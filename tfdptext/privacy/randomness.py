"""Where a mechanism's random numbers come from, as part of its guarantee.

A DP guarantee assumes noise the adversary cannot predict. Which generator
drew it is therefore a condition of every guarantee, stated with it:

- `APP_SECURE_RNG`: random words fed to an exported phone model by the app,
  from the platform's cryptographically secure generator (the default
  export). The model mixes them (`tfdptext.privacy.extraction`: each word
  its mechanism reads is the sum of g >= 2 of them, so a release is exact
  while every group holds one fresh word) and makes its release unusable
  (NaN, or token id -1) when a sample of them shows a defect mixing
  cannot undo: a stuck bit, unfilled, constant, counters, LCGs, bytes too
  even or too repetitive, repeated words (`tfdptext.privacy.
  word_statistics`). No check can tell a predictable generator
  (java.util.Random seeded with the time) or a buffer reused from an
  earlier call from good words.
- `OS_ENTROPY`: Python paths of this package that release data
  (`tfdptext.models.secure.SecureUserSide`, evaluation releases,
  `tfdptext.offline`) read `os.urandom` for every release.
- `TENSORFLOW_UNSEEDED`: a Keras layer called directly draws from
  TensorFlow's unseeded random ops. Each op is keyed once per process
  from a std::mt19937_64 seeded by one 32-bit std::random_device value
  (tsl `random::New64`), and Philox is not a cryptographic generator:
  fine for training and experiments, not for data that leaves a user.
- `TFLITE_INTERNAL`: an exported model's own RANDOM_* ops (opt-in,
  `--noise_source=internal`). TFLite keys every op from one process-wide
  std::mt19937_64 seeded by a single 32-bit std::random_device value
  (tensorflow/lite/kernels/random_ops.cc): all noise of an app process is
  one of 2^32 streams, which an attacker with the public .tflite and one
  release can search (tfdptext.audit.seed_recovery).
- `SEEDED`: a fixed seed, for reproducible research only: no privacy
  against anyone who knows or guesses the seed.
"""

import math

from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

APP_SECURE_RNG = "app_secure_rng"
OS_ENTROPY = "os_entropy"
TENSORFLOW_UNSEEDED = "tensorflow_unseeded"
TFLITE_INTERNAL = "tflite_internal"
SEEDED = "seeded"

SOURCES = (APP_SECURE_RNG, OS_ENTROPY, TENSORFLOW_UNSEEDED, TFLITE_INTERNAL,
           SEEDED)

# Bits of resolution of one uniform number (randomized response's integer
# thresholds, word dropout, Box-Muller angles).
UNIFORM_BITS = {
    APP_SECURE_RNG: 24,      # 24 bits of each random word
    OS_ENTROPY: 24,
    TENSORFLOW_UNSEEDED: 23,  # Uint32ToFloat keeps a 23-bit mantissa
    TFLITE_INTERNAL: 23,
    SEEDED: 23,
}

DESCRIPTIONS = {
    APP_SECURE_RNG: (
        "randomness: random words from the app's cryptographically secure "
        "generator (SecureRandom, SecRandomCopyBytes, "
        "crypto.getRandomValues), fresh for every release; each word the "
        "mechanism reads is the sum modulo 2^32 of g >= 2 of them, so the "
        "release is exact while every such group holds one fresh word (a "
        "few bad words cannot change it); the model refuses (NaN / id -1 "
        "output) buffers with a defect mixing cannot undo (a stuck bit, "
        "unfilled, constant, counters, LCGs, uneven or repeated bytes, "
        "repeated words), but no check can see a predictable generator "
        "(java.util.Random, a time seed) or reuse across calls: the "
        "guarantee holds only for the secure generator"),
    OS_ENTROPY: (
        "randomness: os.urandom, fresh for every release"),
    TENSORFLOW_UNSEEDED: (
        "randomness: TensorFlow's unseeded random ops (Philox keyed once "
        "per process from a 32-bit std::random_device seed; not a "
        "cryptographic generator). Fine for training and experiments; for "
        "releases that leave a user, use SecureUserSide or an exported "
        "model fed by the app's secure generator"),
    TFLITE_INTERNAL: (
        "randomness: the model's own TFLite RANDOM_* ops (opt-in "
        "noise_source=internal). All noise of an app process comes from "
        "one std::mt19937_64 seeded by a single 32-bit std::random_device "
        "value, so it is one of 2^32 predictable streams: an attacker with "
        "the .tflite and one release can search the seed and remove the "
        "noise of every release of that process. The guarantee holds only "
        "against attackers who cannot do that"),
    SEEDED: (
        "randomness: a fixed seed (reproducible research only); anyone who "
        "knows or guesses the seed can remove the noise: no privacy"),
}


# The sources whose noise is computed from random words (the exported
# phone model and SecureUserSide): their exponentials are read from whole
# words (`tfdptext.layers.sampling`), the others' from 23-bit uniforms.
WORD_SOURCES = (APP_SECURE_RNG, OS_ENTROPY)


def check_source(source):
    """Returns `source` if it is one of SOURCES, else raises ValueError."""
    if source not in SOURCES:
        raise ArgumentError(
            f"`randomness` must be one of {SOURCES}, received {source!r}.")
    return source


def uniform_bits(source):
    """Resolution in bits of the uniforms drawn from `source`."""
    return UNIFORM_BITS[check_source(source)]


def reads_words(source):
    """Whether noise from `source` is computed from random words."""
    return check_source(source) in WORD_SOURCES


# Checks of random words fed to a model (fail closed;
# `tfdptext.privacy.word_statistics`): a call of one buffer from a good
# generator fails them with probability below FALSE_ALARM.
FALSE_ALARM = 2.0**-40


def mean_tolerance(num_words, false_alarm=FALSE_ALARM):
    """Largest |mean(U) - 1/2| accepted for `num_words` uniforms in [0, 1].

    Hoeffding: P(|mean - 1/2| >= t) <= 2 exp(-2 W t^2), so
    t = sqrt(ln(2 / false_alarm) / (2 W)).

    Example:
    >>> round(mean_tolerance(768), 3)
    0.136
    """
    num_words = validation.check_int("num_words", num_words, minimum=1)
    _check_false_alarm(false_alarm)
    return math.sqrt(math.log(2.0 / false_alarm) / (2.0 * num_words))


def _check_false_alarm(false_alarm):
    if not (0.0 < false_alarm < 1.0):
        raise ArgumentError(f"`false_alarm` must be in (0, 1), received "
                         f"{false_alarm!r}.")
