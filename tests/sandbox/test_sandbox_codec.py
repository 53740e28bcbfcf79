"""Result framing (child -> host): round trips and hostile frames, in-process (no child)."""

from __future__ import annotations

import io
import json
import math
import struct

import numpy as np
import pandas as pd
import pytest

from quantgym.sandbox._codec import MAGIC, FrameError, decode_frame, encode_frame


def roundtrip(value):
    return decode_frame(encode_frame({"status": "ok", "message": "ok"}, value))["value"]


def _frame(header: dict, arrays: list[bytes]) -> bytes:
    h = json.dumps(header).encode()
    parts = [MAGIC, struct.pack(">Q", len(h)), h, struct.pack(">Q", len(arrays))]
    for a in arrays:
        parts += [struct.pack(">Q", len(a)), a]
    return b"".join(parts)


def _npy(a: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=allow_pickle)
    return buf.getvalue()


def test_scalars_lists_dicts_and_non_finite_floats_round_trip():
    v = roundtrip({"a": [1, 2.5, None, True, "x"], 7: float("nan"), None: -math.inf, "t": (1, 2)})
    assert v["a"] == [1, 2.5, None, True, "x"]
    assert math.isnan(v[7]) and v[None] == -math.inf and v["t"] == [1, 2]


def test_arrays_keep_dtype_and_shape():
    for a in (np.arange(6, dtype=np.int8).reshape(2, 3), np.array([True, False]), np.array([1 + 2j]),
              np.array(["2024-01-02"], dtype="datetime64[ns]"), np.array(["ab", "c"]), np.float32(1.5) * np.ones(3)):
        b = roundtrip(a)
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(a, b)


def test_object_string_arrays_become_unicode_and_other_objects_are_refused():
    np.testing.assert_array_equal(roundtrip(np.array(["a", "bc"], dtype=object)), np.array(["a", "bc"]))
    with pytest.raises(FrameError, match="object dtype"):
        encode_frame({}, np.array([{"x": 1}], dtype=object))


def test_series_and_frame_with_string_index():
    s = pd.Series([1.0, 2.0], index=pd.Index(["A", "B"], name="sym"), name="score")
    t = roundtrip(s)
    pd.testing.assert_series_equal(t, s, check_index_type=False)
    df = pd.DataFrame({"x": [1, 2], "y": ["u", "v"]}, index=["a", "b"])
    u = roundtrip(df)
    assert list(u.columns) == ["x", "y"] and u["y"].tolist() == ["u", "v"] and u["x"].tolist() == [1, 2]


def test_nullable_and_categorical_values():
    s = pd.Series(pd.array([1, None, 3], dtype="Int64"))
    t = roundtrip(s)
    assert t.dtype == np.float64 and np.isnan(t.iloc[1])
    c = roundtrip(pd.Series(pd.Categorical(["a", "b", "a"])))
    assert c.tolist() == ["a", "b", "a"]


def test_unsupported_types_are_refused():
    class X:
        pass

    for bad in (X(), {1, 2}, {(1, 2): 3}, b"bytes", np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")])):
        with pytest.raises(FrameError):
            encode_frame({}, bad)


def test_deep_nesting_is_refused():
    v: list = []
    for _ in range(200):
        v = [v]
    with pytest.raises(FrameError, match="nested"):
        encode_frame({}, v)


def test_hostile_frames_are_refused():
    good = encode_frame({"status": "ok"}, np.arange(3))
    with pytest.raises(FrameError, match="magic"):
        decode_frame(b"X" * len(good))
    with pytest.raises(FrameError, match="truncated"):
        decode_frame(good[:-5])
    with pytest.raises(FrameError, match="trailing"):
        decode_frame(good + b"\0")
    # pickled object array: np.load(allow_pickle=False) must refuse it, no code runs
    pickled = _npy(np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(FrameError, match="malformed"):
        decode_frame(_frame({"value": {"$": "nd", "i": 0}}, [pickled]))
    # dangling and out-of-range references
    with pytest.raises(FrameError, match="out of range"):
        decode_frame(_frame({"value": {"$": "nd", "i": 3}}, [_npy(np.arange(2))]))
    # inconsistent series
    bad = {"$": "series", "index": {"$": "index", "values": {"$": "nd", "i": 0}, "name": None, "tz": None},
           "values": {"$": "nd", "i": 1}, "name": None}
    with pytest.raises(FrameError, match="lengths differ"):
        decode_frame(_frame({"value": bad}, [_npy(np.arange(2)), _npy(np.arange(3.0))]))
    with pytest.raises(FrameError, match="unknown tag"):
        decode_frame(_frame({"value": {"$": "evil"}}, []))
    with pytest.raises(FrameError, match="not valid JSON"):
        h = b"{not json"
        decode_frame(MAGIC + struct.pack(">Q", len(h)) + h + struct.pack(">Q", 0))
