"""Spaces shared by the tasks."""

from __future__ import annotations

from typing import Any

from gymnasium.spaces import Text


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


__all__ = ["AnyText", "InvalidActionError"]
