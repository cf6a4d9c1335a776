#!/usr/bin/env python
"""Share of tokens that d_chi text-to-text leaves unchanged, per eta.

Used to choose an eta grid for an encoder: MiniLM's 384-d embeddings have a
different scale than BERT-base's 768-d ones, so the papers' eta values do not
transfer. Tokens: the first --num_sentences of the dataset's train split,
regular tokens only (special tokens pass through and are not counted).

    python benchmarks/dchi_unchanged_share.py --dataset=sst2 \
        --data_dir=../shared/data/sst2 --eta=25 --eta=50 ...
"""

import datetime
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app
from absl import flags
from absl import logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("dataset", "sst2", "Dataset name.")
flags.DEFINE_string("data_dir", "../shared/data/sst2", "Dataset directory.")
flags.DEFINE_string("preset", "minilm", "Encoder preset.")
flags.DEFINE_integer("num_sentences", 2000, "Sentences from train.")
flags.DEFINE_multi_float("eta", [20, 30, 40, 50, 60, 70, 80, 100, 120, 150],
                         "eta values.")
flags.DEFINE_integer("seed", None, "Noise seed (None: fresh entropy).")
flags.DEFINE_string("table_name", None, "Also write the docs' table record "
                    "of this name (benchmarks/results/<name>.json).")


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    import numpy as np

    from tfdptext import data, models, offline

    dataset = data.load_dataset(FLAGS.dataset, data_dir=FLAGS.data_dir)
    tokenizer = models.load_tokenizer(FLAGS.preset, max_length=128)
    table = models.token_embedding_table(models.load_backbone(FLAGS.preset))
    texts = dataset.splits["train"].texts[:FLAGS.num_sentences]
    ids = tokenizer(texts)["token_ids"].numpy().ravel()
    ids = ids[~np.isin(ids, tokenizer.special_token_ids)]
    print(f"{FLAGS.dataset}: {len(texts)} sentences, {len(ids):,} regular "
          f"tokens; {FLAGS.preset} embeddings {table.shape}; "
          f"{datetime.date.today().isoformat()}")
    print("| eta | unchanged share | E||noise|| = n/eta |")
    print("|---|---|---|")
    shares = {}
    for eta in FLAGS.eta:
        privatizer = offline.DChiCorpusPrivatizer(
            table, eta, tokenizer.special_token_ids, seed=FLAGS.seed)
        share = float((privatizer(ids) == ids).mean())
        shares[f"{eta:g}"] = share
        print(f"| {eta:g} | {share:.3f} | {table.shape[1] / eta:.2f} |")
    result = {"dataset": FLAGS.dataset, "sentences": len(texts),
              "tokens": int(len(ids)), "preset": FLAGS.preset,
              "unchanged_share": shares}
    if FLAGS.table_name:
        docs_table = {"columns": ["eta", "unchanged share",
                                  "E\u2016noise\u2016 = n/eta"],
                      "rows": [[f"{eta:g}", f"{shares[f'{eta:g}']:.3f}",
                                f"{table.shape[1] / eta:.2f}"]
                               for eta in FLAGS.eta]}
        machine.write_json(None, result, name=FLAGS.table_name,
                           table=docs_table)
    else:
        machine.write_json(None, result)


if __name__ == "__main__":
    app.run(main)
