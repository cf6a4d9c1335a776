"""Building the split model a TrainConfig asks for."""

import keras
import numpy as np

from tfdptext import layers
from tfdptext import mechanisms
from tfdptext import models
from tfdptext.privacy import guarantee as guarantee_lib

# Output names of the adversarial training model (mode adv).
LABEL_OUTPUT = "label"
ADV_PREFIX = "adv_"
# Attacker heads: the same 2-layer MLP as the evaluation's eavesdropper
# (tfdptext.evaluation.attacker).
ADV_HIDDEN_UNITS = 512
ADV_CONDITIONS = (
    "adversarial training (ADV baseline, Lyu et al. 2020): the user side "
    "releases the clean representation, with no noise; gradient reversal "
    "only makes the trained attacker heads' private attributes harder to "
    "predict",
    "empirical privacy only: no differential privacy guarantee of any kind; "
    "a stronger or retrained attacker may still recover the attributes",
)


def build_split(config, backbone, tokenizer, num_classes, class_prior=None):
    """The SplitModel for `config.mode` (see tfdptext.models.split).

    - none: encoder + pooling on the user side, no privatization.
    - adv: the same split as none; `adversarial_model` adds the training-only
      attacker heads.
    - robust (DPNR): [WordDropout] -> encoder -> pool -> [Dense to
      `private_dim`] -> MinMaxNormalize -> LaplaceNoise (with normalization
      sigmoid: a sigmoid Dense projection, no min-max); everything trains,
      the noise stays in the graph.
    - seq_rep: the same release (Laplace, or DChiNoise on the pooled vector),
      user side frozen.
    - token_rep: token embedding + DChiNoise, frozen; server = the rest.
    - text_to_text: the layer of the registry entry `config.mechanism`
      (`tfdptext.mechanisms`: d_chi, BRR over `config.codes`, ...) on token
      ids, frozen; server = the whole model.
    - release code (modes none and robust): encoder -> pool -> dense to
      m logits -> argmax -> [CodeRandomizedResponse]; server = a
      code-to-class table, starting as the Bayes decoder for
      `class_prior` (the training labels' frequencies) and the grouping of
      `code_plan` (m and which classes share a code); trained through
      `split.training_model`, the table refitted by `split.calibrate`.
    """
    description = f"{config.preset} token embeddings"
    # Variable length: batches are trimmed to their longest text.
    common = dict(pooling=config.pooling, sequence_length=None)
    if config.release == "code":
        prior = (np.full(num_classes, 1.0 / num_classes)
                 if class_prior is None else np.asarray(class_prior))
        plan = code_plan(config, prior)
        privatizer = None
        if config.mechanism == "rr":
            privatizer = layers.CodeRandomizedResponse(config.epsilon,
                                                       plan.num_codes)
        split = models.code_split(backbone, num_classes, plan.num_codes,
                                  privatizer, class_prior=class_prior,
                                  groups=plan.groups, **common)
    elif config.mode in ("none", "adv", "robust", "seq_rep"):
        privatizers = []
        sigmoid = config.normalization == "sigmoid"
        if config.mechanism == "laplace":
            privatizers = [layers.LaplaceNoise(config.epsilon,
                                               config.sensitivity)]
            if not sigmoid:
                privatizers.insert(0, layers.MinMaxNormalize())
        elif config.mechanism == "dchi":
            privatizers = [layers.DChiNoise(
                config.eta,
                embedding_description=f"{config.preset} pooled sequence "
                "representations", vectors="sequences")]
        dropout = None
        if config.dropout_rate:
            dropout = layers.WordDropout(
                config.dropout_rate, tokenizer.mask_id,
                tokenizer.structural_token_ids)
        split = models.sequence_representation_split(
            backbone, num_classes, privatizers, input_dropout=dropout,
            projection_dim=config.private_dim,
            projection_activation="sigmoid" if sigmoid else None, **common)
    elif config.mode == "token_rep":
        split = models.token_representation_split(
            backbone, num_classes,
            layers.DChiNoise(config.eta, embedding_description=description),
            **common)
    else:
        entry = mechanisms.get(config.mechanism)
        privatizer = entry.layer(text_settings(entry, config, backbone,
                                               tokenizer))
        split = models.text_to_text_split(backbone, num_classes, privatizer,
                                          **common)
    if config.frozen_user_side:
        split.freeze_user_side()
    return split


def code_plan(config, prior):
    """The code release's CodeGrouping (`tfdptext.privacy.identification`)
    for `config` and the training labels' class frequencies `prior`:
    --num_codes=auto reads m and the grouping off the best LDP channel for
    the prior at --epsilon (mode none, no channel: m = K); a number m is
    used as given (m < K: the m most frequent classes own a code each,
    the others share the most frequent one's; m >= K: code c starts as
    class c mod K). The `accuracy` is a perfect code head's through the
    channel that runs, `bound` the theorem for the prior."""
    from tfdptext.privacy import categorical
    from tfdptext.privacy import identification
    from tfdptext.training.config import AUTO_CODES

    prior = np.asarray(prior, np.float64)
    num_classes = len(prior)

    def transition(m):
        if config.mechanism != "rr":
            return np.eye(m)
        return categorical.transition_matrix(config.epsilon, m)

    if config.num_codes == AUTO_CODES and config.mechanism == "rr":
        return identification.code_grouping(prior, config.epsilon,
                                            transition)
    m = num_classes if config.num_codes in (None, AUTO_CODES) \
        else int(config.num_codes)
    groups = None if m >= num_classes else \
        identification.top_m_grouping(prior, m)
    from tfdptext.models import code as code_lib

    sent = code_lib.code_assignment(m, prior, groups)
    joint = prior[:, None] * (sent @ transition(m))
    bound = (identification.identification_limit(prior, config.epsilon)
             if config.mechanism == "rr" else 1.0)
    return identification.CodeGrouping(
        m, None if groups is None else tuple(int(g) for g in groups),
        float(joint.max(axis=0).sum()), bound,
        "given" if config.num_codes not in (None, AUTO_CODES) else "default")


def text_settings(entry, config, backbone, tokenizer):
    """The `tfdptext.mechanisms.Settings` of a text_to_text run: the
    preset's token embedding table, or (an entry that reads codes)
    `config.codes`, which must hold one code per token id of the
    tokenizer's vocabulary, in its order."""
    if entry.table == mechanisms.CODES:
        from tfdptext import binary

        codes = binary.load_codes(config.codes, tokenizer.vocabulary,
                                  f"preset {config.preset}")
        table = codes.bits
        description = (f"{codes.num_bits}-bit codes of {config.preset} "
                       f"token embeddings ({config.codes})")
    else:
        table = models.token_embedding_table(backbone)
        description = f"{config.preset} token embeddings"
    return mechanisms.Settings(
        value=getattr(config, entry.parameter),
        options=entry.parse_options(config.mechanism_options), table=table,
        special_token_ids=tokenizer.special_token_ids,
        passthrough_token_ids=tokenizer.passthrough_token_ids,
        description=description, vocabulary=tuple(tokenizer.vocabulary))


def adv_output_name(attribute):
    """The training model's output (and target) name for an attribute."""
    return ADV_PREFIX + attribute


def adversarial_model(split, attributes, adv_lambda,
                      hidden_units=ADV_HIDDEN_UNITS):
    """The mode-adv training model around `split` (from mode none).

    Outputs {"label": task logits, "adv_<attribute>": attacker logits...}:
    each attacker head (Dense(relu) -> Dense) reads the user side's release
    (the pooled representation) through a `GradientReversal(adv_lambda)`,
    so training on the sum of the losses fits the heads to the private
    attributes while the encoder is pushed to remove them. The heads exist only in this
    model: `split.user` and `split.server` are unchanged and share its
    weights.

    Args:
        split: a SplitModel from `build_split` for mode none or adv (no
            privatization layer: the heads sit on the clean representation).
        attributes: {attribute name: number of its classes}.
        adv_lambda: the gradient-reversal weight (> 0).
    """
    if split.privatizer is not None:
        raise ValueError("Adversarial heads go on a non-private split "
                         "(mode none/adv), this one has a privatizer.")
    if not attributes:
        raise ValueError("`attributes` must name at least one private "
                         "attribute for the attacker heads.")
    inputs = split.model.input
    released = split.user(inputs)  # a dict keyed by the release names
    outputs = {LABEL_OUTPUT: split.server(released)}
    reversed_ = models.GradientReversal(adv_lambda, name="gradient_reversal")(
        split.release_of(released))
    for name, num_classes in attributes.items():
        out = adv_output_name(name)
        x = keras.layers.Dense(hidden_units, activation="relu",
                               name=f"{out}_hidden")(reversed_)
        outputs[out] = keras.layers.Dense(int(num_classes),
                                          name=f"{out}_logits")(x)
    return keras.Model(inputs, outputs, name="adversarial_classifier")


def run_guarantee(config, split, max_tokens=None):
    """What the user side of a run releases, stated for split.json and
    metrics.json. Mode adv states "none" with why (empirical privacy only)."""
    if config.mode == "adv":
        return guarantee_lib.Guarantee(
            mechanism="adversarial_training", parameter="none", value=None,
            unit=guarantee_lib.NO_PRIVACY, conditions=ADV_CONDITIONS,
            details={"adv_lambda": config.adv_lambda})
    return split.guarantee(max_tokens=max_tokens)
