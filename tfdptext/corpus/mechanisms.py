"""The mechanisms a corpus job can run: a `MechanismSpec` per entry of
the text-to-text registry (`tfdptext.mechanisms`).

Each entry says which `CorpusConfig` fields it needs and which do not
apply (checked before any work, with the mechanism's value and option
checks), and builds a `CorpusMechanism`: a codec (text <-> ids,
`tfdptext.corpus.codecs`) and the entry's offline privatizer
(`tfdptext.offline`), with `__call__(token_ids) -> token_ids` and
`guarantee()`. Noise comes from os.urandom for every call: these jobs take
no seed, so no two lines share noise.

- Mechanisms over token embeddings (`dchi`, ...): the preset's token
  embedding table (or --embeddings) and its WordPiece tokenizer.
- Mechanisms over binary codes (`brr`): the codes of
  `tfdptext.binary.codes.load_codes(codes)`, tokenized with the codes'
  vocabulary (`tfdptext.corpus.codecs.for_word_list`: WordPiece for a
  preset's vocabulary, whole words otherwise); imported when built, so
  that a tfdptext without them says so.

Example:
>>> config = CorpusConfig(input="texts.txt", mechanism="dchi", eta=100.0)
>>> mechanism = build(config.validate())
>>> mechanism.privatize_texts(["A private sentence."])
['a private sentence .']
"""

import dataclasses
import functools
import hashlib
import os
import threading
import time
from typing import Callable

import numpy as np

from tfdptext import mechanisms as text_mechanisms
from tfdptext.errors import ArgumentError
from tfdptext.errors import TfdptextError
from tfdptext.privacy import validation


LINE_CONDITION = (
    "corpus release: one output line per input line, each token of a line "
    "privatized independently (lines longer than max_tokens in pieces, "
    "none dropped), so the number of lines and each line's token count are "
    "released")


class MechanismUnavailableError(TfdptextError):
    """The mechanism is registered but this tfdptext cannot run it."""


class CorpusMechanism:
    """Privatizes texts: encode, privatize the ids, decode.

    Args:
        name: the registry name.
        codec: text <-> ids (`tfdptext.corpus.codecs`).
        privatizer: token ids -> token ids, with `guarantee()`; fresh
            noise on every call.
        embedding: what the manifest records about the table or codes.
    """

    def __init__(self, name, codec, privatizer, embedding):
        self.name = name
        self.codec = codec
        self.privatizer = privatizer
        self.embedding = embedding

    def guarantee(self):
        """The privatizer's guarantee, with what a line-per-line release
        adds: each line's token count is public."""
        guarantee = self.privatizer.guarantee()
        if not guarantee.is_private:
            return guarantee
        return dataclasses.replace(guarantee, conditions=(
            *guarantee.conditions, LINE_CONDITION))

    def privatize(self, sequences):
        """Privatizes each 1-D token-id array; one privatizer call for all
        of them (each token draws its own noise)."""
        sequences = [np.asarray(s, dtype=np.int64).reshape(-1)
                     for s in sequences]
        if not sequences:
            return []
        flat = np.concatenate(sequences)
        if not flat.size:
            return [s.copy() for s in sequences]
        private = np.asarray(self.privatizer(flat))
        return np.split(private, np.cumsum([len(s) for s in sequences])[:-1])

    def privatize_texts(self, texts, max_tokens=512, batch_size=64,
                        counts=None):
        """One private line per text, in order.

        A text of more than `max_tokens` tokens is split into consecutive
        pieces of at most `max_tokens`, every piece privatized and the
        outputs joined in order; the privatizer is called on at most
        `batch_size` pieces at a time. `counts` (a dict), when given, is
        incremented with "tokens" and "split_lines".
        """
        max_tokens = validation.check_int("max_tokens", max_tokens)
        batch_size = validation.check_int("batch_size", batch_size)
        encoded = self.codec.encode(list(texts))
        pieces, owners = [], []
        for line, ids in enumerate(encoded):
            for start in range(0, len(ids), max_tokens):
                pieces.append(ids[start:start + max_tokens])
                owners.append(line)
        private = []
        for start in range(0, len(pieces), batch_size):
            private += self.privatize(pieces[start:start + batch_size])
        joined = [[] for _ in encoded]
        for line, ids in zip(owners, private):
            joined[line].append(ids)
        if counts is not None:
            counts["tokens"] = counts.get("tokens", 0) + sum(
                len(ids) for ids in encoded)
            counts["split_lines"] = counts.get("split_lines", 0) + sum(
                len(ids) > max_tokens for ids in encoded)
        # " ".join(split()): no line break can reach the output.
        return [" ".join(self.codec.decode(np.concatenate(parts)).split())
                if parts else "" for parts in joined]

    def describe(self):
        """The mechanism's tokenization and table, for the manifest."""
        return {"tokenization": self.codec.describe(),
                "embedding_table": dict(self.embedding)}


@dataclasses.dataclass(frozen=True)
class MechanismSpec:
    """One registry entry.

    Args:
        name: the --mechanism value.
        parameter: the privacy parameter's field ("eta", "epsilon").
        required: CorpusConfig fields that must be given.
        excluded: fields that do not apply (an error if given).
        build: CorpusConfig -> CorpusMechanism.
        parameters: CorpusConfig -> the manifest's "parameters".
        entry: the `tfdptext.mechanisms` entry (its value and option
            checks).
    """

    name: str
    parameter: str
    required: tuple
    excluded: tuple
    build: Callable
    parameters: Callable
    entry: object = None

    def check(self, config):
        """Raises ArgumentError naming a missing or foreign field, a
        privacy parameter out of range, or a missing codes directory or
        embeddings file."""
        takes = ", ".join("--" + name for name in self.required)
        for name in self.required:
            if getattr(config, name) is None:
                raise ArgumentError(f"`{name}` is required with mechanism "
                                    f"{self.name!r} (it takes {takes}).")
        for name in self.excluded:
            if getattr(config, name) is not None:
                raise ArgumentError(f"`{name}` does not apply to mechanism "
                                    f"{self.name!r} (it takes {takes}).")
        if self.entry is not None:
            self.entry.value(getattr(config, self.parameter))
            self.entry.parse_options(config.mechanism_options)
        else:
            validation.check_positive(self.parameter,
                                      getattr(config, self.parameter))
        for name, exists, kind in (("codes", os.path.isdir, "directory"),
                                   ("embeddings", os.path.isfile, "file")):
            path = getattr(config, name)
            if path is not None and not exists(path):
                raise ArgumentError(f"`{name}`: no such {kind} {path!r}.")


def _table_record(table, description, source):
    return {"description": description, "source": source,
            "shape": list(table.shape),
            "sha256": hashlib.sha256(np.ascontiguousarray(
                table, dtype=np.float32).tobytes()).hexdigest()}


def load_embeddings(path, vocabulary_size):
    """The (vocabulary_size, dim) float table in the .npy file `path`;
    ArgumentError naming `embeddings` when it is not one."""
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ArgumentError(f"`embeddings`: {path} is not a .npy array "
                            f"({err}).") from None
    if table.ndim != 2 or table.shape[0] != vocabulary_size or \
            not np.issubdtype(table.dtype, np.floating) or \
            not np.isfinite(table).all():
        raise ArgumentError(
            f"`embeddings`: {path} must hold a finite float table of shape "
            f"({vocabulary_size}, dim) (one row per vocabulary token), "
            f"found {table.dtype} {table.shape}.")
    return table


def _build(entry, config):
    """A CorpusMechanism for the registry entry `entry`: its offline
    privatizer over the preset's token embeddings (or --embeddings) with
    the preset's WordPiece tokenizer, or over --codes with the codes' word
    list."""
    from tfdptext.corpus import codecs

    options = entry.parse_options(config.mechanism_options)
    value = getattr(config, entry.parameter)
    if entry.table == text_mechanisms.CODES:
        codes, packed = _load_codes(entry, config)
        name = os.path.basename(os.path.normpath(config.codes))
        description = (f"the binary codes in {name} ({packed.shape[0]} "
                       f"words x {8 * packed.shape[1]} bits)")
        settings = text_mechanisms.Settings(
            value, options, codes.bits, codes.special_token_ids, (),
            description, tuple(codes.words))
        embedding = {
            "description": description, "source": config.codes,
            "shape": [packed.shape[0], 8 * packed.shape[1]],
            "sha256": hashlib.sha256(packed.tobytes()).hexdigest()}
        codec = codecs.for_word_list(codes.words, codes.special_token_ids)
    else:
        from tfdptext import models

        tokenizer = models.load_tokenizer(config.preset)
        preset = config.preset or models.DEFAULT_PRESET
        if config.embeddings is not None:
            table = load_embeddings(config.embeddings,
                                    tokenizer.vocabulary_size)
            description = (
                f"the table in {os.path.basename(config.embeddings)} "
                f"({table.shape[0]} x {table.shape[1]})")
            source = config.embeddings
        else:
            table = models.token_embedding_table(models.load_backbone(
                config.preset))
            description = (f"{preset} token embeddings ({table.shape[0]} x "
                           f"{table.shape[1]})")
            source = f"preset {preset}"
        settings = text_mechanisms.Settings(
            value, options, table, tokenizer.special_token_ids, (),
            description, tuple(tokenizer.vocabulary))
        embedding = _table_record(table, description, source)
        codec = codecs.WordPieceCodec(tokenizer)
    privatizer = entry.offline(settings, seed=None)
    return CorpusMechanism(entry.name, codec, privatizer, embedding)


def _load_codes(entry, config):
    try:
        from tfdptext.binary.codes import load_codes
        from tfdptext.offline import BRRCorpusPrivatizer  # noqa: F401
    except ImportError as err:
        if err.name not in ("tfdptext.binary", "tfdptext.binary.codes",
                            "tfdptext.offline"):
            raise
        raise MechanismUnavailableError(
            f"`mechanism`: {entry.name!r} is not available yet in this "
            "tfdptext (tfdptext.offline.BRRCorpusPrivatizer and "
            "tfdptext.binary.codes.load_codes are missing); use "
            "--mechanism=dchi.") from None
    codes = load_codes(config.codes)
    return codes, np.asarray(codes.packed)


def _parameters(entry, config):
    """The manifest's "parameters": the privacy parameter, the table's
    source, and the mechanism's options."""
    parameters = {entry.parameter: float(getattr(config, entry.parameter))}
    if entry.table == text_mechanisms.CODES:
        parameters["codes"] = config.codes
    else:
        from tfdptext import models

        parameters.update(preset=config.preset or models.DEFAULT_PRESET,
                          embeddings=config.embeddings)
    if entry.options:
        parameters["mechanism_options"] = entry.parse_options(
            config.mechanism_options)
    return parameters


def _corpus_spec(entry):
    """The corpus job's entry for a registered text-to-text mechanism."""
    other = "epsilon" if entry.parameter == "eta" else "eta"
    if entry.table == text_mechanisms.CODES:
        required = (entry.parameter, "codes")
        excluded = (other, "preset", "embeddings")
    else:
        required = (entry.parameter,)
        excluded = (other, "codes")
    return MechanismSpec(
        entry.name, entry.parameter, required=required, excluded=excluded,
        build=functools.partial(_build, entry),
        parameters=functools.partial(_parameters, entry),
        entry=entry)


MECHANISMS = {name: _corpus_spec(entry)
              for name, entry in text_mechanisms.REGISTRY.items()}


def spec(name):
    """The registry entry `name`; ArgumentError naming `mechanism` when
    there is none."""
    if name not in MECHANISMS:
        raise ArgumentError(
            f"`mechanism` must be one of "
            f"{', '.join(repr(m) for m in MECHANISMS)}; received {name!r}.")
    return MECHANISMS[name]


_BUILD_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def _build_once(config):
    start = time.perf_counter()
    mechanism = spec(config.mechanism).build(config)
    mechanism.load_seconds = time.perf_counter() - start
    return mechanism


def build(config):
    """The CorpusMechanism of a validated CorpusConfig, built once per
    process however many threads and DoFn instances ask for it (a worker's
    DoFns and, in one process, the job's pre-flight share it; it holds no
    noise state, and its privatizer's caches outlive bundles). Its
    `load_seconds` is how long the build took."""
    with _BUILD_LOCK:
        return _build_once(config)


def builds():
    """How many mechanisms this process has built (tables loaded)."""
    return _build_once.cache_info().misses
