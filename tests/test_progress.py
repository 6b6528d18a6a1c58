"""Progress as chunks are embedded, a sane ETA, and periodic lines when the output is not a terminal.

The first version counted items only: one big item (or a group of them) left the bar at 0 for minutes,
then an ETA of hours; piped output showed nothing at all.
"""

from __future__ import annotations

import re
import time

from click.testing import CliRunner
from fakes import HashEmbedder
from pipeline_env import make_home

from rag_pipelines.indexing import progress
from rag_pipelines.indexing.progress import Tracker, describe
from rag_pipelines.wiring import resources
from rag_search.cli.main import cli


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_eta_waits_for_data_then_follows_the_recent_rate():
    clock = Clock()
    t = Tracker(items_total=10, clock=clock)
    t.work("queued", 50)  # the first item has 50 chunks: 10 items ≈ 500 chunks
    for _ in range(3):
        clock.now += 0.5
        t.work("embedded", 5)
    s = t.snapshot()
    assert s.chunks_embedded == 15 and s.chunks_estimate == 500
    assert s.eta is None and "ETA: measuring" in describe(s)  # 1.5 s of data: no guess yet
    for _ in range(10):  # 10 chunks/s for 10 s
        clock.now += 1.0
        t.work("embedded", 10)
    s = t.snapshot()
    assert 9 <= s.rate <= 11
    assert 33 <= s.eta <= 43  # (500 - 115) / 10 chunks/s ≈ 38 s; no 5-hour guess
    clock.now += 20  # a stall (a slow parser): the rate falls, the ETA grows
    assert t.snapshot().eta > s.eta


def test_the_estimate_counts_items_without_chunks():
    t = Tracker(items_total=4, clock=Clock())
    t.item("a", "unchanged")
    t.item("b", "failed")
    t.work("queued", 30)
    t.work("embedded", 30)
    t.item("c", "indexed")
    assert t.estimate() == 40  # 30 chunks over 3 items seen, 1 item to come


class SlowEmbedder(HashEmbedder):
    """Like the bundled model: batches of 4, progress after each, a few ms per text."""

    def embed_documents(self, texts, progress=None):
        out = []
        for start in range(0, len(texts), 4):
            batch = texts[start : start + 4]
            time.sleep(0.02 * len(batch))
            out.append(super().embed_documents(batch))
            if progress:
                progress(len(batch))
        import numpy as np

        return np.concatenate(out) if out else np.zeros((0, self.dimensions), np.float32)


def test_piped_output_gets_periodic_lines_as_chunks_are_embedded(tmp_path, monkeypatch):
    make_home(tmp_path, monkeypatch)
    embedder = SlowEmbedder()
    monkeypatch.setattr(resources, "load_embedder", lambda settings, paths=None: embedder)
    monkeypatch.setattr(progress, "LINE_SECONDS", 0.2)
    monkeypatch.setattr(progress, "ETA_MIN_SECONDS", 0.5)
    monkeypatch.setattr(progress, "SAMPLE_SECONDS", 0.1)
    folder = tmp_path / "big"
    folder.mkdir()
    paragraphs = [f"## Part {i}\n\n" + " ".join(f"heron{i} river word{j} levee" for j in range(40)) for i in range(60)]
    (folder / "long.md").write_text("# Long\n\n" + "\n\n".join(paragraphs))  # one item, many chunks
    try:
        result = CliRunner().invoke(cli, ["index", "project", "big", str(folder)])
    finally:
        resources.close_all()
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("indexing big:")]
    during = [ln for ln in lines if ln.startswith("indexing big: 0/1 items")]
    embedded = [int(re.search(r"items, ([\d,]+)", ln).group(1).replace(",", "")) for ln in during]
    assert len(during) >= 3 and any(n > 0 for n in embedded)  # moving while the one item is embedded
    assert embedded == sorted(embedded)
    etas = [re.search(r"ETA (< )?(\d+) s", ln) for ln in during]
    assert any(etas) and all(int(m.group(2)) < 60 for m in etas if m)  # the whole run takes ~3 s
    assert "1/1 items" in lines[-1] and "took" in lines[-1] and sum("1/1 items" in ln for ln in lines) == 1
    assert "big: 1 indexed" in result.stdout
