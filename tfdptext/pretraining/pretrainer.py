"""`pretrain`: privacy-adaptive MLM pretraining into an output directory.

The one entry a program needs: it validates the config and the output
directory before any work (every usage problem is a
`tfdptext.errors.TfdptextError`), resumes an interrupted run from its last
checkpoint, and writes the directory described in
`tfdptext.pretraining.layout`: a keras-hub preset that `tfdptext-train
--preset=<output_dir>/preset` fine-tunes, and metrics.json last.
"""

import hashlib
import math
import os
import platform
import time

import keras
import numpy as np
import tensorflow as tf

from tfdptext import data as data_lib
from tfdptext import models
from tfdptext import seeding
from tfdptext.errors import TfdptextError
from tfdptext.models import saving_cache
from tfdptext.pretraining import layout
from tfdptext.pretraining import masking
from tfdptext.pretraining import objectives
from tfdptext.pretraining.config import NONE
from tfdptext.pretraining.config import PROBABILISTIC
from tfdptext.pretraining.config import PretrainConfig
from tfdptext.pretraining.model import MLM_HEAD
from tfdptext.pretraining.model import build_mlm
from tfdptext.pretraining.optimizer import HeadRateAdamW
from tfdptext.training import devices
from tfdptext.training import prebuild
from tfdptext.training.callbacks import Throughput
from tfdptext.training.schedules import WarmupDecay
from tfdptext.version import __version__

GUARANTEE_SCOPE = (
    "the user-side mechanism the encoder was adapted to: fine-tuning "
    "(tfdptext-train --preset=<this preset> with the same mode and eta) "
    "releases user text under this guarantee. Pretraining itself reads "
    "public text only and releases nothing.")
NO_GUARANTEE_SCOPE = (
    "none: a clean-text baseline, adapted to no mechanism. Pretraining "
    "reads public text only and releases nothing; a model fine-tuned from "
    "this preset releases what its own --mode releases, with that mode's "
    "guarantee.")


class PretrainError(TfdptextError):
    """Pretraining cannot start or produced no usable encoder; the message
    says why and what to change."""


def pretrain(config, output_dir, *, verbose=1, callbacks=(),
             announce=None):
    """Pretrains `config` into `output_dir`; resumes a killed run there.

    Args:
        config: a PretrainConfig (validated here; `batch_size` None takes
            the device's default: 32 on CPU, 128 on a GPU).
        output_dir: the run's directory (see tfdptext.pretraining.layout).
        verbose: 0 silent; 1 progress bars (2: a line per epoch, for a
            file) and a line per checkpoint and evaluation.
        callbacks: extra Keras callbacks for each fit call.
        announce: if given, `announce(guarantee)` is called once the model
            is built and before the first step, with the guarantee of the
            mechanism the encoder is adapted to (the program prints its
            epsilon per text first, as tfdptext-train does).

    Returns:
        The metrics dict (also metrics.json).

    Raises:
        TfdptextError (ArgumentError, PretrainDirectoryError, DataError,
        EncoderNotFoundError, PretrainError) for every usage problem,
        before anything is written.
    """
    gpu = devices.gpu_available()
    if not isinstance(config, PretrainConfig):
        raise PretrainError(f"`config` must be a PretrainConfig, received "
                            f"{type(config).__name__}.")
    if config.batch_size is None:
        config.batch_size = devices.default_batch_size(gpu)
    config.validate()
    run = layout.PretrainDir(output_dir)
    state = run.state(config.identity(), config.steps, _identity_of)
    if state == layout.FINISHED:
        run.remove(layout.CHECKPOINT)
        if verbose:
            print(f"{output_dir}: this run has already finished "
                  f"({layout.METRICS} is there); nothing to do. Remove the "
                  "directory to pretrain again.")
        return run.read(layout.METRICS)
    texts = load_corpus(config)
    with devices.precision_policy(devices.policy_for(gpu)):
        return _Session(config, run, texts, gpu=gpu, verbose=verbose,
                        callbacks=callbacks, announce=announce).run(
                            resume=state == layout.RESUME)


def _identity_of(data):
    return PretrainConfig.from_dict(data).identity()


def load_corpus(config):
    """{"train": texts, "heldout": texts, "name": ...} of the corpus: its
    training split (the first `max_examples`) and the first
    `heldout_examples` of its dev split; labels are ignored. Raises
    DataError (naming the file or dataset) when it cannot be read."""
    dataset = data_lib.load_dataset(config.corpus, data_dir=config.data_dir,
                                    **config.dataset_options())
    train = list(dataset.splits["train"].texts)
    if config.max_examples:
        train = train[:config.max_examples]
    heldout = list(dataset.splits["dev"].texts)[:config.heldout_examples]
    if len(train) < config.batch_size:
        raise data_lib.DataError(
            f"Corpus {config.corpus!r} has {len(train)} training texts, "
            f"fewer than one batch (`batch_size` {config.batch_size}); "
            "lower --batch_size or use a larger corpus.")
    return {"train": train, "heldout": heldout, "name": dataset.name}


def check_encoder(config, backbone, tokenizer):
    """Raises PretrainError when the encoder cannot take the config's
    sequences or does not match its vocabulary."""
    longest = getattr(backbone, "max_sequence_length", None)
    if longest is not None and config.max_length > longest:
        raise PretrainError(
            f"`max_length` {config.max_length} exceeds the encoder's "
            f"max_sequence_length {longest} (preset {config.preset!r}); "
            f"use --max_length <= {longest}.")
    if backbone.vocabulary_size != tokenizer.vocabulary_size:
        raise PretrainError(
            f"The encoder of preset {config.preset!r} has a vocabulary of "
            f"{backbone.vocabulary_size} tokens, its vocabulary file "
            f"{tokenizer.vocabulary_size}; the preset is inconsistent.")


def table_digest(backbone):
    """SHA-256 of the token embedding table (the user side's weights)."""
    table = models.token_embedding_table(backbone)
    return hashlib.sha256(np.ascontiguousarray(table).tobytes()).hexdigest()


def save_preset(backbone, tokenizer, directory):
    """Saves `backbone` as a keras-hub preset in `directory`, with the
    tokenizer (keras-hub's BertTokenizer files, and vocab.txt, which
    `tfdptext.models.load_tokenizer` reads). Weights are saved in float32
    whatever policy the backbone was trained under."""
    import keras_hub

    if backbone.dtype_policy.name != "float32":
        copy = type(backbone).from_config(
            {**backbone.get_config(), "dtype": "float32"})
        copy.set_weights(backbone.get_weights())
        backbone = copy
    backbone.save_to_preset(directory)
    keras_hub.models.BertTokenizer(
        vocabulary=list(tokenizer.vocabulary),
        lowercase=tokenizer.lowercase,
        strip_accents=tokenizer.strip_accents).save_to_preset(directory)
    tokenizer.save_vocabulary(os.path.join(directory, layout.PRESET_VOCAB))


def _versions():
    import keras_hub

    return {"tfdptext": __version__, "tensorflow": tf.__version__,
            "keras": keras.__version__, "keras_hub": keras_hub.__version__,
            "python": platform.python_version()}


def _heldout_result(logs):
    """The evaluate() dict as held-out metrics (floats)."""
    return {"mlm_loss": float(logs["loss"]),
            "target_accuracy": float(logs["target_accuracy"]),
            "original_accuracy": float(logs["original_accuracy"])}


def epoch_steps(config):
    """The optimizer steps of a Keras epoch of a session's fit: the greatest
    common divisor of `checkpoint_every` and `eval_every`, so that every
    checkpoint and held-out evaluation falls at an epoch's end (at most
    `steps`: the last epoch ends at `steps` in any case)."""
    return min(math.gcd(config.checkpoint_every, config.eval_every),
               config.steps)


def _next_multiple(step, every):
    return (step // every + 1) * every


def is_eval_step(step, config):
    """Whether the held-out curve has a point after `step` steps: at 0,
    every `eval_every` steps and at the last step."""
    return step % config.eval_every == 0 or step == config.steps


class _Session:
    """One process's part of a run: build, resume, train, export."""

    def __init__(self, config, run, texts, *, gpu, verbose, callbacks,
                 announce=None):
        self.config = config
        self.announce = announce
        self.run_dir = run
        self.texts = texts
        self.gpu = gpu
        self.verbose = verbose
        self.extra_callbacks = list(callbacks)

    def run(self, resume):
        """The whole session; returns the metrics."""
        saving_cache.cache_skipsets()  # cheaper saves and loads
        self._build()
        if self.announce is not None:
            self.announce(self.model.guarantee())
        if not resume:
            for name in (layout.LOGS, layout.CHECKPOINT, layout.START_EVAL,
                         layout.HELDOUT_CURVE):
                self.run_dir.remove(name)
        self.run_dir.write(layout.CONFIG, self.config.to_dict())
        digest = table_digest(self.backbone)  # the source preset's table
        self.writer = tf.summary.create_file_writer(os.path.join(
            self.run_dir.file(layout.LOGS), layout.HELDOUT_LOGS))
        step = self._restore()
        start = self._start_evaluation()
        self.curve = self.run_dir.read_curve(up_to_step=step)
        if not self.curve:
            self._record({"step": 0, **start})
        if is_eval_step(step, self.config) and self.curve[-1]["step"] < step:
            self._evaluate(step)  # killed between checkpoint and evaluation
        wall, throughput, steps_run = self._train(step)
        if table_digest(self.backbone) != digest:
            raise PretrainError(
                "The user-side token embedding changed during pretraining; "
                "it must stay frozen (the phone keeps the original table). "
                "This is a bug: report it.")
        end = {k: v for k, v in self.curve[-1].items() if k != "step"}
        preset = self.run_dir.write_preset(
            lambda d: save_preset(self.backbone, self.tokenizer, d))
        metrics = self._metrics(start=start, end=end, wall=wall,
                                throughput=throughput, steps_run=steps_run,
                                preset=preset, digest=digest)
        self.run_dir.write(layout.METRICS, metrics)
        self.run_dir.remove(layout.CHECKPOINT)  # finished: not needed
        if self.verbose:
            print(f"Pretrained encoder: {preset} (held-out MLM loss "
                  f"{start['mlm_loss']:.3f} -> {end['mlm_loss']:.3f}, "
                  f"original-token accuracy {start['original_accuracy']:.3f}"
                  f" -> {end['original_accuracy']:.3f}).")
        return metrics

    def _build(self):
        """Tokenizer, encoder, model (seeded head, never seeded noise),
        optimizer and held-out batches."""
        config = self.config
        with seeding.scoped_seed(config.seed):
            self.tokenizer = models.load_tokenizer(config.preset,
                                                   config.max_length)
            self.backbone = models.load_backbone(config.preset)
            check_encoder(config, self.backbone, self.tokenizer)
            self.model = build_mlm(config, self.backbone, self.tokenizer)
        # Traced without a seed: masks differ at every iteration.
        self.encode = masking.batch_encoder(self.tokenizer, masking.masker_for(
            self.tokenizer, mask_rate=config.mask_rate,
            max_predictions=config.max_predictions))
        self.heldout = masking.heldout_batches(
            self.texts["heldout"], self.tokenizer,
            mask_rate=config.mask_rate,
            max_predictions=config.max_predictions,
            batch_size=config.batch_size, seed=config.seed)
        # Traced here, outside the seed below.
        first = self.encode(tf.constant(
            self.texts["train"][:config.batch_size]))
        with seeding.scoped_seed(config.seed):
            self.model(first)  # creates the (seeded) weights
        warmup = int(round(config.warmup_fraction * config.steps))
        self.model.compile(
            optimizer=HeadRateAdamW(
                WarmupDecay(config.learning_rate, total_steps=config.steps,
                            warmup_steps=warmup, decay="linear"),
                head_name=MLM_HEAD,
                head_rate_multiplier=config.head_rate_multiplier),
            jit_compile=False)
        self.model.optimizer.build(self.model.trainable_variables)

    def _restore(self):
        """Loads the checkpoint (weights and optimizer state) if there is
        one; returns the steps already done."""
        saved = self.run_dir.read_checkpoint()
        if saved is None:
            return 0
        step, weights = saved
        try:
            self.model.load_weights(weights)
        except Exception as err:  # noqa: BLE001 (Keras raises several)
            raise layout.PretrainDirectoryError(
                f"{weights} does not fit this run's model ({err}); remove "
                f"{self.run_dir.file(layout.CHECKPOINT)} to restart from "
                "step 0.") from None
        if self.verbose:
            print(f"Resuming {self.run_dir.path} after step {step} of "
                  f"{self.config.steps}.")
        return step

    def _start_evaluation(self):
        """Held-out metrics before training (kept across a resume)."""
        if self.run_dir.exists(layout.START_EVAL):
            return self.run_dir.read(layout.START_EVAL)
        start = _heldout_result(self.model.evaluate(
            self.heldout, verbose=0, return_dict=True))
        self.run_dir.write(layout.START_EVAL, start)
        if self.verbose:
            print(f"Held-out before training ({len(self.texts['heldout'])} "
                  f"texts): MLM loss {start['mlm_loss']:.3f}, original-token "
                  f"accuracy {start['original_accuracy']:.3f}.")
        return start

    def _evaluate(self, step):
        """Evaluates on the held-out texts after `step` steps and records
        the point."""
        point = {"step": step, **_heldout_result(self.model.evaluate(
            self.heldout, verbose=0, return_dict=True))}
        self._record(point)
        if self.verbose:
            print(f"step {step}/{self.config.steps}: held-out MLM loss "
                  f"{point['mlm_loss']:.3f}, original-token accuracy "
                  f"{point['original_accuracy']:.3f}.")

    def _record(self, point):
        """Appends a held-out point to the curve: heldout_curve.json and
        TensorBoard."""
        self.curve.append(point)
        self.run_dir.write(layout.HELDOUT_CURVE, {"points": self.curve})
        with self.writer.as_default(step=point["step"]):
            for name, value in point.items():
                if name != "step":
                    tf.summary.scalar(f"heldout_{name}", value)
        self.writer.flush()

    def _train(self, step):
        """Trains from `step` to `config.steps`, a checkpoint every
        `checkpoint_every` steps, a held-out evaluation every `eval_every`
        steps and after the last. Returns (training seconds, examples per
        second, steps run).

        One fit and one iterator of the masked batches for the whole
        session, its Keras epochs `epoch_steps` long: a new iterator
        instantiates the tokenizer's and the masking's graphs again (about
        1 CPU-s each time). A resumed run whose checkpoint is off that grid
        (--checkpoint_every or --eval_every changed) first trains up to the
        grid in a fit of its own."""
        config = self.config
        throughput = Throughput(config.batch_size)
        steps = _SessionSteps(self, step)
        # The session's own first: its work at an epoch's start runs before
        # the other callbacks hear of the epoch.
        callbacks = [steps, keras.callbacks.TensorBoard(
            self.run_dir.file(layout.LOGS), write_graph=False),
            throughput, *self.extra_callbacks]
        first, wall, length = step, 0.0, epoch_steps(config)
        while step < config.steps:
            batches = masking.training_batches(
                self.texts["train"], self.encode,
                batch_size=config.batch_size, seed=config.seed,
                skip_steps=step)
            epoch = step // length
            if step % length:  # off the grid: up to it
                per_epoch = min(_next_multiple(step, length),
                                config.steps) - step
                epochs = epoch + 1
            else:
                per_epoch, epochs = length, -(-config.steps // length)
            # One trace of the step, not two (a no-op once built).
            prebuild.build_before_fit(self.model, batches)
            started = time.perf_counter()
            # The batches shuffle themselves (masking.training_batches);
            # Keras' own shuffle does not apply to a tf.data.Dataset.
            self.model.fit(batches, steps_per_epoch=per_epoch,
                           initial_epoch=epoch, epochs=epochs,
                           callbacks=callbacks, verbose=self.verbose,
                           shuffle=False)
            wall += time.perf_counter() - started - steps.pop_seconds()
            step = steps.step
        return wall, throughput.examples_per_second, step - first

    def _after_epoch(self, step):
        """The checkpoint and the held-out evaluation due after `step`
        steps, if any."""
        config = self.config
        if step % config.checkpoint_every == 0 or step == config.steps:
            self.run_dir.save_checkpoint(self.model, step)
            if self.verbose:
                print(f"step {step}/{config.steps}: checkpoint saved.")
        if is_eval_step(step, config):
            self._evaluate(step)

    def _metrics(self, *, start, end, wall, throughput, steps_run, preset,
                 digest):
        config = self.config
        guarantee = self.model.guarantee()
        clean = config.mode == NONE
        return {
            "objective": config.objective,
            "objective_target": objectives.get(config.objective).predicts,
            "num_privatizations": (config.num_privatizations
                                   if config.objective == PROBABILISTIC
                                   else None),
            "mode": config.mode,
            "mechanism": NONE if clean else "dchi",
            "eta": config.eta,
            "guarantee": guarantee.to_dict(),
            "guarantee_text": str(guarantee),
            "guarantee_scope": (NO_GUARANTEE_SCOPE if clean
                                else GUARANTEE_SCOPE),
            "corpus": self.texts["name"],
            "texts": {"train": len(self.texts["train"]),
                      "heldout": len(self.texts["heldout"])},
            "steps": config.steps,
            "optimizer_steps": int(self.model.optimizer.iterations.numpy()),
            "steps_run_this_session": steps_run,
            "batch_size": config.batch_size,
            "max_length": config.max_length,
            "mask_rate": config.mask_rate,
            "max_predictions": config.max_predictions,
            "examples_per_second": throughput,
            "train_seconds_this_session": wall,
            "heldout": {"start": start, "end": end,
                        "eval_every": config.eval_every,
                        "curve": self.curve},
            "source_preset": config.preset,
            "preset": os.path.abspath(preset),
            "user_side_table_sha256": digest,
            "device": "GPU" if self.gpu else "CPU",
            "mixed_precision": devices.policy_for(self.gpu) is not None,
            "versions": _versions(),
        }


class _SessionSteps(keras.callbacks.Callback):
    """A session's steps inside its fit: counts them, ends the fit at
    `config.steps`, and after each epoch runs the session's checkpoint and
    held-out evaluation (`_Session._after_epoch`).

    That work runs as the next epoch starts, or as the fit ends: after
    every callback's end of the epoch (Keras' progress bar finishes its
    line first), before any batch of the next. Keras resets the metrics
    before an epoch starts and the evaluation fills them with its own, so
    they are reset again after it.
    """

    def __init__(self, session, step):
        super().__init__()
        self.session = session
        self.step = step
        self._due = False
        self._seconds = 0.0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step >= self.session.config.steps:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self._due = True

    def on_epoch_begin(self, epoch, logs=None):
        if self._flush():
            self.model.reset_metrics()

    def on_train_end(self, logs=None):
        self._flush()

    def _flush(self):
        if not self._due:
            return False
        self._due = False
        started = time.perf_counter()
        self.session._after_epoch(self.step)
        self._seconds += time.perf_counter() - started
        return True

    def pop_seconds(self):
        """Seconds spent on checkpoints and evaluations since the last
        call."""
        seconds, self._seconds = self._seconds, 0.0
        return seconds
