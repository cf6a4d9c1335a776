"""The math that the token-substitution mechanisms' Keras layers
(`tfdptext.layers`) and offline privatizers (`tfdptext.offline`) share.

Each module is written once against `backend` (numpy float64 off device,
TensorFlow float32 with TFLite builtins in the layers), so a layer and its
offline twin compute the same function; their guarantees state the
precision each runs in. `race`: float-safe sampling of exponential
mechanisms. The registry that names the mechanisms is
`tfdptext.mechanisms`.
"""
