"""Building the split model a TrainConfig asks for."""

from tfdptext import layers
from tfdptext import models


def build_split(config, backbone, tokenizer, num_classes):
    """The SplitModel for `config.mode` (see tfdptext.models.split).

    - none: encoder + pooling on the user side, no privatization.
    - robust (DPNR): [WordDropout] -> encoder -> pool -> MinMaxNormalize ->
      LaplaceNoise; everything trains, the noise stays in the graph.
    - seq_rep: the same release (Laplace, or DChiNoise on the pooled vector),
      user side frozen.
    - token_rep: token embedding + DChiNoise, frozen; server = the rest.
    - text_to_text: DChiTextPrivatizer on token ids, frozen; server = the
      whole model.
    """
    description = f"{config.preset} token embeddings"
    # Variable length: batches are trimmed to their longest text.
    common = dict(pooling=config.pooling, sequence_length=None)
    if config.mode in ("none", "robust", "seq_rep"):
        privatizers = []
        if config.mechanism == "laplace":
            privatizers = [layers.MinMaxNormalize(),
                           layers.LaplaceNoise(config.epsilon,
                                               config.sensitivity)]
        elif config.mechanism == "dchi":
            privatizers = [layers.DChiNoise(
                config.eta,
                embedding_description=f"{config.preset} pooled sequence "
                "representations")]
        dropout = None
        if config.dropout_rate:
            dropout = layers.WordDropout(
                config.dropout_rate, tokenizer.mask_id,
                tokenizer.structural_token_ids)
        split = models.sequence_representation_split(
            backbone, num_classes, privatizers, input_dropout=dropout,
            **common)
    elif config.mode == "token_rep":
        split = models.token_representation_split(
            backbone, num_classes,
            layers.DChiNoise(config.eta, embedding_description=description),
            **common)
    else:
        privatizer = layers.DChiTextPrivatizer(
            config.eta, models.token_embedding_table(backbone),
            special_token_ids=tokenizer.special_token_ids,
            embedding_description=description)
        split = models.text_to_text_split(backbone, num_classes, privatizer,
                                          **common)
    if config.frozen_user_side:
        split.freeze_user_side()
    return split
