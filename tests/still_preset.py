"""The tests' tiny encoder without dropout, its weights drawn from a fixed
seed, saved as a keras-hub preset with the MiniLM vocabulary.

An unseeded tiny encoder made how well a tiny run learns vary from one suite
run to the next; with these weights (and the run's own seed) the tests that
compare accuracies read the same numbers every time. The seed is scoped
(`tfdptext.seeding.scoped_seed`): no global seed is left behind for later
noise ops or exports in the same pytest worker.
"""

import os
import shutil


def save(path, seed):
    """Writes the seeded, dropout-free tiny encoder to `path`; returns it."""
    import keras_hub

    from tfdptext import models
    from tfdptext import seeding

    with seeding.scoped_seed(seed):
        keras_hub.models.BertBackbone(
            vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=64, dropout=0.0
        ).save_to_preset(path)
    shutil.copy(os.path.join(models.minilm_directory(), "vocab.txt"), path)
    return path
