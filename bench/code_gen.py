"""A generated git repository for bench/code_scale.py: N source files and M commits, written by `git fast-import`.

Files are small programs in Python, Go, TypeScript, Java and Rust (classes, methods, functions of a few to
a few dozen lines, camelCase and snake_case identifiers from a domain vocabulary), plus Markdown notes, a
few files the source skips (vendor/, a lock file, PNGs) and suffix-less scripts. The first commit adds
every file; each later commit rewrites one to three files, by one of a pool of authors, one commit every
~10 minutes ending now, so a 6-month history window holds them all. Deterministic for a given seed.
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

WORDS = """account address amount audit balance basket batch billing buffer cache cart catalog charge checkout
client config coupon credit currency customer delivery discount document draft entry event export feature
filter fulfil gateway header invoice item journal ledger limit line loader lookup manifest merchant message
metric order package parcel payment payout pending policy price product profile quota rate receipt record
refund region report request reserve retry route schedule search session settings shipment signal sku
snapshot status stock store summary supplier tax template tenant ticket timer token total tracking transfer
upload user vendor voucher wallet warehouse webhook window worker""".split()
VERBS = "add apply build check compute create delete fetch find format get handle load merge parse read " \
        "refresh remove render resolve save send sort split store sync update validate write".split()
AUTHORS = [(f"{first} {last}", f"{first.lower()}.{last.lower()}@example.com") for first, last in
           [("Ann", "Example"), ("Bob", "Builder"), ("Carol", "Diaz"), ("Dana", "Kim"), ("Erin", "Park"),
            ("Femi", "Adeyemi"), ("Gita", "Rao"), ("Hugo", "Lambert"), ("Ines", "Costa"), ("Jon", "Berg")]]


def camel(rng: random.Random, n: int = 2) -> str:
    first = rng.choice(VERBS)
    return first + "".join(rng.choice(WORDS).capitalize() for _ in range(n - 1))


def snake(rng: random.Random, n: int = 2) -> str:
    return "_".join([rng.choice(VERBS)] + [rng.choice(WORDS) for _ in range(n - 1)])


def pascal(rng: random.Random) -> str:
    return "".join(rng.choice(WORDS).capitalize() for _ in range(2))


STATEMENT = {"py": "{a} = {f}({b}, {n})", "go": "{a} := {f}({b}, {n})", "ts": "const {a} = {f}({b}, {n});",
             "java": "int {a} = {f}({b}, {n});", "rs": "let {a} = {f}({b}, {n});"}


def body_lines(rng: random.Random, indent: str, lang: str) -> list[str]:
    name = snake if lang in ("py", "rs") else camel
    return [indent + STATEMENT[lang].format(a=name(rng), f=name(rng), b=rng.choice(WORDS), n=rng.randint(1, 999))
            for _ in range(rng.randint(2, 14))]


def py_file(rng: random.Random) -> str:
    cls = pascal(rng)
    lines = [f'"""{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} handling."""', "import logging", "", ""]
    lines += [f"class {cls}:", f'    """Keeps the {rng.choice(WORDS)} of a {rng.choice(WORDS)}."""', ""]
    for _ in range(rng.randint(1, 6)):
        lines += [f"    def {snake(rng)}(self, {rng.choice(WORDS)}):"] + body_lines(rng, "        ", "py")
        lines += [f"        return {rng.choice(WORDS)}", ""]
    for _ in range(rng.randint(0, 4)):
        lines += ["", f"def {snake(rng)}({rng.choice(WORDS)}, {rng.choice(WORDS)}=None):"]
        lines += body_lines(rng, "    ", "py") + [f"    return {rng.choice(WORDS)}"]
    return "\n".join(lines) + "\n"


def brace_file(rng: random.Random, lang: str) -> str:
    cls = pascal(rng)
    if lang == "go":
        lines = [f"package {rng.choice(WORDS)}", "", f"// {cls} keeps {rng.choice(WORDS)} data.",
                 f"type {cls} struct {{", f"\t{pascal(rng)} string", "}", ""]
        for _ in range(rng.randint(1, 6)):
            lines += [f"func (x *{cls}) {pascal(rng)}({rng.choice(WORDS)} int) int {{"]
            lines += body_lines(rng, "\t", "go") + [f"\treturn {rng.randint(0, 9)}", "}", ""]
        return "\n".join(lines)
    if lang == "rs":
        lines = [f"pub struct {cls} {{ {rng.choice(WORDS)}: u64 }}", "", f"impl {cls} {{"]
        for _ in range(rng.randint(1, 6)):
            lines += [f"    pub fn {snake(rng)}(&self, {rng.choice(WORDS)}: u64) -> u64 {{"]
            lines += body_lines(rng, "        ", "rs") + [f"        {rng.randint(0, 9)}", "    }", ""]
        return "\n".join(lines + ["}", ""])
    head = f"export class {cls} {{" if lang == "ts" else f"public class {cls} {{"
    lines = [f"// {cls}: {rng.choice(WORDS)} {rng.choice(WORDS)}", head]
    for _ in range(rng.randint(1, 6)):
        sig = f"  {camel(rng)}({rng.choice(WORDS)}: number): number {{" if lang == "ts" else \
            f"  public int {camel(rng)}(int {rng.choice(WORDS)}) {{"
        lines += [sig] + body_lines(rng, "    ", lang) + [f"    return {rng.randint(0, 9)};", "  }", ""]
    return "\n".join(lines + ["}", ""])


def md_file(rng: random.Random) -> str:
    paras = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 60))).capitalize() + "."
             for _ in range(rng.randint(1, 5))]
    return f"# {pascal(rng)}\n\n" + "\n\n".join(paras) + "\n"


KINDS = [("py", 30), ("go", 20), ("ts", 20), ("java", 12), ("rs", 8), ("md", 10)]


def content(rng: random.Random, suffix: str) -> str:
    if suffix == "py":
        return py_file(rng)
    if suffix == "md":
        return md_file(rng)
    return brace_file(rng, suffix)


def paths(n: int, rng: random.Random) -> list[str]:
    out, suffixes = [], [s for s, w in KINDS for _ in range(w)]
    for i in range(n):
        folder = f"{rng.choice(WORDS)}/{rng.choice(WORDS)}_{i // 100}"
        out.append(f"{folder}/{snake(rng)}_{i}.{rng.choice(suffixes)}")
    extras = ["vendor/lib/left-pad.js", "package-lock.json", "assets/logo.png", "scripts/deploy", "LICENSE"]
    return out[: max(0, n - len(extras))] + extras


def _data(text: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(text), text)


def generate(repo: Path, files: int, commits: int, seed: int = 7, now: int | None = None) -> dict:
    """Write the repository (fast-import, then a checkout of the working tree); its counts and timings."""
    rng, now = random.Random(seed), int(time.time()) if now is None else now
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(["git", "-C", str(repo), "fast-import", "--quiet", "--done"], stdin=subprocess.PIPE)
    assert proc.stdin is not None
    write = proc.stdin.write
    all_paths = paths(files, rng)
    first = now - commits * 600

    def header(n: int, when: int, message: str) -> None:
        name, email = AUTHORS[n % len(AUTHORS)] if n else AUTHORS[0]
        write(b"commit refs/heads/main\n")
        write(f"author {name} <{email}> {when} +0000\ncommitter {name} <{email}> {when} +0000\n".encode())
        write(_data(message.encode()))

    header(0, first, "Initial import")
    for path in all_paths:
        suffix = path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ""
        data = b"\x89PNG\r\n\x1a\n\0\0" if suffix == "png" else content(rng, suffix).encode() \
            if suffix in dict(KINDS) else b"#!/bin/sh\necho hi\n"
        write(f"M 100644 inline {path}\n".encode() + _data(data))
    code = [p for p in all_paths if p.rsplit(".", 1)[-1] in dict(KINDS)]
    for n in range(1, commits):
        touched = rng.sample(code, rng.randint(1, 3))
        header(n, first + n * 600 + rng.randint(0, 300),
               f"{rng.choice(VERBS).capitalize()} {rng.choice(WORDS)} {rng.choice(WORDS)}\n\n"
               + " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30))))
        for path in touched:
            write(f"M 100644 inline {path}\n".encode() + _data(content(rng, path.rsplit('.', 1)[-1]).encode()))
    write(b"done\n")
    proc.stdin.close()
    if proc.wait() != 0:
        raise SystemExit("git fast-import failed")
    t1 = time.perf_counter()
    subprocess.run(["git", "-C", str(repo), "reset", "-q", "--hard", "main"], check=True)
    return {"files": len(all_paths), "commits": commits, "fast_import_s": t1 - t0,
            "checkout_s": time.perf_counter() - t1}
