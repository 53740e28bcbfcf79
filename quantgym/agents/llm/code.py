"""Extract Python source and control words from a model's reply (the code-submission tasks), and strip
reasoning blocks (``<think>…</think>``) from any reply."""

from __future__ import annotations

import re

from quantgym._util import drop_fenced_blocks, fenced_blocks

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Remove ``<think>…</think>`` blocks (and an unterminated leading one) from ``text``."""
    text = _THINK_RE.sub("", text)
    low = text.lower()
    for tag in ("<think>", "<thinking>", "<reasoning>"):
        if low.lstrip().startswith(tag) and tag.replace("<", "</") not in low:
            return ""  # only an unfinished reasoning block: no answer
    return text


_FREEZE_RE = re.compile(r"^\s*\**\s*FREEZE\s*[:#]?\s*(\d+|latest)?\s*\**\s*$", re.IGNORECASE | re.MULTILINE)


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Fenced blocks as (language tag, body); an unterminated last block counts (truncated reply)."""
    return fenced_blocks(text)


def extract_code(text: str | None, must_define: str | None = None) -> str | None:
    """The Python module in a reply.

    Preference: the longest fenced block that defines ``must_define`` (e.g. ``run_backtest``), else the
    longest ``python``/untagged block, else the whole reply if it defines ``must_define`` (a bare
    module). Returns None when no code is found.
    """
    if not text:
        return None
    text = strip_reasoning(text)
    blocks = [(lang, body) for lang, body in code_blocks(text) if lang in ("", "python", "py", "python3")]
    if must_define:
        pat = re.compile(rf"^\s*(def|class)\s+{re.escape(must_define)}\b|^\s*{re.escape(must_define)}\s*=", re.M)
        hits = [b for _, b in blocks if pat.search(b)]
        if hits:
            return max(hits, key=len).strip("\n") + "\n"
        if not blocks and pat.search(text):
            return text.strip("\n") + "\n"
    if blocks:
        return max((b for _, b in blocks), key=len).strip("\n") + "\n"
    return None


def extract_freeze(text: str | None) -> tuple[bool, int | None]:
    """``FREEZE k`` / ``FREEZE latest`` on its own line, outside code blocks. Returns (found, k or None)."""
    if not text:
        return False, None
    outside = drop_fenced_blocks(strip_reasoning(text))
    m = _FREEZE_RE.search(outside)
    if not m:
        return False, None
    g = m.group(1)
    return True, (int(g) if g and g.isdigit() else None)


def failure_source(message: str) -> str:
    """A module that fails at import with ``message``: what is submitted when the model gave no code, so
    that the failure is evaluated and recorded by the env like any other broken submission."""
    return f"raise RuntimeError({('no code from the model: ' + message)[:2000]!r})\n"


__all__ = ["code_blocks", "extract_code", "extract_freeze", "failure_source"]
