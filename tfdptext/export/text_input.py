"""A string-in phone model: TF Text's FastBertTokenizer in the graph.

The .tflite then needs the TF Text TFLite kernels in the app (custom ops,
registered with `tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS` in
ai-edge-litert's InterpreterWithCustomOps, or linked into an Android/iOS
build). The default phone model takes token ids instead and needs builtins
only. One sentence per call: ragged batching would need more custom ops.
"""

import keras
import tensorflow as tf

# Custom ops the TF Text tokenizer brings; anything else is refused.
TFTEXT_CUSTOM_OPS = ("FastBertNormalize", "FastWordpieceTokenizer",
                     "FastWordpieceTokenizeWithOffsets",
                     "FastWordpieceDetokenizer")
# The name of the StringToFeatures layer in `text_input_model`: the only
# layer of the string-in model that holds lookup tables.
TOKENIZER_LAYER = "tokenizer"


class StringToFeatures(keras.layers.Layer):
    """One UTF-8 string -> token_ids and padding_mask (1, max_length).

    Same normalisation as `tfdptext.data.TextTokenizer`: lowercase, NFD,
    accents stripped, WordPiece, [CLS] ... [SEP], truncation, [PAD].
    """

    def __init__(self, tokenizer, **kwargs):
        import tensorflow_text as tf_text

        super().__init__(**kwargs)
        if not (tokenizer.lowercase and tokenizer.strip_accents):
            raise ValueError("The in-graph tokenizer supports lowercased, "
                             "accent-stripped (uncased) vocabularies only.")
        self.max_length = tokenizer.max_length
        self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
        self.pad_id = tokenizer.pad_id
        self.fast = tf_text.FastBertTokenizer(
            vocab=tokenizer.vocabulary, token_out_type=tf.int32,
            lower_case_nfd_strip_accents=True, unknown_token="[UNK]")

    def call(self, text):
        length = self.max_length
        pieces = self.fast.tokenize(text).flat_values[:length - 2]
        ids = tf.concat([[self.cls_id], pieces, [self.sep_id]], axis=0)
        count = tf.shape(ids)[0]
        ids = tf.pad(ids, [[0, length - count]],
                     constant_values=self.pad_id)
        mask = tf.cast(tf.range(length) < count, tf.int32)
        return {"token_ids": tf.reshape(ids, [1, length]),
                "padding_mask": tf.reshape(mask, [1, length])}

    def compute_output_spec(self, text):
        # Two distinct tensors: one shared spec would wire both outputs to
        # the same graph node.
        shape = (1, self.max_length)
        return {"token_ids": keras.KerasTensor(shape, dtype="int32"),
                "padding_mask": keras.KerasTensor(shape, dtype="int32")}


def text_input_model(phone, tokenizer):
    """Wraps the ids-in phone model: inputs `text` (+ `random_words` if
    any)."""
    text = keras.Input((), batch_size=1, dtype="string", name="text")
    inputs = {"text": text}
    features = StringToFeatures(tokenizer, name=TOKENIZER_LAYER)(text)
    feed = dict(features)
    for name, tensor in phone.input.items():
        if name not in feed:
            inputs[name] = keras.Input(tensor.shape[1:], batch_size=1,
                                       dtype=tensor.dtype, name=name)
            feed[name] = inputs[name]
    return keras.Model(inputs, phone(feed), name="privatizer_text_in")
