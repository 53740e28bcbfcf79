"""The code and the docs speak of the domain: they cite a spec section (docs/spec/), a paper or an upstream
issue link, never the project's own issue numbers ("issue #18 item 1", "(#15)"), files a user does not have
(the maintainers' ``../shared`` folder, ``shared/spec``, design notes) or the "over 500 lines" apology.

Upstream references stay legal: they carry a repository ("ggml-org/llama.cpp #28878", a URL) or an
upstream-sized number ("PR #16486").
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOPE = (("quantgym", (".py", ".md")), ("docs", (".md",)), ("examples", (".py", ".md")),
         ("benchmarks", (".py", ".md")), ("tests", (".py",)))
RULES = {
    "the project's issue number": re.compile(r"(?i)\bissues? ?#?\d{1,3}\b|(?<![\w/&#])#\d{2}\b(?!\w)"),
    "a file outside the repository": re.compile(r"\.\./shared\b|\bshared/(?:spec|design)|\bdesign\.md\b"
                                                r"|development repository"),
    "a line-count apology": re.compile(r"(?i)\bover 500 lines\b"),
}


def files() -> list[Path]:
    out = [ROOT / "README.md"]
    for top, exts in SCOPE:
        out += [p for p in (ROOT / top).rglob("*")
                if p.suffix in exts and not {"__pycache__", ".venv-peers"} & set(p.parts)]
    return sorted(p for p in out if p != Path(__file__).resolve())


def test_code_and_docs_cite_the_domain():
    bad = []
    for path in files():
        for ln, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for what, rule in RULES.items():
                m = rule.search(line)
                if m:
                    bad.append(f"{path.relative_to(ROOT)}:{ln}: {what} ({m.group(0)!r}): {line.strip()[:90]}")
    assert not bad, "cite a spec section, a paper or an upstream link instead:\n" + "\n".join(bad)


def test_the_rules_catch_what_they_should():
    issue, outside = RULES["the project's issue number"], RULES["a file outside the repository"]
    assert issue.search("table columns (issue #18 item 1)") and issue.search("# #15 audit: ...")
    assert issue.search("Issue 19 item 1: the kernels")
    assert not issue.search("[server-task.cpp; PRs #15780, #16486; issue #19774]")  # upstream numbers
    assert not issue.search("color:#555;background:#f2f6ff") and not issue.search("## 10. Published")
    assert outside.search("see ../shared/data/portbench") and outside.search("spec `shared/spec/portbench.md`")
    assert not outside.search("spec portbench §7.2 (docs/spec/portbench.md)")
