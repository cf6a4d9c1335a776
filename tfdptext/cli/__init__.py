"""The tfdptext programs, as console entry points (declared in setup.py).

- `tfdptext-train` (`tfdptext.cli.train`): trains a split classifier; its
  flags are the fields of `tfdptext.training.TrainConfig`.
- `tfdptext-demo` (`tfdptext.cli.demo`): every mechanism, a small training
  run and its export, on embedded defaults.
- `tfdptext-eval` (`tfdptext.cli.evaluate`): evaluates a trained run.
- `tfdptext-sweep` (`tfdptext.cli.sweep`): trains and evaluates over a grid.
- `tfdptext-audit` (`tfdptext.cli.audit`): empirical lower bounds on
  epsilon for the mechanisms.
- `tfdptext-export` (`tfdptext.cli.export`): a run as a TFLite phone model
  and a TF Serving model.
- `tfdptext-predict` (`tfdptext.cli.predict`): runs an export locally.

Each module's `main()` defines its flags and runs the program with absl
(`tfdptext.cli.program`); `python -m tfdptext.cli.<module>` runs it too.
A `tfdptext.errors.TfdptextError` ends a program with a one-line usage
error (exit status 2); any other exception keeps its traceback.
`tfdptext.cli.flags` derives flags from the library's dataclasses.

Importing this package picks Keras' TensorFlow backend unless
KERAS_BACKEND says otherwise.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
