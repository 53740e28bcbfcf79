"""Compiled kernels: the one place where quantgym uses numba (issue #19).

The evaluators' hot loops (a day loop whose days depend on the previous one, a per-event order-book
walk, a per-step trade) cannot be vectorised across their sequential axis; where a profile shows
such a loop dominating, the task module writes it once as a plain-Python function over numpy arrays
and scalars and wraps it with :func:`njit`. The same source is then

- compiled by numba (``nopython``, ``cache=True``, no ``fastmath``: IEEE arithmetic in the written
  order, so results are bit-identical to the interpreted function as long as the kernel does not
  call numpy reductions whose summation order numba changes, e.g. ``np.sum`` on more than 8 values;
  write such sums as explicit loops in the order the reference uses), or
- run as ordinary Python when ``QUANTGYM_JIT=0`` is set (debugging, coverage, the Market-Bench
  mutation suite, or a platform without numba wheels): same numbers, only slower.

numba is imported on the first call of a wrapped kernel, never at ``import quantgym`` (start-up time,
``benchmarks/bench_startup.py``), and never inside the sandbox child (agent code cannot load it,
:mod:`quantgym.sandbox`). Compiled machine code is cached on disk by numba (next to the module,
or in numba's user-wide cache directory when the package directory is read-only; ``NUMBA_CACHE_DIR``
moves it), so only the first process on a machine pays the compile time.
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any, Callable

__all__ = ["jit_enabled", "njit"]


def jit_enabled() -> bool:
    """True unless ``QUANTGYM_JIT`` is ``0``/``false``/``no``/``off`` (read at each kernel's first call)."""
    return os.environ.get("QUANTGYM_JIT", "1").strip().lower() not in ("0", "false", "no", "off")


def njit(fn: Callable[..., Any] | None = None, **options: Any) -> Callable[..., Any]:
    """Wrap ``fn`` as a lazily compiled numba ``njit(cache=True)`` kernel (see module docstring).

    Usable bare (``@njit``) or with numba options (``@njit(boundscheck=False)``); ``fastmath`` is
    refused (it would change results). The wrapper compiles on its first call and then dispatches
    straight to numba; with ``QUANTGYM_JIT=0`` (at that first call) it calls ``fn`` itself.
    ``wrapper.py_func`` is always the interpreted function.

    A kernel may call other kernels wrapped here (helpers, by their module-level name): when it is
    compiled, those names are bound to the helpers' numba dispatchers (compiled with it), so numba
    sees one call graph; interpreted, the names call the wrappers as usual. numba's disk cache checks
    only the kernel's own source file, so the cache entry of a kernel that calls kernels of other
    files is stamped with those files too (editing a helper recompiles its callers).

    Raises
    ------
    ValueError
        ``fastmath`` among the options.
    """
    if options.get("fastmath"):
        raise ValueError("quantgym.jit.njit: fastmath changes results; kernels must stay bit-identical")

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        impl: list[Callable[..., Any]] = []      # what calls go to: the dispatcher, or f itself
        compiled: list[Callable[..., Any]] = []  # the numba dispatcher, once created

        def dispatcher() -> Any:
            """The numba dispatcher of ``f`` (created once; numba compiles it on its first call)."""
            if not compiled:
                import numba  # lazy: import quantgym must not load numba

                disp = numba.njit(cache=True, **options)(_bind_kernels(f))
                others = sorted(files() - {f.__code__.co_filename})
                if others:
                    cache_file = getattr(getattr(disp, "_cache", None), "_cache_file", None)
                    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
                        cache_file._source_stamp = (cache_file._source_stamp,
                                                    *[(p, *_stamp(p)) for p in others])
                    else:  # a numba without that attribute: no disk cache rather than a stale one
                        disp = numba.njit(cache=False, **options)(_bind_kernels(f))
                compiled.append(disp)
            return compiled[0]

        def files() -> set[str]:
            """Source files of ``f`` and of every kernel it calls, transitively."""
            out = {f.__code__.co_filename}
            for name in f.__code__.co_names:
                dep = f.__globals__.get(name)
                if hasattr(dep, "_quantgym_files") and dep is not call:
                    out |= dep._quantgym_files()
            return out

        @functools.wraps(f)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not impl:
                impl.append(dispatcher() if jit_enabled() else f)
            return impl[0](*args, **kwargs)

        call.py_func = f  # type: ignore[attr-defined]
        call._quantgym_dispatcher = dispatcher  # type: ignore[attr-defined]
        call._quantgym_files = files  # type: ignore[attr-defined]
        return call

    return wrap(fn) if fn is not None else wrap


def _stamp(path: str) -> tuple[float, int]:
    """(mtime, size) of a source file, numba's own cache stamp."""
    st = os.stat(path)
    return st.st_mtime, st.st_size


def _bind_kernels(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f`` itself, or a copy whose globals bind the kernels it calls to their numba dispatchers."""
    g = f.__globals__
    deps = {name: g[name]._quantgym_dispatcher() for name in f.__code__.co_names
            if hasattr(g.get(name), "_quantgym_dispatcher")}
    if not deps:
        return f
    bound = types.FunctionType(f.__code__, {**g, **deps}, f.__name__, f.__defaults__, f.__closure__)
    bound.__qualname__, bound.__module__, bound.__doc__ = f.__qualname__, f.__module__, f.__doc__
    return bound
