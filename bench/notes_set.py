"""A judged notes-like retrieval set, generated: multi-section Markdown notes of real prose, with queries of the
kinds people type into their own notes' search, each judged by the note it was made from.

Notes: 3–5 `##` sections of real English technical prose (docstrings of installed packages, bench/docstrings.py),
so a note spans several chunks and many notes share vocabulary (hard negatives). A third of the notes carry a
ticket or invoice identifier somewhere in one section.

Query kinds (one relevant note each):
- ident     the note's identifier alone (OPS-4821, INV-2024-0042 ...)
- split     two rare words of the note taken from two *different* sections (whole-item matching)
- phrase    five consecutive words of one paragraph, unquoted
- question  a paragraph's first sentence cut to about half its content words, as a question

    python bench/notes_set.py   # writes bench/out/notes/set.json (bench/quality.py --set notes builds it itself)
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "shared" / "eval"))
from beir import Dataset  # noqa: E402

N_NOTES = 500
QUERIES_PER_KIND = 80
STOP = set("""a about above after again all also an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here how i if in
into is it its itself just more most no nor not now of off on once only or other our out over own same she should so
some such than that the their them then there these they this those through to too under until up very was we were
what when where which while who will with would you your yours return returns default none true false self""".split())
_WORD = re.compile(r"[A-Za-z][A-Za-z]+")


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in STOP and len(w) > 2]


def build_notes(root: Path) -> Dataset:
    """The set (made once, then read back from root/set.json so the index and the judgements agree)."""
    cache = root / "set.json"
    if cache.exists():
        d = json.loads(cache.read_text())
        return Dataset("notes", d["corpus"], d["queries"], d["qrels"], d["doc_ids"])
    from docstrings import docstrings

    rng = random.Random(7)
    paras = docstrings(4 * N_NOTES, min_words=40, max_words=140)
    rng.shuffle(paras)
    notes, sections = {}, {}
    it = iter(paras)
    for n in range(N_NOTES):
        doc_id = f"note-{n:04}"
        parts = []
        for _ in range(rng.randint(3, 5)):
            try:
                parts.append(next(it))
            except StopIteration:
                break
        if len(parts) < 2:
            break
        title = " ".join(w.capitalize() for w in content_words(parts[0])[:3]) or doc_id
        ident = None
        if n % 3 == 0:
            ident = rng.choice(["OPS", "INV", "TKT", "REQ"]) + f"-{rng.randint(2019, 2026)}-{rng.randint(1000, 9999)}"
            s = rng.randrange(len(parts))
            words = parts[s].split()
            at = rng.randrange(len(words))
            parts[s] = " ".join(words[:at] + [f"(see {ident})"] + words[at:])
        body = "\n\n".join(f"## {' '.join(content_words(p)[:3]).capitalize() or 'Notes'}\n\n{p}" for p in parts)
        notes[doc_id] = {"title": title, "text": f"# {title}\n\n{body}", "ident": ident}
        sections[doc_id] = parts
    df = Counter(w.lower() for d in notes.values() for w in set(content_words(d["text"])))
    queries, qrels = {}, {}

    def add(kind: str, doc_id: str, text: str) -> None:
        qid = f"{kind}-{len(queries):04}"
        queries[qid], qrels[qid] = text, {doc_id: 1}

    ids = list(notes)
    for doc_id in rng.sample([d for d in ids if notes[d]["ident"]], min(QUERIES_PER_KIND, len(ids) // 3)):
        add("ident", doc_id, notes[doc_id]["ident"])
    made = 0
    for doc_id in rng.sample(ids, len(ids)):
        if made >= QUERIES_PER_KIND:
            break
        parts = sections[doc_id]
        rare = [min(content_words(p), key=lambda w: (df[w.lower()], w), default=None) for p in parts]
        picks = [(df[w.lower()], s, w) for s, w in enumerate(rare) if w and 1 < df[w.lower()] <= 8]
        picks.sort()
        if len(picks) >= 2 and picks[0][1] != picks[1][1]:
            add("split", doc_id, f"{picks[0][2]} {picks[1][2]}".lower())
            made += 1
    for doc_id in rng.sample(ids, QUERIES_PER_KIND):
        words = rng.choice(sections[doc_id]).split()
        at = rng.randrange(max(1, len(words) - 5))
        add("phrase", doc_id, " ".join(w.strip(".,;:()`'\"") for w in words[at : at + 5]))
    for doc_id in rng.sample(ids, QUERIES_PER_KIND):
        first = re.split(r"(?<=[.!?])\s", rng.choice(sections[doc_id]))[0]
        words = content_words(first)
        kept = [w for w in words if rng.random() < 0.5] or words[:2]
        add("question", doc_id, "how do I " + " ".join(kept[:8]).lower() + "?")
    corpus = {d: {"title": v["title"], "text": v["text"]} for d, v in notes.items()}
    root.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"corpus": corpus, "queries": queries, "qrels": qrels, "doc_ids": ids}))
    return Dataset("notes", corpus, queries, qrels, ids)


if __name__ == "__main__":
    ds = build_notes(Path(__file__).parent / "out" / "notes")
    kinds = Counter(q.split("-")[0] for q in ds.queries)
    print(f"{len(ds.corpus)} notes, {len(ds.queries)} queries: {dict(kinds)}")
