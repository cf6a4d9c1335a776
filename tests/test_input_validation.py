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
    # Integer thresholds: a bit flips with probability at least 2^-24
    # (the keep threshold is at most 2^24 - 1), and the guarantee states
    # that epsilon, ln(2^24 - 1) = 16.6, not 710.
    layer = layers.RandomizedResponse(710.0)
    assert layer.flip_probability == 2.0**-24
    with pytest.warns(UserWarning, match=r"16\.6355, is below the 710"):
        stated = layer.guarantee().value
    assert stated == pytest.approx(math.log(2**24 - 1))
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


# --- Loaders: errors name the file and the line. ---------------------------

def _write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str)
                     else content)
    return str(path)


def _load(train, test=None, **kwargs):
    from tfdptext.data import local_files

    return local_files.load_files(train, test or train, **kwargs)


ROWS = "".join(f"text number {i},{i % 2}\n" for i in range(20))


def test_a_utf8_bom_is_not_part_of_the_header(tmp_path):
    path = _write(tmp_path, "bom.csv", "\ufefftext,label\n" + ROWS)
    assert len(_load(path).splits["train"]) == 18


@pytest.mark.parametrize("content,message", [
    ("", r"bad\.csv: the file is empty"),
    ("text,label\n", r"bad\.csv: no examples"),
    ('text,label\nok,1\n"opened,0\nrow three,1\nclosed",0\n' + ROWS,
     r"bad\.csv:3: a quoted field opened on line 3 closes on line 5"),
    ('text,label\n' + ROWS + '"never closed,1\n',
     r"bad\.csv:22: 1 columns.*never closed"),
    ("text,label\na,0\nb,1\nc,0\nd,1\n", r"too few to split off a dev"),
    ("text,label\n" + "".join(f"t{i},{7 * (i % 2)}\n" for i in range(20)),
     r"labels are \[0, 7\].*missing \[1, 2, 3, 4, 5, 6\]"),
])
def test_bad_csv_files_get_a_clear_error(tmp_path, content, message):
    from tfdptext.data import DataError

    path = _write(tmp_path, "bad.csv", content)
    with pytest.raises(DataError, match=message):
        _load(path)


def test_a_long_field_is_read(tmp_path):
    long_text = "word " * 60000  # 300 KB
    path = _write(tmp_path, "long.csv",
                  f"text,label\n{long_text},1\n" + ROWS)
    data = _load(path, dev_fraction=0.1)
    assert max(len(t) for t in data.splits["train"].texts
               + data.splits["dev"].texts) == len(long_text)


def test_layers_refuse_strings_and_ids_outside_the_table():
    table = np.random.default_rng(0).normal(size=(10, 4)).astype("float32")
    privatizer = layers.DChiTextPrivatizer(5.0, table, special_token_ids=[0])
    with pytest.raises(ValueError, match=r"token ids in \[0, 10\)"):
        privatizer(np.array([[1, 2, 99]]))
    with pytest.raises(ValueError, match="must be integer token ids"):
        privatizer(np.array([[1.5, 2.0]], "float32"))
    with pytest.raises(ValueError, match="must be numbers"):
        layers.LaplaceNoise(1.0)(np.array([["a", "b"]]))
    # In a graph (a phone model) the ids outside the table come out -1.
    import tensorflow as tf

    graph = tf.function(privatizer)
    out = graph(tf.constant([[1, 2, 99, -3]])).numpy()
    assert out[0, 2] == -1 and out[0, 3] == -1 and (out[0, :2] >= 0).all()


def test_guarantee_from_dict_names_missing_keys():
    from tfdptext.privacy import Guarantee

    with pytest.raises(ValueError, match=r"missing keys \['mechanism'"):
        Guarantee.from_dict({})
    with pytest.raises(ValueError, match="unknown keys"):
        Guarantee.from_dict({"mechanism": "x", "parameter": "none",
                             "value": None, "unit": "none", "colour": 1})


def test_sweep_grid_typos_and_repeats_are_refused():
    from tfdptext.evaluation import sweep

    with pytest.raises(ValueError, match="'epsilom' is not a training"):
        sweep.parse_grid(["epsilom=1,2"])
    with pytest.raises(ValueError, match="repeats a value"):
        sweep.parse_grid(["epsilon=1,1.0"])
    assert sweep.parse_grid(["epsilon=1,2", "mode=robust"]) == [
        {"epsilon": 1, "mode": "robust"}, {"epsilon": 2, "mode": "robust"}]


def test_csv_dataset_from_a_data_dir(tmp_path):
    from tfdptext import data

    for split in ("train", "test"):
        _write(tmp_path, f"{split}.csv", "text,label\n" + ROWS)
    loaded = data.load_dataset("csv", data_dir=str(tmp_path))
    assert loaded.num_classes == 2 and len(loaded.splits["test"]) == 20
    with pytest.raises(data.DataError, match="train.tsv and test.tsv"):
        data.load_dataset("tsv", data_dir=str(tmp_path))


def test_evaluation_refuses_a_data_set_with_other_classes():
    import types

    from tfdptext.evaluation import evaluate

    run = types.SimpleNamespace(
        model_dir="runs/x",
        server=types.SimpleNamespace(
            output=types.SimpleNamespace(shape=(None, 2))))
    four = types.SimpleNamespace(name="four", num_classes=4)
    with pytest.raises(evaluate.EvaluationError, match="predicts 2 classes"):
        evaluate.check_classes(run, four)
    evaluate.check_classes(run, types.SimpleNamespace(name="two",
                                                      num_classes=2))
