"""Seeds for reproducible research code that never reach privacy noise.

`keras.utils.set_random_seed` sets a TensorFlow global seed, and every
random op traced while it is set gets a fixed op seed: a noise layer traced
or converted afterwards in the same process would draw the same noise on
every device (tflite.check_unseeded_builtins refuses such a model). Code
that wants seeded weights or shuffling (attackers, training set-up) seeds
inside `scoped_seed`, which leaves no global seed behind.
"""

import contextlib
import random

import numpy as np


@contextlib.contextmanager
def scoped_seed(seed):
    """Seeds Python, numpy, TensorFlow and Keras inside the block;
    afterwards the Python, numpy and Keras seed states are restored and
    TensorFlow's global seed is unset again.

    Example:
    >>> with scoped_seed(0):
    ...     model = keras.Sequential([keras.layers.Dense(4)])
    """
    import keras
    import tensorflow as tf

    python_state = random.getstate()
    numpy_state = np.random.get_state()
    keras_state = _keras_seed_state()
    keras.utils.set_random_seed(seed)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        tf.random.set_seed(None)
        _restore_keras_seed_state(keras_state)


# Where keras.utils.set_random_seed keeps Keras' own seed: the seed, and the
# global SeedGenerator that unseeded `keras.random` calls draw from.
_KERAS_SEED_ATTRIBUTES = ("global_random_seed", "global_seed_generator")


def _keras_seed_state():
    """Keras' global seed and SeedGenerator (to put back afterwards)."""
    from keras.src.backend.common import global_state

    return {name: global_state.get_global_attribute(name)
            for name in _KERAS_SEED_ATTRIBUTES}


def _restore_keras_seed_state(state):
    from keras.src.backend.common import global_state

    for name, value in state.items():
        global_state.set_global_attribute(name, value)
