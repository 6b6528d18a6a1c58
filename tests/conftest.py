from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def _signals_not_ignored() -> None:
    """A suite started in the background (nohup, `cmd &` in a script) inherits SIGTERM/SIGINT/SIGQUIT ignored, and
    so did every `tail -F` Dagster starts to mirror a run's output: its terminate() was ignored, the run waited 30 s
    and failed, and the orphaned tails used up inotify instances (128), so later watchers saw no events."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_signals_not_ignored()


def _home_of_its_own() -> None:
    """Tests that build a source without setting LOCAL_RAG_HOME wrote their caches (mbox tocs, OCR) into the
    user's ~/.local-rag: the run gets a home of its own unless one is set (tests set theirs as they need)."""
    import os
    import tempfile

    if not os.environ.get("LOCAL_RAG_HOME"):
        os.environ["LOCAL_RAG_HOME"] = tempfile.mkdtemp(prefix="local-rag-tests-home-")


_home_of_its_own()

from fakes import HashEmbedder  # noqa: E402
from postgres_server import postgres_url  # noqa: E402,F401  (session fixture: a real PostgreSQL server)
from multilingual_env import e5, e5_cache  # noqa: E402,F401  (session fixtures: e5 derived once per run)

from rag_search.store.item_writer import ParsedItem, write_items  # noqa: E402
from rag_search.records import Chunk, Fingerprint, ItemRef  # noqa: E402
from rag_search.store import Store, writes  # noqa: E402
from rag_search.store.connection import connect, versions  # noqa: E402


def pytest_configure(config):
    """One model cache for the whole run, fixed before any test moves HOME, and the derived model built up front:
    a test's captured output never holds the one-time "deriving" message (tests of the derivation set their own)."""
    import os

    from rag_search.embedders import derived_model
    from rag_search.embedders.builtin import MODEL_FILE, MODEL_SHA256, packaged_file

    os.environ.setdefault("LOCAL_RAG_MODEL_CACHE", str(derived_model.cache_dir()))
    if not derived_model.derived_path(MODEL_SHA256).is_file():
        from rag_search.embedders.builtin import vectors_for

        derived_model.ensure_derived(packaged_file(*MODEL_FILE), MODEL_SHA256, vectors_for)


def pytest_report_header(config):
    sqlite_v, vec_v = versions(connect(":memory:"))
    return f"SQLite {sqlite_v}, sqlite-vec {vec_v}"


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path / "rag.db")
    yield s
    s.close()


@pytest.fixture
def fake_embedder():
    return HashEmbedder()


@pytest.fixture(scope="session")
def builtin_embedder():
    from rag_search.embedders.builtin import BuiltinEmbedder

    return BuiltinEmbedder()


def add_doc(store, embedder, collection, key, text, *, source_type="markdown", title=None, **fields):
    """Index one single-chunk item (the collection is created if new)."""
    writes.ensure_collection(store, collection)
    ref = ItemRef(collection, key, f"/data/{collection}/{key}", source_type)
    chunk = Chunk(index=0, text=text, title=title or key, **fields)
    write_items(store, embedder, [ParsedItem(ref, Fingerprint(len(text), 1, "x"), title or key, [chunk])])


@pytest.fixture
def add(store, fake_embedder):
    def _add(collection, key, text, **kw):
        add_doc(store, fake_embedder, collection, key, text, **kw)

    return _add
