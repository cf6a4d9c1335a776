"""Privacy-adaptive MLM pretraining: targets, masking, freezing, runs.

Targets are checked against closed forms on a toy vocabulary; the whole
program (interrupted, resumed, exported, fine-tuned from) on the tiny
preset and the synthetic corpus (CPU, fast).
"""

import contextlib
import json
import os

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from tfdptext import data
from tfdptext import training
from tfdptext.data import TextTokenizer
from tfdptext.errors import ArgumentError
from tfdptext.errors import TfdptextError
from tfdptext.pretraining import PretrainConfig
from tfdptext.pretraining import PretrainDirectoryError
from tfdptext.pretraining import layout
from tfdptext.pretraining import masking
from tfdptext.pretraining import model as model_lib
from tfdptext.pretraining import objectives
from tfdptext.pretraining import pretrain
from tfdptext.pretraining import pretrainer
from tfdptext.privacy import headline
from tfdptext.training import prebuild

import eager_training

# A toy WordPiece vocabulary: special ids 0-6 ([unused*] included).
TOY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]",
             "[unused1]", "the", "cat", "dog", "sat", "ran", "on", "mat",
             "big", "small", "red", "blue", "a", "and", "fast", "slow"]
TOY_SPECIAL = set(range(7))
TOY_TEXTS = [
    "the big cat sat on the mat and the small dog ran fast",
    "a red dog ran on a blue mat",
    "the slow cat and a fast zebra sat",  # zebra: [UNK]
    "dog",
    "the cat sat on the big red mat and a small blue dog ran slow",
    "a cat",
]


@pytest.fixture(scope="module")
def toy_tokenizer():
    return TextTokenizer(TOY_VOCAB, max_length=16)


@pytest.fixture(scope="module")
def toy_masker(toy_tokenizer):
    return masking.masker_for(toy_tokenizer, mask_rate=0.3,
                              max_predictions=5)


def _toy_backbone():
    return keras_hub.models.BertBackbone(
        vocabulary_size=len(TOY_VOCAB), num_layers=1, num_heads=1,
        hidden_dim=8, intermediate_dim=16, max_sequence_length=16)


def _toy_batch(tokenizer, masker, texts=TOY_TEXTS):
    """A masked batch with at least one masked position in every row."""
    for _ in range(100):
        batch = masking.mask_batch(tokenizer(texts), masker)
        if (batch["mask_weights"].numpy().sum(axis=1) > 0).all():
            return batch
    raise AssertionError("the masker selected nothing in a row 100 times")


def _spy(layer):
    """Records every output of a privatization layer (eager calls)."""
    outputs = []
    apply = layer.apply

    def recording(inputs, uniforms=None):
        result = apply(inputs, uniforms)
        outputs.append(result.numpy())
        return result

    layer.apply = recording
    return outputs


def _take(values, positions):
    return np.take_along_axis(values, positions, axis=1)


def _nearest_regular(table, vectors):
    """Numpy nearest non-special token of each vector."""
    distances = ((vectors[:, None, :] - table[None, :, :]) ** 2).sum(-1)
    distances[:, sorted(TOY_SPECIAL)] = np.inf
    return distances.argmin(axis=1)


# Targets, closed forms.

def test_soft_targets_are_counts_over_k():
    draws = np.array([[[2, 2, 0, 1], [3, 3, 3, 3]]])
    expected = np.array([[[0.25, 0.25, 0.5, 0.0], [0.0, 0.0, 0.0, 1.0]]])
    np.testing.assert_allclose(objectives.soft_targets(draws, 4).numpy(),
                               expected)


def test_probabilistic_targets_count_k_privatizations_of_masked_rows():
    vocabulary, k = 11, 3
    original = np.array([[4, 7, 0], [2, 0, 0]], np.int32)
    weights = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
    calls = []

    def privatize(ids):  # the n-th id privatized -> (id + n) % vocabulary
        calls.append(np.asarray(ids))
        n = tf.reshape(tf.range(tf.size(ids), dtype=tf.int32),
                       tf.shape(ids))
        return (ids + n) % vocabulary

    targets = np.asarray(objectives.probabilistic_targets(
        original, weights, privatize=privatize, num_privatizations=k,
        vocabulary_size=vocabulary))
    # Every slot was privatized K times in one call (fixed shapes) ...
    np.testing.assert_array_equal(calls[0], np.repeat(original[..., None],
                                                      k, axis=-1))
    # ... and only the 3 masked positions' draws were kept.
    expected = np.zeros((2, 3, vocabulary))
    for b, p in [(0, 0), (0, 1), (1, 0)]:
        for j in range(k):
            n = (b * 3 + p) * k + j
            expected[b, p, (original[b, p] + n) % vocabulary] += 1
    expected /= k
    expected[0, 2, 0] = expected[1, 1, 0] = expected[1, 2, 0] = 1.0
    np.testing.assert_allclose(targets, expected, atol=1e-7)
    np.testing.assert_allclose(targets.sum(-1), 1.0, atol=1e-6)


def test_masked_cross_entropy_closed_form_and_padding_ignored():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 5)).astype(np.float32)
    ids = np.array([[1, 4, 0], [2, 0, 0]], np.int32)
    weights = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -(log_p[0, 0, 1] + log_p[0, 1, 4] + log_p[1, 0, 2]) / 3
    loss = objectives.masked_cross_entropy(tf.constant(ids), logits, weights)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # One-hot distributions give the same loss as ids.
    soft = objectives.masked_cross_entropy(
        tf.one_hot(ids, 5), logits, weights)
    assert float(soft) == pytest.approx(expected, rel=1e-5)
    # Unmasked (weight 0) slots do not count, whatever they hold.
    changed = logits.copy()
    changed[0, 2] = changed[1, 1:] = 100.0
    assert float(objectives.masked_cross_entropy(
        tf.constant(ids), changed, weights)) == pytest.approx(expected,
                                                              rel=1e-5)


def test_hard_targets_and_accuracy():
    soft = tf.constant([[[0.2, 0.5, 0.3], [0.6, 0.2, 0.2]]])
    np.testing.assert_array_equal(objectives.hard_targets(soft), [[1, 0]])
    logits = tf.constant([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    np.testing.assert_array_equal(
        objectives.correct_predictions([[1, 0]], logits), [[1.0, 0.0]])


def test_server_input_corruption_closed_form():
    token_ids = tf.constant([[2, 7, 8, 9, 3]])
    masked_ids = tf.constant([[2, 4, 8, 15, 3]])  # [MASK], kept, random
    release = tf.constant([[2, 11, 12, 13, 3]])
    np.testing.assert_array_equal(
        model_lib.corrupt_released_ids(release, token_ids=token_ids,
                                       masked_ids=masked_ids),
        [[2, 4, 12, 15, 3]])
    table = np.arange(22 * 2, dtype=np.float32).reshape(22, 2)
    noise = np.full((1, 5, 2), 0.5, np.float32)
    clean = table[token_ids.numpy()]
    server = model_lib.corrupt_released_embeddings(
        clean + noise, clean=clean, masked_clean=table[masked_ids.numpy()],
        token_ids=token_ids, masked_ids=masked_ids, mask_token_id=4).numpy()
    expected = clean + noise
    expected[0, 1] = table[4]  # [MASK]: the clean marker
    expected[0, 3] = table[15] + 0.5  # random token: with the noise
    np.testing.assert_allclose(server, expected)


# The model's targets on a toy vocabulary.

def _toy_model(mode, objective, eta=40.0, k=4):
    tokenizer = TextTokenizer(TOY_VOCAB, max_length=16)
    backbone = _toy_backbone()
    config = PretrainConfig(objective=objective, mode=mode, eta=eta,
                            num_privatizations=k, preset="toy").validate()
    return model_lib.build_mlm(config, backbone, tokenizer), backbone


@pytest.mark.parametrize("mode", ["token_rep", "text_to_text"])
def test_denoising_targets_are_the_original_ids(toy_tokenizer, toy_masker,
                                                mode):
    mlm, _ = _toy_model(mode, "denoising")
    batch = _toy_batch(toy_tokenizer, toy_masker)
    out = mlm(batch)
    positions = batch["mask_positions"].numpy()
    np.testing.assert_array_equal(
        out["targets"], _take(batch["token_ids"].numpy(), positions))
    assert out["logits"].shape == positions.shape + (len(TOY_VOCAB),)


@pytest.mark.parametrize("mode", ["token_rep", "text_to_text"])
def test_vanilla_targets_are_the_released_tokens_at_masked_positions(
        toy_tokenizer, toy_masker, mode):
    mlm, backbone = _toy_model(mode, "vanilla")
    released = _spy(mlm.privatizer)
    batch = _toy_batch(toy_tokenizer, toy_masker)
    targets = mlm(batch)["targets"].numpy()
    positions = batch["mask_positions"].numpy()
    masked = batch["mask_weights"].numpy() > 0
    if mode == "text_to_text":
        expected = _take(released[0], positions)
    else:  # the nearest regular token of the released noisy embedding
        table = backbone.token_embedding.embeddings.numpy()
        vectors = np.take_along_axis(released[0], positions[..., None],
                                     axis=1)
        expected = np.zeros_like(positions)
        expected[masked] = _nearest_regular(table, vectors[masked])
        np.testing.assert_array_equal(targets[~masked], 0)
    np.testing.assert_array_equal(targets[masked], expected[masked])
    assert not set(targets[masked].tolist()) & TOY_SPECIAL
    # At this eta (noise norm 8 / 40 = 0.2, token distances about 0.08)
    # the privatized tokens differ from the original ones.
    original = _take(batch["token_ids"].numpy(), positions)
    assert (targets[masked] != original[masked]).any()


@pytest.mark.parametrize("mode", ["token_rep", "text_to_text"])
def test_probabilistic_targets_are_counts_of_k_privatizations(
        toy_tokenizer, toy_masker, mode):
    k = 5
    mlm, _ = _toy_model(mode, "probabilistic", k=k)
    draws = _spy(mlm.target_privatizer)
    batch = _toy_batch(toy_tokenizer, toy_masker)
    targets = mlm(batch)["targets"].numpy()
    masked = batch["mask_weights"].numpy() > 0
    positions = batch["mask_positions"].numpy()
    original = _take(batch["token_ids"].numpy(), positions)[masked]
    # text_to_text: the first call is the release, the last the K draws
    # (of every slot: fixed shapes; the padding slots' are dropped).
    assert draws[-1].shape == masked.shape + (k,)
    drawn = draws[-1][masked]
    assert not set(drawn.ravel().tolist()) & TOY_SPECIAL
    expected = np.stack([np.bincount(row, minlength=len(TOY_VOCAB))
                         for row in drawn]) / k
    np.testing.assert_allclose(targets[masked], expected, atol=1e-7)
    np.testing.assert_allclose(targets.sum(-1), 1.0, atol=1e-6)
    assert len(set(drawn.ravel().tolist())) > 1
    # The draws privatize the ORIGINAL tokens: with next to no noise, the
    # targets are their one-hots.
    exact, _ = _toy_model(mode, "probabilistic", eta=1e7, k=k)
    targets = exact(batch)["targets"].numpy()
    np.testing.assert_array_equal(
        targets[masked], np.eye(len(TOY_VOCAB))[original])


@pytest.mark.parametrize("objective", ["vanilla", "probabilistic",
                                       "denoising"])
def test_clean_mode_targets_the_original_ids_of_the_masked_text(
        toy_tokenizer, toy_masker, objective):
    mlm, backbone = _toy_model("none", objective, eta=None)
    assert mlm.privatizer is None
    batch = _toy_batch(toy_tokenizer, toy_masker)
    out = mlm(batch)
    positions = batch["mask_positions"].numpy()
    masked = batch["mask_weights"].numpy() > 0
    original = _take(batch["token_ids"].numpy(), positions)
    hard = objectives.hard_targets(out["targets"]).numpy()
    np.testing.assert_array_equal(hard[masked], original[masked])
    if objective == "probabilistic":  # K identical draws: one-hot
        np.testing.assert_array_equal(
            out["targets"].numpy()[masked],
            np.eye(len(TOY_VOCAB))[original[masked]])
    # The server's input is BERT's masking of the clean text, nothing else.
    sequence = backbone({"token_ids": batch["masked_ids"],
                         "padding_mask": batch["padding_mask"],
                         "segment_ids": batch["segment_ids"]})[
        "sequence_output"]
    np.testing.assert_allclose(
        out["logits"].numpy(),
        mlm.mlm_head(sequence, mask_positions=batch["mask_positions"]),
        rtol=1e-5, atol=1e-5)
    guarantee = mlm.guarantee()
    assert not guarantee.is_private and guarantee.value is None
    assert "NO privacy guarantee" in str(guarantee)
    assert "releases nothing" in str(guarantee)


def _answer_at_input_accuracies(masker, seed=0):
    """Held-out masked-token accuracies of a toy clean MLM trained for 200
    steps on random token sequences (nothing to predict from context) with
    the original token at the input of every masked position (no [MASK]):
    (aligned, shuffled). Shuffled: each row's input is the previous row's
    sequence, so it holds no answer (what misaligned labels would look
    like); the same model starts again from the same weights and optimizer
    state for it (one traced training step serves both)."""
    from tfdptext import seeding

    rng = np.random.default_rng(seed)
    regular = np.arange(len(TOY_SPECIAL), len(TOY_VOCAB))

    def batch(rows=8, length=12):
        ids = rng.choice(regular, size=(rows, length)).astype(np.int32)
        ids[:, 0], ids[:, -1] = 2, 3  # [CLS], [SEP]
        features = {"token_ids": tf.constant(ids),
                    "padding_mask": tf.ones_like(ids, dtype=tf.bool),
                    "segment_ids": tf.zeros_like(ids)}
        features.update(masker(features["token_ids"]))
        return features

    def dataset(batches, shuffle_rows):
        answers = [b["token_ids"] for b in batches]
        if shuffle_rows:
            answers = [tf.roll(a, shift=1, axis=0) for a in answers]
        batches = [{**b, "masked_ids": a} for b, a in zip(batches, answers)]
        return tf.data.Dataset.from_tensor_slices(
            {k: tf.stack([b[k] for b in batches]) for k in batches[0]})

    config = PretrainConfig(objective="vanilla", mode="none",
                            preset="toy").validate()
    with seeding.scoped_seed(seed):
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=len(TOY_VOCAB), num_layers=1, num_heads=1,
            hidden_dim=8, intermediate_dim=16, max_sequence_length=16,
            dropout=0.0)
        mlm = model_lib.build_mlm(config, backbone, TextTokenizer(
            TOY_VOCAB, max_length=16))
        train = [batch() for _ in range(200)]
        heldout = [batch() for _ in range(20)]
        mlm(next(iter(dataset(train, False))))
    # Unit-scale, well-separated token vectors (keras-hub's 0.02-scale
    # initial table makes the tied output layer slow to learn anything).
    backbone.token_embedding.embeddings.assign(
        rng.normal(size=(len(TOY_VOCAB), 8)))
    optimizer = keras.optimizers.AdamW(1e-2)
    mlm.compile(optimizer=optimizer, jit_compile=False,
                steps_per_execution=50)  # fewer Python round trips
    optimizer.build(mlm.trainable_variables)
    start = ([v.numpy() for v in mlm.weights],
             [v.numpy() for v in optimizer.variables])
    accuracies = []
    for shuffle_rows in (False, True):
        for variable, value in zip(mlm.weights, start[0]):
            variable.assign(value)
        for variable, value in zip(optimizer.variables, start[1]):
            variable.assign(value)
        batches = dataset(train, shuffle_rows)
        prebuild.build_before_fit(mlm, batches)  # one trace, not two
        mlm.fit(batches, epochs=1, verbose=0, shuffle=False)
        # What evaluate() would report, as one eager test step on the 160
        # held-out rows (the metric is a mean over all masked tokens):
        # tracing the test step costs more than this one eager call.
        mlm.reset_metrics()
        everything = next(iter(dataset(heldout, shuffle_rows).unbatch()
                               .batch(8 * len(heldout))))
        accuracies.append(float(
            mlm.test_step(everything)["original_accuracy"]))
    return accuracies


def test_labels_are_aligned_with_the_masked_positions(toy_masker):
    """Given the answer at the input, the MLM learns to read it off: its
    labels are the tokens at the positions its logits are taken from. On
    random sequences nothing else predicts a token, so labels taken from
    other positions or rows would stay near chance (1/15): the contrast,
    where each input is another row's, shows it."""
    aligned, shuffled = _answer_at_input_accuracies(toy_masker)
    assert aligned > 0.95
    assert shuffled < 0.3


def test_frozen_embedding_bit_identical_after_training_steps(toy_tokenizer,
                                                             toy_masker):
    mlm, backbone = _toy_model("text_to_text", "vanilla")
    batch = _toy_batch(toy_tokenizer, toy_masker)
    mlm(batch)
    before = {v.path: v.numpy().copy() for v in mlm.weights}
    table = backbone.token_embedding.embeddings
    assert not backbone.token_embedding.trainable
    assert all(v is not table for v in mlm.trainable_variables)
    # Eager steps: three of them cost less than tracing fit's graph.
    mlm.compile(optimizer=keras.optimizers.AdamW(1e-2), jit_compile=False,
                run_eagerly=True)
    mlm.fit(tf.data.Dataset.from_tensors(batch).repeat(3), epochs=1,
            verbose=0, shuffle=False)
    after = {v.path: v.numpy() for v in mlm.weights}
    np.testing.assert_array_equal(after[table.path], before[table.path])
    changed = [p for p in before if not np.array_equal(before[p], after[p])]
    assert any("transformer_layer" in p for p in changed), changed
    assert any("mlm_head" in p for p in changed), changed


def test_head_rate_multiplier_scales_only_the_head_updates(toy_tokenizer,
                                                          toy_masker):
    """One step of HeadRateAdamW(rate, m) = AdamW(m * rate) on the head's
    variables and AdamW(rate) on the others (dropout off: the same
    gradients in every copy)."""
    from tfdptext.pretraining.optimizer import HeadRateAdamW

    rate, multiplier = 1e-3, 10.0
    batch = _toy_batch(toy_tokenizer, toy_masker)
    config = PretrainConfig(objective="denoising", mode="none",
                            preset="toy").validate()
    copies = []
    for optimizer in (
            HeadRateAdamW(rate, head_name=model_lib.MLM_HEAD,
                          head_rate_multiplier=multiplier, weight_decay=0.0),
            keras.optimizers.AdamW(rate, weight_decay=0.0),
            keras.optimizers.AdamW(rate * multiplier, weight_decay=0.0)):
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=len(TOY_VOCAB), num_layers=1, num_heads=1,
            hidden_dim=8, intermediate_dim=16, max_sequence_length=16,
            dropout=0.0)
        mlm = model_lib.build_mlm(config, backbone, toy_tokenizer)
        mlm(batch)
        if copies:
            mlm.set_weights(copies[0].get_weights())
        # Eager: one step costs less than tracing fit's graph.
        mlm.compile(optimizer=optimizer, jit_compile=False, run_eagerly=True)
        copies.append(mlm)
    before = [v.numpy().copy() for v in copies[0].trainable_variables]
    for mlm in copies:
        mlm.fit(tf.data.Dataset.from_tensors(batch), epochs=1, verbose=0,
                shuffle=False)
    scaled, base, head_rate = (m.trainable_variables for m in copies)
    in_head = [model_lib.MLM_HEAD in v.path.split("/") for v in scaled]
    assert copies[0].optimizer.head_variable_count == sum(in_head) == 5
    for i, variable in enumerate(scaled):
        reference = (head_rate if in_head[i] else base)[i]
        np.testing.assert_allclose(variable.numpy(), reference.numpy(),
                                   rtol=1e-6, atol=1e-7,
                                   err_msg=variable.path)
        assert not np.array_equal(variable.numpy(), before[i])


def test_mixed_precision_forward_and_float32_preset(toy_tokenizer,
                                                    toy_masker, tmp_path):
    from tfdptext import models
    from tfdptext.pretraining import pretrainer
    from tfdptext.training import devices

    batch = _toy_batch(toy_tokenizer, toy_masker)
    with devices.precision_policy("mixed_float16"):
        mlm, backbone = _toy_model("token_rep", "probabilistic")
        out = mlm(batch)
        loss = mlm.compute_loss(batch, None, out)
        assert backbone.compute_dtype == "float16"
        pretrainer.save_preset(backbone, toy_tokenizer, str(tmp_path / "p"))
    assert keras.mixed_precision.global_policy().name == "float32"
    assert np.isfinite(float(loss))
    with open(tmp_path / "p" / "config.json") as f:
        assert json.load(f)["config"]["dtype"]["config"]["name"] == "float32"
    assert models.load_tokenizer(str(tmp_path / "p")).vocabulary == TOY_VOCAB
    loaded = models.load_backbone(str(tmp_path / "p"))
    np.testing.assert_array_equal(
        loaded.token_embedding.embeddings.numpy(),
        backbone.token_embedding.embeddings.numpy())


# Masking.

def test_masker_never_selects_special_tokens_or_padding(tokenizer):
    # The real vocabulary (999 special ids) and texts with [UNK] and
    # padding; max_length 16.
    masker = masking.masker_for(tokenizer, mask_rate=0.5, max_predictions=4)
    texts = ["a fine day", "\u2603 snowman \u2603 and more words here",
             "one two three four five six seven eight nine ten eleven"]
    special = np.array(tokenizer.special_token_ids)
    # 30 draws of each text: the masker draws each row on its own, so one
    # call on the 90 rows (one eager call, not 30).
    features = tokenizer(texts * 30)
    out = masker(features["token_ids"])
    ids = features["token_ids"].numpy()
    positions = out["mask_positions"].numpy()
    weights = out["mask_weights"].numpy() > 0
    chosen = _take(ids, positions)[weights]
    assert not np.isin(chosen, special).any()
    assert (_take(features["padding_mask"].numpy(),
                  positions)[weights] == 1).all()
    assert (weights.sum(axis=1) <= 4).all()
    unselected = np.ones_like(ids, bool)
    for row, (p, w) in enumerate(zip(positions, weights)):
        unselected[row, p[w]] = False
    np.testing.assert_array_equal(out["masked_ids"].numpy()[unselected],
                                  ids[unselected])
    selected = weights.sum()
    selectable = (~np.isin(ids, special)).sum()
    # The 30 draws of a text differ (not one draw repeated).
    assert len({tuple(p[w]) for p, w in zip(positions[2::3],
                                            weights[2::3])}) > 1
    assert tokenizer.unk_id in ids  # the snowman is [UNK]
    # 30 x 3 rows; capped at 4 per row: well above 0, below the cap sum.
    assert 0.2 * selectable < selected <= 4 * 90


def test_heldout_masks_are_fixed_by_the_seed_and_training_masks_are_not(
        toy_tokenizer):
    texts = TOY_TEXTS + TOY_TEXTS[::-1]
    options = dict(mask_rate=0.3, max_predictions=4, batch_size=4)

    def masks(seed):
        batches = masking.heldout_batches(texts, toy_tokenizer, seed=seed,
                                          **options)
        return np.concatenate([b["mask_positions"].numpy()
                               for b in batches])

    np.testing.assert_array_equal(masks(0), masks(0))  # rebuilt: same
    assert not np.array_equal(masks(0), masks(1))
    batches = masking.heldout_batches(texts, toy_tokenizer, seed=0,
                                      **options)
    first, again = ([b["masked_ids"].numpy() for b in batches]
                    for _ in range(2))
    for a, b in zip(first, again):  # iterated again: same
        np.testing.assert_array_equal(a, b)
    assert [b["token_ids"].dtype for b in batches][0] == tf.int32
    # Nothing global is seeded: training masks differ.
    encode = masking.batch_encoder(toy_tokenizer, masking.masker_for(
        toy_tokenizer, mask_rate=0.3, max_predictions=4))
    draws = [encode(tf.constant(texts))["mask_positions"].numpy()
             for _ in range(2)]
    assert not np.array_equal(*draws)


def test_fixed_masks_follow_the_maskers_law(tokenizer):
    # TokenMasker.fixed (the held-out masks) against the training masks:
    # the same count per row, never a special token or padding,
    # the unselected ids unchanged, and BERT's 80/10/10 corruption.
    masker = masking.masker_for(tokenizer, mask_rate=0.15,
                                max_predictions=20)
    texts = ["a fine day", "\u2603 snowman \u2603 and more words here",
             "one two three four five six seven eight nine ten eleven "
             "twelve thirteen fourteen fifteen"] * 100
    features = tokenizer(texts)
    ids = features["token_ids"].numpy()
    special = np.array(tokenizer.special_token_ids)
    out = masker.fixed(ids, np.random.default_rng(0))
    weights = out["mask_weights"] > 0
    # Traced, as training traces it.
    traced = tf.function(masker)(tf.constant(ids))
    np.testing.assert_array_equal(
        weights.sum(axis=1),
        (traced["mask_weights"].numpy() > 0).sum(axis=1))
    chosen = _take(ids, out["mask_positions"])[weights]
    assert not np.isin(chosen, special).any()
    for p, w in zip(out["mask_positions"], weights):
        assert w[:w.sum()].all()  # the selections first, then padding
        assert (np.diff(p[w]) > 0).all()  # ascending
    unselected = np.ones_like(ids, bool)
    for row, (p, w) in enumerate(zip(out["mask_positions"], weights)):
        unselected[row, p[w]] = False
    np.testing.assert_array_equal(out["masked_ids"][unselected],
                                  ids[unselected])
    after = _take(out["masked_ids"], out["mask_positions"])[weights]
    share_mask = np.mean(after == tokenizer.mask_id)
    share_kept = np.mean(after == chosen)
    assert len(chosen) > 400
    assert 0.72 < share_mask < 0.88  # about 5 sd of 400 draws
    assert 0.04 < share_kept < 0.16
    np.testing.assert_array_equal(
        out["masked_ids"], masker.fixed(ids, np.random.default_rng(0))[
            "masked_ids"])


def _keras_hub_masks(ids, *, special, vocabulary_size, mask_token_id,
                     mask_rate, max_predictions):
    """keras-hub's MaskedLMMaskGenerator traced (tensorflow-text's
    RandomItemSelector and MaskValuesChooser), every special id hidden as
    [PAD] (its one unselectable id) and put back: the masker tfdptext used
    before its own, as numpy arrays."""
    generator = keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=vocabulary_size, mask_selection_rate=mask_rate,
        mask_token_id=mask_token_id, mask_selection_length=max_predictions,
        unselectable_token_ids=[0], mask_token_rate=0.8,
        random_token_rate=0.1)

    @tf.function
    def masks(ids):
        is_special = tf.gather(tf.constant(special), ids)
        out = generator(tf.where(is_special, 0, ids))
        return {"masked_ids": tf.where(is_special, ids, tf.cast(
                    out["token_ids"], tf.int32)),
                "mask_positions": out["mask_positions"],
                "mask_weights": out["mask_weights"]}

    return {k: v.numpy() for k, v in masks(tf.constant(ids)).items()}


def test_masker_law_is_keras_hubs():
    """TokenMasker against keras-hub's generator, both against the closed
    form: per row ceil(rate x selectable) selections (float32), a uniform
    subset of the selectable positions (the law of every pair where two
    of five are chosen), ascending, never a special token; BERT's
    corruption. Toy vocabulary of 50 with scattered special ids.

    3,000 draws of each row kind; every chi-square test at p > 1e-5 (ten
    tests: a correct pair fails with probability < 1e-4)."""
    from scipy import stats

    vocabulary, special, mask_id = 50, [0, 7, 13, 42], 7
    rate, cap, draws = 0.3, 3, 3000
    kinds = np.array([
        [13, 1, 2, 3, 4, 5, 42, 0, 0, 0, 0, 0],  # 5 selectable: 2 chosen
        [13, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 42],  # 10: 3 (the cap)
        [13, 20, 7, 21, 0, 13, 22, 42, 7, 0, 0, 0],  # 3 (scattered): 1
        [13, 7, 42, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # none
    ], np.int32)
    ids = np.repeat(kinds, draws, axis=0)
    is_special = np.isin(np.arange(vocabulary), special)
    selectable = ~is_special[ids]
    expected_count = np.minimum(np.ceil(
        selectable.sum(1).astype(np.float32) * np.float32(rate)), cap)
    np.testing.assert_array_equal(expected_count[::draws], [2, 3, 1, 0])
    masker = masking.TokenMasker(
        vocabulary_size=vocabulary, mask_token_id=mask_id, pad_token_id=0,
        special_token_ids=special, mask_rate=rate, max_predictions=cap)
    ours = {k: v.numpy() for k, v in masker(ids).items()}
    theirs = _keras_hub_masks(ids, special=is_special,
                              vocabulary_size=vocabulary,
                              mask_token_id=mask_id, mask_rate=rate,
                              max_predictions=cap)
    for out in (ours, theirs):
        weights = out["mask_weights"] > 0
        positions = out["mask_positions"]
        np.testing.assert_array_equal(weights.sum(1), expected_count)
        assert (weights[:, :-1] >= weights[:, 1:]).all()  # selected first
        assert (positions[~weights] == 0).all()
        chosen = _take(ids, positions)
        assert selectable[np.arange(len(ids))[:, None], positions][
            weights].all()
        assert all((np.diff(p[w]) > 0).all()
                   for p, w in zip(positions, weights))
        unselected = np.ones_like(ids, bool)
        for row, (p, w) in enumerate(zip(positions, weights)):
            unselected[row, p[w]] = False
        np.testing.assert_array_equal(out["masked_ids"][unselected],
                                      ids[unselected])
        # Uniform subsets: the 10 pairs of 5 (kind 0), each of the 10
        # positions of kind 1 (3 at a time), each of the 3 of kind 2.
        pairs = [tuple(p) for p in positions[:draws, :2]]
        counts = [pairs.count(pair) for pair in
                  __import__("itertools").combinations(range(1, 6), 2)]
        assert sum(counts) == draws
        assert stats.chisquare(counts).pvalue > 1e-5
        for kind, n in ((1, 10), (2, 3)):
            rows = slice(kind * draws, (kind + 1) * draws)
            hits = np.bincount(positions[rows][weights[rows]],
                               minlength=12)
            hits = hits[selectable[kind * draws]]
            assert len(hits) == n
            assert stats.chisquare(hits).pvalue > 1e-5
        # 80% [MASK], 10% a uniform id (itself [MASK] or the original
        # 1/50 of the time each), 10% kept.
        after = _take(out["masked_ids"], positions)[weights]
        before = chosen[weights]
        outcome = np.where(after == mask_id, 0,
                           np.where(after == before, 1, 2))
        law = np.array([0.8 + 0.1 / vocabulary, 0.1 + 0.1 / vocabulary,
                        0.1 * (vocabulary - 2) / vocabulary])
        observed = np.bincount(outcome, minlength=3)
        assert stats.chisquare(observed, law * len(outcome)).pvalue > 1e-5


# Configuration and output directory errors, before any work.

@pytest.mark.parametrize("kwargs,message", [
    ({"objective": "telepathy"}, "objective"),
    ({"eta": None}, "eta"),
    ({"eta": 0.0}, "eta"),
    ({"eta": -3.0}, "eta"),
    ({"num_privatizations": 1}, "num_privatizations"),
    ({"num_privatizations": 2.5}, "num_privatizations"),
    ({"mode": "seq_rep"}, "mode"),
    ({"mode": "none"}, "eta"),  # eta 50 given: none has no eta
    ({"mode": "text_to_text", "eta": None}, "eta"),
    ({"eval_every": 0}, "eval_every"),
    ({"head_rate_multiplier": 0.5}, "head_rate_multiplier"),
    ({"head_rate_multiplier": float("inf")}, "head_rate_multiplier"),
    ({"eval_every": 2.5}, "eval_every"),
    ({"mask_rate": 0.0}, "mask_rate"),
    ({"mask_rate": 1.0}, "mask_rate"),
    ({"max_predictions": 0}, "max_predictions"),
    ({"steps": 0}, "steps"),
    ({"train_file": "x.csv"}, "train_file"),
    ({"corpus": "csv"}, "train_file"),
])
def test_bad_config_refused_before_any_work(tmp_path, kwargs, message):
    config = PretrainConfig(**{"eta": 50.0, "preset": "/nonexistent",
                               **kwargs})
    out = tmp_path / "run"
    with pytest.raises(ArgumentError, match=message):
        pretrain(config, str(out), verbose=0)
    assert not out.exists()


def test_config_fields_carry_flag_metadata():
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(PretrainConfig)}
    assert all(f.metadata.get("help") for f in fields.values())
    assert fields["objective"].metadata["choices"] == (
        "vanilla", "probabilistic", "denoising")
    assert fields["mode"].metadata["choices"] == ("none", "token_rep",
                                                  "text_to_text")


def test_config_written_before_head_rate_reads_back_as_what_it_ran():
    """A pretrain_config.json from before --head_rate_multiplier trained
    the head at the encoder's rate: it is not the same run as today's
    default, so a rerun does not pass its preset off as one."""
    old = PretrainConfig(eta=50.0).to_dict()
    del old["head_rate_multiplier"], old["eval_every"]
    read = PretrainConfig.from_dict(old)
    assert read.head_rate_multiplier == 1.0
    assert read.identity() != PretrainConfig(eta=50.0).identity()
    assert read.identity() == PretrainConfig(
        eta=50.0, head_rate_multiplier=1.0).identity()


def test_output_dir_holding_other_things_refused(tmp_path):
    config = PretrainConfig(eta=50.0, preset="/nonexistent")
    training_run = tmp_path / "training_run"
    training_run.mkdir()
    (training_run / "config.json").write_text('{"mode": "none"}')
    with pytest.raises(PretrainDirectoryError, match="no tfdptext "
                       "pretraining run"):
        pretrain(config, str(training_run), verbose=0)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(PretrainDirectoryError, match="is a file"):
        pretrain(config, str(a_file), verbose=0)


# The program: interrupted, resumed, exported, fine-tuned from.

class _Interrupt(keras.callbacks.Callback):
    """Raises KeyboardInterrupt as the `at`-th Keras epoch of the session's
    fit begins (its epochs are `pretrainer.epoch_steps` long: one step in
    these runs), after the session's checkpoint and evaluation due at the
    end of the one before, before it reads a batch."""

    def __init__(self, at):
        super().__init__()
        self.at, self.seen = at, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.seen += 1
        if self.seen == self.at:
            raise KeyboardInterrupt


def _run_config(preset, **kwargs):
    # K = 2 and batches of 8: a step's K privatizations of every masked
    # slot search the whole 30,522-token table (most of its cost). At
    # max_length 16 a text has at most 14 words, of which the masking
    # selects at most ceil(0.15 x 14) = 3: 3 slots a row (the masks are the
    # same as with the default 20, which would be 17 padding slots a row,
    # each searched and scored over the vocabulary all the same).
    values = dict(objective="probabilistic", num_privatizations=2,
                  mode="token_rep", eta=100.0, preset=preset,
                  corpus="synthetic",
                  max_length=16, batch_size=8, steps=4, checkpoint_every=2,
                  eval_every=1, heldout_examples=8, max_predictions=3)
    values.update(kwargs)
    return PretrainConfig(**values)


class _Epochs(keras.callbacks.Callback):
    """The (Keras epoch, steps it ran) of a session's fit."""

    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append([epoch, 0])

    def on_train_batch_end(self, batch, logs=None):
        self.epochs[-1][1] += 1


@contextlib.contextmanager
def _eager_sessions():
    """Within it, `pretrain` runs its fit and evaluate steps eagerly
    (Keras' `run_eagerly`; the model built and compiled as the product
    does, everything else the same). For sessions whose subject is not the
    traced step: `interrupted_run`'s first session traces the probabilistic
    token_rep step as the product runs it, and tracing a session's train
    and evaluation steps costs more than a few eager steps."""
    build = pretrainer._Session._build

    def build_eagerly(session):
        build(session)
        session.model.run_eagerly = True

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pretrainer._Session, "_build", build_eagerly)
        yield


@pytest.fixture(scope="module")
def interrupted_run(tiny_preset, tmp_path_factory):
    """A run killed in its second checkpoint period, after its held-out
    evaluation at step 3 (past the checkpoint at step 2) as its epoch of
    step 4 starts, then resumed (4 steps: the resumed session trains two,
    one past the evaluated step 3) with --checkpoint_every and --eval_every
    changed to 3 (allowed on resume): step 2 is off the new epochs' grid,
    so the session trains to step 3 first, then its last epoch. The first
    session runs the traced steps, the resumed one eager steps (the same
    train_step; what it checks is the resume)."""
    out = str(tmp_path_factory.mktemp("pretrain") / "run")
    with pytest.raises(KeyboardInterrupt):
        pretrain(_run_config(tiny_preset), out, verbose=0,
                 callbacks=[_Interrupt(at=4)])
    run = layout.PretrainDir(out)
    first = {"checkpoint": run.read_checkpoint(),
             "start": run.read(layout.START_EVAL),
             "curve": run.read(layout.HELDOUT_CURVE)["points"],
             "finished": run.exists(layout.METRICS)}
    resumed = _Epochs()
    with _eager_sessions():
        metrics = pretrain(_run_config(tiny_preset, checkpoint_every=3,
                                       eval_every=3), out, verbose=0,
                           callbacks=[resumed])
    first["resumed_epochs"] = resumed.epochs
    return out, first, metrics


def test_resume_after_interruption(interrupted_run):
    out, first, metrics = interrupted_run
    assert first["checkpoint"][0] == 2 and not first["finished"]
    assert metrics["steps"] == 4
    assert metrics["steps_run_this_session"] == 2  # steps 1-2 were kept
    # Epochs of 3 steps: step 3 (up to the grid), then step 4 (the last).
    assert first["resumed_epochs"] == [[0, 1], [1, 1]]
    assert metrics["heldout"]["eval_every"] == 3
    assert metrics["optimizer_steps"] == 4  # the optimizer state resumed
    assert metrics["heldout"]["start"] == first["start"]
    # The curve goes on: the point after the checkpoint (step 3) was
    # evaluated again by the resumed run, on the same (seeded) masks.
    assert [p["step"] for p in first["curve"]] == [0, 1, 2, 3]
    curve = metrics["heldout"]["curve"]
    assert [p["step"] for p in curve] == [0, 1, 2, 3, 4]
    assert curve[:3] == first["curve"][:3]
    assert curve[0] == {"step": 0, **first["start"]}
    assert curve[-1] == {"step": 4, **metrics["heldout"]["end"]}
    run = layout.PretrainDir(out)
    assert not run.exists(layout.CHECKPOINT)  # removed once finished
    assert os.listdir(run.file(layout.LOGS))
    assert os.listdir(os.path.join(run.file(layout.LOGS),
                                   layout.HELDOUT_LOGS))
    with open(run.file(layout.METRICS)) as f:
        assert json.load(f)["steps"] == 4


def test_metrics_record_the_run(interrupted_run):
    _, _, metrics = interrupted_run
    assert metrics["objective"] == "probabilistic"
    assert metrics["num_privatizations"] == 2
    assert metrics["mode"] == "token_rep" and metrics["mechanism"] == "dchi"
    assert metrics["guarantee"]["parameter"] == "eta"
    assert metrics["guarantee"]["value"] == 100.0
    assert metrics["guarantee"]["unit"] == "per_token"
    for when in ("start", "end"):
        result = metrics["heldout"][when]
        assert np.isfinite(result["mlm_loss"])
        assert 0.0 <= result["original_accuracy"] <= 1.0
    assert metrics["examples_per_second"] > 0
    # Its 3 prediction slots a row hold every selection the masking can make
    # at max_length 16 (14 words at most): _run_config's masks are those of
    # the default max_predictions.
    assert metrics["max_predictions"] == 3
    assert masking.selection_counts(
        tf.constant([metrics["max_length"] - 2]), metrics["mask_rate"],
        20).numpy().tolist() == [3]


def test_preset_reloads_with_frozen_table_and_trained_encoder(
        interrupted_run, tiny_preset):
    out, _, _ = interrupted_run
    preset = os.path.join(out, layout.PRESET)
    loaded = keras_hub.models.Backbone.from_preset(preset)
    source = keras_hub.models.Backbone.from_preset(tiny_preset)
    np.testing.assert_array_equal(
        loaded.token_embedding.embeddings.numpy(),
        source.token_embedding.embeddings.numpy())
    changed = [a.path for a, b in zip(loaded.weights, source.weights)
               if not np.array_equal(a.numpy(), b.numpy())]
    assert any("transformer_layer" in p for p in changed), changed
    assert any("position_embedding" in p for p in changed), changed
    tokenizer = keras_hub.models.BertTokenizer.from_preset(preset)
    assert tokenizer.vocabulary_size() == 30522


def test_train_fine_tunes_from_the_pretrained_preset(interrupted_run,
                                                     tmp_path):
    out, _, _ = interrupted_run
    preset = os.path.join(out, layout.PRESET)
    config = training.TrainConfig(
        preset=preset, mode="token_rep", eta=100.0, max_length=16,
        batch_size=32, epochs=1, max_train_examples=32, max_dev_examples=32)
    with eager_training.eager_fit():
        metrics = training.train(
            config, str(tmp_path / "finetune"),
            dataset=data.load_synthetic(num_examples=200), verbose=0)
    assert metrics["preset"] == preset
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    user = keras.saving.load_model(
        str(tmp_path / "finetune" / "user_side.keras"))
    table = user.get_layer("token_embedding").embeddings.numpy()
    pretrained = keras_hub.models.Backbone.from_preset(preset)
    np.testing.assert_array_equal(
        table, pretrained.token_embedding.embeddings.numpy())
    # The fine-tuned run exports like any other: phone model + server.
    from tfdptext.export import exporter
    from tfdptext.export.local import ExportedPipeline

    export_dir = str(tmp_path / "export")
    # One input length (the run's max_length, 16): a signature per length.
    manifest = exporter.export_run(str(tmp_path / "finetune"), export_dir,
                                   quantization="float32")
    assert manifest["split_point"] == "token_representation"
    assert manifest["guarantee"]["value"] == 100.0
    result = ExportedPipeline(export_dir).predict(["the staff was friendly",
                                                   "the room was dirty"])
    assert result["label"].shape == (2,)


def test_finished_run_is_kept_and_other_runs_refused(interrupted_run,
                                                     tiny_preset):
    out, _, metrics = interrupted_run
    again = pretrain(_run_config(tiny_preset), out, verbose=0)
    assert again == json.loads(json.dumps(metrics))  # nothing retrained
    with pytest.raises(PretrainDirectoryError, match="finished after 4"):
        pretrain(_run_config(tiny_preset, steps=9), out, verbose=0)
    with pytest.raises(PretrainDirectoryError, match="eta"):
        pretrain(_run_config(tiny_preset, eta=60.0), out, verbose=0)
    with pytest.raises(TfdptextError, match="objective"):
        pretrain(_run_config(tiny_preset, objective="denoising"), out,
                 verbose=0)


def test_clean_baseline_run_states_no_guarantee_and_logs_its_curve(
        tiny_preset, tmp_path):
    out = str(tmp_path / "clean")
    announced = []
    with _eager_sessions():
        metrics = pretrain(_run_config(tiny_preset, mode="none", eta=None,
                                       objective="vanilla", steps=3,
                                       checkpoint_every=3, eval_every=2),
                           out, verbose=0, announce=announced.append)
    # The program prints this first (tfdptext.privacy.headline).
    [guarantee] = announced
    assert headline.lines(guarantee)[0].startswith("Privacy: NONE")
    assert metrics["mode"] == "none" and metrics["mechanism"] == "none"
    assert metrics["eta"] is None
    assert metrics["guarantee"]["unit"] == "none"
    assert metrics["guarantee"]["value"] is None
    assert "NO privacy guarantee" in metrics["guarantee_text"]
    assert "releases nothing" in metrics["guarantee_scope"]
    curve = metrics["heldout"]["curve"]
    assert [p["step"] for p in curve] == [0, 2, 3]
    for point in curve:  # no privatization: the target is the original
        assert point["target_accuracy"] == point["original_accuracy"]
    assert metrics["heldout"]["eval_every"] == 2
