"""BinarizingAutoencoder: binary word codes learned from real embeddings.

After Tissier, Gravier and Habrard, "Near-lossless binarization of word
embeddings" (AAAI 2019), the first stage of BRR (Carvalho et al.): an
autoencoder whose code is binary and whose decoder shares the encoder's
matrix.

With x the embedding scaled to [-1, 1] (below), W the (bits, dim) matrix
(stored transposed, as the (dim, bits) `kernel`), c and c' biases:

    encoder   b = H(W x + c)          H(z) = 1 if z > 0 else 0
    decoder   y = tanh(W^T b + c')    (tied: the same W)
    loss      mean((x - y)^2) + reg * ||W W^T - I||_F^2

The mean squared error is over the batch and the dim coordinates (the
paper's l_rec averaged over words). The regulariser pushes the rows of W
(one per bit) towards orthonormality, so that bits are decorrelated; it is
the paper's l_reg without its factor 1/2 (that is, `reg` here is half the
paper's lambda_reg).

H has no useful gradient, so training uses a straight-through estimator:
the forward pass is exactly H(z) (0.0 or 1.0), the backward pass uses the
derivative of the logistic sigmoid, sigma'(z) = sigma(z)(1 - sigma(z))
(`straight_through_heaviside`).

Scaling to [-1, 1] (tanh's range): x = clip(v / input_scale, -1, 1) for an
embedding v. The paper clips the raw values to [-1, 1] (input_scale = 1),
which suits GloVe but would leave a table of small values, such as a BERT
token embedding, near 0. `default_input_scale` takes the 99th percentile
of |v| over the table instead: one global factor (directions are kept),
then the 1% largest coordinates are clipped. For GloVe 840B 300-d this
factor is 1.09, so it is the paper's clipping there.

The codes are a public, deterministic function of a public embedding
table: they are not privacy noise, and training them with a fixed seed is
intended (`fit_codes`). `encode` computes them in float64 from the trained
float32 weights, so a word gets the same code in every call.
"""

import numpy as np

import keras
from keras import ops

from tfdptext import seeding
from tfdptext.binary import codes as codes_lib
from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

DEFAULT_BITS = 256
DEFAULT_EPOCHS = 20
DEFAULT_BATCH_SIZE = 64
DEFAULT_LEARNING_RATE = 1e-3
DEFAULT_REG = 1e-3
DEFAULT_SEED = 0
# default_input_scale's percentile of |v| over the table.
SCALE_PERCENTILE = 99.0


def straight_through_heaviside(z):
    """H(z) = 1[z > 0] forward, the gradient of sigmoid(z) backward.

    The forward value is `hard + (soft - stop_gradient(soft))`: the
    bracket is x - x = 0.0 exactly for finite x, so the result is exactly
    0.0 or 1.0.
    """
    soft = ops.sigmoid(z)
    hard = ops.cast(ops.greater(z, 0), z.dtype)
    return hard + (soft - ops.stop_gradient(soft))


def orthogonality_penalty(kernel):
    """||W W^T - I||_F^2 for W = kernel^T, a (dim, bits) kernel: the squared
    Frobenius distance of the bits x bits Gram matrix from the identity."""
    gram = ops.matmul(ops.transpose(kernel), kernel)
    eye = ops.eye(ops.shape(kernel)[1], dtype=gram.dtype)
    return ops.sum(ops.square(gram - eye))


def reconstruction_loss(targets, outputs):
    """Mean squared error over every word and coordinate."""
    return ops.mean(ops.square(targets - outputs))


def default_input_scale(matrix):
    """The 99th percentile of |matrix| (the factor that maps the table to
    [-1, 1] before clipping); raises when it is 0."""
    matrix = _check_matrix(matrix)
    scale = float(np.percentile(np.abs(matrix), SCALE_PERCENTILE))
    if not scale > 0.0:
        raise ArgumentError(
            "`matrix`: at least 99% of its values are 0; there is nothing "
            "to binarize.")
    return scale


def _check_matrix(matrix, name="matrix", dim=None):
    array = np.asarray(matrix)
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise ArgumentError(f"`{name}` must be a 2-D (words, dim) array, "
                            f"received shape {array.shape}.")
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(
            array.dtype, np.complexfloating):
        raise ArgumentError(f"`{name}` must hold real numbers, received "
                            f"dtype {array.dtype}.")
    if dim is not None and array.shape[1] != dim:
        raise ArgumentError(f"`{name}` has {array.shape[1]} dimensions; the "
                            f"model was built for {dim}.")
    array = array.astype(np.float32, copy=False)
    if not np.isfinite(array).all():
        row = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])
        raise ArgumentError(f"`{name}` row {row} holds NaN or +-inf.")
    return array


@keras.saving.register_keras_serializable(package="tfdptext")
class BinarizingAutoencoder(keras.Model):
    """Learns a `bits`-bit binary code per embedding (Tissier et al. 2019).

    Calling the model on (batch, input_dim) embeddings returns the
    reconstruction y in the scaled space; `model.fit(x)` (no targets)
    minimises the module docstring's loss and logs its two parts as
    `reconstruction` and `orthogonality`. `encode` gives the codes.

    Args:
        input_dim: the embeddings' dimension, >= 1.
        bits: code length, a positive multiple of 8 (default 256, as BRR).
        reg: weight of the orthogonality regulariser, >= 0.
        input_scale: embeddings are divided by it, then clipped to
            [-1, 1]; > 0 (`default_input_scale(matrix)` for a table).
        seed: seed of the kernel's Glorot-uniform initialiser (None:
            unseeded).

    Example:
    >>> model = BinarizingAutoencoder(input_dim=300, bits=256,
    ...                               input_scale=default_input_scale(x))
    >>> model.compile(keras.optimizers.Adam(1e-3))
    >>> model.fit(x, batch_size=64, epochs=20)
    >>> encode(model, x).shape
    (33860, 256)

    Reference: J. Tissier, C. Gravier, A. Habrard. Near-lossless
    binarization of word embeddings. AAAI 2019.
    """

    def __init__(self, input_dim, bits=DEFAULT_BITS, reg=DEFAULT_REG,
                 input_scale=1.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.input_dim = validation.check_int("input_dim", input_dim)
        self.bits = codes_lib.check_bits(bits)
        self.reg = validation.check_nonnegative("reg", reg)
        self.input_scale = validation.check_positive("input_scale",
                                                     input_scale)
        self.seed = None if seed is None else validation.check_int(
            "seed", seed, minimum=0)
        self.kernel = self.add_weight(
            shape=(self.input_dim, self.bits), name="kernel",
            initializer=keras.initializers.GlorotUniform(seed=self.seed))
        self.encoder_bias = self.add_weight(
            shape=(self.bits,), name="encoder_bias", initializer="zeros")
        self.decoder_bias = self.add_weight(
            shape=(self.input_dim,), name="decoder_bias",
            initializer="zeros")
        self.reconstruction_tracker = keras.metrics.Mean(
            name="reconstruction")
        self.orthogonality_tracker = keras.metrics.Mean(name="orthogonality")

    def scale_inputs(self, inputs):
        """clip(inputs / input_scale, -1, 1)."""
        return ops.clip(ops.divide(ops.cast(inputs, self.kernel.dtype),
                                   self.input_scale), -1.0, 1.0)

    def call(self, inputs):
        x = self.scale_inputs(inputs)
        bits = straight_through_heaviside(
            ops.matmul(x, self.kernel) + self.encoder_bias)
        return ops.tanh(ops.matmul(bits, ops.transpose(self.kernel))
                        + self.decoder_bias)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        """Reconstruction MSE on the scaled inputs plus reg times the
        orthogonality penalty (module docstring); `y` is not used."""
        del y, sample_weight, training
        reconstruction = reconstruction_loss(self.scale_inputs(x), y_pred)
        orthogonality = orthogonality_penalty(self.kernel)
        self.reconstruction_tracker.update_state(reconstruction)
        self.orthogonality_tracker.update_state(orthogonality)
        return reconstruction + self.reg * orthogonality

    @property
    def metrics(self):
        return [*super().metrics, self.reconstruction_tracker,
                self.orthogonality_tracker]

    def get_config(self):
        config = super().get_config()
        config.update({"input_dim": self.input_dim, "bits": self.bits,
                       "reg": self.reg, "input_scale": self.input_scale,
                       "seed": self.seed})
        return config

    def weights_float64(self):
        """(kernel, encoder_bias, decoder_bias) as float64 numpy arrays."""
        return tuple(np.asarray(w.numpy(), np.float64) for w in (
            self.kernel, self.encoder_bias, self.decoder_bias))


def _check_model(model):
    if not isinstance(model, BinarizingAutoencoder):
        raise ArgumentError("`model` must be a BinarizingAutoencoder, "
                            f"received {type(model).__name__}.")
    return model


def scaled(model, matrix):
    """The model's inputs for `matrix`: clip(matrix / input_scale, -1, 1),
    float64 numpy."""
    model = _check_model(model)
    matrix = _check_matrix(matrix, dim=model.input_dim)
    return np.clip(matrix.astype(np.float64) / model.input_scale, -1.0, 1.0)


def encode(model, matrix):
    """The codes of `matrix`'s rows: (V, bits) uint8 of 0 and 1.

    H(W x + c) computed in float64 from the trained weights; each row's
    code depends only on that row (the same in every call).
    """
    x = scaled(model, matrix)
    kernel, encoder_bias, _ = model.weights_float64()
    return (x @ kernel + encoder_bias > 0.0).astype(np.uint8)


def decode(model, bits_array):
    """The reconstructions tanh(W^T b + c') of codes: (V, dim) float64, in
    the scaled space."""
    model = _check_model(model)
    bits_array = codes_lib.check_bit_array(bits_array)
    if bits_array.shape[1] != model.bits:
        raise ArgumentError(f"`bits_array` has {bits_array.shape[1]} bits; "
                            f"the model has {model.bits}.")
    kernel, _, decoder_bias = model.weights_float64()
    return np.tanh(bits_array.astype(np.float64) @ kernel.T + decoder_bias)


def fit_codes(matrix, bits=DEFAULT_BITS, *, epochs=DEFAULT_EPOCHS,
              batch_size=DEFAULT_BATCH_SIZE,
              learning_rate=DEFAULT_LEARNING_RATE, reg=DEFAULT_REG,
              input_scale=None, seed=DEFAULT_SEED, verbose=0,
              callbacks=None):
    """Trains a `BinarizingAutoencoder` on the rows of `matrix`.

    Adam with `learning_rate`, shuffled mini-batches, `epochs` passes,
    all inside `tfdptext.seeding.scoped_seed(seed)` (initial weights and
    shuffling; no global seed is left behind). A fixed seed is intended:
    the codes are a public deterministic embedding, not privacy noise.

    Args:
        matrix: (V, dim) finite real embeddings.
        bits: code length, a positive multiple of 8.
        epochs, batch_size: >= 1.
        learning_rate: > 0.
        reg: orthogonality weight, >= 0.
        input_scale: > 0, or None for `default_input_scale(matrix)`.
        seed: integer >= 0.
        verbose, callbacks: passed to `model.fit`.

    Returns the trained model (`model.history.history` holds the losses).

    Example:
    >>> model = fit_codes(matrix, bits=256, epochs=20)
    >>> codes = encode(model, matrix)
    """
    matrix = _check_matrix(matrix)
    bits = codes_lib.check_bits(bits)
    epochs = validation.check_int("epochs", epochs)
    batch_size = validation.check_int("batch_size", batch_size)
    learning_rate = validation.check_positive("learning_rate", learning_rate)
    reg = validation.check_nonnegative("reg", reg)
    seed = validation.check_int("seed", seed, minimum=0)
    input_scale = default_input_scale(matrix) if input_scale is None else \
        validation.check_positive("input_scale", input_scale)
    with seeding.scoped_seed(seed):
        model = BinarizingAutoencoder(input_dim=matrix.shape[1], bits=bits,
                                      reg=reg, input_scale=input_scale,
                                      seed=seed)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate))
        model.fit(matrix, batch_size=batch_size, epochs=epochs,
                  shuffle=True, verbose=verbose, callbacks=callbacks)
    return model


__all__ = ["BinarizingAutoencoder", "DEFAULT_BITS", "decode",
           "default_input_scale", "encode", "fit_codes",
           "orthogonality_penalty", "reconstruction_loss", "scaled",
           "straight_through_heaviside"]
