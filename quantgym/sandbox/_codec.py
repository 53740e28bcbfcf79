"""Safe result framing for the child -> host direction (never pickle).

Frame layout (all lengths unsigned 64-bit big-endian)::

    MAGIC (8 bytes) | len(header) | header (UTF-8 JSON) | n_arrays | (len(npy_i) | npy_i) * n

The JSON header is an envelope ``{"status", "message", "traceback", "value", ...}`` whose
``value`` is a tree of JSON scalars/lists and tagged objects ``{"$": tag, ...}``:

========  ==========================================================================
tag       meaning
========  ==========================================================================
dict      ``{"$": "dict", "k": [keys], "v": [values]}`` (keys: str/int/float/bool/None)
nd        numpy array ``{"$": "nd", "i": array index}`` (dtype kinds ``b i u f c m M U``)
scalar    numpy scalar, same as ``nd`` with a 0-d array
index     pandas Index ``{"values": nd, "name": v, "tz": str|None}``
mindex    pandas MultiIndex ``{"arrays": [nd...], "names": [...]}``
series    pandas Series ``{"index": index, "values": nd, "name": v}``
frame     pandas DataFrame ``{"index": index, "columns": index, "data": [nd...]}``
ts        pandas Timestamp / datetime ``{"v": isoformat}``
date      datetime.date ``{"v": isoformat}``
========  ==========================================================================

Tuples become lists. Arrays are written with ``np.save(allow_pickle=False)`` and read with
``np.load(allow_pickle=False)``, so decoding never executes code. The host decoder checks every
index, dtype, length and the total size, and raises :class:`FrameError` on anything else.
"""

from __future__ import annotations

import io
import json
import math
import struct
from typing import Any

MAGIC = b"QGSBOX1\n"
_ALLOWED_KINDS = set("biufcmMU")
_MAX_DEPTH = 64


class FrameError(Exception):
    """The result cannot be encoded or decoded safely (maps to status ``bad_output``)."""


# --------------------------------------------------------------------------- child: encoding
class _Encoder:
    def __init__(self) -> None:
        self.arrays: list[bytes] = []

    def _array(self, arr: Any, what: str) -> dict:
        import numpy as np

        a = np.asarray(arr)
        if a.dtype.kind == "O":
            flat = a.ravel().tolist()
            if all(type(x) is str for x in flat):
                a = np.array(flat, dtype=str).reshape(a.shape) if flat else np.zeros(a.shape, dtype="U1")
            elif all(type(x) in (float, int) for x in flat) and flat:
                a = np.array(flat, dtype=float).reshape(a.shape)
            else:
                kinds = sorted({type(x).__name__ for x in flat[:1000]})
                raise FrameError(f"{what} has object dtype with non-string elements ({', '.join(kinds)})")
        if a.dtype.kind not in _ALLOWED_KINDS or a.dtype.fields is not None:
            raise FrameError(f"{what} has unsupported dtype {a.dtype} (allowed: bool, numeric, datetime, str)")
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(a) if a.ndim else a, allow_pickle=False)
        self.arrays.append(buf.getvalue())
        return {"$": "nd", "i": len(self.arrays) - 1}

    def _index(self, idx: Any, depth: int) -> dict:
        import pandas as pd

        if isinstance(idx, pd.MultiIndex):
            arrays = [self._index_values(idx.get_level_values(i)) for i in range(idx.nlevels)]
            return {"$": "mindex", "arrays": arrays, "names": [self.enc(n, depth + 1) for n in idx.names]}
        if not isinstance(idx, pd.Index):
            raise FrameError(f"unsupported index type {type(idx).__name__}")
        tz = None
        vals = idx
        if isinstance(idx.dtype, pd.DatetimeTZDtype):
            tz = str(idx.tz)
            vals = idx.tz_convert("UTC").tz_localize(None)
        return {"$": "index", "values": self._index_values(vals), "name": self.enc(idx.name, depth + 1), "tz": tz}

    def _index_values(self, idx: Any) -> dict:
        import numpy as np
        import pandas as pd

        if isinstance(idx.dtype, pd.DatetimeTZDtype):
            idx = idx.tz_convert("UTC").tz_localize(None)
        if isinstance(idx.dtype, pd.CategoricalDtype):
            idx = idx.astype(object)
        try:
            values = idx.to_numpy()
        except Exception as exc:  # noqa: BLE001 - extension arrays with NA etc.
            raise FrameError(f"index cannot be converted to numpy: {exc}") from None
        if values.dtype.kind == "O" or str(idx.dtype) in ("str", "string"):
            values = np.asarray(values, dtype=object)
        return self._array(values, "index")

    def _values(self, s: Any, what: str) -> dict:
        import numpy as np
        import pandas as pd

        dtype = s.dtype
        if isinstance(dtype, pd.DatetimeTZDtype):
            raise FrameError(f"{what} has a timezone-aware datetime dtype; convert it to naive UTC first")
        if isinstance(dtype, pd.CategoricalDtype):
            s = s.astype(object)
        try:
            if isinstance(dtype, pd.api.extensions.ExtensionDtype) and not isinstance(dtype, pd.CategoricalDtype):
                kind = getattr(dtype, "kind", "O")
                if kind in "iufb" and s.isna().any():
                    values = s.to_numpy(dtype=float, na_value=np.nan)
                elif kind in "iufb":
                    values = s.to_numpy(dtype=getattr(dtype, "numpy_dtype", None))
                else:
                    values = s.to_numpy(dtype=object)
            else:
                values = s.to_numpy()
        except Exception as exc:  # noqa: BLE001
            raise FrameError(f"{what} cannot be converted to numpy: {exc}") from None
        return self._array(values, what)

    def enc(self, obj: Any, depth: int = 0) -> Any:
        import datetime as _dt

        if depth > _MAX_DEPTH:
            raise FrameError(f"value is nested deeper than {_MAX_DEPTH} levels")
        t = type(obj)
        if obj is None or t is bool or t is str:
            return obj
        if t is int:
            if abs(obj) > 2**63:
                raise FrameError("integer too large to send back")
            return obj
        if t is float:
            return obj
        if t in (list, tuple):
            return [self.enc(x, depth + 1) for x in obj]
        if t is dict:
            keys = []
            for k in obj:
                if type(k) not in (str, int, float, bool) and k is not None:
                    raise FrameError(f"dict key of type {type(k).__name__} cannot be sent back")
                keys.append(k)
            return {"$": "dict", "k": keys, "v": [self.enc(obj[k], depth + 1) for k in keys]}
        mod = getattr(t, "__module__", "") or ""
        if mod.startswith("numpy"):
            import numpy as np

            if isinstance(obj, np.ndarray):
                if t is not np.ndarray:
                    obj = np.asarray(obj)
                return self._array(obj, "array")
            if isinstance(obj, np.generic):
                if isinstance(obj, np.bool_):
                    return bool(obj)
                if isinstance(obj, np.integer):
                    return self.enc(int(obj), depth + 1)
                if isinstance(obj, np.floating):
                    return float(obj)
                d = self._array(np.asarray(obj), "numpy scalar")
                d["$"] = "scalar"
                return d
        if mod.startswith("pandas"):
            import pandas as pd

            if isinstance(obj, pd.Series):
                return {
                    "$": "series",
                    "index": self._index(obj.index, depth),
                    "values": self._values(obj, "Series values"),
                    "name": self.enc(obj.name, depth + 1),
                }
            if isinstance(obj, pd.DataFrame):
                data = [self._values(obj.iloc[:, j], f"DataFrame column {j}") for j in range(obj.shape[1])]
                return {
                    "$": "frame",
                    "index": self._index(obj.index, depth),
                    "columns": self._index(obj.columns, depth),
                    "data": data,
                }
            if isinstance(obj, pd.Index):
                return self._index(obj, depth)
            if isinstance(obj, pd.Timestamp):
                return {"$": "ts", "v": obj.isoformat()}
        if t is _dt.datetime:
            return {"$": "ts", "v": obj.isoformat()}
        if t is _dt.date:
            return {"$": "date", "v": obj.isoformat()}
        raise FrameError(
            f"value of type {t.__module__}.{t.__qualname__} cannot be sent back (allowed: None, bool, int, "
            "float, str, list, tuple, dict, numpy arrays/scalars, pandas Series/DataFrame/Index, Timestamp)"
        )


def encode_frame(envelope: dict, value: Any) -> bytes:
    """Encode ``envelope`` (JSON-safe dict) plus ``value`` into one frame (child side).

    Raises
    ------
    FrameError
        When ``value`` contains a type that cannot be sent back safely.
    """
    enc = _Encoder()
    env = dict(envelope)
    env["value"] = enc.enc(value)
    header = json.dumps(env, allow_nan=True).encode("utf-8")
    parts = [MAGIC, struct.pack(">Q", len(header)), header, struct.pack(">Q", len(enc.arrays))]
    for a in enc.arrays:
        parts.append(struct.pack(">Q", len(a)))
        parts.append(a)
    return b"".join(parts)


# --------------------------------------------------------------------------- host: decoding
def _parse_constant(name: str) -> float:
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def decode_frame(data: bytes) -> dict:
    """Decode a frame produced by :func:`encode_frame` (host side; ``data`` is untrusted).

    Returns
    -------
    dict
        The envelope with ``"value"`` rebuilt (numpy arrays, pandas objects, ...).

    Raises
    ------
    FrameError
        On any malformed, inconsistent or unsupported content.
    """
    import numpy as np

    mv = memoryview(data)
    pos = 0

    def take(n: int) -> memoryview:
        nonlocal pos
        if n < 0 or pos + n > len(mv):
            raise FrameError("truncated result frame")
        out = mv[pos : pos + n]
        pos += n
        return out

    if bytes(take(len(MAGIC))) != MAGIC:
        raise FrameError("result frame has a bad magic number")
    (hlen,) = struct.unpack(">Q", take(8))
    try:
        env = json.loads(bytes(take(hlen)).decode("utf-8"), parse_constant=_parse_constant)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"result header is not valid JSON: {exc}") from None
    if not isinstance(env, dict):
        raise FrameError("result header is not a JSON object")
    (n,) = struct.unpack(">Q", take(8))
    if n > 1_000_000:
        raise FrameError("too many arrays in result frame")
    arrays = []
    for i in range(n):
        (alen,) = struct.unpack(">Q", take(8))
        raw = take(alen)
        try:
            a = np.load(io.BytesIO(raw), allow_pickle=False)
        except Exception as exc:  # noqa: BLE001 - any parse failure is bad output
            raise FrameError(f"array {i} in result frame is malformed: {exc}") from None
        if not isinstance(a, np.ndarray) or a.dtype.kind not in _ALLOWED_KINDS or a.dtype.fields is not None:
            raise FrameError(f"array {i} has a forbidden dtype")
        arrays.append(a)
    if pos != len(mv):
        raise FrameError("trailing bytes after result frame")
    env["value"] = _Decoder(arrays).dec(env.get("value"), 0)
    return env


class _Decoder:
    def __init__(self, arrays: list) -> None:
        self.arrays = arrays

    def nd(self, obj: Any) -> Any:
        if not isinstance(obj, dict) or obj.get("$") != "nd":
            raise FrameError("expected an array reference")
        i = obj.get("i")
        if type(i) is not int or not 0 <= i < len(self.arrays):
            raise FrameError("array reference out of range")
        return self.arrays[i]

    def index(self, obj: Any, depth: int) -> Any:
        import pandas as pd

        if not isinstance(obj, dict):
            raise FrameError("expected an index")
        tag = obj.get("$")
        if tag == "mindex":
            arrays = [self.nd(a) for a in _as_list(obj.get("arrays"))]
            names = [self.dec(x, depth + 1) for x in _as_list(obj.get("names"))]
            if not arrays or len(names) != len(arrays) or len({len(a) for a in arrays}) != 1:
                raise FrameError("inconsistent MultiIndex")
            return pd.MultiIndex.from_arrays([a.ravel() for a in arrays], names=names)
        if tag == "index":
            vals = self.nd(obj.get("values"))
            if vals.ndim != 1:
                raise FrameError("index values must be 1-d")
            idx = pd.Index(vals, name=self.dec(obj.get("name"), depth + 1))
            tz = obj.get("tz")
            if tz is not None:
                if type(tz) is not str or not isinstance(idx, pd.DatetimeIndex):
                    raise FrameError("bad timezone in index")
                try:
                    idx = idx.tz_localize("UTC").tz_convert(tz)
                except Exception as exc:  # noqa: BLE001
                    raise FrameError(f"bad timezone in index: {exc}") from None
            return idx
        raise FrameError("expected an index")

    def dec(self, obj: Any, depth: int) -> Any:
        import datetime as _dt

        import pandas as pd

        if depth > _MAX_DEPTH:
            raise FrameError("result nested too deeply")
        if obj is None or type(obj) in (bool, int, float, str):
            return obj
        if type(obj) is list:
            return [self.dec(x, depth + 1) for x in obj]
        if type(obj) is not dict:
            raise FrameError("unexpected JSON type in result")
        tag = obj.get("$")
        try:
            if tag == "dict":
                keys, vals = _as_list(obj.get("k")), _as_list(obj.get("v"))
                if len(keys) != len(vals) or any(type(k) not in (str, int, float, bool) and k is not None for k in keys):
                    raise FrameError("malformed dict in result")
                return {k: self.dec(v, depth + 1) for k, v in zip(keys, vals)}
            if tag == "nd":
                return self.nd(obj)
            if tag == "scalar":
                a = self.nd({"$": "nd", "i": obj.get("i")})
                if a.ndim != 0:
                    raise FrameError("scalar reference is not 0-d")
                return a[()]
            if tag in ("index", "mindex"):
                return self.index(obj, depth)
            if tag == "series":
                idx = self.index(obj.get("index"), depth)
                vals = self.nd(obj.get("values"))
                if vals.ndim != 1 or len(vals) != len(idx):
                    raise FrameError("Series values and index lengths differ")
                return pd.Series(vals, index=idx, name=self.dec(obj.get("name"), depth + 1), copy=False)
            if tag == "frame":
                idx = self.index(obj.get("index"), depth)
                cols = self.index(obj.get("columns"), depth)
                data = [self.nd(d) for d in _as_list(obj.get("data"))]
                if len(data) != len(cols) or any(d.ndim != 1 or len(d) != len(idx) for d in data):
                    raise FrameError("DataFrame columns and data are inconsistent")
                df = pd.DataFrame(dict(enumerate(data)), index=idx)
                if not data:
                    df = pd.DataFrame(index=idx, columns=range(0))
                df.columns = cols
                return df
            if tag == "ts":
                return pd.Timestamp(_as_str(obj.get("v")))
            if tag == "date":
                return _dt.date.fromisoformat(_as_str(obj.get("v")))
        except FrameError:
            raise
        except Exception as exc:  # noqa: BLE001 - pandas/numpy rejects malformed content
            raise FrameError(f"cannot rebuild {tag}: {exc}") from None
        raise FrameError(f"unknown tag {tag!r} in result")


def _as_list(x: Any) -> list:
    if type(x) is not list:
        raise FrameError("expected a list in result")
    return x


def _as_str(x: Any) -> str:
    if type(x) is not str or len(x) > 100:
        raise FrameError("expected a short string in result")
    return x
