"""The privacy-adaptive masked-LM model (Qu et al. 2021, Sec. 3.4).

One training step on a masked batch (`tfdptext.pretraining.masking`):

1. User side, frozen: the mechanism fine-tuning and export will use
   privatizes the ORIGINAL text. token_rep: d_chi noise on the token
   embeddings (`DChiNoise` on the frozen `token_embedding`); text_to_text:
   d_chi text-to-text on the ids (`DChiTextPrivatizer` over the same
   table). This is the release.
2. Server side: BERT's MLM corruption is applied to the release. At a
   position the masking left unchanged the server sees the release; at a
   [MASK] position it sees the [MASK] token (its embedding unperturbed in
   token_rep: the server's own marker, never user data); at a position
   replaced by a random token r it sees r's embedding with that
   position's noise (token_rep: a release of r), or r itself (text_to_text:
   privatizing r too would cost a second nearest-neighbour search over the
   whole batch for 1.5% of the tokens). So the server learns on fully
   privatized text, as in the paper, with BERT's masking on top.
3. The encoder from the position embeddings on
   (`tfdptext.models.split.encode_token_embeddings`) for token_rep, the
   whole backbone on the privatized ids for text_to_text; then keras-hub's
   `MaskedLMHead`, tied to the frozen token embedding (its output
   projection is that table; its dense layer, layer norm and bias train),
   in float32 under any precision policy.
4. The objective's targets (`tfdptext.pretraining.objectives`), and the
   cross-entropy at the masked positions.

The privatized token of a position (the vanilla target) is the token the
release shows there: the privatized id for text_to_text, and for token_rep
the vocabulary token nearest to the noisy embedding, i.e. the text-to-text
output of that same noise draw (special tokens excluded). Qu et al. do not
say how they read a token off a noisy embedding; this is the reading their
text-to-text mechanism defines. The probabilistic objective draws K fresh
text-to-text privatizations of the original token.

Mode none (no privatizer) is the clean-text baseline: the release is the
original text, the server's input BERT's masking of it, and every
objective's target the original token.

No gradient reaches the user side: the token embedding is not trainable
(Qu et al.: a trainable user side learns embeddings that resist the noise,
which weakens the privacy it is meant to give), and the privatizers' tables
are constants.

Backends: the model, its privatizers (`DChiNoise`, `DChiTextPrivatizer`
with its nearest-token search `tfdptext.layers.nearest`) and the
objectives are written in `keras.ops` with fixed shapes: every mode and
objective runs on any Keras backend (`KERAS_BACKEND=jax`,
`tfdptext.pretraining.portable`).
"""

import keras
from keras import ops

from tfdptext import layers
from tfdptext import models
from tfdptext.errors import ArgumentError
from tfdptext.models.split import encode_token_embeddings
from tfdptext.pretraining import objectives
from tfdptext.pretraining.config import DENOISING
from tfdptext.pretraining.config import NONE
from tfdptext.pretraining.config import TOKEN_REP
from tfdptext.privacy import guarantee as guarantee_lib

# The name of the reader that turns noisy embeddings into tokens (token_rep
# targets); the user side's mechanism keeps the default name "privatizer".
TARGET_PRIVATIZER = "target_privatizer"
MLM_HEAD = "mlm_head"
# BERT's initialisation of new dense layers (keras-hub's BertMaskedLM).
HEAD_INITIALIZER_STDDEV = 0.02
# What the clean-text baseline (mode none) states instead of a guarantee.
NO_MECHANISM_REASON = (
    "clean-text MLM baseline (--mode=none): no user-side mechanism; the "
    "encoder was adapted to no privatization and this run releases nothing. "
    "Fine-tuning from it releases what its own --mode releases")


def corrupt_released_ids(release, *, token_ids, masked_ids):
    """text_to_text: the server's MLM input. Where the masking left the
    token unchanged, the released (privatized) id; elsewhere the id the
    masking put there ([MASK], or a random token)."""
    return ops.where(ops.equal(masked_ids, token_ids),
                     ops.cast(release, masked_ids.dtype), masked_ids)


def corrupt_released_embeddings(release, *, clean, masked_clean, token_ids,
                                 masked_ids, mask_token_id):
    """token_rep: the server's MLM input, float32.

    Where the masking left the token unchanged, the release; at a random
    replacement r, E[r] + z with z = release - clean that position's noise
    (a release of r); at [MASK], the [MASK] embedding without noise (the
    server's own marker).

    Args:
        release: (batch, length, dim) E[original] + z.
        clean: (batch, length, dim) E[original].
        masked_clean: (batch, length, dim) E[masked ids].
        token_ids, masked_ids: (batch, length) the ids before and after
            masking.
        mask_token_id: [MASK].
    """
    release = ops.cast(release, "float32")
    noise = release - ops.cast(clean, "float32")
    keep_noise = ops.cast(ops.not_equal(masked_ids, mask_token_id),
                          "float32")[..., None]
    replaced = ops.cast(masked_clean, "float32") + noise * keep_noise
    unchanged = ops.equal(masked_ids, ops.cast(token_ids, masked_ids.dtype))
    return ops.where(unchanged[..., None], release, replaced)


class PrivacyAdaptiveMLM(keras.Model):
    """A BERT backbone with masked-LM head, trained on privatized input.

    Call it on a masked batch (`tfdptext.pretraining.masking.FEATURES`); it
    returns {"logits": (batch, predictions, vocabulary), "targets": the
    objective's targets}. `fit` and `evaluate` use its own loss (mean
    cross-entropy at the masked positions) and report `target_accuracy`
    (top prediction = the objective's target, the most frequent one for
    probabilistic) and `original_accuracy` (top prediction = the original
    token, comparable across objectives).

    Args:
        backbone: a keras-hub BertBackbone; its token embedding is frozen.
        privatizer: the user side's mechanism: a `DChiNoise` (token_rep)
            or a `DChiTextPrivatizer` (text_to_text) over the backbone's
            token embedding table; None for the clean-text baseline.
        target_privatizer: token_rep only: a `DChiTextPrivatizer` with the
            same eta and table, named TARGET_PRIVATIZER, that reads tokens
            off noisy embeddings and draws the probabilistic targets (None
            with the denoising objective, which reads none).
        objective: one of `tfdptext.pretraining.config.OBJECTIVES`.
        num_privatizations: K of the probabilistic objective.
        mask_token_id: [MASK].

    Example:
    >>> model = build_mlm(config, backbone, tokenizer)
    >>> model.compile(optimizer=keras.optimizers.AdamW(1e-4))
    >>> encode = masking.batch_encoder(tokenizer, masking.masker_for(
    ...     tokenizer, mask_rate=0.15, max_predictions=20))
    >>> model.fit(masking.training_batches(texts, encode, batch_size=32,
    ...                                    seed=0), steps_per_epoch=100)
    """

    def __init__(self, *, backbone, privatizer, objective,
                 num_privatizations, mask_token_id, target_privatizer=None,
                 **kwargs):
        super().__init__(**kwargs)
        import keras_hub

        self.backbone = backbone
        self.token_embedding = backbone.token_embedding
        self.token_embedding.trainable = False
        # The [CLS] pooler takes no part in the MLM loss: keep it as it is.
        backbone.pooled_dense.trainable = False
        self.privatizer = privatizer
        self.clean = privatizer is None
        self.text_mode = self.clean or not isinstance(privatizer,
                                                      layers.DChiNoise)
        self.objective = objectives.get(objective)
        if not self.text_mode and target_privatizer is None and \
                objective != DENOISING:
            raise ArgumentError(
                f"A DChiNoise `privatizer` (token_rep) with the {objective} "
                "objective needs a `target_privatizer`: a "
                "DChiTextPrivatizer with the same eta over the same table.")
        self.target_privatizer = (privatizer if self.text_mode
                                  else target_privatizer)
        if self.target_privatizer is not None and \
                not self.target_privatizer.built:
            # Its table is needed before its first call (`released_ids`).
            self.target_privatizer.build((None,))
        self.num_privatizations = int(num_privatizations)
        self.mask_token_id = int(mask_token_id)
        self.vocabulary_size = int(backbone.vocabulary_size)
        self.mlm_head = keras_hub.layers.MaskedLMHead(
            vocabulary_size=self.vocabulary_size,
            token_embedding=self.token_embedding,
            intermediate_activation="gelu",
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=HEAD_INITIALIZER_STDDEV),
            # float32 under any policy: under mixed_float16 keras-hub's head
            # adds its float32 bias to float16 logits, which TensorFlow
            # refuses; its tied projection computes in float32 anyway.
            dtype="float32", name=MLM_HEAD)
        self.target_accuracy = keras.metrics.Mean(name="target_accuracy")
        self.original_accuracy = keras.metrics.Mean(name="original_accuracy")

    def build(self, input_shape=None):
        """Marks the model built: its layers build on the first call, which
        spares Keras' symbolic trial run of `call` (a whole extra trace)."""
        self.built = True

    def call(self, inputs, training=False):
        release, encoded = self._release_and_encode(inputs)
        logits = self.mlm_head(ops.cast(encoded, "float32"),
                               mask_positions=inputs["mask_positions"])
        positions, weights = inputs["mask_positions"], inputs["mask_weights"]
        sources = objectives.TargetSources(
            original_ids=objectives.at_positions(inputs["token_ids"],
                                                 positions),
            weights=weights,
            released_ids=lambda: self.released_ids(release, positions,
                                                   weights),
            privatize=(_unchanged if self.clean
                       else self.target_privatizer),
            num_privatizations=self.num_privatizations,
            vocabulary_size=self.vocabulary_size)
        return {"logits": logits, "targets": self.objective.targets(sources)}

    def _release_and_encode(self, inputs):
        """(the user side's release of the original ids, the encoder's
        sequence output on the server's corrupted release)."""
        token_ids, masked_ids = inputs["token_ids"], inputs["masked_ids"]
        if self.text_mode:
            release = token_ids if self.clean else self.privatizer(token_ids)
            encoded = self.backbone({
                "token_ids": corrupt_released_ids(
                    release, token_ids=token_ids, masked_ids=masked_ids),
                "padding_mask": inputs["padding_mask"],
                "segment_ids": inputs["segment_ids"]})["sequence_output"]
            return release, encoded
        clean = self.token_embedding(token_ids)
        release = self.privatizer(clean)  # float32: E[w] + z
        server_input = corrupt_released_embeddings(
            release, clean=clean,
            masked_clean=self.token_embedding(masked_ids),
            token_ids=token_ids, masked_ids=masked_ids,
            mask_token_id=self.mask_token_id)
        encoded = encode_token_embeddings(
            self.backbone,
            ops.cast(server_input, self.backbone.compute_dtype),
            inputs["segment_ids"], inputs["padding_mask"])
        return release, encoded

    def released_ids(self, release, positions, weights):
        """The privatized token the release shows at each masked position:
        the released id (text_to_text), or the vocabulary token nearest to
        the released noisy embedding (token_rep; computed only where
        `weights` > 0, 0 elsewhere)."""
        at = objectives.at_positions(release, positions)
        if self.text_mode:
            return ops.cast(at, "int32")
        # Every slot is searched (fixed shapes); padding slots read 0.
        nearest = self.target_privatizer.nearest_tokens(
            ops.reshape(at, (-1, at.shape[-1])))
        nearest = ops.reshape(nearest, ops.shape(positions))
        return ops.where(ops.convert_to_tensor(weights) > 0, nearest, 0)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        """Mean cross-entropy at the masked positions (weights from the
        batch's `mask_weights`; `y` and `sample_weight` are unused)."""
        loss = objectives.masked_cross_entropy(
            y_pred["targets"], y_pred["logits"], x["mask_weights"])
        for extra in self.losses:
            loss = loss + ops.cast(ops.sum(extra), loss.dtype)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Updates target_accuracy and original_accuracy (per masked
        token) and returns every metric's value."""
        logits, weights = y_pred["logits"], x["mask_weights"]
        self.target_accuracy.update_state(
            objectives.correct_predictions(
                objectives.hard_targets(y_pred["targets"]), logits),
            sample_weight=weights)
        original = objectives.at_positions(x["token_ids"],
                                           x["mask_positions"])
        self.original_accuracy.update_state(
            objectives.correct_predictions(original, logits),
            sample_weight=weights)
        return self.get_metrics_result()

    def guarantee(self):
        """The guarantee of the user-side mechanism the encoder is adapted
        to (the release fine-tuning with the same eta makes); for the
        clean-text baseline, a statement that there is none."""
        if self.clean:
            return guarantee_lib.Guarantee.none(NONE, NO_MECHANISM_REASON)
        return self.privatizer.guarantee()


def _unchanged(ids):
    """The clean baseline's "privatization": the ids themselves."""
    return ops.convert_to_tensor(ids)


def _description(config):
    """The embedding description tfdptext-train gives the same mechanism
    (tfdptext.training.builder), so both state the same guarantee."""
    return f"{config.preset} token embeddings"


def _text_privatizer(config, backbone, tokenizer, name=None):
    """A DChiTextPrivatizer at `config.eta` over the backbone's table, with
    the tokenizer's special and passthrough ids (as tfdptext-train's)."""
    kwargs = {"name": name} if name else {}
    return layers.DChiTextPrivatizer(
        config.eta, models.token_embedding_table(backbone),
        special_token_ids=tokenizer.special_token_ids,
        passthrough_token_ids=tokenizer.passthrough_token_ids,
        embedding_description=_description(config), **kwargs)


def build_mlm(config, backbone, tokenizer):
    """The PrivacyAdaptiveMLM a validated PretrainConfig asks for.

    token_rep builds its target privatizer (a text privatizer reading
    tokens off the release) only for the objectives that read them
    (vanilla, probabilistic): with denoising the model is the same on
    every backend, and its weights move between them. Every mode and
    objective runs on any backend; `tokenizer` needs `mask_id`, and for
    the text privatizer `special_token_ids` and `passthrough_token_ids`
    (a `tfdptext.pretraining.portable.Vocabulary` has them)."""
    target_privatizer = None
    if config.mode == NONE:
        privatizer = None
    elif config.mode == TOKEN_REP:
        privatizer = layers.DChiNoise(
            config.eta, embedding_description=_description(config))
        if config.objective != DENOISING:
            target_privatizer = _text_privatizer(config, backbone, tokenizer,
                                                 TARGET_PRIVATIZER)
    else:
        privatizer = _text_privatizer(config, backbone, tokenizer)
    return PrivacyAdaptiveMLM(
        backbone=backbone, privatizer=privatizer,
        target_privatizer=target_privatizer, objective=config.objective,
        num_privatizations=config.num_privatizations,
        mask_token_id=tokenizer.mask_id, name="privacy_adaptive_mlm")
