"""Privacy-adaptive MLM pretraining on pre-tokenized ids, on any backend.

`tfdptext.pretraining.pretrainer` tokenizes and masks with TensorFlow
(tf.data, tensorflow-text); this path takes token ids saved beforehand
(`tfdptext.training.portable.load_ids`), masks them on the host in numpy
(`tfdptext.pretraining.host_masking`, the law of the TensorFlow masker)
and trains the same `PrivacyAdaptiveMLM` with `train_on_batch`, so it runs
under `KERAS_BACKEND=jax` with TensorFlow imported nowhere. Under such a
backend it trains every mode (none, token_rep, text_to_text) and objective
(vanilla, probabilistic, denoising) of `tfdptext.pretraining.model.
build_mlm`.

Batches keep the ids' full length (a fixed shape: one compiled step).

Example:
>>> vocab = {"mask_id": 103, "special_token_ids": [0, 100, 101, 102, 103]}
>>> mlm = model.build_mlm(config, backbone, Vocabulary(**vocab))
>>> result = pretrain(mlm, data["train"], Vocabulary(**vocab), config)
"""

import dataclasses

import numpy as np

from tfdptext.pretraining import host_masking
from tfdptext.pretraining import objectives
from tfdptext.pretraining.model import MLM_HEAD
from tfdptext.pretraining.optimizer import HeadRateAdamW
from tfdptext.privacy import validation
from tfdptext.training.portable import timed_steps


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """What masking, `build_mlm` and the text privatizer need of a
    tokenizer, without one: [MASK]'s id, the ids never masked and never
    output (the special tokens, [PAD] included) and the ids a text
    privatizer releases unchanged ([PAD], [CLS], [SEP])."""

    mask_id: int
    special_token_ids: tuple
    pad_id: int = 0
    passthrough_token_ids: tuple = ()

    @classmethod
    def from_json(cls, path):
        """From a package's vocab.json (`benchmarks/gpu_package.py`)."""
        import json

        with open(path) as f:
            vocab = json.load(f)
        return cls(mask_id=vocab["mask_id"], pad_id=vocab["pad_id"],
                   special_token_ids=tuple(vocab["special_token_ids"]),
                   passthrough_token_ids=tuple(
                       vocab["passthrough_token_ids"]))

    def is_special(self, vocabulary_size):
        return host_masking.special_ids_table(
            vocabulary_size, self.special_token_ids, self.pad_id)


def masked_batches(values, vocabulary, vocabulary_size, *, batch_size, rng,
                   mask_rate, max_predictions):
    """Endless masked batches (`tfdptext.pretraining.masking.FEATURES`) of a
    split's ids, shuffled and masked afresh each pass from `rng`."""
    token_ids = np.asarray(values["token_ids"], np.int32)
    count = len(token_ids)
    if count < batch_size:
        raise ValueError(f"`batch_size` {batch_size} exceeds the {count} "
                         "texts.")
    is_special = vocabulary.is_special(vocabulary_size)
    while True:
        order = rng.permutation(count)
        for start in range(0, count - batch_size + 1, batch_size):
            rows = order[start:start + batch_size]
            ids = token_ids[rows]
            yield {
                "token_ids": ids,
                "padding_mask": np.asarray(values["padding_mask"][rows],
                                           np.int32),
                "segment_ids": np.asarray(values["segment_ids"][rows],
                                          np.int32),
                **host_masking.mask_ids(
                    ids, rng, is_special=is_special, mask_rate=mask_rate,
                    max_predictions=max_predictions,
                    mask_token_id=vocabulary.mask_id),
            }


def masked_accuracy(model, batch):
    """(loss, accuracy of the top prediction against the original token)
    of `model` on one masked batch, weighted by the mask weights."""
    out = model(batch, training=False)
    loss = float(model.compute_loss(x=batch, y_pred=out))
    logits = np.asarray(out["logits"])
    original = np.asarray(objectives.at_positions(batch["token_ids"],
                                                  batch["mask_positions"]))
    right = (np.argmax(logits, axis=-1) == original) * batch["mask_weights"]
    return loss, float(right.sum() / max(batch["mask_weights"].sum(), 1.0))


def pretrain(model, train, vocabulary, config, *, time_budget_s=None,
             heldout=None, jit_compile="auto"):
    """Trains a `PrivacyAdaptiveMLM` for `config.steps` steps on `train`'s
    ids.

    Args:
        model: from `tfdptext.pretraining.model.build_mlm`.
        train: a split's arrays (`tfdptext.training.portable.load_ids`).
        vocabulary: a `Vocabulary`.
        config: the validated `PretrainConfig` (its steps, batch_size,
            learning_rate, head_rate_multiplier (`HeadRateAdamW`),
            mask_rate, max_predictions and seed; a constant rate, no
            warmup).
        time_budget_s: stop early once training took this long.
        heldout: a split's arrays to measure the masked-token accuracy on
            (one batch, masked from `config.seed`), or None.
        jit_compile: Keras `compile`'s.

    Returns:
        a dict: steps done, seconds of the first step (compilation
        included) and of all, steps per second after the first, the mean
        loss of the last 10 steps, and (with `heldout`) the held-out loss
        and accuracy against the original token.
    """
    steps = validation.check_int("steps", config.steps, minimum=1)
    batch_size = validation.check_int("batch_size", config.batch_size,
                                      minimum=1)
    masking = dict(mask_rate=config.mask_rate,
                   max_predictions=config.max_predictions)
    model.compile(optimizer=HeadRateAdamW(
        config.learning_rate, head_name=MLM_HEAD,
        head_rate_multiplier=config.head_rate_multiplier),
        jit_compile=jit_compile)
    batches = masked_batches(train, vocabulary, model.vocabulary_size,
                             batch_size=batch_size,
                             rng=np.random.default_rng(config.seed),
                             **masking)
    result = {
        **timed_steps(lambda batch: model.train_on_batch(
            batch, return_dict=True), batches, steps, time_budget_s),
        "objective": model.objective.name,
        "guarantee": model.guarantee().to_dict(),
    }
    if heldout is not None:
        batch = next(masked_batches(
            heldout, vocabulary, model.vocabulary_size,
            batch_size=min(batch_size, len(heldout["token_ids"])),
            rng=np.random.default_rng(config.seed), **masking))
        result["heldout_loss"], result["heldout_original_accuracy"] = \
            masked_accuracy(model, batch)
    return result
