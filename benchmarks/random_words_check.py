#!/usr/bin/env python
"""Random words on the phone: extraction and checks (issue 27).

Four measurements (docs/benchmarks.md, "Random words: extraction, checks
and their cost"):

- --false_alarms: --alarm_layouts (consumed words:buffers) os.urandom
  buffers through the per-row statistics (tfdptext.models.word_checks,
  TensorFlow, vectorised over rows: the sampled checks and the zero
  counts over the whole buffer) and the repeat count of each row's
  sample alone (as a one-row call); prints, per check, its limits, the
  most extreme values seen and the failures, and writes each layout's
  table (benchmarks/results/false-alarms[-k].json).
- --channel: the code release (3 codes, epsilon 2) alone as a phone model
  runs it, in TFLite, one call per release: --channel_draws releases per
  input code and per buffer kind (good, and the partly bad and defective
  kinds of tfdptext.audit.word_generators), chi-square against the stated
  transition matrix; and the noise law of 8-d Laplace (KS against Lap(b))
  and of 8-d d_chi (KS of the norm against Gamma(8, 1/eta)) under the
  same buffer kinds. With --channel_baseline, the same on the phone
  models of --baseline_commit (before extraction).
- --noise_table=NAME: the noise laws alone (8-d Laplace, 8-d d_chi) on
  the phone models of --baseline_commit (before) and today's (now), the
  same --noise_draws per buffer kind, written as the docs' table NAME.
- --cost: for every exported mechanism and length, the phone model as
  tfdptext-export writes it (MiniLM weights as loaded, int8, batch 1,
  one thread) beside the extraction and the checks alone at its layout
  (TFLite), round-robin; and the check of --baseline_commit (the words
  check before extraction, loaded from git) at that commit's buffer.
- --candidates: what the app fills and the model computes for the
  alternatives considered (XOR instead of the sum; a 256-bit key
  expanded in the graph by ChaCha20, checked against RFC 8439).

    .venv/bin/python benchmarks/random_words_check.py --false_alarms \\
        --channel --cost --candidates
    .venv/bin/python benchmarks/random_words_check.py \\
        --noise_table=random-words-channel-2
"""

import importlib.util
import os
import random
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

import machine as host

FLAGS = flags.FLAGS
flags.DEFINE_bool("false_alarms", False, "Count false alarms.")
flags.DEFINE_bool("channel", False, "Measure the released channels.")
flags.DEFINE_bool("cost", False, "Time extraction and checks in TFLite.")
flags.DEFINE_bool("candidates", False, "Time the alternatives.")
flags.DEFINE_list("alarm_layouts", ["2:1000000", "768:1000000",
                                    "1536:1000000", "98304:20000"],
                  "consumed:buffers pairs for --false_alarms.")
flags.DEFINE_integer("chunk_words", 2**24,
                     "Words per TensorFlow call in --false_alarms.")
flags.DEFINE_integer("channel_draws", 100000,
                     "Code releases per input code and buffer kind.")
flags.DEFINE_integer("noise_draws", 5000,
                     "Laplace / d_chi releases per buffer kind.")
flags.DEFINE_list("lengths", ["16", "32", "64", "128"],
                  "Phone model lengths for --cost.")
flags.DEFINE_list("mechanisms", ["all"], "Mechanisms for --cost (names "
                  "of MECHANISMS below, or 'all').")
flags.DEFINE_integer("rounds", 20, "Round-robin rounds for --cost.")
flags.DEFINE_integer("block", 10, "Invokes per setting per round.")
flags.DEFINE_string("baseline_commit", "3d066f4",
                    "The commit whose words check --cost times beside "
                    "ours (the check before extraction); '' skips it.")
flags.DEFINE_string("noise_table", None, "The noise laws alone (8-d "
                    "Laplace and d_chi, --noise_draws per buffer kind) on "
                    "the phone models of --baseline_commit and today's, "
                    "written as the docs' result of this name.")
flags.DEFINE_bool("channel_baseline", False, "--channel on the phone "
                  "models of --baseline_commit (its secure.py and "
                  "checks, today's layers) instead of today's.")

CHANNEL_KINDS = ("os_urandom", "first_1_zero", "first_2_zero",
                 "first_word_0x12345678", "first_word_0xffffffff",
                 "counter_in_first_8", "words_0_10_20_zero",
                 "second_word_zero", "first_16_zero", "last_1_zero",
                 "last_16_zero", "all_even", "all_odd", "multiples_of_4",
                 "top_bit_set", "ascii_text", "bytes_not_words")


# ---------------------------------------------------------------------------
# False alarms.


def _false_alarms(consumed, buffers):
    """({check: (min, max, failures)}, limits) for os.urandom rows."""
    import numpy as np
    import tensorflow as tf

    from tfdptext.models import secure
    from tfdptext.models import word_checks
    from tfdptext.privacy import extraction
    from tfdptext.privacy import word_statistics as ws

    width = extraction.layout(consumed).words
    limits = ws.row_limits(consumed)
    rows = max(1, min(buffers, FLAGS.chunk_words // width))
    repeat_limit = ws.word_repeat_limit(limits.sample)
    seen = {}

    # Every call has the same shape (a last, shorter chunk reads only its
    # first rows): a retrace on a second shape built a graph over 2 GB.
    @tf.function(input_signature=[tf.TensorSpec((rows, width), tf.int32)])
    def measure(words):
        sample = word_checks.sampled_words(words, consumed)
        stats = word_checks.row_statistics(words, consumed, sample=sample)
        verdicts = word_checks.row_verdicts(words, consumed, sample=sample)
        stats.update(word_checks.buffer_statistics(words, consumed))
        verdicts.update(word_checks.buffer_verdicts(words, consumed))
        return stats, verdicts, word_checks.repeat_count(sample)

    done = 0
    while done < buffers:
        n = min(rows, buffers - done)
        stats, verdicts, repeats = measure(tf.constant(
            secure.os_random_words((rows, width))))
        values = {k: v.numpy()[:n] for k, v in stats.items()}
        passed = {k: v.numpy()[:n] for k, v in verdicts.items()}
        values["word_repeats"] = repeats.numpy()[:n]
        passed["word_repeats"] = values["word_repeats"] < repeat_limit
        for name in values:
            low, high, fails = seen.get(name, (np.inf, -np.inf, 0))
            seen[name] = (min(low, float(values[name].min())),
                          max(high, float(values[name].max())),
                          fails + int((~passed[name]).sum()))
        done += n
    return seen, limits, repeat_limit


def _report_false_alarms():
    """Prints each layout's table and writes it to
    benchmarks/results/false-alarms[-k].json (the k-th layout of
    --alarm_layouts, k >= 2; docs/benchmarks.md, "False alarms")."""
    from tfdptext.privacy import extraction

    for index, pair in enumerate(FLAGS.alarm_layouts):
        consumed, buffers = (int(v) for v in pair.split(":"))
        began = time.time()
        seen, limits, repeat_limit = _false_alarms(consumed, buffers)
        seconds = time.time() - began
        width = extraction.layout(consumed).words
        print(f"\n{consumed:,} consumed words, buffers of {width:,} words "
              f"(the checks read {limits.sample}), {buffers:,} os.urandom "
              f"buffers ({seconds:.0f} s); per row, each alone:\n")
        print("| check | fails when | smallest seen | largest seen | "
              "failures |\n|---|---|---|---|---|")
        rows = []
        for name, (low, high, fails) in seen.items():
            if name == "word_repeats":
                rule = f">= {repeat_limit}"
            else:
                lo, hi = getattr(limits, name)
                rule = " or ".join(
                    p for p in (f"<= {lo}" if lo is not None and lo >= 0
                                else None,
                                f">= {hi}" if hi is not None else None) if p)
                if name in ("bits", "half_sum_bits", "neighbour_bits"):
                    rule += " (any of the 32)"
            rows.append([name, rule, f"{low:,.0f}", f"{high:,.0f}",
                         str(fails)])
            print("| " + " | ".join(rows[-1]) + " |", flush=True)
        host.write_json(
            None, {"consumed": consumed, "words": width,
                   "sample": limits.sample, "buffers": buffers,
                   "seconds": round(seconds, 1)},
            name="false-alarms" + (f"-{index + 1}" if index else ""),
            table={"columns": ["check", "fails when", "smallest seen",
                               "largest seen", "failures"], "rows": rows})


# ---------------------------------------------------------------------------
# Channels.


def _single_row_runner(model):
    """run(x, words) of a Keras phone model converted to TFLite (batch 1)."""
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite

    runner = Interpreter(model_content=tflite.convert(model, batch_size=1),
                         num_threads=1).get_signature_runner()

    def run(x, words):
        return next(iter(runner(x=x, random_words=words).values()))

    return run


def _kind_buffers(kind, width, rng):
    from tfdptext.audit import word_generators

    return word_generators.GENERATORS[kind].fill(rng, 1, width)


def _report_channel():
    import numpy as np
    from scipy import stats

    from tfdptext import layers
    from tfdptext.models import secure
    from tfdptext.privacy import categorical

    if FLAGS.channel_baseline:
        secure = _baseline_modules()["secure"]
        print(f"\nPhone models of commit {FLAGS.baseline_commit} "
              "(before extraction).")
    rng = np.random.default_rng(0)
    code = secure.secure_privatizer_model(
        layers.CodeRandomizedResponse(2.0, 3), (), "int32")
    width = int(code.input[secure.RANDOM_WORDS].shape[-1])
    run = _single_row_runner(code)
    matrix = categorical.transition_matrix(2.0, 3, 24)
    print(f"\nCode release, 3 codes, epsilon 2 ({width} words per call); "
          f"stated P(keep) {matrix[0, 0]:.4f}, each other code "
          f"{matrix[0, 1]:.4f}; {FLAGS.channel_draws:,} releases per input "
          "code and buffer kind:\n")
    print("| buffer | input | refused | released: share of each code | "
          "chi-square p against the stated channel |\n|---|---|---|---|---|")
    for kind in CHANNEL_KINDS:
        for value in range(3):
            x = np.array([value], np.int32)
            out = np.array([int(run(x, _kind_buffers(kind, width, rng))[0])
                            for _ in range(FLAGS.channel_draws)])
            refused = int((out < 0).sum())
            kept = out[out >= 0]
            if len(kept):
                counts = np.bincount(kept, minlength=3)
                shares = " / ".join(f"{c / len(kept):.4f}" for c in counts)
                p = stats.chisquare(counts, matrix[value] * len(kept)).pvalue
                verdict = f"{p:.3g}"
            else:
                shares, verdict = "-", "-"
            print(f"| {kind} | {value} | {refused:,} | {shares} | "
                  f"{verdict} |", flush=True)
    for name, rows in _noise_laws(secure, rng).items():
        print(f"\n{name}, {FLAGS.noise_draws:,} releases per buffer "
              "kind:\n")
        if "d_chi" in name:
            print("| buffer | refused | KS p of the norms | t-test p of the "
                  "direction's first coordinate (mean 0) |\n|---|---|---|---|")
        else:
            print("| buffer | refused | KS p (all coordinates) | KS p (first "
                  "coordinate) |\n|---|---|---|---|")
        for kind, (refused, p, p_first) in rows.items():
            print(f"| {kind} | {refused:,} | "
                  + (" | ".join(f"{v:.3g}" for v in (p, p_first))
                     if p is not None else "- | -") + " |", flush=True)


NOISE_LAWS = ("Laplace, 8-d, epsilon 1 per coordinate",
              "d_chi, 8-d, eta 4 (norm of the noise)")


def _noise_laws(secure, rng):
    """{law: {kind: (refused, KS p, first-coordinate p)}} (p None when
    every release was refused) of 8-d Laplace at epsilon 1 (KS of every
    coordinate against Lap(1); the first coordinate alone) and 8-d d_chi
    at eta 4 (KS of the norms against Gamma(8, 1/4); a t-test of the
    direction's first coordinate), FLAGS.noise_draws releases per kind of
    CHANNEL_KINDS, each law's phone model built by `secure`'s
    secure_privatizer_model (today's module or --baseline_commit's)."""
    import numpy as np
    from scipy import stats

    from tfdptext import layers

    found = {}
    for name, layer, law in (
            (NOISE_LAWS[0], layers.LaplaceNoise(1.0),
             stats.laplace(scale=1.0).cdf),
            (NOISE_LAWS[1], layers.DChiNoise(4.0),
             stats.gamma(a=8, scale=0.25).cdf)):
        model = secure.secure_privatizer_model(layer, (8,))
        width = int(model.input[secure.RANDOM_WORDS].shape[-1])
        run = _single_row_runner(model)
        x = np.zeros((1, 8), np.float32)
        rows = found[f"{name} ({width} words per call)"] = {}
        for kind in CHANNEL_KINDS:
            out = np.concatenate([run(x, _kind_buffers(kind, width, rng))
                                  for _ in range(FLAGS.noise_draws)])
            ok = np.isfinite(out).all(axis=1)
            refused = int((~ok).sum())
            noise = out[ok]
            if not len(noise):
                rows[kind] = (refused, None, None)
                continue
            if "d_chi" in name:
                sample = np.linalg.norm(noise, axis=1)
                first = noise[:, 0] / sample  # uniform direction: mean 0
                p_first = stats.ttest_1samp(first, 0.0).pvalue
            else:
                sample = noise.ravel()
                p_first = stats.kstest(noise[:, 0], law).pvalue
            rows[kind] = (refused, float(stats.kstest(sample, law).pvalue),
                          float(p_first))
    return found


def _report_noise_table():
    """--noise_table: the noise laws of --baseline_commit's phone models
    (before) and today's (now), side by side, written as the docs'
    result --noise_table (refused, KS p of each law per buffer kind)."""
    import numpy as np

    from tfdptext.models import secure

    laws = {}
    for when, module in (("before", _baseline_modules()["secure"]),
                         ("now", secure)):
        laws[when] = list(_noise_laws(module, np.random.default_rng(0))
                          .items())
    columns, cells = ["buffer"], {kind: [kind] for kind in CHANNEL_KINDS}
    for index, label in enumerate(("Laplace", "d_chi")):
        for when in ("before", "now"):
            name, rows = laws[when][index]
            columns.append(f"{label} {when}: refused, KS p")
            for kind, (refused, p, _) in rows.items():
                cells[kind].append(
                    f"{refused:,}, " + ("-" if p is None else f"{p:.3g}"))
    table = {"columns": columns, "rows": list(cells.values())}
    print("\n".join("| " + " | ".join(r) + " |"
                    for r in [columns, *table["rows"]]))
    host.write_json(None, {
        "noise_draws": FLAGS.noise_draws,
        "baseline_commit": FLAGS.baseline_commit,
        "laws": {when: {name: {kind: dict(zip(
            ("refused", "ks_p", "first_p"), v)) for kind, v in rows.items()}
            for name, rows in found} for when, found in laws.items()}},
        name=FLAGS.noise_table, table=table)


# ---------------------------------------------------------------------------
# Cost.

MECHANISMS = ("code_release", "dpnr_laplace", "dpnr_laplace_dropout",
              "dchi_sequence", "dchi_tokens", "dchi_text_to_text",
              "brr_text_to_text", "mahalanobis", "vickrey_dchi", "tem",
              "santext", "custext", "truncated_gumbel", "diffractor")


def _user_side(name, backbone, tokenizer):
    """(user side, split point) of mechanism `name` over MiniLM (weights
    as loaded), built as tfdptext-train builds it."""
    import numpy as np

    from tfdptext import layers
    from tfdptext import models
    from tfdptext.training import builder
    from tfdptext.training import config as config_lib

    common = dict(preset="minilm", dataset="synthetic")
    if name == "code_release":
        config = config_lib.TrainConfig(mode="robust", release="code",
                                        epsilon=2.0, num_codes=3, **common)
    elif name.startswith("dpnr_laplace"):
        config = config_lib.TrainConfig(
            mode="robust", epsilon=1.0,
            dropout_rate=0.3 if name.endswith("dropout") else 0.0, **common)
    elif name == "dchi_sequence":
        config = config_lib.TrainConfig(mode="seq_rep", mechanism="dchi",
                                        eta=20.0, **common)
    elif name == "dchi_tokens":
        config = config_lib.TrainConfig(mode="token_rep", eta=80.0, **common)
    elif name == "brr_text_to_text":
        # Random 256-bit codes of the vocabulary: the phone model's cost
        # does not depend on which codes.
        bits = np.random.default_rng(0).integers(
            0, 2, size=(len(tokenizer.vocabulary), 256)).astype(np.float32)
        privatizer = layers.BRRTextPrivatizer(
            8.0, codes=bits, special_token_ids=tokenizer.special_token_ids,
            passthrough_token_ids=tokenizer.passthrough_token_ids)
        split = models.text_to_text_split(backbone, 2, privatizer,
                                          sequence_length=None)
        return split.user, split.split_point
    else:
        from tfdptext import mechanisms

        mechanism = "dchi" if name == "dchi_text_to_text" else name
        entry = mechanisms.get(mechanism)
        value = {"eta": 80.0, "epsilon": 3.0}[entry.parameter]
        # The paper's calibration has no scale on MiniLM's table at any
        # practical epsilon: give TruncatedGumbel its scale.
        options = ["scale=0.5"] if mechanism == "truncated_gumbel" else None
        config = config_lib.TrainConfig(
            mode="text_to_text", mechanism=mechanism,
            mechanism_options=options, **{entry.parameter: value}, **common)
    config = config.validate()
    split = builder.build_split(config, backbone, tokenizer, 2)
    return split.user, split.split_point


def _checks_alone(consumed, fn=None):
    """A Keras model: random words -> (consumed words, verdict), as the
    phone model computes them (`fn`: another check, on the words as they
    are)."""
    import keras
    import tensorflow as tf

    from tfdptext.models import word_checks
    from tfdptext.privacy import extraction

    if fn is not None:
        width = max(consumed, 128)
    else:
        width = extraction.layout(consumed).words
    inputs = keras.Input((width,), dtype="int32", name="random_words")

    def both(words):
        if fn is not None:
            return tf.cast(fn(words), tf.int32)
        ok = tf.cast(word_checks.words_look_random(words, consumed),
                     tf.int32)
        used = word_checks.extract(words, consumed)
        return used[:, :1] * 0 + ok + tf.reduce_max(used, axis=1,
                                                    keepdims=True) * 0

    outputs = keras.layers.Lambda(both)(inputs)
    return keras.Model(inputs, outputs), width


def modules_from_git(commit, modules, renames, prefix):
    """{name: module}: the files `modules` ((name, path) pairs) of
    `commit`, with the import lines `renames` ({old: new}) rewritten,
    loaded as private modules `prefix + name` beside today's code."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = tempfile.mkdtemp(prefix=f"{prefix}checks-")
    loaded = {}
    sys.path.insert(0, folder)
    for name, path in modules:
        text = subprocess.run(
            ["git", "show", f"{commit}:{path}"], cwd=root,
            check=True, capture_output=True, text=True).stdout
        for old, new in renames.items():
            text = text.replace(old, new)
        module = f"{prefix}{name}"
        path = os.path.join(folder, module + ".py")
        with open(path, "w") as f:
            f.write(text)
        spec = importlib.util.spec_from_file_location(module, path)
        loaded[name] = importlib.util.module_from_spec(spec)
        sys.modules[module] = loaded[name]
        spec.loader.exec_module(loaded[name])
    return loaded


def _baseline_modules():
    """The random-words modules of --baseline_commit (before extraction:
    word_statistics, word_checks, secure), loaded from git as private
    modules beside today's layers (which did not change): {name:
    module}, or None without --baseline_commit."""
    if not FLAGS.baseline_commit:
        return None
    renames = {
        "from tfdptext.privacy import word_statistics as ws":
            "import baseline_word_statistics as ws",
        "from tfdptext.privacy import word_statistics":
            "import baseline_word_statistics as word_statistics",
        "from tfdptext.models import word_checks":
            "import baseline_word_checks as word_checks"}
    return modules_from_git(
        FLAGS.baseline_commit,
        (("word_statistics", "tfdptext/privacy/word_statistics.py"),
         ("word_checks", "tfdptext/models/word_checks.py"),
         ("secure", "tfdptext/models/secure.py")), renames, "baseline_")


def _baseline_check():
    """The words check of --baseline_commit: fn(words) -> (batch, 1)."""
    modules = _baseline_modules()
    return None if modules is None else modules[
        "word_checks"].words_look_random


class _Setting:
    def __init__(self, name, runner, feed):
        self.name, self.runner, self.feed = name, runner, feed
        self.times = []

    def run_block(self, invokes):
        self.runner(**self.feed)
        for _ in range(invokes):
            began = time.perf_counter()
            self.runner(**self.feed)
            self.times.append(time.perf_counter() - began)

    def p50(self):
        import numpy as np

        return float(np.median(self.times)) * 1e3


def _round_robin(settings):
    order = list(settings)
    for setting in order:
        for _ in range(5):
            setting.runner(**setting.feed)
    shuffle = random.Random(0).shuffle
    for _ in range(FLAGS.rounds):
        shuffle(order)
        for setting in order:
            setting.run_block(FLAGS.block)


def phone_runners(name, backbone, tokenizer, lengths):
    """[(length, Keras phone model, TFLite signature runner)] of mechanism
    `name` as tfdptext-export writes it (int8, batch 1, one thread)."""
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import exporter
    from tfdptext.export import tflite

    user, split_point = _user_side(name, backbone, tokenizer)
    phones = {length: exporter._phone_model(user, split_point, length)
              for length in lengths}
    flat = tflite.convert_signatures(
        {exporter.phone_signature(length, lengths[-1]): phone
         for length, phone in phones.items()},
        quantize=True, batch_size=1)
    return [(length, phone, Interpreter(model_content=flat, num_threads=1)
             .get_signature_runner(exporter.phone_signature(length,
                                                            lengths[-1])))
            for length, phone in phones.items()]


def _report_cost():
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext import models
    from tfdptext.export import tflite
    from tfdptext.models import secure

    names = list(MECHANISMS) if "all" in FLAGS.mechanisms else \
        FLAGS.mechanisms
    lengths = sorted(int(v) for v in FLAGS.lengths)
    backbone = models.load_backbone("minilm")
    tokenizer = models.load_tokenizer(max_length=max(lengths))
    baseline = _baseline_check()
    text = ("the quarterly report said revenue grew while costs fell and "
            "analysts expect the company to raise its forecast again ") * 8
    ids = tokenizer([text])["token_ids"].numpy()
    print("\n| mechanism | length | words (read) | phone model p50 ms | "
          "extraction + checks p50 ms | share of the phone model | "
          f"words check of {FLAGS.baseline_commit or '-'}: words, p50 ms, "
          "share |\n|---|---|---|---|---|---|---|")
    for name in names:
        began = time.time()
        settings = {}
        for length, phone, runner in phone_runners(name, backbone,
                                                   tokenizer, lengths):
            consumed = secure.phone_consumed_words(phone)
            width = int(phone.input[secure.RANDOM_WORDS].shape[-1])
            feed = {"token_ids": ids[:, :length],
                    "padding_mask": np.ones((1, length), np.int32),
                    "random_words": secure.os_random_words((1, width))}
            settings[("phone", length)] = _Setting("phone", runner, feed)
            for kind, fn in (("ours", None), ("baseline", baseline)):
                if kind == "baseline" and fn is None:
                    continue
                model, words = _checks_alone(consumed, fn)
                check = Interpreter(model_content=tflite.convert(
                    model, batch_size=1), num_threads=1
                ).get_signature_runner()
                settings[(kind, length)] = _Setting(
                    kind, check, {"random_words": secure.os_random_words(
                        (1, words))})
            settings[("layout", length)] = (width, consumed)
        timed = {k: v for k, v in settings.items() if k[0] != "layout"}
        _round_robin(timed.values())
        for length in lengths:
            width, consumed = settings[("layout", length)]
            phone = timed[("phone", length)].p50()
            ours = timed[("ours", length)].p50()
            base = timed.get(("baseline", length))
            base_text = "-" if base is None else (
                f"{max(consumed, 128):,}, {base.p50():.3f}, "
                f"{100 * base.p50() / phone:.1f}%")
            print(f"| {name} | {length} | {width:,} ({consumed:,}) | "
                  f"{phone:.3f} | {ours:.3f} | {100 * ours / phone:.1f}% | "
                  f"{base_text} |", flush=True)
        logging.warning("%s: %.0f s", name, time.time() - began)


# ---------------------------------------------------------------------------
# Candidates.

_CHACHA_CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)


def _rotl(x, n):
    import tensorflow as tf

    # MUL wraps modulo 2^32 (TFLite has no LEFT_SHIFT builtin); the
    # arithmetic RIGHT_SHIFT then FLOOR_MOD keeps the top n bits.
    return x * (2**n) + tf.math.floormod(tf.bitwise.right_shift(x, 32 - n),
                                         2**n)


def chacha20_words(key, blocks, rounds=20):
    """ChaCha20 (RFC 8439) keystream of `blocks` 64-byte blocks from an
    int32 (8,) key, nonce 0, counters 0.., as int32 words, in TensorFlow
    builtin ops (ADD, BITWISE_XOR, MUL, RIGHT_SHIFT, FLOOR_MOD, CONCAT)."""
    import numpy as np
    import tensorflow as tf

    xor = tf.bitwise.bitwise_xor
    ones = tf.ones([blocks], tf.int32)
    constants = np.array(_CHACHA_CONSTANTS, np.uint32).view(np.int32)
    a = tf.constant(constants)[:, None] * ones
    b = key[:4, None] * ones
    c = key[4:, None] * ones
    d = tf.concat([tf.range(blocks, dtype=tf.int32)[None],
                   tf.zeros([3, blocks], tf.int32)], axis=0)
    start = (a, b, c, d)

    def quarter(a, b, c, d):
        a = a + b
        d = _rotl(xor(d, a), 16)
        c = c + d
        b = _rotl(xor(b, c), 12)
        a = a + b
        d = _rotl(xor(d, a), 8)
        c = c + d
        b = _rotl(xor(b, c), 7)
        return a, b, c, d

    def roll(x, k):
        return tf.concat([x[k:], x[:k]], axis=0)

    for _ in range(rounds // 2):
        a, b, c, d = quarter(a, b, c, d)
        b, c, d = roll(b, 1), roll(c, 2), roll(d, 3)
        a, b, c, d = quarter(a, b, c, d)
        b, c, d = roll(b, 3), roll(c, 2), roll(d, 1)
    out = tf.concat([x + x0 for x, x0 in zip((a, b, c, d), start)], axis=0)
    return tf.reshape(tf.transpose(out), [-1])


def _report_candidates():
    import keras
    import numpy as np
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from tfdptext.export import tflite
    from tfdptext.models import word_checks
    from tfdptext.privacy import extraction

    # RFC 8439, A.1, test vector #1: key 0, nonce 0, block counter 0;
    # the keystream's first bytes 76 b8 e0 ad a0 f1 3d 90 40 5d 6a e5 53
    # 86 bd 28 as little-endian words.
    zero = chacha20_words(tf.zeros([8], tf.int32), 1).numpy().view(
        np.uint32)
    expected = [0xade0b876, 0x903df1a0, 0xe56a5d40, 0x28bd8653]
    if list(zero[:4]) != expected:
        raise AssertionError(f"ChaCha20 mismatch: {zero[:4]}")
    print("\nChaCha20 in TensorFlow ops: RFC 8439 A.1 test vector #1 "
          "(key 0, nonce 0, counter 0) reproduced.\n")
    print("| consumed words | app fills (ours) | ours: sum of g (SPLIT + "
          "ADD, or SUM) ms | XOR of g ms | app fills (key) | ChaCha20 from "
          "a 256-bit key ms | ChaCha8 ms |\n|---|---|---|---|---|---|---|")

    def timed(model, feed):
        runner = Interpreter(model_content=tflite.convert(model,
                                                          batch_size=1),
                             num_threads=1).get_signature_runner()
        for _ in range(5):
            runner(**feed)
        spent = []
        for _ in range(50):
            began = time.perf_counter()
            runner(**feed)
            spent.append(time.perf_counter() - began)
        return 1e3 * float(np.median(spent))

    for consumed in (2, 1536, 12288, 98304):
        width = extraction.layout(consumed).words
        words = keras.Input((width,), dtype="int32", name="random_words")
        feed = {"random_words": np.frombuffer(os.urandom(4 * width),
                                              np.int32).reshape(1, width)}
        ours = timed(keras.Model(words, keras.layers.Lambda(
            lambda w: word_checks.extract(w, consumed),
            output_shape=(consumed,))(words)), feed)
        group = width // consumed

        def xor_of_group(w):
            parts = tf.split(w, group, axis=-1)
            out = parts[0]
            for part in parts[1:]:
                out = tf.bitwise.bitwise_xor(out, part)
            return out

        xor = timed(keras.Model(words, keras.layers.Lambda(
            xor_of_group, output_shape=(consumed,))(words)), feed)
        key = keras.Input((8,), dtype="int32", name="key")
        blocks = -(-consumed // 16)
        chacha = [timed(keras.Model(key, keras.layers.Lambda(
            lambda k, r=r: chacha20_words(k[0], blocks, r)[None],
            output_shape=(16 * blocks,))(key)),
            {"key": np.frombuffer(os.urandom(32), np.int32).reshape(1, 8)})
            for r in (20, 8)]
        print(f"| {consumed:,} | {4 * width:,} bytes | {ours:.3f} | "
              f"{xor:.3f} | 32 bytes | {chacha[0]:.3f} | {chacha[1]:.3f} |",
              flush=True)


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    reports = [(flag, report) for flag, report in (
        ("false_alarms", _report_false_alarms), ("channel", _report_channel),
        ("noise_table", _report_noise_table),
        ("cost", _report_cost), ("candidates", _report_candidates))
        if FLAGS[flag].value]
    # What it prints (its tables) is kept as a provenance record,
    # benchmarks/results/random_words_check_<parts>.json.
    name = "_".join(["random_words_check"] + [f for f, _ in reports])
    with host.recording(name=name):
        print(f"Machine: {host.cpu_name()}; "
              f"{time.strftime('%Y-%m-%d')}")
        for _, report in reports:
            report()


if __name__ == "__main__":
    app.run(main)
