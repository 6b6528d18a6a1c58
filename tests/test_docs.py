"""The README and docs/ as a reader meets them: a README that fits a first read and links every page, a contents
list on every page that matches its headings, and every `local-rag` command shown runs as written (its
subcommands and options exist; checked against the real click commands, nothing is run)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from rag_search.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```", re.M | re.S)  # (language, body)


def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_a_first_read_that_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for page in PAGES:
        assert f"(docs/{page.name})" in readme, f"README does not link docs/{page.name}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_page_has_contents_that_match_its_headings(page):
    text = page.read_text(encoding="utf-8")
    assert "**Contents**" in text, f"{page.name} has no contents list"
    body = re.sub(FENCE, "", text)
    anchors = {_anchor(h) for h in re.findall(r"^#{2,3} (.*)$", body, re.M)}
    listed = re.findall(r"^\s*- \[[^\]]*\]\(#([^)]+)\)", text.split("**Contents**", 1)[1], re.M)
    assert listed and set(listed) <= anchors, f"{page.name}: {set(listed) - anchors} lead nowhere"
    for target, anchor in re.findall(r"\]\(([\w.-]+\.md)#([^)]+)\)", text):
        other = (page.parent / target).read_text(encoding="utf-8")
        assert anchor in {_anchor(h) for h in re.findall(r"^#{1,4} (.*)$", re.sub(FENCE, "", other), re.M)}, \
            f"{page.name} links {target}#{anchor}, which is no heading there"


def _commands() -> list[tuple[str, str]]:
    found = []
    for page in [ROOT / "README.md", *PAGES]:
        for language, block in FENCE.findall(page.read_text(encoding="utf-8")):
            if language not in ("", "bash", "sh", "shell", "console"):
                continue  # output, config, JSON
            for line in block.splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("local-rag ") or line.startswith(".venv/bin/local-rag "):
                    found.append((page.name, line))
    return found


@pytest.mark.parametrize("page,line", _commands())
def test_every_command_shown_runs_as_written(page, line):
    words = shlex.split(line, comments=True)
    assert "|" not in words, f"{page}: `{line}` is several commands on one line"
    command: click.Command = cli
    args = words[1:]
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        name = args.pop(0)
        sub = command.get_command(click.Context(command), name)
        assert sub is not None, f"{page}: `{line}`: no command `{name}`"
        command = sub
    options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help", "-h"}
    for word in args:
        if word.startswith("-") and word != "-":
            assert word.split("=", 1)[0] in options, f"{page}: `{line}`: `{command.name}` has no option {word}"
