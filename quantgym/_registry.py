"""Inspect AI's entry point into quantgym (``[project.entry-points.inspect_ai]`` in pyproject.toml): importing
this module registers ``quantgym/<task>`` for every task of the registry with an LLM adapter
(docs/inspect.md), e.g. ``inspect eval quantgym/portbench -T profile=balanced --model openai/gpt-4o-mini``."""

from quantgym.integrations.inspect.tasks import inspect_tasks

globals().update(inspect_tasks())
