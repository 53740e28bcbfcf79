"""Pickling of the host -> child payload without pyarrow.

pandas >= 3 stores strings (column labels, object columns, indexes) in pyarrow arrays whenever
pyarrow is installed. pyarrow is never loaded inside the sandbox child (it reads files and opens
network connections in C++, unseen by the audit hook), so the host pickles such arrays as the
equivalent python-backed string arrays. Other pyarrow-backed arrays are converted to numpy where
possible; anything left that needs pyarrow to unpickle is refused with a clear ``ValueError``.
"""

from __future__ import annotations

import io
import pickle
import sys
from typing import Any


def rebuild_python_strings(values: Any, na_value: Any) -> Any:
    """Child side: python-backed pandas string array from an object ndarray."""
    import pandas as pd

    return pd.array(values, dtype=pd.StringDtype("python", na_value=na_value))


def rebuild_string_dtype(na_value: Any) -> Any:
    """Child side: the python-backed pandas string dtype."""
    import pandas as pd

    return pd.StringDtype("python", na_value=na_value)


def rebuild_numpy_array(values: Any) -> Any:
    """Child side: a numpy-backed pandas array."""
    import pandas as pd

    return pd.array(values)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:  # noqa: D401 - pickle protocol
        if "pandas" not in sys.modules:
            return NotImplemented
        t = type(obj)
        mod = getattr(t, "__module__", "") or ""
        if not mod.startswith("pandas"):
            return NotImplemented
        import numpy as np
        import pandas as pd

        if isinstance(obj, pd.StringDtype):
            if obj.storage == "pyarrow":
                return rebuild_string_dtype, (obj.na_value,)
            return NotImplemented
        try:
            from pandas.arrays import ArrowExtensionArray
        except ImportError:  # pragma: no cover - pandas without arrow support
            return NotImplemented
        if isinstance(obj, ArrowExtensionArray):
            if isinstance(obj.dtype, pd.StringDtype):
                return rebuild_python_strings, (np.asarray(obj, dtype=object), obj.dtype.na_value)
            values = obj.to_numpy()
            if values.dtype.kind != "O":
                return rebuild_numpy_array, (values,)
        return NotImplemented


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` for the sandbox child (pyarrow-backed pandas strings become python-backed)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def skeleton(obj: Any) -> bytes:
    """The opcodes of :func:`dumps` without the contiguous data buffers (numpy array contents).

    Protocol 5 lets picklable buffers go out of band (PEP 574): the stream keeps a ``NEXT_BUFFER``
    opcode in place of each buffer's bytes and every other opcode as it is, so it names the same
    modules as ``dumps(obj)``. It is a few kB for a panel of tens of MB, which makes scanning it for
    the modules the child needs cheap."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=5, buffer_callback=lambda _b: False).dump(obj)
    return buf.getvalue()
