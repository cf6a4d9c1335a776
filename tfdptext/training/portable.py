"""Server-side fine-tuning on pre-tokenized ids, on any Keras backend.

The TensorFlow trainer (`tfdptext.training.trainer`) tokenizes with
TensorFlow Text and feeds tf.data; this path reads token ids saved
beforehand (`save_ids` / `load_ids`, a .npz) and trains with Keras `fit`
on numpy arrays, so it runs under `KERAS_BACKEND=jax` with TensorFlow
imported nowhere (a GPU machine whose image has no TensorFlow). It builds
the same split models (`tfdptext.models.split`) with the same layers.

Modes (`MODES`):

- none: encoder + pooling + classifier, no privatization;
- robust (DPNR, Lyu et al. Alg. 1): [WordDropout (`dropout_rate`)] ->
  encoder -> pool -> MinMaxNormalize -> LaplaceNoise, everything trains,
  the dropout and the noise stay in the training graph (noise as
  augmentation of the server's own texts);
- token_rep (Qu et al.): token embedding + DChiNoise on the user side,
  frozen; each training and dev text is released ONCE through the user
  side before training, and the server trains on that release every
  epoch (a user's text is never released twice);
- text_to_text (Qu et al.): d_chi text-to-text (`DChiTextPrivatizer`, its
  exact nearest-token search in `keras.ops`) on the ids, frozen, released
  once; the server is the whole model on the privatized ids;
- seq_rep (Qu et al.): encoder + pooling + MinMaxNormalize + LaplaceNoise
  (`epsilon`) or DChiNoise on the pooled vector (`eta`), frozen, released
  once; the server is the classifier.

With `label_epsilon` (the frozen modes), each training label is also
released once by K-ary randomized response (`tfdptext.offline.
categorical`, os.urandom) and the model trains with the forward-corrected
loss (`tfdptext.training.losses`); the evaluation split keeps its clean
labels, for measuring.

Under a backend other than TensorFlow the noise comes from `keras.random`
with the layer's SeedGenerator (`tfdptext.layers.noise_math`), a seeded
generator: what `guarantee` states. Phones release through the
TensorFlow export and its secure sampler.

Example:
>>> data = load_ids("sst2_ids.npz")
>>> split = build_split(TOKEN_REP, backbone, num_classes=2, eta=81.0)
>>> result = fine_tune(split, data["train"], data["dev"], steps=200,
...                    batch_size=32, learning_rate=5e-5, seed=0)
>>> result["accuracy"]  # on `dev`
"""

import time

import keras
import numpy as np

from tfdptext import layers
from tfdptext import models
from tfdptext.errors import ArgumentError
from tfdptext.privacy import validation

NONE, ROBUST, TOKEN_REP = "none", "robust", "token_rep"
TEXT_TO_TEXT, SEQ_REP = "text_to_text", "seq_rep"
MODES = (NONE, ROBUST, TOKEN_REP, TEXT_TO_TEXT, SEQ_REP)
# The modes whose user side is frozen and released once.
FROZEN = (TOKEN_REP, TEXT_TO_TEXT, SEQ_REP)
# The arrays of one split in an ids file: "<split>/<key>".
FEATURE_KEYS = ("token_ids", "padding_mask", "segment_ids")
LABELS = "labels"


def save_ids(path, splits):
    """Writes {split: {token_ids, padding_mask, segment_ids, labels}} of
    int32 arrays to the .npz `path` (keys "<split>/<key>")."""
    arrays = {}
    for split, values in splits.items():
        for key in FEATURE_KEYS + (LABELS,):
            arrays[f"{split}/{key}"] = np.asarray(values[key], np.int32)
    np.savez_compressed(path, **arrays)


def load_ids(path):
    """{split: {token_ids, padding_mask, segment_ids, labels}} from a .npz
    written by `save_ids`, checked: every split has the four arrays, the
    features (texts, length) with equal shapes and the labels (texts,)."""
    with np.load(path) as store:
        names = sorted(store.files)
        splits = {}
        for name in names:
            split, _, key = name.partition("/")
            splits.setdefault(split, {})[key] = store[name]
    for split, values in splits.items():
        missing = [k for k in FEATURE_KEYS + (LABELS,) if k not in values]
        if missing:
            raise ArgumentError(f"{path}: split {split!r} lacks {missing}.")
        shape = values["token_ids"].shape
        if len(shape) != 2 or any(values[k].shape != shape
                                  for k in FEATURE_KEYS):
            raise ArgumentError(
                f"{path}: split {split!r} must hold (texts, length) "
                f"features of one shape, received "
                f"{ {k: values[k].shape for k in FEATURE_KEYS} }.")
        if values[LABELS].shape != shape[:1]:
            raise ArgumentError(
                f"{path}: split {split!r} has {shape[0]} texts but labels "
                f"of shape {values[LABELS].shape}.")
    return splits


def features_of(values):
    """The model inputs of a split's arrays (int32)."""
    return {k: np.asarray(values[k], np.int32) for k in FEATURE_KEYS}


def build_split(mode, backbone, num_classes, *, epsilon=None, eta=None,
                sensitivity="per_coordinate", pooling="mean",
                classifier_dropout=0.1, special_token_ids=None,
                passthrough_token_ids=None, dropout_rate=0.0,
                mask_token_id=None):
    """The SplitModel of `mode` (one of MODES) over a keras-hub backbone.

    Args:
        epsilon: robust, seq_rep: LaplaceNoise's epsilon (`sensitivity` as
            in the layer).
        eta: token_rep, text_to_text: d_chi's eta; seq_rep without
            `epsilon`: DChiNoise's on the pooled vector.
        special_token_ids, passthrough_token_ids: text_to_text: the ids
            never output and those released unchanged (a
            `tfdptext.pretraining.portable.Vocabulary`'s).
        dropout_rate: DPNR's word dropout rate mu in [0, 1) before the
            encoder (`tfdptext.layers.WordDropout`), as the TensorFlow
            trainer's `dropout_rate`: modes robust and seq_rep with
            `epsilon` (Laplace) only. It needs `mask_token_id` ([MASK])
            and `passthrough_token_ids`: with [MASK], the ids never
            dropped ([PAD], [CLS], [SEP], [MASK], the TensorFlow
            trainer's `structural_token_ids`).
    """
    validation.check_choice("mode", mode, MODES)
    dropout = _word_dropout(mode, epsilon, dropout_rate, mask_token_id,
                            passthrough_token_ids)
    common = dict(pooling=pooling, classifier_dropout=classifier_dropout)
    needs = {TOKEN_REP: eta, TEXT_TO_TEXT: eta, ROBUST: epsilon,
             SEQ_REP: epsilon if epsilon is not None else eta}
    if mode in needs and needs[mode] is None:
        raise ArgumentError(f"Mode {mode} needs `" + (
            "epsilon" if mode == ROBUST else
            "eta" if mode != SEQ_REP else "epsilon` or `eta") + "`.")
    if mode == TOKEN_REP:
        split = models.token_representation_split(
            backbone, num_classes, layers.DChiNoise(
                eta, embedding_description="token embeddings"), **common)
    elif mode == TEXT_TO_TEXT:
        if special_token_ids is None or passthrough_token_ids is None:
            raise ArgumentError("Mode text_to_text needs "
                                "`special_token_ids` and "
                                "`passthrough_token_ids`.")
        split = models.text_to_text_split(
            backbone, num_classes, layers.DChiTextPrivatizer(
                eta, models.token_embedding_table(backbone),
                special_token_ids=special_token_ids,
                passthrough_token_ids=passthrough_token_ids,
                embedding_description="token embeddings"), **common)
    else:
        privatizers = None
        if mode == SEQ_REP and epsilon is None:
            privatizers = [layers.DChiNoise(
                eta, embedding_description="pooled sequence "
                "representations", vectors="sequences")]
        elif mode in (ROBUST, SEQ_REP):
            privatizers = [layers.MinMaxNormalize(),
                           layers.LaplaceNoise(epsilon, sensitivity)]
        split = models.sequence_representation_split(
            backbone, num_classes, privatizers, input_dropout=dropout,
            **common)
    if mode in FROZEN:
        split.freeze_user_side()
    return split


def _word_dropout(mode, epsilon, dropout_rate, mask_token_id,
                  passthrough_token_ids):
    """The WordDropout of `build_split`'s arguments, or None (rate 0);
    ArgumentError where the TensorFlow trainer's config refuses it."""
    rate = validation.check_rate("dropout_rate", dropout_rate)
    if not rate:
        return None
    if mode not in (ROBUST, SEQ_REP) or epsilon is None:
        raise ArgumentError(
            "`dropout_rate` > 0 (word dropout) applies to modes robust and "
            "seq_rep with `epsilon` (it amplifies an epsilon-LDP Laplace "
            f"release), received mode={mode!r}, epsilon={epsilon!r}.")
    if mask_token_id is None or passthrough_token_ids is None:
        raise ArgumentError(
            "`dropout_rate` > 0 (word dropout) needs `mask_token_id` and "
            "`passthrough_token_ids` (a `tfdptext.pretraining.portable."
            "Vocabulary`'s mask_id and passthrough_token_ids).")
    return layers.WordDropout(
        rate, mask_token_id,
        tuple(passthrough_token_ids) + (mask_token_id,))


def release_once(split, values, batch_size=64):
    """What a frozen user side releases for every text of a split, drawn
    once (a dict of numpy arrays keyed by `split.spec.released_keys`)."""
    return split.user.predict(features_of(values), batch_size=batch_size,
                              verbose=0)


def _batches(inputs, labels, batch_size, rng):
    """Endless shuffled (inputs, labels) batches of a fixed size (one
    compiled step)."""
    count = len(labels)
    if count < batch_size:
        raise ArgumentError(f"`batch_size` {batch_size} exceeds the "
                            f"{count} training texts.")
    while True:
        order = rng.permutation(count)
        for start in range(0, count - batch_size + 1, batch_size):
            rows = order[start:start + batch_size]
            yield ({k: v[rows] for k, v in inputs.items()}, labels[rows])


def trainee(split):
    """(the model `fit` trains, a function from a split's arrays to its
    inputs): the server on a once-drawn release for a frozen user side
    (token_rep), else the whole model on the ids."""
    if split.privatizer is not None and not split.user.trainable:
        return split.server, lambda values: release_once(split, values)
    return split.model, features_of


def timed_steps(step, batches, steps, time_budget_s=None):
    """Calls `step(batch)` (returning the loss) on `batches` until `steps`
    steps are done or training took `time_budget_s` seconds.

    Returns a dict: steps done, seconds of the first step (compilation
    included) and of all, steps per second after the first (None after
    one step) and the mean loss of the last 10 steps.
    """
    start = time.perf_counter()
    first_s, losses = None, []
    for batch in batches:
        loss = step(batch)
        losses.append(float(loss["loss"] if isinstance(loss, dict)
                            else loss))
        elapsed = time.perf_counter() - start
        if first_s is None:
            first_s = elapsed
        if len(losses) >= steps or (time_budget_s and
                                    elapsed > time_budget_s):
            break
    total_s = time.perf_counter() - start
    rest = len(losses) - 1
    return {"steps": len(losses), "first_step_s": first_s,
            "train_s": total_s,
            "steps_per_s": rest / (total_s - first_s) if rest else None,
            "final_train_loss": float(np.mean(losses[-10:]))}


def released_labels(labels, num_classes, label_epsilon):
    """(training labels, Keras loss): the labels as they are and the
    cross-entropy; with `label_epsilon`, each label released once by
    K-ary randomized response (os.urandom) and the forward-corrected
    cross-entropy for that channel."""
    labels = np.asarray(labels, np.int32)
    if label_epsilon is None:
        return labels, keras.losses.SparseCategoricalCrossentropy(
            from_logits=True)
    from tfdptext.offline import categorical as categorical_rr
    from tfdptext.privacy import categorical
    from tfdptext.training import losses

    noisy = categorical_rr.randomized_response(
        labels.astype(np.int64), num_classes, label_epsilon)
    return np.asarray(noisy, np.int32), losses.ForwardCorrectedCrossentropy(
        categorical.transition_matrix(label_epsilon, num_classes))


def fine_tune(split, train, dev, *, steps, batch_size, learning_rate,
              seed=0, time_budget_s=None, jit_compile="auto",
              label_epsilon=None):
    """Trains `split` for `steps` optimizer steps and measures dev accuracy.

    Args:
        split: from `build_split`.
        train, dev: a split's arrays (`load_ids`).
        steps: optimizer steps (batches of `batch_size`).
        time_budget_s: stop early once training took this long.
        jit_compile: Keras `compile`'s (False runs the steps eagerly:
            no compilation, for tiny test models).
        label_epsilon: a frozen mode (FROZEN): release each training
            label once by randomized response at this epsilon and train
            with the forward-corrected loss (`released_labels`); `dev`'s
            labels stay clean (they measure).

    Returns:
        a dict: `timed_steps`'s, the seconds taken to prepare the
        training inputs (`inputs_s`: the release of a frozen user side),
        the accuracy on `dev` and the guarantee of the release (and of
        the labels'; with word dropout, over inputs of 1 to the ids'
        length real tokens).
    """
    validation.check_int("steps", steps, minimum=1)
    validation.check_int("batch_size", batch_size, minimum=1)
    model, inputs_of = trainee(split)
    num_classes = int(model.output_shape[-1])
    if label_epsilon is not None:
        if split.user.trainable:
            raise ArgumentError("`label_epsilon` applies to the modes with "
                                f"a frozen user side {FROZEN} only.")
        validation.check_positive("label_epsilon", label_epsilon)
    train_labels, loss = released_labels(train[LABELS], num_classes,
                                         label_epsilon)
    rng = np.random.default_rng(seed)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate),
                  loss=loss, jit_compile=jit_compile)
    started = time.perf_counter()
    train_inputs = inputs_of(train)  # a frozen user side: drawn once
    inputs_s = time.perf_counter() - started
    batches = _batches(train_inputs, train_labels, batch_size, rng)
    result = timed_steps(lambda batch: model.train_on_batch(*batch),
                         batches, steps, time_budget_s)
    logits = model.predict(inputs_of(dev), batch_size=batch_size, verbose=0)
    accuracy = float(np.mean(np.argmax(logits, axis=-1) == dev[LABELS]))
    result.update(inputs_s=inputs_s, accuracy=accuracy,
                  guarantee=split.guarantee(
                      max_tokens=train["token_ids"].shape[1]).to_dict(),
                  backend=keras.backend.backend())
    if label_epsilon is not None:
        from tfdptext.privacy import categorical

        result["label_guarantee"] = categorical.label_guarantee(
            label_epsilon, num_classes).to_dict()
    return result
