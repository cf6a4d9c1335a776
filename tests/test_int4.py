"""4-bit weights (`tfdptext.export.int4`): the pure functions against closed
forms. The rewrite of a .tflite is tested on an export in
tests/test_export.py, and in the browser in tests/test_web.py."""

import numpy as np
import pytest

from tfdptext.export import int4


def test_pack_unpack_round_trip_and_layout():
    values = np.arange(-8, 8, dtype=np.int8)
    packed = int4.pack(values)
    assert packed.dtype == np.uint8 and packed.size == 8
    # The first value in the low nibble: -8 = 0x8, -7 = 0x9 -> 0x98.
    assert packed[0] == 0x98 and packed[-1] == 0x76
    np.testing.assert_array_equal(int4.unpack(packed, 16), values)
    odd = np.array([[3, -1, 7]], np.int8)  # padded with a 0 nibble
    np.testing.assert_array_equal(int4.pack(odd), [0xF3, 0x07])
    np.testing.assert_array_equal(int4.unpack(int4.pack(odd), 3), [3, -1, 7])
    rng = np.random.default_rng(0)
    many = rng.integers(-8, 8, size=(37, 11)).astype(np.int8)
    np.testing.assert_array_equal(
        int4.unpack(int4.pack(many), many.size).reshape(many.shape), many)
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        int4.pack(np.array([8]))
    with pytest.raises(ValueError, match="`count`"):
        int4.unpack(packed, 17)


def test_quantize_rows_scale_and_error_bound():
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((64, 48)) * rng.uniform(0.01, 3, (64, 1))
         ).astype(np.float32)
    w[5] = 0.0  # an all-zero row
    q, scale = int4.quantize_rows(w)
    assert q.dtype == np.int8 and scale.dtype == np.float32
    assert q.min() >= -int4.QMAX and q.max() <= int4.QMAX
    peak = np.abs(w).max(axis=1)
    expected = np.where(peak > 0, peak / 7, 1.0).astype(np.float32)
    np.testing.assert_array_equal(scale, expected)
    # Each row's largest weight maps to +-7 exactly, with its sign.
    rows = np.arange(64) != 5
    top = np.abs(w).argmax(axis=1)
    np.testing.assert_array_equal(np.abs(q[rows, top[rows]]), 7)
    np.testing.assert_array_equal(np.sign(q[rows, top[rows]]),
                                  np.sign(w[rows, top[rows]]))
    np.testing.assert_array_equal(q[5], 0)
    back = int4.dequantize_rows(q, scale)
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, scale[:, None] * q.astype(np.float32))
    error = np.abs(back.astype(np.float64) - w)
    bound = scale.astype(np.float64)[:, None] / 2
    assert (error <= bound * (1 + 1e-6) + 1e-12).all()
    # The bound is tight: some weight in most rows moves by nearly s / 2.
    assert np.median((error / bound)[rows].max(axis=1)) > 0.9
    # Rounding to nearest: no other value of [-7, 7] is closer.
    grid = np.arange(-7, 8)[None, None, :] * scale.astype(np.float64)[
        :, None, None]
    nearest = np.abs(grid - w[..., None]).min(axis=-1)
    np.testing.assert_allclose(error, nearest, atol=1e-6)
    with pytest.raises(ValueError, match="2-d"):
        int4.quantize_rows(np.ones(3))
    with pytest.raises(ValueError, match="NaN"):
        int4.quantize_rows(np.array([[np.nan, 1.0]]))
