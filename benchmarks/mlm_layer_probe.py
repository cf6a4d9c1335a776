#!/usr/bin/env python
"""How much token identity each layer of an encoder carries (issue 21).

Masked-LM heads tied to the token embedding E predict a token from a
hidden state h as argmax_v h' . E[v] (+ bias), h' the head's transform of
h. An encoder trained with an MLM head keeps its last layer close to that
space; a checkpoint fine-tuned for something else (MiniLM's
sentence-embedding training) may have moved it away, and then a fresh head
has a long way to go. This measures it, layer by layer, with the encoder
frozen:

- `tied`: top-1 of h . E[v], no transform at all;
- `ridge`: a linear map h -> E[token] fitted in closed form (ridge) on the
  training positions, then top-1 of (hW + b) . E[v];
- `head`: keras-hub's MaskedLMHead (dense + gelu + layer norm, tied to E,
  with a bias) trained on the training positions with Adam for
  `--head_steps`, the encoder frozen: what a fresh head gets out of that
  layer without the encoder moving (its held-out loss and top-1).

Each on two inputs: `masked` (BERT's corruption: 80% [MASK], 10% random,
10% kept at the selected positions; the MLM task) and `answer` (the
original text: the token to predict is at the input, so a layer that
keeps token identity scores near 1 here).

Every score is on held-out texts (the corpus' dev split), at the masked
positions only. The fitted heads also answer how a fresh head learns on a
frozen layer: at which Adam rate (`--head_learning_rates`), from a zero
output bias or from the log unigram frequencies of the training positions
(`--head_biases`).

    python benchmarks/mlm_layer_probe.py --data_dir=../shared/data/ag_dpnr \\
        --cache=runs/mlm_layer_features.npz --json_out=runs/mlm_layers.json
    python benchmarks/mlm_layer_probe.py --data_dir=../shared/data/ag_dpnr \\
        --cache=runs/mlm_layer_features.npz --head_layers=6 \\
        --head_learning_rates=1e-4,1e-3,1e-2 --head_biases=zeros,unigram
"""

import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

import machine  # noqa: E402

# Closed-form ridge penalty per unit of feature variance (the features are
# layer-normalized, so of order 1).
RIDGE_PENALTY = 1.0
INPUTS = ("masked", "answer")
BIASES = ("zeros", "unigram")
# Add-k smoothing of the unigram counts that initialise a head's bias.
UNIGRAM_SMOOTHING = 0.1
# BERT's initialisation of the head's dense layer (as the pretraining model).
HEAD_INITIALIZER_STDDEV = 0.02

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "minilm", "Encoder to probe.")
flags.DEFINE_string("corpus", "ag_dpnr", "Corpus (labels ignored).")
flags.DEFINE_string("data_dir", "../shared/data/ag_dpnr", "Its files.")
flags.DEFINE_integer("max_length", 64, "Token length.")
flags.DEFINE_integer("batch_size", 32, "Texts per forward pass.")
flags.DEFINE_integer("train_batches", 60, "Training batches whose masked "
                     "positions fit the ridge map and the head.")
flags.DEFINE_integer("heldout_examples", 256, "Held-out texts scored.")
flags.DEFINE_integer("head_steps", 300, "Adam steps of each fitted head.")
flags.DEFINE_integer("head_batch", 256, "Positions per head step.")
flags.DEFINE_list("head_learning_rates", ["1e-3"], "Constant Adam rates of "
                  "the fitted heads (one head per rate).")
flags.DEFINE_list("head_biases", ["zeros"], f"Initial output bias of the "
                  f"fitted heads, each of {BIASES}.")
flags.DEFINE_list("head_inputs", ["masked"], "Inputs whose layers get "
                  "fitted heads (the slow part).")
flags.DEFINE_list("head_layers", None, "Layers that get fitted heads "
                  "(0 = embedding output; default all).")
flags.DEFINE_string("cache", None, "An .npz of the collected features: "
                    "read if it exists (with the same flags), else written.")
flags.DEFINE_integer("seed", 0, "Seed of text order, masks and head init.")
flags.DEFINE_string("json_out", None, "Also write the results as JSON.")


def layer_outputs(backbone, token_ids, segment_ids, padding_mask):
    """[embedding output, layer 1, ..., layer L] of the backbone."""
    tokens = backbone.token_embedding(token_ids)
    x = backbone.embeddings_add((tokens, backbone.position_embedding(tokens),
                                 backbone.segment_embedding(segment_ids)))
    x = backbone.embeddings_layer_norm(x)
    outputs = [x]
    for transformer_layer in backbone.transformer_layers:
        x = transformer_layer(x, padding_mask=padding_mask)
        outputs.append(x)
    return outputs


def collect(backbone, batches):
    """{input: (layers, positions, dim) float32} at the masked positions,
    and the original tokens there (positions,)."""
    import tensorflow as tf

    @tf.function
    def at_masked(batch, ids):
        outputs = layer_outputs(backbone, ids, batch["segment_ids"],
                                batch["padding_mask"])
        selected = batch["mask_weights"] > 0
        positions = batch["mask_positions"]
        return [tf.boolean_mask(tf.gather(h, positions, batch_dims=1),
                                selected) for h in outputs]

    features = {name: [] for name in INPUTS}
    tokens = []
    for batch in batches:
        original = tf.gather(batch["token_ids"], batch["mask_positions"],
                             batch_dims=1)
        tokens.append(tf.boolean_mask(original,
                                      batch["mask_weights"] > 0).numpy())
        for name, ids in (("masked", batch["masked_ids"]),
                          ("answer", batch["token_ids"])):
            features[name].append(
                np.stack([h.numpy() for h in at_masked(batch, ids)]))
    return ({name: np.concatenate(parts, axis=1)
             for name, parts in features.items()}, np.concatenate(tokens))


def top1(scores, tokens):
    return float(np.mean(np.argmax(scores, axis=-1) == tokens))


def tied_accuracy(features, tokens, table):
    """Top-1 of h . E[v]."""
    return top1(features @ table.T, tokens)


def ridge_accuracy(train, train_tokens, heldout, heldout_tokens, table):
    """Top-1 of (hW + b) . E[v], W and b the ridge fit of h -> E[token]."""
    def with_bias(x):
        return np.concatenate([x, np.ones((len(x), 1), x.dtype)], axis=1)

    x = with_bias(train).astype(np.float64)
    penalty = RIDGE_PENALTY * np.eye(x.shape[1])
    penalty[-1, -1] = 0.0  # the bias is not penalised
    weights = np.linalg.solve(x.T @ x + penalty,
                              x.T @ table[train_tokens].astype(np.float64))
    mapped = (with_bias(heldout) @ weights).astype(np.float32)
    return top1(mapped @ table.T, heldout_tokens)


def fitted_head(train, train_tokens, heldout, heldout_tokens, backbone,
                *, learning_rate, bias, seed):
    """(held-out loss, top-1) of a fresh MaskedLMHead trained with Adam at
    a constant `learning_rate` on frozen features, its output bias starting
    at zero or at the log unigram frequencies of `train_tokens`."""
    import keras
    import keras_hub
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    head = keras_hub.layers.MaskedLMHead(
        token_embedding=backbone.token_embedding,
        intermediate_activation="gelu",
        kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=HEAD_INITIALIZER_STDDEV),
        dtype="float32")
    optimizer = keras.optimizers.Adam(learning_rate)
    zero = tf.zeros([1, 1], tf.int32)

    def logits(x):
        x = tf.convert_to_tensor(x)[:, None, :]
        return head(x, mask_positions=tf.tile(zero, [tf.shape(x)[0], 1]))[
            :, 0]

    def loss_of(x, y):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits(x)))

    logits(train[:1])
    if bias == "unigram":
        counts = np.bincount(train_tokens, minlength=head.vocabulary_size)
        counts = counts + UNIGRAM_SMOOTHING
        [output_bias] = [v for v in head.trainable_variables
                         if tuple(v.shape) == (head.vocabulary_size,)]
        output_bias.assign(np.log(counts / counts.sum()))
    variables = head.trainable_variables

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(x, y)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables),
                                      variables))
        return loss

    rng = np.random.default_rng(seed)
    for _ in range(FLAGS.head_steps):
        rows = rng.integers(0, len(train), FLAGS.head_batch)
        step(train[rows], train_tokens[rows].astype(np.int32))
    scores = np.concatenate([logits(heldout[i:i + 1024]).numpy()
                             for i in range(0, len(heldout), 1024)])
    loss = float(np.mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=heldout_tokens.astype(np.int32), logits=scores)))
    return loss, top1(scores, heldout_tokens)


def main(argv):
    del argv
    import tensorflow as tf

    from tfdptext import data
    from tfdptext import models
    from tfdptext.pretraining import masking

    for bias in FLAGS.head_biases:
        if bias not in BIASES:
            raise app.UsageError(f"--head_biases: each of {BIASES}, "
                                 f"received {bias!r}.")
    started = time.perf_counter()
    dataset = data.load_dataset(FLAGS.corpus, data_dir=FLAGS.data_dir)
    backbone = models.load_backbone(FLAGS.preset)
    backbone.token_embedding.trainable = False  # as in pretraining
    table = models.token_embedding_table(backbone)
    if FLAGS.cache and os.path.exists(FLAGS.cache):
        train, train_tokens, heldout, heldout_tokens = read_cache(FLAGS.cache)
    else:
        tokenizer = models.load_tokenizer(FLAGS.preset, FLAGS.max_length)
        tf.random.set_seed(FLAGS.seed)  # the masks (no privacy noise here)
        encode = masking.batch_encoder(tokenizer, masking.masker_for(
            tokenizer, mask_rate=0.15, max_predictions=20))
        train_texts = list(dataset.splits["train"].texts)
        np.random.default_rng(FLAGS.seed).shuffle(train_texts)
        size = FLAGS.batch_size
        train, train_tokens = collect(backbone, [
            encode(tf.constant(train_texts[i * size:(i + 1) * size]))
            for i in range(FLAGS.train_batches)])
        heldout_texts = list(dataset.splits["dev"].texts)[
            :FLAGS.heldout_examples]
        heldout, heldout_tokens = collect(backbone, [
            encode(tf.constant(heldout_texts[i:i + size]))
            for i in range(0, len(heldout_texts), size)])
        if FLAGS.cache:
            write_cache(FLAGS.cache, train, train_tokens, heldout,
                        heldout_tokens)
    unigram = np.bincount(train_tokens, minlength=len(table))
    print(f"{FLAGS.preset} on {dataset.name}: {len(train_tokens)} training "
          f"and {len(heldout_tokens)} held-out masked positions; the most "
          f"frequent training token alone scores "
          f"{np.mean(heldout_tokens == unigram.argmax()):.3f} held-out; "
          f"{machine.cpu_name()}")
    layers = range(train[INPUTS[0]].shape[0])
    rows = [{"input": name, "layer": layer,
             "tied": tied_accuracy(heldout[name][layer], heldout_tokens,
                                   table),
             "ridge": ridge_accuracy(train[name][layer], train_tokens,
                                     heldout[name][layer], heldout_tokens,
                                     table)}
            for name in INPUTS for layer in layers]
    print_probes(rows)
    head_layers = ([int(v) for v in FLAGS.head_layers] if FLAGS.head_layers
                   else list(layers))
    heads = []
    for name in FLAGS.head_inputs:
        for layer in head_layers:
            for rate in FLAGS.head_learning_rates:
                for bias in FLAGS.head_biases:
                    loss, accuracy = fitted_head(
                        train[name][layer], train_tokens,
                        heldout[name][layer], heldout_tokens, backbone,
                        learning_rate=float(rate), bias=bias,
                        seed=FLAGS.seed)
                    heads.append({"input": name, "layer": layer,
                                  "learning_rate": float(rate),
                                  "bias": bias, "steps": FLAGS.head_steps,
                                  "top1": accuracy, "loss": loss})
                    print(json.dumps(heads[-1]), flush=True)
    print_heads(heads)
    print(f"\n{time.perf_counter() - started:.0f} s")
    machine.write_json(FLAGS.json_out, {
        "flags": {name: FLAGS[name].value for name in (
            "preset", "corpus", "max_length", "batch_size",
            "train_batches", "heldout_examples", "head_steps",
            "head_batch", "seed")},
        "positions": {"train": int(len(train_tokens)),
                      "heldout": int(len(heldout_tokens))},
        "machine": machine.cpu_name(), "probes": rows, "heads": heads})


def _layer_name(layer):
    return "embeddings" if layer == 0 else str(layer)


def print_probes(rows):
    print("| input | layer | tied h.E top-1 | ridge-mapped top-1 |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['input']} | {_layer_name(row['layer'])} | "
              f"{row['tied']:.3f} | {row['ridge']:.3f} |")
    print()


def print_heads(heads):
    if not heads:
        return
    print("| input | layer | head Adam rate | initial bias | steps | "
          "held-out top-1 | held-out loss |")
    print("|---|---|---|---|---|---|---|")
    for head in heads:
        print(f"| {head['input']} | {_layer_name(head['layer'])} | "
              f"{head['learning_rate']:g} | {head['bias']} | "
              f"{head['steps']} | {head['top1']:.3f} | {head['loss']:.2f} |")


def write_cache(path, train, train_tokens, heldout, heldout_tokens):
    arrays = {f"train_{name}": train[name] for name in INPUTS}
    arrays.update({f"heldout_{name}": heldout[name] for name in INPUTS})
    np.savez(path, train_tokens=train_tokens, heldout_tokens=heldout_tokens,
             flags=json.dumps(_cache_flags()), **arrays)


def read_cache(path):
    """(train, train tokens, held-out, held-out tokens) of a cache written
    with the same flags (ValueError otherwise)."""
    with np.load(path) as cached:
        if json.loads(str(cached["flags"])) != _cache_flags():
            raise ValueError(f"{path} was collected with other flags "
                             f"({cached['flags']}); remove it or pass "
                             "another --cache.")
        return ({name: cached[f"train_{name}"] for name in INPUTS},
                cached["train_tokens"],
                {name: cached[f"heldout_{name}"] for name in INPUTS},
                cached["heldout_tokens"])


def _cache_flags():
    """The flags the collected features depend on."""
    return {name: FLAGS[name].value for name in (
        "preset", "corpus", "max_length", "batch_size", "train_batches",
        "heldout_examples", "seed")}


if __name__ == "__main__":
    app.run(main)
