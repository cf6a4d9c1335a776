"""Writes the device package `.gpu/` (issue 37; `make gpu-package`).

The GPU machine's image has Python 3.12 and jax but no TensorFlow, keras or
keras-hub, and a call carries at most 64 MiB. The package holds what the
call needs beside the checkout, at most `LIMIT_BYTES`:

- `wheels/`: keras, keras-hub and what they import that the image lacks,
  for cp312 manylinux (`pip download --no-deps --only-binary=:all:`), at
  the versions of this venv;
- `encoder/`: MiniLM in float16 (`tfdptext.models.portable_encoder`; 46 MB
  instead of 91), with the measured effect of the rounding;
- `data/`: SST-2 (train, dev, test) and AG (DPNR's subset: train as the
  pretraining corpus, heldout) as token ids (`tfdptext.training.portable.
  save_ids`, tokenized here with TensorFlow Text) and `vocab.json`;
- `run.sh` (a copy of benchmarks/gpu_run.sh): the whole device command;
- `manifest.json`: every file's SHA-256 and size, the versions, the
  rounding's effect. It is also written to RECORD (committed), so the
  numbers in the docs come from a committed JSON.

Run: python benchmarks/gpu_package.py [--out=.gpu] [--skip_wheels]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import machine  # noqa: E402

LIMIT_BYTES = 60 * 2**20
RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                      "gpu_package.json")
# What keras and keras-hub import that the image may lack (the image has
# numpy, scipy, h5py, ml-dtypes, absl-py, safetensors); pure Python except
# optree and regex.
WHEELS = ("keras", "keras-hub", "optree", "namex", "rich", "markdown-it-py",
          "mdurl", "pygments", "regex", "packaging")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
MAX_LENGTH = 64
EFFECT_TEXTS = 64
EFFECT_ETA = 81.0
EFFECT_DRAWS = 2000


def download_wheels(directory):
    """The cp312 manylinux wheels of WHEELS at this venv's versions."""
    os.makedirs(directory, exist_ok=True)
    pins = [f"{name}=={metadata.version(name)}" for name in WHEELS]
    command = [sys.executable, "-m", "pip", "download", "--quiet",
               "--no-deps", "--only-binary=:all:", "--python-version",
               "3.12", "--implementation", "cp", "-d", directory]
    for platform_tag in PLATFORMS:
        command += ["--platform", platform_tag]
    subprocess.run(command + pins, check=True)
    return pins


def tokenize_splits(dataset, tokenizer, splits):
    """{split: arrays} of a TextDataset's splits, tokenized."""
    result = {}
    for name, split in splits.items():
        examples = dataset.splits[split]
        features = tokenizer(list(examples.texts))
        result[name] = {k: np.asarray(v) for k, v in features.items()}
        result[name]["labels"] = np.asarray(examples.labels, np.int32)
    return result


def write_data(directory, tokenizer, data_root):
    from tfdptext import data as data_lib
    from tfdptext.training import portable

    os.makedirs(directory, exist_ok=True)
    sst2 = data_lib.load_dataset("sst2", os.path.join(data_root, "sst2"))
    portable.save_ids(os.path.join(directory, "sst2_ids.npz"),
                      tokenize_splits(sst2, tokenizer, {
                          "train": "train", "dev": "dev", "test": "test"}))
    ag = data_lib.load_dataset("ag_dpnr", os.path.join(data_root, "ag_dpnr"))
    portable.save_ids(os.path.join(directory, "ag_ids.npz"),
                      tokenize_splits(ag, tokenizer, {
                          "train": "train", "heldout": "dev"}))
    vocab = {"mask_id": int(tokenizer.mask_id),
             "pad_id": int(tokenizer.pad_id),
             "special_token_ids": sorted(int(i) for i in
                                         tokenizer.special_token_ids),
             "passthrough_token_ids": sorted(
                 int(i) for i in tokenizer.passthrough_token_ids),
             "vocabulary_size": int(tokenizer.vocabulary_size),
             "max_length": MAX_LENGTH}
    with open(os.path.join(directory, "vocab.json"), "w") as f:
        json.dump(vocab, f, indent=1)
    return sst2


def write_encoder(directory, tokenizer, sst2):
    """The float16 encoder and the measured effect of the rounding."""
    from tfdptext import models
    from tfdptext.models import portable_encoder

    backbone = models.load_backbone()
    hashes = portable_encoder.save_encoder(backbone, directory, "float16")
    rounded = portable_encoder.load_encoder(directory)
    features = tokenizer(list(sst2.splits["test"].texts[:EFFECT_TEXTS]))
    special = set(int(i) for i in tokenizer.special_token_ids)
    candidates = [i for i in range(tokenizer.vocabulary_size)
                  if i not in special]
    effect = portable_encoder.rounding_effect(
        backbone, rounded, features, eta=EFFECT_ETA, draws=EFFECT_DRAWS,
        candidate_ids=candidates)
    effect["texts"] = EFFECT_TEXTS
    return hashes, effect


def _files(root):
    for base, _, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(base, name)
            yield os.path.relpath(path, root), path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=".gpu")
    parser.add_argument("--data_root", default="../shared/data")
    parser.add_argument("--skip_wheels", action="store_true",
                        help="no pip download (tests)")
    args = parser.parse_args(argv)
    from tfdptext import models
    from tfdptext.runfiles import sha256_file

    started = time.time()
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    pins = [] if args.skip_wheels else download_wheels(
        os.path.join(args.out, "wheels"))
    tokenizer = models.load_tokenizer(max_length=MAX_LENGTH)
    sst2 = write_data(os.path.join(args.out, "data"), tokenizer,
                      args.data_root)
    hashes, effect = write_encoder(os.path.join(args.out, "encoder"),
                                   tokenizer, sst2)
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "gpu_run.sh"), os.path.join(args.out, "run.sh"))
    files = {rel: {"bytes": os.path.getsize(path),
                   "sha256": sha256_file(path)}
             for rel, path in _files(args.out)}
    total = sum(f["bytes"] for f in files.values())
    manifest = {
        "command": "python benchmarks/gpu_package.py " + " ".join(
            argv if argv is not None else sys.argv[1:]),
        "machine": machine.cpu_name(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.time() - started, 1),
        "wheels": pins, "encoder_dtype": "float16",
        "encoder_sha256": hashes, "float16_effect": effect,
        "max_length": MAX_LENGTH, "total_bytes": total,
        "limit_bytes": LIMIT_BYTES, "files": files,
    }
    if total > LIMIT_BYTES:
        shutil.rmtree(args.out)
        raise SystemExit(f"The package would be {total} bytes, over the "
                         f"limit {LIMIT_BYTES}: nothing written.")
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    if not args.skip_wheels:
        machine.write_json(RECORD, manifest)
    print(f"{args.out}: {total / 2**20:.1f} MiB; float16 effect {effect}")


if __name__ == "__main__":
    main()
