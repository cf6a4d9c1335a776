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
    """Seeds Python, numpy and TensorFlow inside the block; afterwards the
    Python and numpy states are restored and TensorFlow's global seed is
    unset again.

    Example:
    >>> with scoped_seed(0):
    ...     model = keras.Sequential([keras.layers.Dense(4)])
    """
    import keras
    import tensorflow as tf

    python_state = random.getstate()
    numpy_state = np.random.get_state()
    keras.utils.set_random_seed(seed)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        tf.random.set_seed(None)
