"""tfdptext-privatize-corpus: the corpus privatization job (tfdptext.corpus)
as an Apache Beam pipeline on the DirectRunner.

Most jobs privatize with a small synthetic (30522 x 8) table over the
MiniLM vocabulary (`CorpusConfig.embeddings`); one runs the program with
the real default encoder. Skipped when Apache Beam (the `beam` extra) is
not installed.
"""

import hashlib
import json
import os
import sys

import numpy as np
import pytest

pytest.importorskip(
    "apache_beam", reason="Apache Beam is not installed: the corpus job "
    "needs the beam extra (pip install -e '.[beam]').")

from tfdptext import models  # noqa: E402
from tfdptext import offline  # noqa: E402
from tfdptext.corpus import CorpusConfig  # noqa: E402
from tfdptext.corpus import codecs  # noqa: E402
from tfdptext.corpus import inputs  # noqa: E402
from tfdptext.corpus import mechanisms  # noqa: E402
from tfdptext.corpus import outdir  # noqa: E402
from tfdptext.corpus import pipeline  # noqa: E402
from tfdptext.errors import TfdptextError  # noqa: E402
from tfdptext.privacy.guarantee import Guarantee  # noqa: E402
import zygote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(ROOT, "export", "tfdptext-privatize-corpus")
# The program's environment: TensorFlow's log level left as the suite's,
# so that zygote forks the runs from its server (no import of TensorFlow
# per run).
ENV = {**os.environ, "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": ""}
# Far beyond any table distance: the nearest token is the token itself.
HUGE_ETA = 1e7
WORDS = ("river", "garden", "music", "doctor", "window", "yellow", "city",
         "paper", "summer", "table")


@pytest.fixture(scope="module")
def tokenizer():
    return models.load_tokenizer()


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread():
    """FAISS's searches on one OpenMP thread in this process: on the
    suite's two shared cores a second thread mostly spins waiting for the
    first (measured on a loaded machine: 5.8 of the 12.3 CPU-s of the
    noise test's job went to FAISS's flat search with 2 threads, 0.1 with
    one). The rows found are the same (exact_nearest certifies them)."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


# How far the rows of "##" pieces are moved (in every coordinate).
PIECE_SHIFT = 20.0
# The farthest the noise of the tests that read their outputs reaches
# (eta >= 9): d_chi's norm is Gamma(8, 1 / eta), at eta 9 of mean 0.9 and
# sd 0.3; P(norm > 15) < 1e-40.
NOISE_REACH = 15.0


@pytest.fixture(scope="module")
def table_path(tmp_path_factory, tokenizer):
    """A synthetic (30522, 8) table; the rows of "##" pieces lie far away,
    so that no output is a piece and each output word is one token.

    Far, but not much farther: exact_nearest's float32 rounding margin
    grows with the table's largest squared norm, and a shift of 1,000
    (norms of 2,800) made it exceed every gap between distances, which
    sent every query to a whole-table float64 search (10 of the noise
    test's 26 CPU-s)."""
    rng = np.random.default_rng(7)
    table = rng.standard_normal((tokenizer.vocabulary_size, 8))
    pieces = np.array([t.startswith("##") for t in tokenizer.vocabulary])
    table[pieces] += PIECE_SHIFT
    # Every piece row is farther than NOISE_REACH from every word row:
    # |p - w| >= shift sqrt(8) - |p - shift| - |w|.
    norms = np.linalg.norm(table - PIECE_SHIFT * pieces[:, None], axis=1)
    assert PIECE_SHIFT * np.sqrt(8) - norms[pieces].max() - \
        norms[~pieces].max() > NOISE_REACH
    path = tmp_path_factory.mktemp("table") / "table.npy"
    np.save(path, table.astype(np.float32))
    return str(path)


def _expected(tokenizer, lines):
    """Each line tokenized and detokenized: the output at a huge eta."""
    codec = codecs.WordPieceCodec(tokenizer)
    return [" ".join(codec.decode(ids).split())
            for ids in codec.encode(lines)]


def _read_lines(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == "" or text.endswith("\n")
    return text.split("\n")[:-1] if text else []


def _corpus():
    """50 distinct lines: an empty one, a blank one, a CRLF one, accents,
    and one of about 700 tokens (longer than max_tokens=64)."""
    lines = [f"Line {i}: the {WORDS[i % 10]} near the {WORDS[i * 3 % 10]}."
             for i in range(50)]
    lines[4] = ""
    lines[9] = "   \t "
    lines[13] = "Café déjà vu, naïve résumé!\r"
    lines[21] = " ".join(f"{WORDS[i % 10]}{i}" for i in range(300))
    return lines


@pytest.fixture(scope="module")
def job(tmp_path_factory, tokenizer, table_path):
    """One job over three text files (50 lines; no trailing newline; empty)
    with blocks of 7 lines; records what the directory holds when the
    manifest is written."""
    base = tmp_path_factory.mktemp("job")
    corpus = _corpus()
    (base / "a.txt").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (base / "b.txt").write_text("no trailing newline", encoding="utf-8")
    (base / "c.txt").write_text("", encoding="utf-8")
    config = CorpusConfig(
        input=f"{base}/a.txt,{base}/[bc].txt", eta=HUGE_ETA,
        embeddings=table_path, max_tokens=64, batch_size=16)
    out = str(base / "out")
    seen = {}
    real_write = outdir.write_manifest

    def write_manifest(output_dir, manifest):
        seen["entries"] = sorted(os.listdir(output_dir))
        seen["lines"] = {name: len(_read_lines(os.path.join(output_dir,
                                                            name)))
                         for name in ("a.txt", "b.txt", "c.txt")}
        seen["output_mtime"] = max(
            os.stat(os.path.join(output_dir, n)).st_mtime_ns
            for n in ("a.txt", "b.txt", "c.txt"))
        real_write(output_dir, manifest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(outdir, "write_manifest", write_manifest)
        manifest = pipeline.run(config, out, block_lines=7,
                                command="test-job")
    return {"base": base, "out": out, "corpus": corpus, "config": config,
            "manifest": manifest, "seen": seen}


def test_one_output_line_per_input_line_in_order(job, tokenizer):
    out = job["out"]
    expected = _expected(tokenizer, job["corpus"])
    assert _read_lines(os.path.join(out, "a.txt")) == expected
    assert expected[4] == expected[9] == ""  # empty lines stay empty
    assert expected[13] == "cafe deja vu , naive resume !"
    # The long line (far over max_tokens) is privatized whole.
    long_ids = codecs.WordPieceCodec(tokenizer).encode([job["corpus"][21]])
    assert len(long_ids[0]) > 10 * 64
    assert job["manifest"]["statistics"]["split_lines"] == 1
    assert _read_lines(os.path.join(out, "b.txt")) == ["no trailing newline"]
    assert _read_lines(os.path.join(out, "c.txt")) == []
    assert sorted(os.listdir(out)) == ["a.txt", "b.txt", "c.txt",
                                       outdir.MANIFEST]


def test_manifest_is_written_last_and_holds_the_guarantee(job):
    seen, out, manifest = job["seen"], job["out"], job["manifest"]
    # When the manifest is written, every output is complete and the
    # blocks are gone.
    assert seen["entries"] == ["a.txt", "b.txt", "c.txt"]
    assert seen["lines"] == {"a.txt": 50, "b.txt": 1, "c.txt": 0}
    assert os.stat(os.path.join(out, outdir.MANIFEST)).st_mtime_ns >= \
        seen["output_mtime"]
    assert outdir.read_manifest(out) == json.loads(json.dumps(manifest))
    guarantee = Guarantee.from_dict(manifest["guarantee"])
    assert guarantee.mechanism == "dchi_text_to_text"
    assert guarantee.value == HUGE_ETA and guarantee.randomness == \
        "os_entropy"
    assert mechanisms.LINE_CONDITION in guarantee.conditions
    assert manifest["guarantee_text"] == str(guarantee)
    assert manifest["mechanism"] == "dchi"
    assert manifest["parameters"]["eta"] == HUGE_ETA
    assert manifest["command"] == "test-job"
    assert manifest["embedding_table"]["shape"] == [30522, 8]
    assert manifest["tokenization"]["kind"] == "wordpiece"
    for record in manifest["inputs"]:
        data = open(record["path"], "rb").read()
        assert record["sha256"] == hashlib.sha256(data).hexdigest()
        assert record["bytes"] == len(data)
        output = manifest["outputs"][record["output"]]
        assert output["lines"] == record["lines"]
        written = open(os.path.join(out, record["output"]), "rb").read()
        assert output["sha256"] == hashlib.sha256(written).hexdigest()
    assert [r["lines"] for r in manifest["inputs"]] == [50, 1, 0]


def test_noise_is_fresh_for_every_line(tmp_path, tokenizer, table_path):
    """200 copies of a line of 10 copies of one word, at an eta where a
    token stays unchanged about half the time. Noise reused between lines
    (all of them, or those of a batch) makes lines equal, and the tokens at
    the same position of two lines agree more often than independent
    draws do. Compared with 2,000 independent draws of the same mechanism
    (DChiCorpusPrivatizer called directly); each bound is 5 standard
    deviations of the difference of two binomials."""
    eta, word, copies, length = 9.0, "river", 200, 10
    path = tmp_path / "same.txt"
    path.write_text((" ".join([word] * length) + "\n") * copies)
    config = CorpusConfig(input=str(path), eta=eta, embeddings=table_path,
                          batch_size=16)
    pipeline.run(config, str(tmp_path / "out"))
    lines = _read_lines(tmp_path / "out" / "same.txt")
    assert len(lines) == copies
    assert len(set(lines)) >= 190  # equal lines have probability ~q^10
    index = {t: i for i, t in enumerate(tokenizer.vocabulary)}
    private = np.array([[index[w] for w in line.split()] for line in lines])
    assert private.shape == (copies, length)

    word_id = index[word]
    reference = offline.DChiCorpusPrivatizer(
        np.load(table_path), eta,
        special_token_ids=tokenizer.special_token_ids)(
            np.full(copies * length, word_id)).reshape(copies, length)
    n = copies * length
    kept, kept_ref = (private == word_id).sum(), (reference == word_id).sum()
    p = (kept + kept_ref) / (2 * n)
    assert 0.2 < p < 0.8
    assert abs(kept - kept_ref) <= 5 * np.sqrt(2 * n * p * (1 - p))

    def matches(ids, shift):
        """Agreements between line i and line i + shift at the same
        position, over disjoint pairs (independent under fresh noise)."""
        first = np.concatenate([ids[s:s + shift] for s in
                                range(0, copies, 2 * shift)])
        second = np.concatenate([ids[s + shift:s + 2 * shift] for s in
                                 range(0, copies, 2 * shift)])
        return (first == second).sum()

    pairs = n // 2
    for shift in (1, 100):  # neighbours in a batch; different batches
        got, ref = matches(private, shift), matches(reference, shift)
        q = (got + ref) / (2 * pairs)
        assert abs(got - ref) <= 5 * np.sqrt(2 * pairs * q * (1 - q)) + 1, \
            (shift, got, ref)


def _write_tfrecord(path, records):
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for features in records:
            example = tf.train.Example(features=tf.train.Features(feature={
                name: tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[value]))
                for name, value in features.items()}))
            writer.write(example.SerializeToString())


def test_tfrecord_input(tmp_path, tokenizer, table_path):
    texts = ["First review: loved it.", "", "Two\nlines in one record.",
             "The city at night."]
    path = tmp_path / "reviews.tfrecord"
    _write_tfrecord(path, [{"body": t.encode("utf-8"), "label": b"x"}
                           for t in texts])
    config = CorpusConfig(input=str(path), input_format="tfrecord",
                          tfrecord_feature="body", eta=HUGE_ETA,
                          embeddings=table_path)
    manifest = pipeline.run(config, str(tmp_path / "out"))
    assert manifest["inputs"][0]["output"] == "reviews.tfrecord.txt"
    assert manifest["tfrecord_feature"] == "body"
    lines = _read_lines(tmp_path / "out" / "reviews.tfrecord.txt")
    assert lines == _expected(tokenizer, texts)
    assert lines[2] == "two lines in one record ."

    # A record without the feature is refused, naming file and record.
    bad = tmp_path / "bad.tfrecord"
    _write_tfrecord(bad, [{"body": b"fine"}, {"text": b"no body"}])
    with pytest.raises(inputs.CorpusInputError,
                       match=r"bad\.tfrecord: record 2 has no feature "
                       "'body'"):
        pipeline.prepare(CorpusConfig(
            input=str(bad), input_format="tfrecord", tfrecord_feature="body",
            eta=1.0, embeddings=table_path), str(tmp_path / "out2"))


def test_input_lists_globs_and_output_names(tmp_path, monkeypatch):
    for name in ("b.txt", "a.txt", "sub/a.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n")
    monkeypatch.chdir(tmp_path)
    # Comma order kept, each glob sorted, repeats and directories left out.
    paths = inputs.expand("b.txt, *, sub/*.txt,a.txt")
    assert paths == [str(tmp_path / n) for n in ("b.txt", "a.txt",
                                                 "sub/a.txt")]
    # Two inputs named a.txt: every output gets its input's index.
    assert outdir.output_names(paths, "text") == [
        "00000-b.txt", "00001-a.txt", "00002-a.txt"]
    assert outdir.output_names(paths[:2], "tfrecord") == ["b.txt.txt",
                                                          "a.txt.txt"]
    assert outdir.output_names(["/d/manifest.json"], "text") == [
        "00000-manifest.json"]


def test_bad_inputs_are_refused_before_any_work(tmp_path, table_path):
    good = tmp_path / "good.txt"
    good.write_text("fine\n")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("ok\nna\xefve\n".encode("latin-1"))
    out = tmp_path / "out"

    def refused(spec, match, output=out):
        config = CorpusConfig(input=spec, eta=1.0, embeddings=table_path)
        with pytest.raises(TfdptextError, match=match):
            pipeline.prepare(config, str(output))
        assert not out.exists()

    refused(str(tmp_path / "missing.txt"), r"`input`: no such file .*"
            r"missing\.txt")
    refused(f"{good},{tmp_path}/*.tsv", r"`input`: the pattern .*\*\.tsv' "
            "matches no file")
    refused(str(tmp_path), "is a directory")
    refused(str(bad), r"latin1\.txt: line 2 is not UTF-8")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("keep")
    refused(str(good), r"`output_dir` .*taken is not empty", output=taken)
    assert (taken / "x").read_text() == "keep"


def test_bad_input_found_in_the_pipeline_fails_without_manifest(
        tmp_path, table_path):
    """A file that turns bad after the check (here: replaced by bytes
    that are not UTF-8) fails the job with an error naming it."""
    path = tmp_path / "texts.txt"
    path.write_text("one\ntwo\nthree\nfour\n")
    out = tmp_path / "out"
    config = CorpusConfig(input=str(path), eta=1.0, embeddings=table_path)
    checked = pipeline.prepare(config, str(out))
    path.write_bytes(b"one\ntwo\nth\xffree\nfour\n")
    with pytest.raises(TfdptextError, match=r"texts\.txt: line 3 is not "
                       "UTF-8.*holds no manifest.json"):
        pipeline.run(config, str(out), input_files=checked)
    assert not (out / outdir.MANIFEST).exists()


def test_brr_words_and_unknown_words(tmp_path):
    """BRR over a word list: known words survive a huge epsilon, unknown
    ones become the list's unknown token (or, without one, its first
    non-special word), never themselves."""
    from tfdptext.binary import codes as codes_lib

    words = ["<unk>", "the", "cat", "sat", "on", "mat", "."]
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2, (len(words), 64))
    codes_lib.save_codes(str(tmp_path / "codes"), words, bits)
    config = CorpusConfig(input="x.txt", mechanism="brr", epsilon=200.0,
                          codes=str(tmp_path / "codes")).validate()
    mechanism = mechanisms.build(config)
    assert mechanism.privatize_texts(["The cat sat on the zebra-mat.", ""]) \
        == ["the cat sat on the <unk> <unk> mat .", ""]
    assert mechanism.guarantee().randomness == "os_entropy"
    assert "<unk>" in mechanism.describe()["tokenization"]["unknown_words"]
    # A list without an unknown token (GloVe's): its first non-special word.
    codec = codecs.for_word_list(["[x]", "the", "cat"], special_token_ids=[0])
    assert codec.decode(codec.encode(["cat dog"])[0]) == "cat the"


@pytest.mark.parametrize("flags, named", [
    ("--mechanism=laplace --eta=1", "`mechanism` must be one of 'dchi', "
     "'brr'"),
    ("--eta=0", "`eta` must be finite and > 0"),
    ("--eta=inf", "`eta` must be finite and > 0"),
    ("--mechanism=dchi", "`eta` is required"),
    ("--mechanism=brr --epsilon=0 --codes=.", "`epsilon` must be finite "
     "and > 0"),
    ("--mechanism=brr --epsilon=1", "`codes` is required"),
    ("--eta=1 --epsilon=1", "`epsilon` does not apply"),
    ("--eta=1 --max_tokens=0", "`max_tokens` must be an integer >= 1"),
    ("--eta=1 --input_format=csv", "`input_format` must be one of"),
])
def test_program_flag_errors_exit_2(tmp_path, flags, named):
    (tmp_path / "in.txt").write_text("hello\n")
    out = tmp_path / "out"
    result = zygote.run(
        [sys.executable, PROGRAM, *flags.split(),
         f"--input={tmp_path / 'in.txt'}", f"--output_dir={out}"],
        capture_output=True, text=True, env=ENV, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [line for line in result.stderr.splitlines()
              if line.startswith("tfdptext-privatize-corpus: error:")]
    assert named in line
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_program_names_bad_input_files(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\nnot \xff utf-8\n")
    for spec, named in ((bad, "bad.txt: line 2 is not UTF-8"),
                        (tmp_path / "gone.txt", "`input`: no such file"),
                        (f"{tmp_path}/*.csv", "matches no file")):
        result = zygote.run(
            [sys.executable, PROGRAM, "--eta=1", f"--input={spec}",
             f"--output_dir={tmp_path / 'out'}"],
            capture_output=True, text=True, env=ENV, timeout=120)
        assert result.returncode == 2, result.stderr[-2000:]
        assert named in result.stderr.splitlines()[-1]
        assert not (tmp_path / "out").exists()


def test_program_with_the_default_encoder(tmp_path):
    """The program end to end with MiniLM's table, Beam options after
    `--`: a huge eta gives back the tokenized text."""
    (tmp_path / "in.txt").write_text("Hello, World!\n\nA quiet river.\n")
    out = tmp_path / "out"
    result = zygote.run(
        [sys.executable, PROGRAM, "--mechanism=dchi", f"--eta={HUGE_ETA}",
         f"--input={tmp_path / 'in.txt'}", f"--output_dir={out}", "--",
         "--runner=DirectRunner", "--direct_num_workers=1"],
        capture_output=True, text=True, env=ENV, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _read_lines(out / "in.txt") == ["hello , world !", "",
                                           "a quiet river ."]
    manifest = outdir.read_manifest(str(out))
    assert manifest["embedding_table"]["shape"] == [30522, 384]
    assert manifest["embedding_table"]["source"] == "preset minilm"
    assert manifest["pipeline_options"] == ["--runner=DirectRunner",
                                            "--direct_num_workers=1"]
    assert manifest["command"].startswith("tfdptext-privatize-corpus ")
    assert "eta = 1e+07" in result.stdout
