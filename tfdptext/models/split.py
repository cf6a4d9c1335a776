"""The split point: a user-side model, a server-side model, one whole.

The user side runs on the phone and ends in the privatization layer; the
server side takes only what the user side releases. `SplitModel.model` is
server(user(inputs)), a single Keras model to train with `fit`; the two
halves share its weights, so after training they are exported separately.

Split points (Qu et al. Sec. 3.3; DPNR):
- `sequence_representation`: user = encoder + pooling (+ normalise) + noise;
  server = classifier. DPNR robust training and Qu's seq_rep.
- `token_representation`: user = token embedding + noise; server = positions,
  segments, encoder, classifier.
- `text_to_text`: user = token ids -> privatized token ids; server = the
  whole model on privatized ids.

The sequence, token and text-to-text splits build on any Keras backend
(with the backend-agnostic layers); the code release and word dropout are
TensorFlow's and imported where used.

Every user side returns a dict keyed by its split point's
`tfdptext.models.split_spec.SplitSpec.released_keys` (the release, plus the
padding mask and segment ids for the token-level splits), and every server
takes that same dict.
"""

import dataclasses

import keras
import numpy as np

from tfdptext.errors import ArgumentError
from tfdptext.layers import base as layers_base
from tfdptext.layers import noise_math
from tfdptext.models import split_spec
from tfdptext.models.pooling import MaskedMeanPooling
from tfdptext.models.split_spec import CODE
from tfdptext.models.split_spec import SEQUENCE
from tfdptext.models.split_spec import SPLIT_POINTS  # noqa: F401
from tfdptext.models.split_spec import TEXT_TO_TEXT
from tfdptext.models.split_spec import TOKEN
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import laplace
from tfdptext.privacy import validation

POOLINGS = ("mean", "cls")
FEATURES = ("token_ids", "segment_ids", "padding_mask")
# The name of the token embedding layer on the token split's user side (the
# keras-hub backbone's `token_embedding`): evaluation reads the public
# embedding table from the layer of this name.
TOKEN_EMBEDDING = "token_embedding"
# The optional trainable projection of the pooled representation on the
# sequence split's user side (`projection_dim`), before the privatizers.
PRIVATE_PROJECTION = "private_projection"


@dataclasses.dataclass
class SplitModel:
    """A model cut into a user side and a server side.

    Attributes:
        user: the on-device model; its output, a dict keyed by
            `spec.released_keys`, is all the server receives.
        server: the server model; it takes the user side's output dict.
        model: server(user(inputs)), trainable as one.
        split_point: one of SPLIT_POINTS.
        privatizer: the privatization layer (None for a non-private model).
        input_dropout: a WordDropout on the user side, or None.
        training_model: what `fit` trains when `model` cannot be (the code
            release: its argmax has no gradient); None: `model`. It shares
            every weight with `user` and `server`.
        training_loss: the Keras loss of `training_model`; None: the
            cross-entropy of `model`'s logits.
        calibrate: None, or `calibrate(batches)` to run once training is
            done, on the training batches (the code release refits its
            decoder in closed form).
    """

    user: keras.Model
    server: keras.Model
    model: keras.Model
    split_point: str
    privatizer: object = None
    input_dropout: object = None
    training_model: keras.Model = None
    training_loss: object = None
    calibrate: object = None

    @property
    def spec(self):
        """The `tfdptext.models.split_spec.SplitSpec` of the split point."""
        return split_spec.get(self.split_point)

    def release_of(self, released):
        """The release tensor in a user-side output dict (e.g. the pooled
        representation an attacker head reads)."""
        return released[self.spec.release]

    def freeze_user_side(self):
        """Privacy-constrained fine-tuning: the server cannot update it."""
        self.user.trainable = False

    def guarantee(self, max_tokens=None, randomness=None):
        """The guarantee of what the user side releases.

        With word dropout, the amplified token-substitution guarantee over
        inputs of 1 to `max_tokens` real tokens. `randomness` says where the
        noise comes from (`tfdptext.privacy.randomness`; None: a direct
        call's, `tfdptext.layers.noise_math.default_randomness`).
        """
        return user_side_guarantee(self.privatizer, self.input_dropout,
                                   max_tokens, randomness, self.model.name)


def user_side_guarantee(privatizer, input_dropout=None, max_tokens=None,
                        randomness=None, name="user_side"):
    """The guarantee of a release made by `privatizer`, after an optional
    word dropout, with noise from `randomness` (None: a direct call's)."""
    if randomness is None:
        randomness = noise_math.default_randomness()
    if privatizer is None:
        return guarantee_lib.Guarantee.none(
            name, "no privatization layer (non-private model)")
    g = privatizer.guarantee(randomness=randomness)
    if input_dropout is None or not g.is_private:
        return g
    if max_tokens is None:
        raise ValueError("`max_tokens` is needed with word dropout.")
    return input_dropout.guarantee(
        laplace.to_representation_level(g)
        if g.unit == guarantee_lib.PER_COORDINATE else g,
        min_tokens=1, max_tokens=max_tokens)


def feature_inputs(sequence_length=None, names=FEATURES):
    """int32 Keras Inputs (batch, sequence_length) for the named features."""
    return {name: keras.Input((sequence_length,), dtype="int32", name=name)
            for name in names}


def released_inputs(spec, sequence_length=None, dim=None):
    """The server model's Keras Inputs: one per key of the user side's
    output (`spec.released_keys`)."""
    return {info.name: keras.Input(info.shape[1:], dtype=info.dtype,
                                   name=info.name)
            for info in spec.released_infos(sequence_length, dim)}


def _check(num_classes, pooling, classifier_dropout):
    validation.check_int("num_classes", num_classes, minimum=2)
    validation.check_choice("pooling", pooling, POOLINGS)
    validation.check_rate("classifier_dropout", classifier_dropout)


def _pool(backbone, sequence_output, padding_mask, pooling):
    """One vector per text: masked mean, or BERT's [CLS] pooler."""
    if pooling == "mean":
        # The [CLS] pooler is unused: keep it out of the trainable weights.
        backbone.pooled_dense.trainable = False
        return MaskedMeanPooling(name="mean_pool")(sequence_output,
                                                   padding_mask)
    return backbone.pooled_dense(sequence_output[:, 0, :])


@dataclasses.dataclass(frozen=True)
class _Head:
    """The server's classifier: dropout, hidden ReLU layers, logits."""

    num_classes: int
    dropout: float
    hidden_units: tuple = ()

    def __call__(self, representation):
        x = keras.layers.Dropout(self.dropout, name="classifier_dropout")(
            representation)
        for i, units in enumerate(self.hidden_units):
            x = keras.layers.Dense(units, activation="relu",
                                   name=f"classifier_hidden_{i}")(x)
        return keras.layers.Dense(self.num_classes, name="logits")(x)


def _as_list(privatizers):
    if privatizers is None:
        return []
    if isinstance(privatizers, keras.layers.Layer):
        return [privatizers]
    return list(privatizers)


def _noise_layer(layers):
    """The one mechanism among `layers`, or None."""
    noise = [layer for layer in layers
             if isinstance(layer, layers_base.PrivatizationLayer)]
    if len(noise) > 1:
        raise ArgumentError("Give at most one noise layer per split model.")
    return noise[0] if noise else None


def _passthrough(inputs):
    """Padding mask and segment ids, released as they are.

    They go through Identity layers: a functional model whose outputs are
    its own inputs cannot be called inside another model (the phone
    wrapper at export) and stay connected.
    """
    return {name: keras.layers.Identity(name=f"released_{name}")(
        inputs[name]) for name in split_spec.MASK_KEYS}


def _user_side(spec, inputs, release):
    """The user-side model: features -> {release name: release, [padding
    mask, segment ids]}; its randomized layers must carry their fixed
    names (`tfdptext.layers.base.privatization_layers`)."""
    released = {spec.release: release}
    if spec.mask_travels:
        released.update(_passthrough(inputs))
    user = keras.Model(inputs, released, name="user_side")
    layers_base.privatization_layers(user)
    return user


def _split_model(spec, inputs, user, server_inputs, representation, head,
                 privatizer=None, input_dropout=None):
    """The SplitModel: the server (`head` on `representation`, computed
    from `server_inputs`) and server(user(inputs))."""
    server = keras.Model(server_inputs, head(representation),
                         name="server_side")
    model = keras.Model(inputs, server(user(inputs)), name="split_classifier")
    return SplitModel(user, server, model, spec.name, privatizer,
                      input_dropout)


def _is_word_dropout(layer):
    from tfdptext.layers.word_dropout import WordDropout

    return isinstance(layer, WordDropout)


def sequence_representation_split(backbone, num_classes, privatizers=None,
                                  input_dropout=None, pooling="mean",
                                  classifier_dropout=0.1, hidden_units=(),
                                  sequence_length=None, projection_dim=None,
                                  projection_activation=None):
    """User: [WordDropout] -> encoder -> pooling -> [projection] ->
    privatizers; server: MLP.

    The user side returns {"private_representation": (batch, dim)}, where
    dim is `projection_dim` if given, else the encoder's hidden size.

    Args:
        backbone: a keras-hub BertBackbone.
        num_classes: task classes.
        privatizers: layers applied to the pooled representation, e.g.
            `[MinMaxNormalize(), LaplaceNoise(0.5)]`; None for a
            non-private model.
        input_dropout: an optional `WordDropout` on the token ids.
        pooling: "mean" (MiniLM's) or "cls" (BERT's pooled output).
        projection_dim: an optional k >= 2: a trainable dense projection of
            the pooled vector to k dimensions (the layer named
            `PRIVATE_PROJECTION`, part of the user side), so that the
            privatizers noise k coordinates instead of the hidden size.
            Min-max normalisation then maps one of the k coordinates to 0
            and one to 1, so k = 2 releases one bit: use k >= 4.
        projection_activation: None (linear) or "sigmoid": the projection
            then outputs k coordinates in (0, 1) of its own, so it can feed
            `LaplaceNoise` (which clips to [0, 1]) without min-max, keeping
            all k coordinates informative.
    """
    _check(num_classes, pooling, classifier_dropout)
    if projection_dim is not None:
        projection_dim = validation.check_int("projection_dim",
                                              projection_dim, minimum=2)
    if projection_activation is not None:
        validation.check_choice("projection_activation",
                                projection_activation, ("sigmoid",))
        if projection_dim is None:
            raise ArgumentError("`projection_activation` needs "
                                "`projection_dim`.")
    spec = split_spec.get(SEQUENCE)
    layers = _as_list(privatizers)
    if input_dropout is not None and not _is_word_dropout(input_dropout):
        raise ArgumentError("`input_dropout` must be a WordDropout layer.")
    inputs = feature_inputs(sequence_length)
    features = input_dropout(inputs) if input_dropout else inputs
    encoded = backbone({k: features[k] for k in FEATURES})
    x = _pool(backbone, encoded["sequence_output"], features["padding_mask"],
              pooling)
    if projection_dim is not None:
        x = keras.layers.Dense(projection_dim,
                               activation=projection_activation,
                               name=PRIVATE_PROJECTION)(x)
    for layer in layers:
        x = layer(x)
    user = _user_side(spec, inputs, x)
    server_inputs = released_inputs(spec, sequence_length, x.shape[-1])
    return _split_model(
        spec, inputs, user, server_inputs, server_inputs[spec.release],
        _Head(num_classes, classifier_dropout, tuple(hidden_units)),
        _noise_layer(layers), input_dropout)


def encode_token_embeddings(backbone, token_embeddings, segment_ids,
                            padding_mask):
    """The backbone's forward pass from token embeddings on."""
    positions = backbone.position_embedding(token_embeddings)
    segments = backbone.segment_embedding(segment_ids)
    x = backbone.embeddings_add((token_embeddings, positions, segments))
    x = backbone.embeddings_layer_norm(x)
    x = backbone.embeddings_dropout(x)
    for transformer_layer in backbone.transformer_layers:
        x = transformer_layer(x, padding_mask=padding_mask)
    return x


def _token_embedding(backbone):
    """The backbone's token embedding layer, which must be named
    TOKEN_EMBEDDING (evaluation finds the table by that name)."""
    layer = backbone.token_embedding
    if layer.name != TOKEN_EMBEDDING:
        raise ArgumentError(
            f"The backbone's token embedding layer is named {layer.name!r}; "
            f"the token split needs it named {TOKEN_EMBEDDING!r} (a "
            "keras-hub backbone's default).")
    return layer


def token_representation_split(backbone, num_classes, privatizer,
                               pooling="mean", classifier_dropout=0.1,
                               hidden_units=(), sequence_length=None):
    """User: token embedding -> privatizer (e.g. DChiNoise); server: rest.

    The user side returns {"token_embeddings", "padding_mask",
    "segment_ids"}: the noisy token embeddings with the padding mask and
    segment ids (which reveal only the length).
    """
    _check(num_classes, pooling, classifier_dropout)
    spec = split_spec.get(TOKEN)
    inputs = feature_inputs(sequence_length)
    noisy = privatizer(_token_embedding(backbone)(inputs["token_ids"]))
    user = _user_side(spec, inputs, noisy)
    server_inputs = released_inputs(spec, sequence_length, noisy.shape[-1])
    x = encode_token_embeddings(
        backbone, server_inputs[spec.release],
        server_inputs["segment_ids"], server_inputs["padding_mask"])
    x = _pool(backbone, x, server_inputs["padding_mask"], pooling)
    return _split_model(
        spec, inputs, user, server_inputs, x,
        _Head(num_classes, classifier_dropout, tuple(hidden_units)),
        privatizer)


def text_to_text_split(backbone, num_classes, privatizer, pooling="mean",
                       classifier_dropout=0.1, hidden_units=(),
                       sequence_length=None):
    """User: token ids -> privatized ids; server: the whole model.

    The user side returns {"token_ids", "padding_mask", "segment_ids"}.
    """
    _check(num_classes, pooling, classifier_dropout)
    spec = split_spec.get(TEXT_TO_TEXT)
    inputs = feature_inputs(sequence_length)
    user = _user_side(spec, inputs, privatizer(inputs["token_ids"]))
    server_inputs = released_inputs(spec, sequence_length)
    encoded = backbone({k: server_inputs[k] for k in FEATURES})
    x = _pool(backbone, encoded["sequence_output"],
              server_inputs["padding_mask"], pooling)
    return _split_model(
        spec, inputs, user, server_inputs, x,
        _Head(num_classes, classifier_dropout, tuple(hidden_units)),
        privatizer)


def code_split(backbone, num_classes, num_codes, privatizer=None,
               pooling="mean", sequence_length=None, class_prior=None,
               groups=None):
    """User: encoder -> pooling -> dense to `num_codes` logits -> argmax ->
    [privatizer, a CodeRandomizedResponse]; server: a CodeDecoder table
    from the released code to class logits.

    The user side returns {"private_code": (batch,) int32}. `model` is
    server(user(inputs)), the real channel (argmax, randomized response);
    `training_model` outputs the expected log-likelihoods over the channel
    (`tfdptext.models.code`) and trains with `training_loss`.

    Args:
        backbone: a keras-hub BertBackbone.
        num_classes: task classes K.
        num_codes: m >= 2 codes (several codes per class when m > K,
            classes sharing a code when m < K).
        privatizer: a `CodeRandomizedResponse` over `num_codes` codes, or
            None for a non-private code (the reference of the same model).
        class_prior: the training labels' class frequencies: the decoder
            starts as the Bayes decoder of a perfect code head through the
            channel (`tfdptext.models.code.bayes_table`), and
            `split.calibrate(batches)` refits it in closed form after
            training (`refit_decoder`). None: uniform.
        groups: (K,) the code of each class in that initial decoder (m <
            K: classes sharing a code, e.g. from
            `tfdptext.privacy.identification.code_grouping`); None:
            `tfdptext.models.code.code_assignment`'s default.

    Training the decoder by gradient alone is slow where the learning rate
    suits the encoder (1e-4): at a small epsilon it would keep decoding
    code c to class c, below always answering the majority class.
    """
    validation.check_int("num_classes", num_classes, minimum=2)
    validation.check_choice("pooling", pooling, POOLINGS)
    num_codes = validation.check_int("num_codes", num_codes, minimum=2)
    if privatizer is not None and getattr(privatizer, "num_codes",
                                          None) != num_codes:
        raise ArgumentError(
            f"`privatizer` must randomize {num_codes} codes, received "
            f"{privatizer!r}.")
    from tfdptext.models import code as code_lib

    spec = split_spec.get(CODE)
    inputs = feature_inputs(sequence_length)
    encoded = backbone({k: inputs[k] for k in FEATURES})
    pooled = _pool(backbone, encoded["sequence_output"],
                   inputs["padding_mask"], pooling)
    logits = keras.layers.Dense(num_codes, name=code_lib.CODE_LOGITS)(pooled)
    code = code_lib.ArgmaxCode(name=code_lib.ARGMAX_CODE)(logits)
    user = _user_side(spec, inputs,
                      code if privatizer is None else privatizer(code))
    server_inputs = released_inputs(spec, sequence_length)
    transition = (privatizer.transition_matrix() if privatizer is not None
                  else np.eye(num_codes, dtype=np.float32))
    prior = (np.full(num_classes, 1.0 / num_classes) if class_prior is None
             else np.asarray(class_prior, np.float64))
    decoder = code_lib.CodeDecoder(
        num_codes, num_classes, name=code_lib.CODE_DECODER,
        table=code_lib.bayes_table(prior, transition, num_codes, groups))
    split = _split_model(spec, inputs, user, server_inputs,
                         server_inputs[spec.release], decoder, privatizer)
    released = code_lib.CodeChannel(transition, name="code_channel")(logits)
    split.training_model = keras.Model(inputs, decoder(released),
                                       name="code_training_model")
    split.training_loss = code_lib.ExpectedNegativeLogLikelihood()
    head = keras.Model(inputs, logits, name="code_head")
    split.calibrate = lambda batches: code_lib.refit_decoder(
        head, decoder, transition, batches, prior)
    return split


def _variable_values(variable):
    """A Keras variable's values as numpy (its own `numpy()`: converting
    the variable object makes numpy call an `__array__` that Keras 3.15
    writes without the `copy` argument, a DeprecationWarning)."""
    return np.asarray(variable.numpy())


def token_embedding_table(backbone):
    """The backbone's (vocabulary, dim) token embedding matrix as numpy."""
    return _variable_values(backbone.token_embedding.embeddings)


def release_embedding_table(user):
    """The public (vocabulary, dim) table a user side's released tokens
    index, as numpy: a text-to-text privatizer's public table (d_chi's
    embeddings, BRR's +-1 codes: `TokenPrivatizer.public_table`), else the
    layer named TOKEN_EMBEDDING (token split), or the (m, m) identity of a code release's m codes (their one-hot vectors);
    None when the user side has none of them (sequence split)."""
    from tfdptext.layers.token_privatizer import TokenPrivatizer
    from tfdptext.models import code as code_lib

    for layer in user.layers:
        if isinstance(layer, code_lib.ArgmaxCode):
            return np.eye(layer.num_codes, dtype=np.float32)
    _, privatizer = layers_base.privatization_layers(user)
    if isinstance(privatizer, TokenPrivatizer):
        return privatizer.public_table()
    for layer in user.layers:
        if layer.name == TOKEN_EMBEDDING:
            return _variable_values(layer.embeddings)
    return None
