"""Bad arguments to the layers and the accounting get clear errors, never a
silently wrong release or an infinite number."""

import math

import numpy as np
import pytest

from tfdptext import layers
from tfdptext import privacy
from tfdptext import training


@pytest.mark.parametrize("make,width", [
    (lambda: layers.LaplaceNoise(1.0, sensitivity="vector"), 4),
    (lambda: layers.DChiNoise(5.0), 4),
    (lambda: layers.RandomizedResponse(1.0), 4),
])
def test_a_layer_reused_on_another_width_is_refused(make, width):
    layer = make()
    layer(np.random.rand(2, width).astype("float32"))
    with pytest.raises(ValueError, match="last dimension 4"):
        layer(np.random.rand(2, 400).astype("float32"))


@pytest.mark.parametrize("make", [
    lambda: layers.LaplaceNoise(1e-39),
    lambda: layers.DChiNoise(1e-39),
    lambda: training.TrainConfig(mode="robust", epsilon=1e-39).validate(),
    lambda: training.TrainConfig(mode="token_rep", eta=1e-39).validate(),
    lambda: privacy.laplace_scale(1e-320),
])
def test_parameters_whose_noise_overflows_float32_are_refused(make):
    with pytest.raises(ValueError, match="too small for float32"):
        make()


def test_vector_laplace_checks_the_scale_with_its_width():
    layer = layers.LaplaceNoise(1e-29, sensitivity="vector")
    with pytest.raises(ValueError, match="too small for float32"):
        layer(np.zeros((1, 384), "float32"))


def test_huge_epsilon_randomized_response_is_finite():
    layer = layers.RandomizedResponse(710.0)
    assert 0.0 <= layer.flip_probability < 1e-300
    bits = np.asarray(layer(np.ones((2, 8), "float32")))
    assert set(np.unique(bits)) <= {0.0, 1.0}
    assert math.isclose(privacy.flip_probability(1.0),
                        1 / (1 + math.e))


def test_sequence_distance_refuses_ids_outside_the_table():
    table = np.eye(3)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        privacy.sequence_distance(table, [0, -1], [1, 2])
    with pytest.raises(ValueError, match="token_ids_b"):
        privacy.sequence_distance(table, [0, 1], [1, 3])
