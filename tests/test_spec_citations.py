"""Every "spec §x.y" that the package or its docs cite resolves to a section of docs/spec/<task>.md.

A citation is a ``§`` followed by a section number in ``quantgym/`` (``.py``, ``.md``) or ``docs/``
(``.md``). Its task is, in this order:

- the task named right before it: ``spec portbench §7.2``, ``PortBench §7.1``, ``Quant-Arena spec §10.4``,
  ``spec `market_bench.md` §9``, ``market_bench.md §9.2`` (also for the rest of a chain such as
  ``spec portbench §7.1, §7.2`` or ``§9.5-§9.7``);
- none, when it cites another document: an RFC, a paper (``arXiv:…), §2.1``, ``LW (2008) §3.1``, ``their
  §3.2``) or another docs page (``docs/data.md §11``);
- the page's own numbered section, in a docs page that has that heading (``docs/llm-agents.md`` "§4.1");
- the task named at an earlier citation of the same line ("spec portbench §11.4 wins over §4.3");
- the task the file belongs to (``quantgym/envs/<task>/``, ``docs/<task>.md`` and the PortBench pages
  ``fidelity``, ``qa``, ``live``, ``data``, ``rl``).

A citation with no task by these rules fails: write the task into it ("spec portbench §7.2").

A section number ``a.b`` resolves to a heading ``a.b`` of the task's spec page; ``a.b.c`` to item ``c.``
of the numbered list under heading ``a.b`` (``§9.2.4``: item 4 of §9.2); ``a.b`` without a heading
``a.b`` to item ``b.`` under heading ``a`` (``§8.6``: item 6 of §8).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "docs" / "spec"
TASKS = ("portbench", "quant_arena", "market_bench")
NAMES = {"portbench": "portbench", "quant_arena": "quant_arena", "market_bench": "market_bench",
         "quantarena": "quant_arena", "quant-arena": "quant_arena", "marketbench": "market_bench",
         "market-bench": "market_bench"}
PAGE_TASK = {"portbench": "portbench", "fidelity": "portbench", "qa": "portbench", "live": "portbench",
             "data": "portbench", "rl": "portbench", "quant_arena": "quant_arena",
             "market_bench": "market_bench"}

CITE = re.compile(r"§\s?(\d+(?:\.\d+)*)")
# earlier citations of the same chain ("§7.1, §7.2", "§9.5-§9.7", "§9.2.4 a-d and §9.3")
CHAIN = re.compile(r"(?:§\s?\d+(?:\.\d+)*(?:\s?\(?[a-g](?:\)?-\(?[a-g])?\)?)?[\s,;/\-–—]*(?:and |or |to )?)+$")
NAMED = re.compile(r"(?i)(portbench|quant_arena|quant-arena|quantarena|market_bench|market-bench|marketbench)"
                   r"(?:\.md)?`?\s*(?:spec(?:'s)?\s*)?$")
NAMED_EARLIER = re.compile(r"(?i)(portbench|quant_arena|quant-arena|quantarena|market_bench|market-bench|marketbench)"
                           r"(?:\.md)?`?\s*(?:spec(?:'s)?\s*)?§")
OTHER_DOC = re.compile(r"(RFC \d+|arXiv:[\d.]+\),?|\(\d{4}\),?|\btheir|\bLW|[\w./-]+\.md)\s*$")


def sources() -> list[Path]:
    files = [p for p in (ROOT / "quantgym").rglob("*") if p.suffix in (".py", ".md") and "__pycache__" not in p.parts]
    return sorted(files + list((ROOT / "docs").rglob("*.md")))


def default_task(path: Path) -> str | None:
    rel = path.relative_to(ROOT).parts
    if rel[0] == "quantgym" and len(rel) > 2 and rel[1] == "envs" and rel[2] in TASKS:
        return rel[2]
    if rel[0] == "docs" and len(rel) == 2:
        return PAGE_TASK.get(path.stem)
    if rel[:2] == ("docs", "spec") and path.stem in TASKS:
        return path.stem
    return None


def headings(text: str) -> dict[str, int]:
    """Section number -> line index of its markdown heading (``## 7. Metrics``, ``### 7.2 Stress gate``)."""
    out = {}
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", line)  # "### §11.1 …" is a citation, not a section
        if m:
            out.setdefault(m.group(1), i)
    return out


@lru_cache(maxsize=None)
def spec_page(task: str) -> tuple[list[str], dict[str, int]]:
    text = (SPEC / f"{task}.md").read_text(encoding="utf-8")
    return text.splitlines(), headings(text)


def resolves(task: str, number: str) -> bool:
    lines, heads = spec_page(task)
    if number in heads:
        return True
    parent, _, item = number.rpartition(".")
    if not parent or parent not in heads:
        return False
    start = heads[parent]
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    body = []
    for line in lines[start + 1:]:
        m = re.match(r"(#+)\s", line)
        if m and len(m.group(1)) <= level:
            break
        body.append(line)
    return any(re.match(rf"\s*(?:[-*]\s+)?\**{item}\.\**\s", line) for line in body)


def citations():
    """(file, line number, number, task or None, line text) of every spec citation."""
    for path in sources():
        text = path.read_text(encoding="utf-8", errors="replace")
        own = headings(text) if path.suffix == ".md" else {}
        page_task = default_task(path)
        for ln, line in enumerate(text.splitlines(), 1):
            for m in CITE.finditer(line):
                before = CHAIN.sub("", line[:m.start()])
                named = NAMED.search(before[-40:])
                if named:
                    yield path, ln, m.group(1), NAMES[named.group(1).lower()], line
                    continue
                if OTHER_DOC.search(before[-40:]):
                    continue
                if m.group(1) in own and not path.is_relative_to(SPEC):
                    continue
                earlier = NAMED_EARLIER.findall(line[:m.start()])
                task = NAMES[earlier[-1].lower()] if earlier else page_task
                yield path, ln, m.group(1), task, line


def test_every_spec_citation_resolves_in_docs_spec():
    found = list(citations())
    assert len(found) > 500  # the package cites its spec throughout; a broken scan finds nothing
    bad = []
    for path, ln, number, task, line in found:
        where = f"{path.relative_to(ROOT)}:{ln}: §{number}"
        if task is None:
            bad.append(f"{where}: which task's spec? write 'spec <task> §{number}'")
        elif not resolves(task, number):
            bad.append(f"{where}: no section {number} in docs/spec/{task}.md")
    assert not bad, f"{len(bad)} unresolved citations:\n" + "\n".join(bad)


@pytest.mark.parametrize("task", TASKS)
def test_spec_pages_exist_and_are_indexed(task):
    index = (SPEC / "README.md").read_text(encoding="utf-8")
    assert f"{task}.md" in index
    lines, heads = spec_page(task)
    assert heads  # numbered sections


def test_resolution_rules():
    # the rules the scan relies on, on the PortBench page
    assert resolves("portbench", "7.2")          # a heading
    assert resolves("portbench", "8.6")          # item 6 of §8 (Black–Litterman)
    assert not resolves("portbench", "7.9")
    assert resolves("market_bench", "9.2.4")     # item 4 of §9.2 (cleaning)
    assert not resolves("market_bench", "9.2.9")
