"""Spaces shared by the tasks."""

from __future__ import annotations

from typing import Any

from gymnasium.spaces import Text

#: Prompt renderings every prompt-producing env offers, richest first [project choice]: ``"full"`` is
#: the reference prompt (byte-identical to the envs' rendering before styles existed); ``"compact"``
#: fits an 8,192-token context window with the answer, ``"minimal"`` a 4,096-token one (budgets and
#: the order of what is summarised per task: docs/llm-agents.md, "Prompt styles").
PROMPT_STYLES: tuple[str, ...] = ("full", "compact", "minimal")


def check_prompt_style(style: object) -> str:
    """Return ``style`` if it is one of :data:`PROMPT_STYLES`.

    Raises
    ------
    ValueError
        Any other value (also a non-``str``), with a one-line message naming the valid styles.
    """
    if isinstance(style, str) and style in PROMPT_STYLES:
        return style
    raise ValueError(f"prompt_style must be one of {', '.join(map(repr, PROMPT_STYLES))}; got {style!r}")


class InvalidActionError(ValueError, TypeError):
    """An action of the wrong type or shape: a caller bug, raised before anything is evaluated or consumed.

    A ``ValueError`` naming the expected action types; also a ``TypeError`` so that code catching
    either works (Quant-Arena spec §10.14 names ``TypeError`` for a non-str, non-freeze action).
    """


class AnyText(Text):
    """A :class:`gymnasium.spaces.Text` that accepts any ``str`` within its length bounds.

    Gymnasium's default ``Text`` charset is alphanumeric, so a prompt with spaces,
    punctuation or non-ASCII characters would fail ``contains``. Prompts, answers
    and source code are free text (spec portbench §11.2). ``sample`` still draws
    from an alphanumeric charset, which is a subset of the accepted strings.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length=max_length, min_length=min_length, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyText) and other.min_length == self.min_length and other.max_length == self.max_length


__all__ = ["AnyText", "InvalidActionError", "PROMPT_STYLES", "check_prompt_style"]
