"""Training runs whose Keras fit runs its steps eagerly.

For tests that train a run to get what it exports, not to test fit's
traced graph: tests/test_training.py trains every mode with the graph as
the product runs it. Tracing fit's training and validation steps costs
more than a few eager steps (a 1-epoch, 64-example token_rep run on the
tiny preset: 10.6 CPU-s traced, 6.0 eager, measured in one process on the
shared 2-core machine); at eight steps an epoch the two cost about the
same. The run's code path is otherwise the same (the model compiled as
the product does, then Keras' `run_eagerly`).

Example:
>>> with eager_training.eager_fit():
...     training.train(config, out, dataset=corpus, verbose=0)
"""

import contextlib

import pytest

from tfdptext.training import trainer


@contextlib.contextmanager
def eager_fit():
    """Within it, `training.train` compiles its model with
    `run_eagerly=True` (everything else as the product does)."""
    compile_model = trainer._compile

    def compile_eagerly(model, *args, **kwargs):
        schedule = compile_model(model, *args, **kwargs)
        model.run_eagerly = True
        return schedule

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trainer, "_compile", compile_eagerly)
        yield
