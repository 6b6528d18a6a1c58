"""The OCR cache: text read from an image, keyed by the image's content hash and the engine that read it.

Like the embedding cache, it makes a re-index cheap: an image (a file, a scanned PDF page, a note's embedded
picture) is read once per engine and language set, whatever happens to the index. It lives outside rag.db, in
the local-rag home (`cache/ocr.sqlite`), so deleting or rebuilding the index keeps it. It is a cache: when it
cannot be opened, read or written, the image is read again and nothing fails.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

SCHEMA = ("CREATE TABLE IF NOT EXISTS ocr (image_sha256 TEXT NOT NULL, engine TEXT NOT NULL, text TEXT NOT NULL, "
          "confidence REAL NOT NULL, seconds REAL NOT NULL, created INTEGER NOT NULL, "
          "PRIMARY KEY (image_sha256, engine)) WITHOUT ROWID")


@dataclass(frozen=True)
class CachedText:
    text: str
    confidence: float
    seconds: float  # what reading it took the first time


def default_path() -> Path:
    from rag_search.config import Paths

    return Paths.from_env().home / "cache" / "ocr.sqlite"


class OcrCache:
    """get/put by (image sha256, engine key); a failing cache file is reported once and then left alone."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self.broken: str | None = None

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and self.broken is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(SCHEMA)
                self._conn = conn
            except (sqlite3.Error, OSError) as exc:
                self.broken = f"{self.path}: {exc}"
        return self._conn

    def get(self, image_sha256: str, engine: str) -> CachedText | None:
        conn = self._connect()
        try:
            row = conn.execute("SELECT text, confidence, seconds FROM ocr WHERE image_sha256 = ? AND engine = ?",
                               (image_sha256, engine)).fetchone() if conn else None
        except sqlite3.Error:
            return None
        return CachedText(*row) if row else None

    def put(self, image_sha256: str, engine: str, found: CachedText) -> None:
        conn = self._connect()
        if conn is None:
            return
        try:
            with conn:
                conn.execute("INSERT OR REPLACE INTO ocr VALUES (?, ?, ?, ?, ?, ?)",
                             (image_sha256, engine, found.text, found.confidence, found.seconds, int(time.time())))
        except sqlite3.Error:
            pass  # a locked or read-only cache: the image is read again next time

    def count(self) -> int:
        conn = self._connect()
        try:
            return conn.execute("SELECT count(*) FROM ocr").fetchone()[0] if conn else 0
        except sqlite3.Error:
            return 0

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
