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
"""

import dataclasses

import keras

from tfdptext.layers import base as layers_base
from tfdptext.layers.word_dropout import WordDropout
from tfdptext.models.pooling import MaskedMeanPooling
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.privacy import laplace
from tfdptext.privacy import randomness as randomness_lib
from tfdptext.privacy import validation

SEQUENCE = "sequence_representation"
TOKEN = "token_representation"
TEXT_TO_TEXT = "text_to_text"
SPLIT_POINTS = (SEQUENCE, TOKEN, TEXT_TO_TEXT)
POOLINGS = ("mean", "cls")
FEATURES = ("token_ids", "segment_ids", "padding_mask")


@dataclasses.dataclass
class SplitModel:
    """A model cut into a user side and a server side.

    Attributes:
        user: the on-device model; its output is all the server receives.
        server: the server model, whose inputs are the user side's outputs.
        model: server(user(inputs)), trainable as one.
        split_point: one of SPLIT_POINTS.
        privatizer: the privatization layer (None for a non-private model).
        input_dropout: a WordDropout on the user side, or None.
    """

    user: keras.Model
    server: keras.Model
    model: keras.Model
    split_point: str
    privatizer: object = None
    input_dropout: object = None

    def freeze_user_side(self):
        """Privacy-constrained fine-tuning: the server cannot update it."""
        self.user.trainable = False

    def guarantee(self, max_tokens=None,
                  randomness=randomness_lib.TENSORFLOW_UNSEEDED):
        """The guarantee of what the user side releases.

        With word dropout, the amplified token-substitution guarantee over
        inputs of 1 to `max_tokens` real tokens. `randomness` says where the
        noise comes from (`tfdptext.privacy.randomness`).
        """
        return user_side_guarantee(self.privatizer, self.input_dropout,
                                   max_tokens, randomness, self.model.name)


def user_side_guarantee(privatizer, input_dropout=None, max_tokens=None,
                        randomness=randomness_lib.TENSORFLOW_UNSEEDED,
                        name="user_side"):
    """The guarantee of a release made by `privatizer`, after an optional
    word dropout, with noise from `randomness`."""
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
    return {name: keras.Input((sequence_length,), dtype="int32", name=name)
            for name in names}


def _check(num_classes, pooling, classifier_dropout):
    validation.check_int("num_classes", num_classes, minimum=2)
    validation.check_choice("pooling", pooling, POOLINGS)
    validation.check_rate("classifier_dropout", classifier_dropout)


def _pool(backbone, sequence_output, padding_mask, pooling):
    if pooling == "mean":
        # The [CLS] pooler is unused: keep it out of the trainable weights.
        backbone.pooled_dense.trainable = False
        return MaskedMeanPooling(name="mean_pool")(sequence_output,
                                                   padding_mask)
    return backbone.pooled_dense(sequence_output[:, 0, :])


def _classifier(representation, num_classes, dropout, hidden_units=()):
    x = keras.layers.Dropout(dropout, name="classifier_dropout")(
        representation)
    for i, units in enumerate(hidden_units):
        x = keras.layers.Dense(units, activation="relu",
                               name=f"classifier_hidden_{i}")(x)
    return keras.layers.Dense(num_classes, name="logits")(x)


def _server_and_model(inputs, user, server_inputs, representation,
                      num_classes, classifier_dropout, hidden_units):
    """The server model on `representation`, and server(user(inputs))."""
    server = keras.Model(
        server_inputs,
        _classifier(representation, num_classes, classifier_dropout,
                    hidden_units),
        name="server_side")
    model = keras.Model(inputs, server(user(inputs)), name="split_classifier")
    return server, model


def _as_list(privatizers):
    if privatizers is None:
        return []
    if isinstance(privatizers, keras.layers.Layer):
        return [privatizers]
    return list(privatizers)


def _noise_layer(layers):
    noise = [l for l in layers if isinstance(l, layers_base.PrivatizationLayer)]
    if len(noise) > 1:
        raise ValueError("Give at most one noise layer per split model.")
    return noise[0] if noise else None


def sequence_representation_split(backbone, num_classes, privatizers=None,
                                  input_dropout=None, pooling="mean",
                                  classifier_dropout=0.1, hidden_units=(),
                                  sequence_length=None):
    """User: [WordDropout] -> encoder -> pooling -> privatizers; server: MLP.

    Args:
        backbone: a keras-hub BertBackbone.
        num_classes: task classes.
        privatizers: layers applied to the pooled representation, e.g.
            `[MinMaxNormalize(), LaplaceNoise(0.5)]`; None for a
            non-private model.
        input_dropout: an optional `WordDropout` on the token ids.
        pooling: "mean" (MiniLM's) or "cls" (BERT's pooled output).
    """
    _check(num_classes, pooling, classifier_dropout)
    layers = _as_list(privatizers)
    if input_dropout is not None and not isinstance(input_dropout,
                                                    WordDropout):
        raise ValueError("`input_dropout` must be a WordDropout layer.")
    inputs = feature_inputs(sequence_length)
    features = input_dropout(inputs) if input_dropout else inputs
    encoded = backbone({k: features[k] for k in FEATURES})
    x = _pool(backbone, encoded["sequence_output"], features["padding_mask"],
              pooling)
    for layer in layers:
        x = layer(x)
    user = keras.Model(inputs, x, name="user_side")
    released = keras.Input((x.shape[-1],), name="private_representation")
    server, model = _server_and_model(inputs, user, released, released,
                                      num_classes, classifier_dropout,
                                      hidden_units)
    return SplitModel(user, server, model, SEQUENCE, _noise_layer(layers),
                      input_dropout)


def _passthrough(inputs):
    """Padding mask and segment ids, released as they are.

    They go through Identity layers: a functional model whose outputs are
    its own inputs cannot be called inside another model (the phone
    wrapper at export) and stay connected.
    """
    return {name: keras.layers.Identity(name=f"released_{name}")(
        inputs[name]) for name in ("padding_mask", "segment_ids")}


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


def token_representation_split(backbone, num_classes, privatizer,
                               pooling="mean", classifier_dropout=0.1,
                               hidden_units=(), sequence_length=None):
    """User: token embedding -> privatizer (e.g. DChiNoise); server: rest.

    The user side releases the noisy token embeddings with the padding mask
    and segment ids (which reveal only the length).
    """
    _check(num_classes, pooling, classifier_dropout)
    inputs = feature_inputs(sequence_length)
    noisy = privatizer(backbone.token_embedding(inputs["token_ids"]))
    released = {"token_embeddings": noisy, **_passthrough(inputs)}
    user = keras.Model(inputs, released, name="user_side")
    server_inputs = {
        "token_embeddings": keras.Input(
            (sequence_length, noisy.shape[-1]), name="token_embeddings"),
        **feature_inputs(sequence_length, ("padding_mask", "segment_ids")),
    }
    x = encode_token_embeddings(
        backbone, server_inputs["token_embeddings"],
        server_inputs["segment_ids"], server_inputs["padding_mask"])
    x = _pool(backbone, x, server_inputs["padding_mask"], pooling)
    server, model = _server_and_model(inputs, user, server_inputs, x,
                                      num_classes, classifier_dropout,
                                      hidden_units)
    return SplitModel(user, server, model, TOKEN, privatizer)


def text_to_text_split(backbone, num_classes, privatizer, pooling="mean",
                       classifier_dropout=0.1, hidden_units=(),
                       sequence_length=None):
    """User: token ids -> privatized ids; server: the whole model."""
    _check(num_classes, pooling, classifier_dropout)
    inputs = feature_inputs(sequence_length)
    released = {"token_ids": privatizer(inputs["token_ids"]),
                **_passthrough(inputs)}
    user = keras.Model(inputs, released, name="user_side")
    server_inputs = feature_inputs(sequence_length)
    encoded = backbone(server_inputs)
    x = _pool(backbone, encoded["sequence_output"],
              server_inputs["padding_mask"], pooling)
    server, model = _server_and_model(inputs, user, server_inputs, x,
                                      num_classes, classifier_dropout,
                                      hidden_units)
    return SplitModel(user, server, model, TEXT_TO_TEXT, privatizer)


def token_embedding_table(backbone):
    """The backbone's (vocabulary, dim) token embedding matrix as numpy."""
    return keras.ops.convert_to_numpy(backbone.token_embedding.embeddings)
