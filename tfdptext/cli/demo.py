"""The toolkit end to end on embedded defaults, in a few minutes on a CPU.

1. Privatizes a few sentences with every mechanism and shows what leaves the
   device, with the formal guarantee of each.
2. Trains a small DPNR (robust) classifier on the SYNTHETIC corpus with
   Keras fit, and reports its accuracy and guarantee.
3. Exports it (TFLite phone model + SavedModel server) and classifies a
   sentence through both, as a phone and a server would.

    tfdptext-demo [--preset=minilm] [--epsilon=1] [--skip_training]

Runs on the MiniLM encoder and the project's SYNTHETIC sentences (plus your
own with --sentence). Runs go to --runs_dir/demo-<time>. --preset,
--epsilon, --dropout_rate and --max_length are TrainConfig's fields, as in
tfdptext-train, with the demo's defaults.
"""

import os
import time

from absl import flags

from tfdptext.cli import flags as cli_flags
from tfdptext.cli import program
from tfdptext.cli import quiet

FLAGS = flags.FLAGS
NAME = "tfdptext-demo"
# The TrainConfig fields that are the demo's flags, and the demo's own
# defaults for some of them.
TRAIN_FIELDS = ("preset", "epsilon", "dropout_rate", "max_length")
DEMO_DEFAULTS = {"epsilon": 1.0, "dropout_rate": 0.3, "max_length": 32}


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-demo's flags in `flag_values`."""
    from tfdptext.training import TrainConfig

    cli_flags.define_flags(TrainConfig, names=TRAIN_FIELDS,
                           defaults=DEMO_DEFAULTS, flag_values=flag_values)
    flags.DEFINE_float("rr_epsilon", 3.0,
                       "Randomized-response epsilon per bit.",
                       flag_values=flag_values)
    flags.DEFINE_multi_float("eta", [60.0, 120.0, 240.0],
                             "d_chi eta values for text-to-text.",
                             flag_values=flag_values)
    flags.DEFINE_multi_string("sentence", [], "Extra sentences to privatize.",
                              flag_values=flag_values)
    flags.DEFINE_string("runs_dir", "runs",
                        "Where the demo's run and export go.",
                        flag_values=flag_values)
    flags.DEFINE_bool("skip_training", False, "Only show the mechanisms.",
                      flag_values=flag_values)


def _check_flags():
    """Bad flags are refused before anything loads (a usage error)."""
    from tfdptext.privacy import laplace, metric, validation

    laplace.laplace_scale(FLAGS.epsilon)
    validation.check_rate("dropout_rate", FLAGS.dropout_rate)
    validation.check_positive("rr_epsilon", FLAGS.rr_epsilon)
    for eta in FLAGS.eta:
        metric.check_float32_eta(eta)
    validation.check_int("max_length", FLAGS.max_length, 8)


def demo(argv):
    """The program: the mechanisms, then training and export."""
    del argv
    _check_flags()
    from tfdptext import data, models

    sentences = list(data.load_synthetic(num_examples=50).splits["test"]
                     .texts[:3]) + ["Mary's café in Zürich was excellent."]
    sentences += FLAGS.sentence
    tokenizer = models.load_tokenizer(FLAGS.preset, FLAGS.max_length)
    backbone = models.load_backbone(FLAGS.preset)
    features = tokenizer(sentences)
    table = models.token_embedding_table(backbone)
    print(f"Encoder: {FLAGS.preset} ({table.shape[0]} tokens x "
          f"{table.shape[1]} dims). SYNTHETIC sentences:")
    for s in sentences:
        print("   ", s)
    _show_dpnr(backbone, tokenizer, features)
    _show_dchi(table, tokenizer, features)
    _show_brr(table, tokenizer, features)
    if not FLAGS.skip_training:
        _train_and_export(sentences)


def _show_dpnr(backbone, tokenizer, features):
    """DPNR's release, without and with word dropout."""
    import numpy as np

    from tfdptext import layers, models, privacy
    from tfdptext.models.secure import SecureUserSide

    print("\n== DPNR: encoder -> mean pool -> min-max -> Laplace noise ==")
    for dropout in (None, layers.WordDropout(
            FLAGS.dropout_rate, tokenizer.mask_id,
            tokenizer.structural_token_ids)):
        split = models.sequence_representation_split(
            backbone, 2, [layers.MinMaxNormalize(),
                          layers.LaplaceNoise(FLAGS.epsilon)],
            input_dropout=dropout)
        # What a user's device would do in Python: every random choice
        # from os.urandom (split.user called directly would use
        # TensorFlow's own generator, keyed from 32 bits per process).
        secure_user = SecureUserSide(split.user, split.split_point,
                                     max_tokens=FLAGS.max_length - 2)
        released = secure_user(features)["private_representation"]
        title = "with word dropout" if dropout else "no dropout"
        print(f"-- {title}; first 6 of {released.shape[1]} released "
              "coordinates per sentence:")
        for row in released:
            print("   ", np.array2string(row[:6], precision=2))
        g = split.guarantee(max_tokens=FLAGS.max_length - 2,
                            randomness=privacy.randomness.OS_ENTROPY)
        assert g == secure_user.guarantee
        print(g)
        if g.unit == privacy.guarantee.PER_COORDINATE:
            print(privacy.to_representation_level(g))


def _show_dchi(table, tokenizer, features):
    """d_chi text-to-text at every --eta."""
    from tfdptext import layers

    print("\n== d_chi text-to-text over the token embeddings ==")
    for eta in FLAGS.eta:
        privatizer = layers.DChiTextPrivatizer(
            eta, table, special_token_ids=tokenizer.special_token_ids,
            passthrough_token_ids=tokenizer.passthrough_token_ids,
            embedding_description=f"{FLAGS.preset} token embeddings")
        ids = privatizer(features["token_ids"]).numpy()
        print(f"-- eta = {eta:g}:")
        for row in ids:
            print("   ", tokenizer.decode(row))
    print(privatizer.guarantee())


def _show_brr(table, tokenizer, features):
    """Binary randomized response over sign-binarised token embeddings."""
    import faiss
    import numpy as np

    from tfdptext import layers

    print("\n== BRR: sign-binarised token embeddings -> randomized response "
          "-> Hamming nearest word ==")
    print("   (sign binarisation of the encoder's embeddings, not the BRR "
          "paper's autoencoder)")
    bits = (table > 0).astype(np.float32)
    index = faiss.IndexBinaryFlat(bits.shape[1])
    index.add(np.packbits(bits.astype(np.uint8), axis=1))
    rr = layers.RandomizedResponse(FLAGS.rr_epsilon)
    mask = features["padding_mask"].numpy().astype(bool)
    for row, keep in zip(features["token_ids"].numpy(), mask):
        real = [i for i in row[keep] if i not in tokenizer.special_token_ids]
        noisy = rr(bits[real]).numpy().astype(np.uint8)
        _, nearest = index.search(np.packbits(noisy, axis=1), 1)
        print("   ", tokenizer.decode(nearest[:, 0]))
    print(rr.guarantee())


def _train_and_export(sentences):
    """A robust run on the SYNTHETIC corpus, exported, then classifying
    `sentences` as a phone and a server would."""
    from tfdptext import training
    from tfdptext.export import exporter
    from tfdptext.export.local import ExportedPipeline

    base = os.path.join(FLAGS.runs_dir, time.strftime("demo-%Y%m%d-%H%M%S"))
    config = training.TrainConfig(
        mode="robust", epsilon=FLAGS.epsilon, dataset="synthetic",
        preset=FLAGS.preset, max_length=FLAGS.max_length, epochs=1,
        learning_rate=1e-4)
    print(f"\n== Robust (DPNR) training on the SYNTHETIC corpus -> "
          f"{base}/run ==")
    metrics = training.train(config, os.path.join(base, "run"),
                             verbose=quiet.progress_verbosity())
    print(f"test accuracy {metrics['test_accuracy']:.3f} (dev "
          f"{metrics['dev_accuracy']:.3f}; {metrics['sizes']['train']} "
          f"training sentences, majority class "
          f"{metrics['majority_test_accuracy']:.3f})")
    print(metrics["guarantee_text"])

    print(f"\n== Export -> {base}/export, then phone -> server ==")
    manifest = exporter.export_run(os.path.join(base, "run"),
                                   os.path.join(base, "export"),
                                   model_name="demo")
    size = manifest["files"]["user/privatizer.tflite"]["bytes"] / 2**20
    words = manifest["user"]["randomness"]["words"]
    print(f"user/privatizer.tflite: {size:.1f} MiB (int8), builtin ops "
          f"only, no random op: its noise comes from {words} random words "
          f"that the app draws from its secure generator (here os.urandom) "
          f"for every call; server: {manifest['server']['path']}")
    pipeline = ExportedPipeline(os.path.join(base, "export"))
    answer = pipeline.predict(sentences)
    for text, label in zip(sentences, answer["label"]):
        print(f"    label {int(label)} ({'positive' if label else 'negative'})"
              f": {text}")


def main():
    """The console entry point of tfdptext-demo."""
    define_flags()
    program.run(NAME, __name__, demo)


if __name__ == "__main__":
    main()
