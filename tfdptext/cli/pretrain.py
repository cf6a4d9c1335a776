"""Privacy-adaptive MLM pretraining (Qu et al. 2021, Sec. 3.4).

    tfdptext-pretrain --objective=denoising --mode=token_rep --eta=80 \\
        --corpus=ag_dpnr --data_dir=../shared/data/ag_dpnr \\
        --output_dir=runs/mlm_denoise_eta80
    tfdptext-train --mode=token_rep --eta=80 \\
        --preset=runs/mlm_denoise_eta80/preset --dataset=sst2 \\
        --data_dir=../shared/data/sst2 --output_dir=runs/sst2_token_rep_mlm

Continues masked-LM training of a keras-hub BERT backbone (default: the
installed MiniLM) on public text whose tokens are privatized on the fly by
the user-side mechanism that fine-tuning uses (--mode=token_rep: d_chi noise
on the frozen token embeddings; --mode=text_to_text: d_chi tokens); the
user-side token embedding is frozen. Objectives: vanilla (target = the
privatized token), probabilistic (target = the distribution of K
privatizations of the original token), denoising (target = the original
token). --mode=none is the clean-text baseline (no privatization, no
guarantee, no --eta):

    tfdptext-pretrain --mode=none --objective=vanilla --corpus=ag_dpnr \\
        --data_dir=../shared/data/ag_dpnr --steps=500 --max_length=64 \\
        --output_dir=runs/mlm_clean

The flags are the fields of tfdptext.pretraining.PretrainConfig, plus
--output_dir. Writes <output_dir>/preset (a keras-hub preset),
metrics.json (with the held-out curve, every --eval_every steps),
checkpoints (re-running the same command resumes after a kill) and
TensorBoard logs.
"""

from absl import flags

from tfdptext.cli import flags as cli_flags
from tfdptext.cli import program

FLAGS = flags.FLAGS
NAME = "tfdptext-pretrain"


def define_flags(flag_values=FLAGS):
    """Defines tfdptext-pretrain's flags in `flag_values`."""
    from tfdptext.pretraining import PretrainConfig

    cli_flags.define_flags(PretrainConfig, flag_values=flag_values)
    flags.DEFINE_string("output_dir", None, "Pretraining run directory.",
                        required=True, flag_values=flag_values)


def pretrain(argv):
    """The program: pretrains the configuration that the flags give."""
    del argv
    from tfdptext import pretraining

    config = cli_flags.build(pretraining.PretrainConfig)
    config.validate()
    from tfdptext.cli import quiet
    from tfdptext.privacy import headline

    def announce(guarantee):
        print("\n".join(headline.lines(guarantee)), flush=True)

    metrics = pretraining.pretrain(config, FLAGS.output_dir,
                                   verbose=quiet.progress_verbosity(),
                                   announce=announce)
    for when in ("start", "end"):
        held = metrics["heldout"][when]
        print(f"held-out at {when}: " + ", ".join(
            f"{k} {v:.4f}" for k, v in sorted(held.items())
            if isinstance(v, float)))
    curve = metrics["heldout"].get("curve", [])  # none before issue 21
    if curve:
        print("held-out masked-token accuracy by step: " + ", ".join(
            f"{p['step']}: {p['original_accuracy']:.3f}" for p in curve))
    print(metrics["guarantee_text"])
    print(f"Preset: {metrics['preset']}")


def main():
    """The console entry point of tfdptext-pretrain."""
    define_flags()
    program.run(NAME, __name__, pretrain)


if __name__ == "__main__":
    main()
