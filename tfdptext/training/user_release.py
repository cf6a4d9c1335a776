"""Training texts that users send, released once (`--training_release`).

In modes token_rep, text_to_text and seq_rep the training and dev
examples come from users: what a deployment's server holds is ONE release
of each text, made on the user's device. With `training_release=once`
(the default there) each train and dev text goes through the frozen user
side exactly once, with its randomness from os.urandom
(`tfdptext.models.secure.SecureUserSide`, as on a phone), before any
training step; the release is recorded in the run directory
(`rundir.TRAINING_RELEASE`, layout in `RunDir.write_training_release`), a
resumed run reads it back (drawing again would release every text a
second time), and every epoch trains the server on that same release.

Only real positions are kept: a token-level release stores
sum(real tokens) rows (text_to_text: one int32 id each, 4 bytes;
token_rep: one noisy embedding, 4 x dim bytes, 1,536 for MiniLM's 384),
a sequence release one vector per text. `per_epoch` (today's Keras path,
noise inside fit) is for a server's own texts: no guarantee to any user.
"""

import dataclasses
import hashlib
import json
import time

import numpy as np

from tfdptext import rundir
from tfdptext.models import split_spec
from tfdptext.privacy import guarantee as guarantee_lib
from tfdptext.training import label_privacy

ONCE, PER_EPOCH = "once", "per_epoch"
# The splits whose texts come from users (the test split is the
# experimenter's, measured with fresh releases).
USER_SPLITS = label_privacy.USER_SPLITS
# Texts are released in groups of similar length, each group padded to
# the next multiple of this (one secure model per padded length).
LENGTH_STEP = 16
# Texts per call of the secure user side.
GROUP_SIZE = 64

PER_EPOCH_REASON = (
    "--training_release=per_epoch: every training text was privatized again "
    "at every epoch (and every dev text at every validation) inside fit, "
    "with TensorFlow's own random ops; a user's text would be released once "
    "per pass, so no guarantee holds for any user whose text is in the "
    "training data (noise as augmentation of the server's own texts; use "
    "--training_release=once for texts that users send)")


@dataclasses.dataclass
class ReleasedSplit:
    """One split's release: `values` (real positions of every text,
    concatenated, for a per-token release; one row per text otherwise)
    and `lengths` (real tokens per text)."""

    values: np.ndarray
    lengths: np.ndarray
    per_token: bool

    def __len__(self):
        return len(self.lengths)

    @property
    def nbytes(self):
        return int(self.values.nbytes + self.lengths.nbytes)

    def rows(self, indices, pad_value):
        """(release, padding mask) of texts `indices`, padded to their
        longest (per-token releases; mask None otherwise)."""
        indices = np.asarray(indices, np.int64)
        if not self.per_token:
            return self.values[indices], None
        offsets = self._offsets()
        width = max(int(self.lengths[indices].max()), 1)
        out = np.full((len(indices), width) + self.values.shape[1:],
                      pad_value, self.values.dtype)
        mask = np.zeros((len(indices), width), np.int32)
        for row, i in enumerate(indices):
            n = int(self.lengths[i])
            out[row, :n] = self.values[offsets[i]:offsets[i] + n]
            mask[row, :n] = 1
        return out, mask

    def _offsets(self):
        if getattr(self, "_offset_cache", None) is None:
            self._offset_cache = np.concatenate(
                [[0], np.cumsum(self.lengths, dtype=np.int64)])
        return self._offset_cache


def _inputs(tokenizer, examples, max_examples):
    """Token ids and padding masks (numpy, the run's max_length) of the
    first `max_examples` texts."""
    texts = list(examples.texts[:max_examples] if max_examples
                 else examples.texts)
    features = tokenizer(texts)
    return (np.asarray(features["token_ids"], np.int32),
            np.asarray(features["padding_mask"], np.int32))


def inputs_digest(ids, mask):
    """SHA-256 of the real token ids of a split (what was released)."""
    digest = hashlib.sha256()
    digest.update(np.asarray(mask.sum(axis=1), np.int32).tobytes())
    digest.update(np.where(mask > 0, ids, -1).astype(np.int32).tobytes())
    return digest.hexdigest()


def _draw_split(secure_user, spec, ids, mask, progress=None):
    """One release per text, from os.urandom, in text order."""
    lengths = mask.sum(axis=1).astype(np.int32)
    order = np.argsort(lengths, kind="stable")
    parts = [None] * len(ids)
    for start in range(0, len(order), GROUP_SIZE):
        group = order[start:start + GROUP_SIZE]
        longest = max(int(lengths[group].max()), 1)
        width = min(ids.shape[1],
                    -(-longest // LENGTH_STEP) * LENGTH_STEP)
        released = secure_user({"token_ids": ids[group, :width],
                                "padding_mask": mask[group, :width]})
        value = np.asarray(released[spec.release])
        for row, i in enumerate(group):
            parts[i] = value[row, :lengths[i]] if spec.per_token \
                else value[row]
        if progress is not None:
            progress(len(group))
    if spec.per_token:
        values = np.concatenate(parts) if parts else np.zeros((0,))
    else:
        values = np.stack(parts)
    return ReleasedSplit(values, lengths, spec.per_token)


def _matches(meta, expected):
    return all(meta.get(key) == value for key, value in expected.items())


def check_release(path, stored, spec, lengths, *, vocabulary_size=None,
                  dim=None, error=ValueError):
    """Raises `error` naming `path` unless the stored release `stored`
    ({split: (values, lengths)}) is what the user side releases for these
    texts: per split, the real-token `lengths` of its inputs exactly (not
    merely their total), values of the release's dtype (integer ids,
    within `vocabulary_size`; finite floats of `dim` features)."""
    hint = "the file is damaged: use a new output directory"
    for split, (values, got) in stored.items():
        where = f"{path}: split {split!r}"
        want = np.asarray(lengths[split])
        if got.shape != want.shape or (got != want).any():
            bad = int(np.argmax(got != want)) if got.shape == want.shape \
                else None
            raise error(
                f"{where} records lengths that are not its texts' real "
                "token counts" + (f" (text {bad}: {int(got[bad])}, its text "
                                  f"has {int(want[bad])})" if bad is not None
                                  else f" ({got.shape} for {want.shape})")
                + f"; {hint}.")
        if spec.releases_token_ids:
            if values.dtype.kind not in "iu" or values.ndim != 1:
                raise error(f"{where} holds {values.dtype} values of shape "
                            f"{values.shape}; token ids are 1-D integers; "
                            f"{hint}.")
            if values.size and (values.min() < 0 or (
                    vocabulary_size and values.max() >= vocabulary_size)):
                raise error(
                    f"{where} holds ids in [{values.min()}, {values.max()}]"
                    f", outside the vocabulary [0, {vocabulary_size}); "
                    f"{hint}.")
            continue
        if values.dtype.kind != "f" or values.ndim != 2 or (
                dim is not None and values.shape[1] != dim):
            raise error(f"{where} holds {values.dtype} values of shape "
                        f"{values.shape}; the release is float vectors of "
                        f"{dim} features; {hint}.")
        if not np.isfinite(values).all():
            raise error(f"{where} holds NaN or inf; {hint}.")


def release_dim(user, spec):
    """The release's feature size (None for token ids and codes)."""
    if not spec.feature_axis:
        return None
    shape = user.output[spec.release].shape if isinstance(
        user.output, dict) else user.output.shape
    return None if shape[-1] is None else int(shape[-1])


def released_inputs(run, config, split, tokenizer, dataset, error,
                    log=print):
    """{"train", "dev"} -> ReleasedSplit, and a record for metrics.json.

    Read from the run directory when an earlier start drew them: the
    file's SHA-256 and run id are checked against RUN_RECORD, and its
    ids, dtype and lengths against the inputs (`check_release`); refused
    with `error` when they were drawn for other inputs or another user
    side. Else drawn once from os.urandom and written there atomically
    before any training step, unless the run already drew (it has
    progress, or recorded the draw): then refused, naming the missing file
    (`RunDir.check_may_draw`).
    """
    from tfdptext.models import secure

    spec = split_spec.get(split.split_point)
    limits = {"train": config.max_train_examples,
              "dev": config.max_dev_examples}
    inputs = {name: _inputs(tokenizer, dataset.splits[name], limits[name])
              for name in USER_SPLITS}
    secure_user = secure.SecureUserSide(split.user, split.split_point,
                                        max_tokens=config.max_length - 2)
    expected = json.loads(json.dumps({
        "split_point": spec.name, "release": spec.release,
        "per_token": spec.per_token, "max_length": config.max_length,
        "sizes": {n: int(len(inputs[n][0])) for n in USER_SPLITS},
        "inputs_sha256": {n: inputs_digest(*inputs[n])
                          for n in USER_SPLITS},
        "guarantee": secure_user.guarantee.to_dict()}))
    seconds = None
    path = run.file(rundir.TRAINING_RELEASE)
    run_id = run.run_id(create=True)
    if run.exists(rundir.TRAINING_RELEASE):
        meta, stored = run.read_training_release()
        if not _matches(meta, expected) or set(stored) != set(USER_SPLITS):
            changed = sorted(k for k, v in expected.items()
                             if meta.get(k) != v)
            raise error(
                f"{path} holds a release of other inputs or by another user "
                f"side (differ: {changed}); it was released once and is "
                "never drawn again: use a new output directory.")
        check_release(path, stored, spec,
                      {n: inputs[n][1].sum(axis=1) for n in USER_SPLITS},
                      vocabulary_size=tokenizer.vocabulary_size,
                      dim=release_dim(split.user, spec), error=error)
        released = {n: ReleasedSplit(v, l, spec.per_token)
                    for n, (v, l) in stored.items()}
        drawn = False
    else:
        run.check_may_draw(rundir.TRAINING_RELEASE)
        start = time.perf_counter()
        total = sum(len(inputs[n][0]) for n in USER_SPLITS)
        if log is not None:
            log(f"Releasing the {total} train and dev texts once through "
                "the user side (noise from os.urandom)...")
        released = {n: _draw_split(secure_user, spec, *inputs[n])
                    for n in USER_SPLITS}
        seconds = time.perf_counter() - start
        run.write_training_release(
            expected, {n: (r.values, r.lengths)
                       for n, r in released.items()})
        drawn = True
    record = {
        "mode": ONCE, "file": rundir.TRAINING_RELEASE,
        # The draw this run trained on: its digest (RUN_RECORD) and run id.
        "sha256": run.recorded_draw(rundir.TRAINING_RELEASE),
        "run_id": run_id,
        # What the user side guaranteed for these releases (its randomness:
        # os.urandom words, so the random-word sampler's delta).
        "release_guarantee": expected["guarantee"],
        "texts": {n: len(r) for n, r in released.items()},
        "real_tokens": {n: int(r.lengths.sum()) for n, r in
                        released.items()},
        "bytes": sum(r.nbytes for r in released.values()),
        "drawn_this_session": drawn, "draw_seconds": seconds}
    return released, record


def batches(released, spec, labels, *, batch_size, pad_id, shuffle=False,
            seed=0, class_weights=None):
    """A tf.data.Dataset of (server inputs, label[, weight]) batches of a
    released split: {release, [padding_mask, segment_ids]} padded to each
    batch's longest text. With `shuffle` the order changes every epoch
    (from one generator seeded by `seed`)."""
    import tensorflow as tf

    labels = np.asarray(labels, np.int32)
    if len(labels) != len(released):
        raise ValueError(f"{len(labels)} labels for {len(released)} "
                         "released texts.")
    rng = np.random.default_rng(seed)
    pad = spec.pad_value(spec.release, pad_id)

    def generate():
        order = rng.permutation(len(labels)) if shuffle else np.arange(
            len(labels))
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            value, mask = released.rows(idx, pad)
            features = {spec.release: value}
            if spec.mask_travels:
                features[split_spec.PADDING_MASK] = mask
                features[split_spec.SEGMENT_IDS] = np.zeros_like(mask)
            out = (features, labels[idx])
            if class_weights is not None:
                out += (np.asarray(class_weights, np.float32)[labels[idx]],)
            yield out

    value_shape = (None,) * (2 if spec.per_token else 1) + tuple(
        released.values.shape[1 if spec.per_token else 1:])
    features = {spec.release: tf.TensorSpec(
        value_shape, tf.as_dtype(released.values.dtype))}
    if spec.mask_travels:
        for key in split_spec.MASK_KEYS:
            features[key] = tf.TensorSpec((None, None), tf.int32)
    signature = (features, tf.TensorSpec((None,), tf.int32))
    if class_weights is not None:
        signature += (tf.TensorSpec((None,), tf.float32),)
    steps = -(-len(labels) // batch_size)
    dataset = tf.data.Dataset.from_generator(generate,
                                             output_signature=signature)
    return dataset.apply(tf.data.experimental.assert_cardinality(
        steps)).prefetch(2)


def training_data_guarantee(config, release_guarantee,
                            label_guarantee=None):
    """What the run's training data guarantees to the users who sent it.

    once: `release_guarantee`, the guarantee of the secure user side that
    drew the release (os.urandom words), one release per text, composed
    with the label's when labels are randomized
    (`tfdptext.privacy.categorical.with_label`); per_epoch: no guarantee
    (PER_EPOCH_REASON).
    """
    from tfdptext.privacy import categorical

    if config.training_release != ONCE or release_guarantee is None or \
            not release_guarantee.is_private:
        return guarantee_lib.Guarantee.none(
            "training_data", PER_EPOCH_REASON if config.training_release
            == PER_EPOCH else "the user side releases the text without "
            "privatization")
    text = dataclasses.replace(release_guarantee, composition=(
        "each training and dev text released once, before training "
        "(recorded in the run; every epoch reads that release). "
        + release_guarantee.composition))
    if label_guarantee is None:
        return text
    return categorical.with_label(text, label_guarantee)
