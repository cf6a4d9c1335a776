"""Learned binary codes (tfdptext.binary, tfdptext-binarize): the
autoencoder's losses and estimator, codes that keep neighbours, the codes
directory, the word2vec reader and the program.

The toy table is 12 clusters of 30 words in 24 dimensions, so that a
word's nearest neighbours are its cluster; training and the report are
seeded, so the neighbour assertions are deterministic on a machine (their
margins are wide: measured overlap is about 20x chance, the test asks 5x).
"""

import json
import os
import re
import sys

import numpy as np
import pytest

from tfdptext import binary
from tfdptext.binary import codes as codes_lib
from tfdptext.errors import ArgumentError
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(ROOT, "train", "tfdptext-binarize")
ENV = {**os.environ, "KERAS_BACKEND": "tensorflow",
       "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
UNICODE_WORDS = ["café", "日本語", "naïve", "Ünïcödé", "a.b", "€", "—",
                 "\u00a0nbsp", "x\u2028y"]


def _toy_table(clusters=12, per_cluster=30, dim=24, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    labels = np.repeat(np.arange(clusters), per_cluster)
    matrix = centres[labels] + 0.35 * rng.normal(size=(len(labels), dim))
    words = [f"w{i}" for i in range(len(labels))]
    words[:len(UNICODE_WORDS)] = UNICODE_WORDS
    return words, matrix.astype(np.float32)


@pytest.fixture(scope="module")
def toy():
    return _toy_table()


@pytest.fixture(scope="module")
def trained(toy):
    _, matrix = toy
    return binary.fit_codes(matrix, bits=64, epochs=15, batch_size=32,
                            seed=0)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


# The autoencoder.


def test_codes_are_exactly_binary_and_deterministic(toy, trained):
    _, matrix = toy
    bits = binary.encode(trained, matrix)
    assert bits.dtype == np.uint8 and bits.shape == (len(matrix), 64)
    assert set(np.unique(bits)) <= {0, 1}
    assert 0 < bits.mean() < 1
    np.testing.assert_array_equal(binary.encode(trained, matrix), bits)
    # A word's code does not depend on the other rows encoded with it.
    order = np.random.default_rng(1).permutation(len(matrix))[:50]
    np.testing.assert_array_equal(binary.encode(trained, matrix[order]),
                                  bits[order])
    np.testing.assert_array_equal(binary.encode(trained, matrix[7:8]),
                                  bits[7:8])


def test_training_is_seeded(toy, trained):
    _, matrix = toy
    again = binary.fit_codes(matrix, bits=64, epochs=15, batch_size=32,
                             seed=0)
    np.testing.assert_array_equal(binary.encode(again, matrix),
                                  binary.encode(trained, matrix))


def test_neighbours_in_code_space_agree_with_the_real_space(toy, trained):
    _, matrix = toy
    bits = binary.encode(trained, matrix)
    report = binary.binarization_report(
        matrix, bits, scaled_inputs=binary.scaled(trained, matrix),
        reconstruction=binary.decode(trained, bits), k=10, sample=200,
        seed=0)
    n = report["neighbours"]
    assert n["chance"] == pytest.approx(10 / (len(matrix) - 1))
    assert n["overlap"] > 5 * n["chance"]
    assert report["reconstruction"]["mean_cosine"] > 0.5
    assert report["distinct_codes"] > 0.9 * len(matrix)
    # Contrast: random codes of the same size stay near chance, so the
    # assertion above measures the training, not the report.
    random_bits = np.random.default_rng(0).integers(0, 2, bits.shape)
    contrast = binary.binarization_report(matrix, random_bits, k=10,
                                          sample=200)
    assert contrast["neighbours"]["overlap"] < 3 * n["chance"]
    assert contrast["reconstruction"] is None


def test_report_on_a_case_worked_by_hand():
    # Real nearest neighbours: a <-> b, c <-> d.
    matrix = np.array([[1, 0], [1, 0.1], [0, 1], [0.1, 1]], np.float32)
    bits = np.unpackbits(np.array([[0b00000000], [0b00000001],
                                   [0b11111111], [0b00000011]], np.uint8),
                         axis=1)
    # Hamming nearest: a -> b (1); b -> a or d (both 1: half a hit);
    # c -> d (6); d -> b (1, a miss). The word itself never counts.
    report = binary.binarization_report(matrix, bits, k=1, sample=10)
    n = report["neighbours"]
    assert n["sample"] == 4
    assert n["overlap"] == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    assert n["chance"] == pytest.approx(1 / 3)
    assert report["bits_set"] == {"mean": 2.75, "min": 0, "max": 8}
    assert report["bit_share"] == {"min": 0.25, "max": 0.75,
                                   "constant_bits": 0}
    assert (report["distinct_codes"], report["words_sharing_a_code"]) == \
        (4, 0)
    # Left out, d is neither a query nor a candidate: b's nearest is a,
    # and c's is b in both spaces (cosine 0.0995 vs 0; Hamming 7 vs 8).
    left_out = binary.binarization_report(matrix, bits, k=1,
                                          exclude_ids=[3])
    assert left_out["words"] == 3 and left_out["excluded_ids"] == 1
    assert left_out["neighbours"]["overlap"] == 1.0
    same = np.vstack([bits[:3], bits[:1]])  # d gets a's code
    collided = binary.binarization_report(matrix, same, k=1)
    assert (collided["distinct_codes"], collided["words_sharing_a_code"]) \
        == (3, 2)
    with pytest.raises(ArgumentError, match="`k`"):
        binary.binarization_report(matrix, bits, k=4)


def test_losses_match_their_closed_forms():
    import keras

    rng = np.random.default_rng(3)
    kernel = rng.normal(size=(3, 8)).astype(np.float32)
    enc_bias = rng.normal(size=8).astype(np.float32) * 0.1
    dec_bias = rng.normal(size=3).astype(np.float32) * 0.1
    x = (rng.normal(size=(5, 3)) * 2.0).astype(np.float32)  # some clipped
    model = binary.BinarizingAutoencoder(input_dim=3, bits=8, reg=0.25,
                                         input_scale=1.5)
    model.set_weights([kernel, enc_bias, dec_bias])
    k64 = kernel.astype(np.float64)
    scaled = np.clip(x / 1.5, -1.0, 1.0)
    assert np.abs(x / 1.5).max() > 1.0  # the clip is exercised
    b = (scaled @ k64 + enc_bias > 0).astype(np.float64)
    y = np.tanh(b @ k64.T + dec_bias)
    reconstruction = np.mean((scaled - y) ** 2)
    orthogonality = np.sum((k64.T @ k64 - np.eye(8)) ** 2)
    assert float(binary.orthogonality_penalty(kernel)) == pytest.approx(
        orthogonality, rel=1e-5)
    assert float(binary.orthogonality_penalty(np.eye(8, dtype="float32"))
                 ) == 0.0
    np.testing.assert_allclose(np.asarray(model(x)), y, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(binary.decode(model, b), y, rtol=1e-6)
    model.compile(keras.optimizers.SGD())
    results = model.evaluate(x, batch_size=5, verbose=0, return_dict=True)
    assert results["reconstruction"] == pytest.approx(reconstruction,
                                                      rel=1e-5)
    assert results["orthogonality"] == pytest.approx(orthogonality,
                                                     rel=1e-5)
    assert results["loss"] == pytest.approx(
        reconstruction + 0.25 * orthogonality, rel=1e-5)


def test_straight_through_estimator():
    import tensorflow as tf

    z = tf.constant([-3.0, -0.5, 0.0, 1e-8, 0.5, 3.0])
    with tf.GradientTape() as tape:
        tape.watch(z)
        h = binary.straight_through_heaviside(z)
    np.testing.assert_array_equal(h.numpy(), [0, 0, 0, 1, 1, 1])
    s = tf.sigmoid(z).numpy()
    np.testing.assert_allclose(tape.gradient(h, z).numpy(), s * (1 - s),
                               rtol=1e-6)
    # The encoder's bias reaches the loss only through the codes.
    model = binary.BinarizingAutoencoder(input_dim=4, bits=8, seed=0)
    x = tf.constant(np.random.default_rng(0).normal(size=(16, 4)),
                    tf.float32)
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x, y_pred=model(x))
    grad = tape.gradient(loss, model.encoder_bias)
    assert grad is not None and float(tf.reduce_max(tf.abs(grad))) > 0


def test_model_config_round_trip_and_argument_checks():
    model = binary.BinarizingAutoencoder(input_dim=5, bits=16, reg=0.5,
                                         input_scale=2.0, seed=3)
    config = model.get_config()
    clone = binary.BinarizingAutoencoder.from_config(config)
    assert (clone.input_dim, clone.bits, clone.reg, clone.input_scale,
            clone.seed) == (5, 16, 0.5, 2.0, 3)
    for kwargs, named in [({"bits": 12}, "`bits`"), ({"bits": 0}, "`bits`"),
                          ({"bits": 8.0}, "`bits`"),
                          ({"reg": -1.0}, "`reg`"),
                          ({"input_scale": 0.0}, "`input_scale`"),
                          ({"input_dim": 0}, "`input_dim`")]:
        with pytest.raises(ArgumentError, match=named):
            binary.BinarizingAutoencoder(**{"input_dim": 5, **kwargs})
    matrix = np.ones((4, 5), np.float32)
    for kwargs, named in [({"epochs": 0}, "`epochs`"),
                          ({"learning_rate": 0.0}, "`learning_rate`"),
                          ({"batch_size": 0}, "`batch_size`")]:
        with pytest.raises(ArgumentError, match=named):
            binary.fit_codes(matrix, 8, **kwargs)
    matrix[1, 2] = np.nan
    with pytest.raises(ArgumentError, match="row 1"):
        binary.fit_codes(matrix, 8)


# The codes directory.


def test_save_load_round_trip(tmp_path, toy, trained):
    words, matrix = toy
    bits = binary.encode(trained, matrix)
    out = str(tmp_path / "codes")
    record = binary.save_codes(out, words, bits, {"source": "toy",
                                                  "report": {"a": 1}},
                               special_token_ids=(3, 0))
    assert sorted(os.listdir(out)) == sorted(codes_lib.FILES)
    assert record["bits"] == 64 and record["vocabulary_size"] == len(words)
    codes = binary.load_codes(out)
    assert list(codes.words) == words  # unicode, U+2028 and U+00A0 kept
    np.testing.assert_array_equal(codes.packed, np.packbits(bits, axis=1))
    np.testing.assert_array_equal(codes.bits, bits)
    assert codes.num_bits == 64 and len(codes) == len(words)
    assert codes.special_token_ids == (0, 3)
    assert codes.metadata["source"] == "toy"
    assert codes.metadata["report"] == {"a": 1}
    np.testing.assert_array_equal(np.load(os.path.join(out, "codes.npy")),
                                  np.packbits(bits, axis=1))
    # Deterministic: encoding again gives the stored codes.
    np.testing.assert_array_equal(binary.encode(trained, matrix),
                                  codes.bits)
    # An existing empty directory is accepted.
    empty = tmp_path / "empty"
    empty.mkdir()
    binary.save_codes(str(empty), ["a", "b"], np.eye(2, 8, dtype=np.uint8))
    assert binary.load_codes(str(empty)).words == ("a", "b")


def test_hamming_distances_match_unpacked_bits():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, (7, 24)), rng.integers(0, 2, (5, 24))
    expected = (a[:, None, :] != b[None, :, :]).sum(axis=2)
    got = binary.hamming_distances(np.packbits(a, axis=1),
                                   np.packbits(b, axis=1))
    np.testing.assert_array_equal(got, expected)
    assert binary.hamming_distances(np.packbits(a[0]), np.packbits(a[0])
                                    ).tolist() == [[0]]
    with pytest.raises(ArgumentError, match="same code length"):
        binary.hamming_distances(np.zeros((1, 2), np.uint8),
                                 np.zeros((1, 3), np.uint8))


def test_save_refuses_a_taken_directory_and_bad_input(tmp_path):
    bits = np.eye(3, 8, dtype=np.uint8)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("keep")
    with pytest.raises(binary.CodesError,
                       match=f"{taken}.*not empty.*notes.txt"):
        binary.save_codes(str(taken), ["a", "b", "c"], bits)
    assert os.listdir(taken) == ["notes.txt"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(binary.CodesError, match="is a file"):
        binary.save_codes(str(a_file), ["a", "b", "c"], bits)
    out = str(tmp_path / "out")
    for words, array, named in [
            (["a", "b"], bits, "`words` has 2"),
            (["a", "a", "c"], bits, "repeats"),
            (["a", "b\nc", "d"], bits, "line break"),
            (["a", "b", "c"], bits * 2, "only 0 and 1"),
            (["a", "b", "c"], np.ones((3, 12)), "multiple of 8")]:
        with pytest.raises(ArgumentError, match=named):
            binary.save_codes(out, words, array)
    with pytest.raises(ArgumentError, match="special_token_ids"):
        binary.save_codes(out, ["a", "b", "c"], bits, special_token_ids=[3])
    with pytest.raises(ArgumentError, match="may not set"):
        binary.save_codes(out, ["a", "b", "c"], bits, {"bits": 1})
    assert not os.path.exists(out)
    assert not [p for p in os.listdir(tmp_path) if "partial" in p]


@pytest.fixture
def saved(tmp_path):
    out = str(tmp_path / "codes")
    bits = np.random.default_rng(0).integers(0, 2, (6, 16))
    binary.save_codes(out, ["α", "b", "c", "d", "e", "f"], bits)
    return out


def _rewrite(directory, name, data):
    """Replaces file `name` and records its new size and SHA-256 in
    codes.json (a writer bug, not a damaged copy)."""
    from tfdptext import runfiles

    path = os.path.join(directory, name)
    if isinstance(data, np.ndarray):
        np.save(path, data)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
    meta_path = os.path.join(directory, "codes.json")
    meta = json.load(open(meta_path))
    meta["files"][name] = {"bytes": os.path.getsize(path),
                           "sha256": runfiles.sha256_file(path)}
    json.dump(meta, open(meta_path, "w"))


def test_load_refuses_damaged_files_naming_them(saved):
    codes_path = os.path.join(saved, "codes.npy")
    vocab_path = os.path.join(saved, "vocab.txt")
    meta_path = os.path.join(saved, "codes.json")
    _rewrite(saved, "codes.npy", np.zeros((6, 3), np.uint8))
    with pytest.raises(binary.CodesError,
                       match=f"{codes_path}.*shape \\(6, 3\\).*\\(6, 2\\)"):
        binary.load_codes(saved)
    _rewrite(saved, "codes.npy", np.zeros((6, 2), np.float32))
    with pytest.raises(binary.CodesError, match=f"{codes_path}.*float32"):
        binary.load_codes(saved)
    _rewrite(saved, "codes.npy", np.zeros((6, 2), np.uint8))
    _rewrite(saved, "vocab.txt", "α\nb\nc\nd\ne\n")
    with pytest.raises(binary.CodesError,
                       match=f"{vocab_path} holds 5 words.*6"):
        binary.load_codes(saved)
    _rewrite(saved, "vocab.txt", "α\nb\nc\nd\ne\nf\n")
    assert binary.load_codes(saved).words[0] == "α"
    # A copy damaged after it was written: size or checksum differ.
    with open(vocab_path, "r+b") as f:  # same size, one word changed
        f.seek(len("α\n".encode()))
        f.write(b"z")
    with pytest.raises(binary.CodesError, match=f"{vocab_path}: SHA-256"):
        binary.load_codes(saved)
    with open(vocab_path, "r+b") as f:
        f.seek(len("α\n".encode()))
        f.write(b"b")
    assert binary.load_codes(saved).words[1] == "b"
    with open(codes_path, "r+b") as f:
        f.truncate(os.path.getsize(codes_path) - 3)
    with pytest.raises(binary.CodesError, match=f"{codes_path}.*truncated"):
        binary.load_codes(saved)


def test_load_refuses_bad_metadata_naming_it(saved):
    meta_path = os.path.join(saved, "codes.json")
    meta = json.load(open(meta_path))
    json.dump({**meta, "format_version": 99}, open(meta_path, "w"))
    with pytest.raises(binary.CodesError,
                       match=f"{meta_path}.*format version 99"):
        binary.load_codes(saved)
    json.dump({**meta, "special_token_ids": [6]}, open(meta_path, "w"))
    with pytest.raises(binary.CodesError, match=f"{meta_path}.*6"):
        binary.load_codes(saved)
    open(meta_path, "w").write('{"format": ')
    with pytest.raises(binary.CodesError, match=f"{meta_path}.*JSON"):
        binary.load_codes(saved)
    os.remove(meta_path)
    with pytest.raises(binary.CodesError, match=f"{meta_path}.*no such"):
        binary.load_codes(saved)


# The word2vec reader.


def test_word2vec_with_and_without_header(tmp_path):
    body = "the 0.5 -1 2\ncafé 1e-3 0 -0.25\nη 3 2 1\n"
    words, matrix = binary.read_word2vec(
        _write(tmp_path / "h.txt", "3 3\n" + body))
    assert words == ["the", "café", "η"]
    assert matrix.dtype == np.float32 and matrix.shape == (3, 3)
    np.testing.assert_allclose(matrix[1], [1e-3, 0, -0.25])
    glove_words, glove = binary.read_word2vec(
        _write(tmp_path / "g.txt", body.replace("\n", " \n")))
    assert glove_words == words
    np.testing.assert_array_equal(glove, matrix)
    words, matrix = binary.read_word2vec(str(tmp_path / "h.txt"),
                                         max_words=2)
    assert words == ["the", "café"] and matrix.shape == (2, 3)


@pytest.mark.parametrize("text, where", [
    ("2 3\na 1 2 3\nb 1 2\n", ":3: 2 values after the word, expected 3"),
    ("a 1 2 3\nb 1 2 3 4\n", ":2: 4 values"),
    ("a 1 2 3\nb 1  2 3\n", ":2: 4 values"),  # a double space
    ("a 1 2 3\nb 1 x 3\n", ":2: value 'x' is not a number"),
    ("a 1 2 3\nb 1 nan 3\n", ":2: value 'nan'.*not finite"),
    ("a 1 2 3\nb 1 1e39 3\n", ":2: value '1e39'.*not finite"),
    ("a 1 2 3\n\nb 1 2 3\n", ":2: empty line"),
    ("a 1 2 3\na 4 5 6\n", ":2: the word 'a' repeats line 1"),
    ("3 3\na 1 2 3\nb 1 2 3\n", ": the header says 3 words, the file "
     "holds 2"),
    ("1 3\na 1 2 3\nb 1 2 3\n", ":3: the header says 1 words"),
    ("", ": no words"),
])
def test_word2vec_refuses_bad_lines_naming_them(tmp_path, text, where):
    path = _write(tmp_path / "bad.txt", text)
    with pytest.raises(binary.EmbeddingsError) as err:
        binary.read_word2vec(path)
    assert str(err.value).startswith(path)
    assert re.search(where, str(err.value)), str(err.value)


def test_word2vec_refuses_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"a 1 2\ncaf\xe9 1 2\n")
    with pytest.raises(binary.EmbeddingsError, match=f"{path}:2: bytes"):
        binary.read_word2vec(str(path))
    with pytest.raises(binary.EmbeddingsError, match="no such file"):
        binary.read_word2vec(str(tmp_path / "missing.txt"))
    with pytest.raises(ArgumentError, match="`max_words`"):
        binary.read_word2vec(str(path), max_words=0)


def test_preset_table_and_special_ids(tiny_preset):
    table = binary.load_embeddings(f"preset:{tiny_preset}")
    assert table.matrix.shape == (30522, 16)
    assert table.words[0] == "[PAD]" and table.words[101] == "[CLS]"
    special = set(table.special_token_ids)
    assert {0, 100, 101, 102, 103} <= special  # PAD UNK CLS SEP MASK
    assert 1 in special and table.words[1] == "[unused0]"
    assert table.words.index("the") not in special
    assert table.source == f"preset:{tiny_preset}"
    first = binary.read_preset(tiny_preset, max_words=200)
    assert len(first[0]) == 200 and first[1].shape == (200, 16)
    assert all(i < 200 for i in first[2]) and 0 in first[2]


# The program.


def _binarize(*flags):
    return zygote.run([sys.executable, LAUNCHER, *flags],
                      capture_output=True, text=True, env=ENV,
                      timeout=300)


def test_program_end_to_end(tmp_path):
    words, matrix = _toy_table(clusters=6, per_cluster=20, dim=16)
    lines = [f"{len(words)} {matrix.shape[1]}"] + [
        w + " " + " ".join(f"{v:.6f}" for v in row)
        for w, row in zip(words, matrix)]
    table = _write(tmp_path / "toy.vec", "\n".join(lines) + "\n")
    out = tmp_path / "codes"
    result = _binarize(f"--embeddings={table}", "--bits=16", "--epochs=3",
                       "--batch_size=16", "--report_sample=50",
                       f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "neighbour overlap" in result.stdout
    assert "x chance" in result.stdout
    codes = binary.load_codes(str(out))
    assert list(codes.words) == words and codes.bits.shape == (120, 16)
    assert codes.metadata["training"]["epochs"] == 3
    assert codes.metadata["source"].endswith("toy.vec")
    assert codes.metadata["report"]["neighbours"]["sample"] == 50


@pytest.mark.parametrize("flag, named", [
    ("--bits=12", "`bits`"),
    ("--bits=0", "`bits`"),
    ("--epochs=0", "`epochs`"),
    ("--learning_rate=-1", "`learning_rate`"),
    ("--reg=-0.5", "`reg`"),
    ("--max_words=0", "`max_words`"),
    ("--embeddings=MISSING", "`embeddings`: no such file"),
    ("--embeddings=preset:", "`embeddings`"),
    ("--output_dir=TAKEN", "`output_dir`"),
])
def test_program_refuses_bad_flags_before_any_work(tmp_path, flag, named):
    table = _write(tmp_path / "t.vec", "a 1 2\nb 2 1\nc 0 1\n")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("keep")
    out = tmp_path / "out"
    flags = {"--embeddings": table, "--output_dir": str(out)}
    name, _, value = flag.partition("=")
    value = {"MISSING": str(tmp_path / "missing.vec"),
             "TAKEN": str(taken)}.get(value, value)
    flags[name] = value
    result = _binarize(*(f"{k}={v}" for k, v in flags.items()))
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [line for line in result.stderr.splitlines()
              if line.startswith("tfdptext-binarize: error:")]
    assert named in line
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert os.listdir(taken) == ["x"]
