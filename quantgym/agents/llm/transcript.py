"""LLM transcripts: the canonical request hash, the append-only JSONL writer and the reader.

Every request is appended, as it happens, to a JSONL transcript (``flush`` + ``fsync`` per line): a
header line (config, versions; never the API key) and one ``"type": "call"`` line per request with the
canonical request hash, request, response, text, usage, latency, model, endpoint, timestamp, each HTTP
try, and cost; ``"type": "probe"`` lines record metadata probes. :class:`~quantgym.agents.llm.replay.ReplayEngine`
serves a transcript's answers offline.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


def canonical_hash(request: dict, nonce: int = 0, subs: tuple[tuple[str, str], ...] = ()) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of ``request`` + ``nonce``.

    The endpoint and the API key are not part of it: the same request to another endpoint hashes the
    same (so a transcript can serve as a cache for a mirror of the same model). ``subs`` are string
    replacements applied to the canonical JSON before hashing, for run-specific text in a prompt
    (e.g. Market-Bench's temporary input folder → ``<WORKDIR>``); the request itself is sent and
    recorded unchanged.
    """
    doc = {"request": request, "nonce": int(nonce)}
    s = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    for old, new in subs:
        if old:
            s = s.replace(json.dumps(old, ensure_ascii=False)[1:-1], new)
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def transcript_path(folder: str | os.PathLike, task: str, model: str, run: str | None = None) -> Path:
    """Where a run's transcript goes: ``<folder>/<task>-<model>-<run>.jsonl``, the one naming scheme of every
    command (``quantgym eval`` and ``bench``: ``OUT/transcripts``; a sweep: ``OUT/transcripts`` with the run
    id; the Python API: ``results/transcripts``).

    ``model`` is reduced to ``[A-Za-z0-9._-]`` (80 characters at most); ``run`` is a sweep's run id, or by
    default the UTC time to the microsecond and the process id, so two runs never share a file.
    """
    import re

    if run is None:
        run = f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y%m%dT%H%M%S%fZ')}-{os.getpid()}"
    return Path(folder) / f"{task}-{re.sub(r'[^A-Za-z0-9._-]+', '_', model)[:80]}-{run}.jsonl"


def utc_timestamp() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def one_line(msg: Any, limit: int = 300) -> str:
    s = " ".join(str(msg).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


class Transcript:
    """Append-only JSONL transcript of one run (thread-safe; every line flushed and fsynced).

    Raises
    ------
    FileExistsError
        If ``path`` already holds a transcript (one file per run).
    """

    def __init__(self, path: str | os.PathLike, header: dict | None = None):
        self.path = Path(path)
        if self.path.exists() and self.path.stat().st_size > 0:
            raise FileExistsError(f"transcript {self.path} already exists: choose a new path (one transcript per "
                                  "run; pass the old one as cache_from= to reuse its answers)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fh = self.path.open("a", encoding="utf-8")
        if header is not None:
            self.write({"type": "header", **header})

    def write(self, record: dict) -> None:
        from quantgym.results import to_jsonable

        line = json.dumps(to_jsonable(record), ensure_ascii=False, allow_nan=False)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()
            try:
                os.fsync(self._fh.fileno())
            except OSError:  # pragma: no cover - e.g. a pipe
                pass

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __del__(self):  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass


def read_transcript(path: str | os.PathLike) -> tuple[dict, list[dict]]:
    """(header, call records) of a JSONL transcript (``.jsonl`` or gzip-compressed ``.jsonl.gz``); a
    truncated last line (crash) is skipped, any other line that is not JSON is skipped with a
    ``RuntimeWarning`` naming it; ``probe`` lines are returned in ``header["_probes"]``.

    Raises
    ------
    FileNotFoundError, ValueError
        Missing file, or no header line.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"transcript {path} does not exist")
    header: dict | None = None
    calls: list[dict] = []
    probes: list[dict] = []
    if path.suffix == ".gz":
        import gzip

        opener = gzip.open(path, "rt", encoding="utf-8")
    else:
        opener = path.open(encoding="utf-8")
    bad: list[int] = []  # numbers of the lines that are not JSON
    n_lines = 0
    with opener as fh:
        for n_lines, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                bad.append(n_lines)  # a line cut by a crash (the last one), or a corrupt one (warned below)
                continue
            if rec.get("type") == "header":
                header = header or rec
            elif rec.get("type") == "call":
                calls.append(rec)
            elif rec.get("type") == "probe":
                probes.append(rec)
    if header is None:
        raise ValueError(f"{path} is not a quantgym LLM transcript (no header line)")
    corrupt = [n for n in bad if n != n_lines]
    if corrupt:  # not a crash's cut last line: calls are missing (a replay would diverge, a cache re-asks)
        import warnings

        warnings.warn(f"{path}: {len(corrupt)} line(s) that are not JSON were skipped (line "
                      f"{', '.join(map(str, corrupt[:5]))}{', ...' if len(corrupt) > 5 else ''}); "
                      "the transcript is corrupt", RuntimeWarning, stacklevel=2)
    if probes:
        header = {**header, "_probes": probes}
    return header, calls


__all__ = ["canonical_hash", "Transcript", "read_transcript"]
