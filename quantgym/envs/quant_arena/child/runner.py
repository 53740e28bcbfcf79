"""Sandbox-child entry of the Quant-Arena harness: commit-reveal isolation of later rows.

Why
---
``run_in_sandbox`` hands the whole payload (all decision dates of a window) to the
child once. Python code in one process can reach any object of that process (e.g.
``collections._sys._getframe(1).f_locals`` from the agent's module code, or
``exc.__traceback__.tb_frame.f_back`` inside ``score``), so rows after the current
decision date held anywhere in the agent's process are a look-ahead leak
(demonstrated: perfect-foresight scores, S ≈ 86). Spec §10.4 requires that rows after
the current decision date never exist in the child.

How
---
This module is the sandbox runner module. :func:`score_days` carries the sandbox's
supported pre-lockdown hook ``score_days.sandbox_prepare`` (:func:`_prepare`, see
docs/security.md "Pre-lockdown hook"): the sandbox child calls it with the payload
after its imports and **before** lockdown and before any agent code exists. When the
payload asks for isolation, :func:`_prepare`

1. splits it: the *public* part holds the rows up to D_0; the *secret* part holds
   the later rows, their intraday tables and the host's HMAC key;
2. forks a **keeper** process holding the secret part (before lockdown, so the fork
   is allowed; the keeper never runs agent code);
3. overwrites the later rows of the original arrays with NaN in place, drops the key
   and returns the public part, which the child passes to the runner.

If the keeper cannot be set up, :func:`_prepare` still scrubs every later row and the
key and returns a payload without rows; :func:`score_days` then reports
``isolation_error`` ("look-ahead isolation unavailable") without calling agent code,
so an evaluation never runs unprotected.

During the evaluation the runner **commits** each decision date's scores (and
features on sample dates) to the keeper over a pipe, in a fixed binary format (never
pickle in that direction), and only then receives the next day's row (**reveal**).
After the last date the keeper returns the committed scores with an HMAC-SHA256 tag
under the host's key; the host recomputes the tag and refuses a mismatch. The agent
can therefore neither see a row before its scores for the previous date are fixed,
nor alter the committed scores afterwards.

Without an isolating payload (e.g. the in-process executor used by tests), the
runner falls back to feeding rows from the payload it holds.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import time
from typing import Any

import numpy as np

from . import harness

#: Runner path passed to ``run_in_sandbox``.
RUNNER_PATH = "quantgym.envs.quant_arena.child.runner:score_days"

_COMMIT_MAGIC = b"QACM"
_HDR = struct.Struct("<4sqqq")  # magic, j, flag (0 ok / 1 day error), n_feature_rows (0 or F)
_HELLO = struct.Struct("<4sq")   # magic b"QAHI", F

#: set by :func:`_prepare` in the sandbox child when the keeper runs: (pid, commit_fd, reveal_fd, n, N)
_KEEPER: tuple[int, int, int, int, int] | None = None
#: why isolation is off (reported back to the host)
_ISOLATION_NOTE = "not prepared (the sandbox did not call score_days.sandbox_prepare)"


# ---------------------------------------------------------------------- pipe helpers
def _read_exact(fd: int, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        buf += chunk
    return bytes(buf)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        k = os.write(fd, view)
        view = view[k:]


def _send_obj(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(fd, struct.pack("<q", len(data)) + data)


def _recv_obj(fd: int) -> Any:
    (k,) = struct.unpack("<q", _read_exact(fd, 8))
    return pickle.loads(_read_exact(fd, k))  # keeper -> runner only (trusted direction)


# ---------------------------------------------------------------------- keeper (trusted, forked pre-lockdown)
class _Expired(Exception):
    """The current decision date's deadline passed while the keeper waited on the runner."""


def _margin(day_seconds: float) -> float:
    """Grace the keeper adds to the per-date limit (the child's own alarm fires first when it can)."""
    return 1.0 + 0.1 * float(day_seconds)


def _wait_fd(fd: int, events: int, deadline: float) -> None:
    poller = select.poll()
    poller.register(fd, events | select.POLLHUP | select.POLLERR)
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Expired()
        if poller.poll(None if left == float("inf") else max(1, int(left * 1000) + 1)):
            return


def _read_by(fd: int, n: int, deadline: float) -> bytes:
    """``n`` bytes from the non-blocking ``fd`` before ``deadline`` (EOFError, _Expired)."""
    buf = bytearray()
    while len(buf) < n:
        _wait_fd(fd, select.POLLIN, deadline)
        try:
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            raise EOFError("pipe closed")
        buf += chunk
    return bytes(buf)


def _write_by(fd: int, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        _wait_fd(fd, select.POLLOUT, deadline)
        try:
            k = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[k:]


def _send_by(fd: int, obj: Any, deadline: float) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_by(fd, struct.pack("<q", len(data)) + data, deadline)


def _stop_child(child: int, limit_fd: int, message: str) -> None:
    """Write the limit record and SIGKILL the sandbox child, if it is still this keeper's parent."""
    if os.getppid() != child:
        return
    if limit_fd >= 0:
        try:
            os.write(limit_fd, message.encode("utf-8", "replace")[:1000] + b"\n")
        except OSError:
            pass
    try:
        os.kill(child, signal.SIGKILL)
    except OSError:
        pass


def _keeper_loop(secret: dict, c_r: int, r_w: int, child: int = -1, limit_fd: int = -1) -> None:
    """Serve rows only after the previous date's scores are committed; return the tagged result.

    Also the per-date time limit, enforced from outside the agent's process: date ``j`` starts when
    the keeper has the commit of date ``j - 1`` (for ``j = 0``: the runner's hello) and must be
    committed within ``day_seconds`` plus :func:`_margin`; the hello itself (after the submission's
    module-level code) must come within ``import_seconds`` plus its margin of the keeper's fork;
    otherwise the keeper writes a
    ``timeout`` line to the sandbox's limit record and kills the child (``child``, its parent).
    Nothing the agent does in the child (signal handlers, interval timers, closing or corrupting
    the pipes) moves that deadline.
    """
    n, N, first = secret["n"], secret["N"], secret["first"]
    every, max_f = secret["sample_every"], secret["max_features"]
    rows = secret["rows"]            # dict field -> (n-1, N) arrays for block rows first+1 .. first+n-1
    dates = secret["dates"]          # their ISO dates
    intr = secret["intraday"]        # date -> tables
    limit = float(secret.get("day_seconds") or 0.0)
    imp = float(secret.get("import_seconds") or 0.0)
    for fd in (c_r, r_w):
        os.set_blocking(fd, False)
    no_deadline = float("inf")

    def start_date() -> float:
        return time.monotonic() + limit + _margin(limit) if limit > 0 else no_deadline

    # the submission's module-level code (and the runner's warm-up rows) must end within import_seconds
    # of the keeper's fork: the runner's hello comes right before the first decision date
    deadline = time.monotonic() + imp + _margin(imp) if imp > 0 else no_deadline
    cur = -1  # the decision date whose deadline runs (-1: the import)
    try:
        magic, F = _HELLO.unpack(_read_by(c_r, _HELLO.size, deadline))
        if magic != b"QAHI" or not 0 <= F <= max_f:
            raise EOFError("protocol violation")
        samples = list(range(0, n, every))
        scores = np.full((n, N), np.nan)
        feats = np.full((len(samples), F, N), np.nan, dtype=np.float32)
        flagged = 0
        deadline, cur = start_date(), 0
        for j in range(n):
            cur = j
            mg, jj, flag, fr = _HDR.unpack(_read_by(c_r, _HDR.size, deadline))
            want_f = F if j % every == 0 else 0
            if mg != _COMMIT_MAGIC or jj != j or flag not in (0, 1) or fr != want_f:
                raise EOFError("protocol violation")  # the runner gets EOF and the evaluation fails
            vec = np.frombuffer(_read_by(c_r, 8 * N, deadline), dtype="<f8")
            if fr:
                fm = np.frombuffer(_read_by(c_r, 4 * F * N, deadline), dtype="<f4").reshape(F, N)
                feats[j // every] = fm
            scores[j] = vec
            flagged += int(flag)
            if j + 1 < n:
                deadline, cur = start_date(), j + 1
                d = dates[j]
                _send_by(r_w, {"row": {k: a[j] for k, a in rows.items()}, "date": d, "intraday": intr.get(d)},
                         deadline)
        scores[~np.isfinite(scores)] = np.nan
        tag = harness.result_tag(secret["key"], scores, feats, flagged)
        deadline = start_date()  # the runner reads the result right after its last commit
        _send_by(r_w, {"scores": scores, "features": feats, "n_flagged": flagged, "tag": tag}, deadline)
    except (EOFError, OSError, _Expired):
        # Close the pipes (the runner sees EOF and fails the evaluation), then hold the deadline of the
        # current date: if the child is still alive when it passes, stop it.
        for fd in (c_r, r_w):
            try:
                os.close(fd)
            except OSError:
                pass
        if deadline == no_deadline:
            return
        while os.getppid() == child and time.monotonic() < deadline:
            time.sleep(0.05)
        if cur < 0:
            _stop_child(child, limit_fd, f"timeout: importing the submission (its module-level code) took more "
                                         f"than {imp:g} s wall (stopped from outside the submission's process "
                                         f"after {imp + _margin(imp):.1f} s)")
            return
        date = secret.get("d0") if cur == 0 else dates[cur - 1]
        _stop_child(child, limit_fd, f"timeout: decision date {str(date)[:10]} took more than {limit:g} s wall "
                                     f"(stopped from outside the submission's process after "
                                     f"{limit + _margin(limit):.1f} s)")


def _scrub(payload: dict) -> None:
    """Overwrite the later rows of the payload's arrays in place and drop the key and intraday tables."""
    blk = payload.get("block")
    if isinstance(blk, dict):
        first = int(payload.get("first", -1))
        for k in harness.ROW_FIELDS:
            a = blk.get(k)
            if isinstance(a, np.ndarray) and a.ndim >= 1:
                a[first + 1:] = False if a.dtype == bool else np.nan
        if isinstance(blk.get("dates"), list):
            del blk["dates"][first + 1:]
    payload["key"] = b""
    payload.pop("intraday", None)


def _split_and_fork(payload: dict) -> dict:
    """Fork the keeper with the later rows; return the public payload (rows up to D_0)."""
    global _KEEPER
    blk = payload["block"]
    first, n = int(payload["first"]), int(payload["n"])
    later = slice(first + 1, first + n)
    secret = {
        "n": n, "N": len(blk["symbols"]), "first": first, "sample_every": int(payload["sample_every"]),
        "max_features": int(payload["max_features"]), "key": payload["key"],
        "day_seconds": float(payload.get("day_seconds") or 0.0), "d0": str(blk["dates"][first]),
        "import_seconds": float(payload.get("import_seconds") or 0.0),
        "rows": {k: np.array(blk[k][later]) for k in harness.ROW_FIELDS},
        "dates": list(blk["dates"][first + 1:first + n]),
    }
    secret["intraday"] = {d: t for d, t in (payload.get("intraday") or {}).items() if d in set(secret["dates"])}
    from quantgym.sandbox._child import limit_fd

    lim_fd = limit_fd()
    c_r, c_w = os.pipe()
    r_r, r_w = os.pipe()
    child = os.getpid()
    pid = os.fork()
    if pid == 0:  # keeper
        try:
            for fd in range(0, 1024):
                if fd not in (c_r, r_w, lim_fd):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            _keeper_loop(secret, c_r, r_w, child, lim_fd)
        finally:
            os._exit(0)
    os.close(c_r)
    os.close(r_w)
    pub_blk = {k: (v[:first + 1].copy() if isinstance(v, np.ndarray) else v) for k, v in blk.items()}
    pub_blk["dates"] = list(blk["dates"][:first + 1])
    public = {k: v for k, v in payload.items() if k not in ("block", "key", "intraday")}
    public["block"] = pub_blk
    public["intraday"] = {d: t for d, t in (payload.get("intraday") or {}).items() if d in set(pub_blk["dates"])}
    for a in secret["rows"].values():  # the parent's copies (the keeper has its own after the fork)
        a.fill(False if a.dtype == bool else np.nan)
    secret.clear()
    _KEEPER = (pid, c_w, r_r, n, len(pub_blk["symbols"]))
    return public


def _prepare(payload: Any) -> Any:
    """Pre-lockdown hook of :func:`score_days` (``score_days.sandbox_prepare``, trusted code).

    Called by the sandbox child after its imports, before lockdown and before the agent's
    module is executed. Seeds the agent's RNGs (spec §10.4: seeds 0) and, for an isolating
    payload, forks the commit-reveal keeper (see the module docstring).

    Parameters
    ----------
    payload : dict
        From :func:`~quantgym.envs.quant_arena.handoff.build_payload`.

    Returns
    -------
    dict
        The public payload (rows up to D_0, no key). When isolation was requested but the keeper
        could not be set up, a payload without any rows whose ``isolation_failed`` names the
        reason; :func:`score_days` then reports ``isolation_error``.
    """
    global _KEEPER, _ISOLATION_NOTE
    _seed()
    if not isinstance(payload, dict) or not payload.get("isolate"):
        _ISOLATION_NOTE = "not requested"
        return payload
    try:
        public = _split_and_fork(payload)
    except BaseException as exc:  # noqa: BLE001 - never run unprotected: scrub and report
        _KEEPER = None
        _ISOLATION_NOTE = f"keeper set-up failed: {type(exc).__name__}: {exc}"[:300]
        try:
            _scrub(payload)
        finally:
            payload.clear()
        return {"isolate": True, "isolation_failed": _ISOLATION_NOTE}
    _scrub(payload)
    payload.clear()
    _ISOLATION_NOTE = "commit-reveal keeper"
    return public


class KeeperFeeder:
    """Runner side of the commit-reveal protocol (used inside the sandbox child)."""

    isolation = "commit-reveal"

    def __init__(self, keeper: tuple[int, int, int, int, int]):
        self._pid, self._c_w, self._r_r, self.n, self.N = keeper

    def start(self, F: int) -> None:
        _write_all(self._c_w, _HELLO.pack(b"QAHI", int(F)))

    def commit(self, j: int, flag: int, vec: np.ndarray, fmat: np.ndarray | None) -> None:
        parts = [_HDR.pack(_COMMIT_MAGIC, j, flag, 0 if fmat is None else fmat.shape[0]),
                 np.ascontiguousarray(vec, dtype="<f8").tobytes()]
        if fmat is not None:
            parts.append(np.ascontiguousarray(fmat, dtype="<f4").tobytes())
        _write_all(self._c_w, b"".join(parts))

    def reveal(self) -> dict:
        return _recv_obj(self._r_r)

    def final(self) -> dict:
        return _recv_obj(self._r_r)


def score_days(agent: dict, payload: dict) -> dict:
    """Sandbox runner: :func:`~quantgym.envs.quant_arena.child.harness.run_days` with the keeper when present."""
    if payload.get("isolate"):
        if _KEEPER is None or payload.get("isolation_failed"):
            return {"status": "isolation_error", "message": f"look-ahead isolation unavailable ({_ISOLATION_NOTE})"}
        return harness.run_days(agent, payload, KeeperFeeder(_KEEPER))
    return harness.run_days(agent, payload, harness.LocalFeeder(payload))


def _seed() -> None:
    """Fix the agent's RNGs before its module is executed (spec §10.4: seeds 0)."""
    import random

    random.seed(0)
    np.random.seed(0)


score_days.sandbox_prepare = _prepare  # type: ignore[attr-defined] - the sandbox's pre-lockdown hook
# Two layers guard look-ahead: the keeper (later rows never exist in the agent's process) and the
# sandbox's refusal of frame introspection, which executor.py requests through
# ArenaSandboxLimits.frame_introspection (default False = refused). With True the keeper alone still holds
# (tests/quant_arena/test_arena_sandbox.py, test_frame_walking_finds_no_later_rows).
