"""The pieces of the code release: a text becomes one of m codes.

The user side maps a text to m logits (encoder, pooling, a dense layer),
picks the code c = argmax (`ArgmaxCode`) and releases it by m-ary
randomized response (`tfdptext.layers.CodeRandomizedResponse`). The server
decodes a released code to class logits with a table (`CodeDecoder`): a
table is the most general function of a discrete code, so m > K (several
codes per class) and m < K (classes sharing a code, which a skewed prior
at a small epsilon favours: `tfdptext.privacy.identification.
code_grouping`) need nothing else.

Training cannot go through the argmax, so it uses the exact expected loss
over the channel (`CodeChannel`, then `CodeDecoder` on the distribution it
gives): with q = softmax(logits) T (T the randomized-response transition
matrix), the expected negative log-likelihood is -sum_c q_c log P(y | c),
linear in q, differentiable, and with no sampling. Its minimum puts all of softmax(logits) on one code,
which is what the argmax releases (`ExpectedNegativeLogLikelihood`).
"""

import keras
import numpy as np
import tensorflow as tf

from tfdptext.errors import ArgumentError
from tfdptext.layers import base
from tfdptext.privacy import categorical
from tfdptext.privacy import validation

# The names of the code release's layers in the split model.
CODE_LOGITS = "code_logits"
ARGMAX_CODE = "code"
CODE_DECODER = "code_decoder"
# The initial decoder logit of a code's own class (code c -> class c mod K):
# every code starts decoded to a different class where m >= K, so codes do
# not collapse onto one class at the start.
INITIAL_LOGIT = 2.0


@keras.saving.register_keras_serializable(package="tfdptext")
class ArgmaxCode(keras.layers.Layer):
    """(batch, m) logits -> (batch,) int32 code: the index of the largest
    logit (the lowest among ties). A row holding NaN or inf gives -1, an
    unusable code that the privatizer and the server refuse.

    Example:
    >>> ArgmaxCode()(np.array([[0.1, 2.0, -1.0]], "float32"))
    <tf.Tensor: shape=(1,), dtype=int32, numpy=array([1], dtype=int32)>
    """

    def __init__(self, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.num_codes = None

    def build(self, input_shape):
        if len(input_shape) != 2 or input_shape[-1] is None:
            raise ArgumentError(
                f"`inputs` of {self.name} must be logits of shape (batch, "
                f"num_codes), received shape {tuple(input_shape)}.")
        self.num_codes = categorical.check_num_values("num_codes",
                                                      int(input_shape[-1]))
        super().build(input_shape)

    def call(self, logits):
        logits = tf.cast(logits, tf.float32)
        code = tf.argmax(logits, axis=-1, output_type=tf.int32)
        ok = tf.reshape(base.finite_rows(logits), [-1])
        return tf.where(ok, code, -1)

    def compute_output_spec(self, logits):
        return keras.KerasTensor(logits.shape[:-1], dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        return config


def initial_table(num_codes, num_classes, scale=INITIAL_LOGIT):
    """(m, K) float32 decoder logits: `scale` at (c, c mod K), 0 elsewhere."""
    table = np.zeros((num_codes, num_classes), np.float32)
    table[np.arange(num_codes), np.arange(num_codes) % num_classes] = scale
    return table


def code_assignment(num_codes, prior, groups=None):
    """(K, m) P(code c | class k) of a perfect code head: one-hot at
    groups[k] (classes sharing a code when m < K); without `groups`, class
    k sends one of its codes {c : c mod K = k} uniformly when m >= K, and
    the m most frequent classes own a code each when m < K
    (`tfdptext.privacy.identification.top_m_grouping`)."""
    from tfdptext.privacy import identification

    num_classes = len(prior)
    sent = np.zeros((num_classes, num_codes))
    if groups is None and num_codes >= num_classes:
        codes_of = np.arange(num_codes) % num_classes
        sent[codes_of, np.arange(num_codes)] = 1.0
        return sent / sent.sum(axis=1, keepdims=True)
    if groups is None:
        groups = identification.top_m_grouping(prior, num_codes)
    groups = np.asarray(groups, np.int64)
    if groups.shape != (num_classes,) or (groups < 0).any() or \
            (groups >= num_codes).any():
        raise ArgumentError(
            f"`groups` must give each of the {num_classes} classes a code "
            f"in [0, {num_codes}), received {groups.tolist()}.")
    sent[np.arange(num_classes), groups] = 1.0
    return sent


def bayes_table(prior, transition, num_codes, groups=None):
    """(m, K) float32 log P(class | released code) when class k sends its
    code (`code_assignment`: groups[k], or one of {c : c mod K = k}
    uniformly) through the channel `transition` and classes occur with
    `prior`: the Bayes decoder of a perfect code head. At a small epsilon
    it decodes every code to the likeliest class (a decoder that ignored
    the prior would do worse than always answering the majority class);
    at a large one, each code to its class (the likeliest of its group).

    Example:
    >>> t = np.array([[0.6, 0.4], [0.4, 0.6]])
    >>> bayes_table([0.9, 0.1], t, 2).argmax(axis=1)  # class 0 either way
    array([0, 0])
    """
    prior = np.asarray(prior, np.float64)
    num_classes = len(prior)
    if (prior < 0).any() or prior.sum() <= 0 or num_codes < 2:
        raise ArgumentError(
            f"`prior` must be {num_classes} non-negative weights (not all "
            f"zero) and `num_codes` at least 2, received {prior.tolist()} "
            f"and {num_codes}.")
    prior = prior / prior.sum()
    sent = code_assignment(num_codes, prior, groups)
    joint = prior[:, None] * (sent @ np.asarray(transition, np.float64))
    return posterior_logits(joint.T, prior)


def posterior_logits(counts, prior):
    """(m, K) log P(class | code) from (m, K) co-occurrence weights of
    released codes and classes, with one pseudo-observation per code,
    half spread by `prior` and half uniformly (a code never seen decodes
    to the prior; a class absent from the training labels keeps a finite
    logit)."""
    prior = np.asarray(prior, np.float64)
    pseudo = 0.5 * prior / prior.sum() + 0.5 / len(prior)
    counts = np.asarray(counts, np.float64) + pseudo[None]
    return np.log(counts / counts.sum(axis=1, keepdims=True)).astype(
        np.float32)


@keras.saving.register_keras_serializable(package="tfdptext")
class CodeDecoder(keras.layers.Layer):
    """(batch,) int codes -> (batch, K) class logits, one trainable row of
    logits per code. A code outside [0, m) gives a row of NaN (the server
    signature refuses a non-finite answer).

    Called on a float (batch, m) distribution q over released codes
    (training, `CodeChannel`), it returns the expected log-likelihoods
    sum_c q_c log P(class | c), whose label column is minus the exact
    expected loss (`ExpectedNegativeLogLikelihood`).

    Args:
        num_codes: m, in [2, 65536].
        num_classes: K >= 2.
        table: the initial (m, K) logits (e.g. `bayes_table`); default
            `initial_table` (code c -> class c mod K).

    Example:
    >>> decoder = CodeDecoder(num_codes=4, num_classes=2)
    >>> decoder(np.array([0, 3], "int32")).shape
    TensorShape([2, 2])
    """

    def __init__(self, num_codes, num_classes, table=None, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.num_codes = categorical.check_num_values("num_codes", num_codes)
        self.num_classes = validation.check_int("num_classes", num_classes, 2)
        if table is not None:
            table = np.asarray(table, np.float32)
            if table.shape != (self.num_codes, self.num_classes) or \
                    not np.isfinite(table).all():
                raise ArgumentError(
                    f"`table` must be finite of shape ({self.num_codes}, "
                    f"{self.num_classes}), received shape {table.shape}.")
        # The initial logits (not in the config: the weights are saved).
        self._initial_table = table

    def build(self, input_shape):
        start = self._initial_table
        if start is None:
            start = initial_table(self.num_codes, self.num_classes)
        self.table = self.add_weight(
            name="decoder_logits", shape=start.shape,
            initializer=lambda shape, dtype=None: tf.constant(start, dtype))
        super().build(input_shape)

    def call(self, codes):
        if codes.dtype.is_floating:
            return tf.matmul(tf.cast(codes, tf.float32),
                             self.log_probabilities())
        codes = tf.cast(codes, tf.int32)
        valid = tf.logical_and(codes >= 0, codes < self.num_codes)
        rows = tf.gather(self.table, tf.where(valid, codes, 0))
        return tf.where(valid[:, None], rows, tf.constant(float("nan")))

    def log_probabilities(self):
        """(m, K): log P(class | code) of the current table."""
        return tf.nn.log_softmax(tf.cast(self.table, tf.float32), axis=-1)

    def compute_output_spec(self, codes):
        return keras.KerasTensor((codes.shape[0], self.num_classes),
                                 dtype="float32")

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        config.update({"num_codes": self.num_codes,
                       "num_classes": self.num_classes})
        return config


@keras.saving.register_keras_serializable(package="tfdptext")
class CodeChannel(keras.layers.Layer):
    """Training only: (batch, m) code logits -> (batch, m) distribution of
    the RELEASED code, q = softmax(logits) T, where T is the
    randomized-response transition matrix (the identity for a code
    released as it is). `CodeDecoder` called on q gives the expected
    log-likelihoods that the training loss reads.

    Args:
        transition: the (m, m) matrix P[released = j | code = i]
            (`CodeRandomizedResponse.transition_matrix`).
    """

    def __init__(self, transition, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        transition = np.asarray(transition, np.float32)
        if transition.ndim != 2 or transition.shape[0] != transition.shape[
                1] or not np.allclose(transition.sum(axis=1), 1.0,
                                      atol=1e-5) or (transition < 0).any():
            raise ArgumentError(
                "`transition` must be a square row-stochastic matrix, "
                f"received shape {transition.shape}.")
        self.transition = transition

    def build(self, input_shape):
        if input_shape[-1] != self.transition.shape[0]:
            raise ArgumentError(
                f"`inputs` of {self.name} must hold "
                f"{self.transition.shape[0]} code logits, received shape "
                f"{tuple(input_shape)}.")
        super().build(input_shape)

    def call(self, logits):
        return tf.matmul(tf.nn.softmax(tf.cast(logits, tf.float32), axis=-1),
                         tf.constant(self.transition))

    def get_config(self):
        config = super().get_config()
        config.pop("dtype", None)
        config["transition"] = self.transition.tolist()
        return config


@keras.saving.register_keras_serializable(package="tfdptext")
class ExpectedNegativeLogLikelihood(keras.losses.Loss):
    """-y_pred[label], where y_pred holds log-likelihoods per class.

    Example:
    >>> loss = ExpectedNegativeLogLikelihood()
    >>> float(loss([1], np.log([[0.25, 0.75]], dtype="float32")))  # -ln .75
    0.2876...
    """

    def __init__(self, name="expected_nll", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        y_pred = tf.cast(y_pred, tf.float32)
        labels = tf.reshape(tf.cast(y_true, tf.int32), [-1])
        return -tf.gather(y_pred, labels, axis=-1, batch_dims=1)


def refit_decoder(code_logits, decoder, transition, batches, prior):
    """Sets the decoder to the exact minimiser of the expected loss given
    the trained code head: log P(class | released code) of the training
    data, sum_x q(r | x) [y_x = y] normalised per code, q(. | x) =
    softmax(code logits of x) T (`posterior_logits`). Returns the table.

    Args:
        code_logits: a model from features to (batch, m) code logits.
        decoder: the `CodeDecoder` to set.
        transition: the (m, m) channel.
        batches: (features, labels[, weights]) batches of training data.
        prior: the class frequencies (the pseudo-observation per code).
    """
    transition = np.asarray(transition, np.float64)
    counts = np.zeros((decoder.num_codes, decoder.num_classes))
    for batch in batches:
        features, labels = batch[0], np.asarray(batch[1]).reshape(-1)
        logits = np.asarray(code_logits(features, training=False),
                            np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        soft = np.exp(logits)
        released = (soft / soft.sum(axis=1, keepdims=True)) @ transition
        np.add.at(counts.T, labels, released)
    table = posterior_logits(counts, prior)
    decoder.table.assign(table)
    return table
