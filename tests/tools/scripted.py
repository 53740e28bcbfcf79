"""A scripted tool-using policy for the tool-mode tests of every task: tool calls and stage answers in order."""

from __future__ import annotations


def call(name: str, **arguments) -> dict:
    """The action of a tool call (docs/tools.md)."""
    return {"tool": name, "arguments": arguments}


class Scripted:
    """A policy (``act(obs, info)``) that plays a fixed list of actions: tool calls or stage answers."""

    def __init__(self, actions):
        self.actions = list(actions)

    def __call__(self, obs, info):
        return self.actions.pop(0)
