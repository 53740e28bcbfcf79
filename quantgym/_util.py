"""Small helpers shared by every layer: markdown code fences in a model's reply, file hashes, the
missing-extra error.

Stdlib only (importing it loads no numpy / pandas), so any module may use it.

Code fences: one grammar for the three jobs a reply needs. A fence opens with three backticks,
optional blanks and a language tag (:data:`FENCE_TAG`), and closes with three backticks.

- :func:`strip_fences` removes the fence markers and keeps what is between them (LLM answer parsing,
  PortBench static-QA scoring; the two differ in which markers go: ``markers=``).
- :func:`fenced_blocks` / :func:`drop_fenced_blocks` find or remove whole blocks (Quant-Arena and
  Market-Bench code replies).
- :func:`unwrap_fence` removes one fence that surrounds the whole reply (Market-Bench env actions).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: language tag after an opening fence: ``python``, ``json``, ``c++``, ``objective-c`` (may be empty)
FENCE_TAG = r"[A-Za-z0-9_+-]*"

_MARKERS = {
    # every marker: an opening ``` with blanks, tag, blanks and its newline; a bare ```; a ~~~ fence
    "any": re.compile(rf"```[ \t]*{FENCE_TAG}[ \t]*\n?|```|~~~{FENCE_TAG}\n?"),
    # ``` or ```json and all the white space after it (static-QA answers are JSON; another tag stays)
    "json": re.compile(r"```(?:json)?\s*"),
}
_BLOCK = re.compile(rf"```[ \t]*({FENCE_TAG})[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
# the whole reply is one fence; its tag may also hold '.' (``python3.11``); CRLF line ends accepted
_OUTER = re.compile(r"\A\s*```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?\n(?P<body>.*?)\r?\n[ \t]*```[ \t]*\s*\Z", re.S)


def strip_fences(text: str, markers: str = "any") -> str:
    """``text`` without its code-fence markers (the fenced content stays, in place).

    Parameters
    ----------
    text : str
    markers : {"any", "json"}
        ``"any"``: every ```` ```tag ```` opening (with the blanks and the one newline after it), bare
        ```` ``` ```` and ``~~~tag`` fences (LLM answer parsing, spec portbench §4.0). ``"json"``: only
        ```` ``` ```` / ```` ```json ```` and all the white space after them (PortBench static-QA
        scorer; another tag is left in the text).

    Raises
    ------
    KeyError
        An unknown ``markers``.
    """
    return _MARKERS[markers].sub("", text)


def fenced_blocks(text: str | None) -> list[tuple[str, str]]:
    """Fenced blocks as (lower-case language tag, body); an unterminated last block counts (truncated reply)."""
    return [(m.group(1).lower(), m.group(2)) for m in _BLOCK.finditer(text or "")]


def drop_fenced_blocks(text: str) -> str:
    """``text`` with every fenced block (markers and body) removed."""
    return _BLOCK.sub("", text)


def unwrap_fence(text: str) -> tuple[str, bool]:
    """Remove one markdown code fence that surrounds the whole reply.

    Returns
    -------
    (str, bool)
        The body inside the fence (with a final ``\\n``) and True, or ``text`` unchanged and False when
        the reply is not one fenced block (text before/after the fence, or no fence). Inner fences are
        kept; only the outermost pair is removed.
    """
    m = _OUTER.match(text)
    if m is None:
        return text, False
    return m.group("body") + "\n", True


def shared_data_dir() -> Path:
    """Root of the maintainers' raw data (not shipped; read by build scripts and some tests):
    ``$QUANTGYM_SHARED_DATA``, else ``shared/data`` in the folder that holds the source checkout (the
    maintainers' and CI's layout). The folder may not exist: callers check."""
    import os

    env = os.environ.get("QUANTGYM_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class MissingExtraError(ModuleNotFoundError):
    """An optional extra is not installed. ``str(exc)`` is the one-line install hint, which the commands
    print as their error (exit 2) instead of a traceback."""


__all__ = ["MissingExtraError", "FENCE_TAG", "drop_fenced_blocks", "fenced_blocks", "sha256_file", "shared_data_dir", "strip_fences", "unwrap_fence"]


def check_flag(name: str, value: object) -> bool:
    """``value`` as a bool when it is one (Python or numpy), else ``ValueError`` in one line: an env switch
    such as ``blind`` or ``tools`` given as ``"yes"`` or ``1`` is refused, not read as true."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")
