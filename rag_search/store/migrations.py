"""The schema of rag.db as ordered, named migrations; the only DDL in the project.

The vector table is not a migration: its dimension comes from the embedder, so it is created when
an embedder is first bound to the index (see `rag_search.store.vectors`).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from rag_search import cjk
from rag_search.store.derived_rows import ITEM_TEXT_SQL, chunk_keywords, write_item_names, write_item_text
from rag_search.store.names import MAX_NAMES

CODE_TERMS_SQL = """
        ALTER TABLE chunks ADD COLUMN keywords TEXT NOT NULL DEFAULT '';
        DROP TRIGGER chunks_fts_insert;
        DROP TRIGGER chunks_fts_delete;
        DROP TRIGGER chunks_fts_update;
        DROP TABLE chunks_fts;
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            title, text, keywords, content='chunks', content_rowid='id', tokenize='porter unicode61'
        );
        INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('rank', 'bm25(2.0, 1.0, 0.5)');
        INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');
        CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, title, text, keywords) VALUES (new.id, new.title, new.text, new.keywords);
        END;
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, title, text, keywords)
                VALUES ('delete', old.id, old.title, old.text, old.keywords);
        END;
        CREATE TRIGGER chunks_fts_update AFTER UPDATE OF title, text, keywords ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, title, text, keywords)
                VALUES ('delete', old.id, old.title, old.text, old.keywords);
            INSERT INTO chunks_fts(rowid, title, text, keywords) VALUES (new.id, new.title, new.text, new.keywords);
        END;
"""

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_core_tables",
        """
        CREATE TABLE meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE collections (
            id          INTEGER PRIMARY KEY,
            name        TEXT NOT NULL UNIQUE,
            kind        TEXT NOT NULL DEFAULT 'project' CHECK (kind IN ('system', 'project')),
            description TEXT NOT NULL DEFAULT '',
            created_at  TEXT NOT NULL
        );
        CREATE TABLE items (
            id            INTEGER PRIMARY KEY,
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            source_type   TEXT NOT NULL,
            key           TEXT NOT NULL,
            uri           TEXT NOT NULL,
            title         TEXT NOT NULL DEFAULT '',
            size          INTEGER,
            mtime_ns      INTEGER,
            sha256        TEXT,
            status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'indexed', 'failed')),
            error_kind    TEXT,
            error         TEXT,
            failed_at     TEXT,
            indexed_at    TEXT,
            UNIQUE (collection_id, key)
        );
        CREATE INDEX items_by_status ON items(status, collection_id);
        CREATE INDEX items_by_uri ON items(uri);
        CREATE TABLE chunks (
            id            INTEGER PRIMARY KEY,
            item_id       INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
            collection_id INTEGER NOT NULL,
            idx           INTEGER NOT NULL,
            title         TEXT NOT NULL DEFAULT '',
            text          TEXT NOT NULL,
            heading_path  TEXT NOT NULL DEFAULT '[]',
            page          INTEGER,
            ts            INTEGER,
            author        TEXT,
            participants  TEXT NOT NULL DEFAULT '[]',
            tags          TEXT NOT NULL DEFAULT '[]',
            metadata      TEXT NOT NULL DEFAULT '{}',
            content_hash  TEXT NOT NULL,
            UNIQUE (item_id, idx)
        );
        CREATE INDEX chunks_by_collection_ts ON chunks(collection_id, ts);
        CREATE INDEX chunks_by_ts ON chunks(ts);
        -- Filterable values of a chunk, one row each: tag, participant, meta.<key>.
        CREATE TABLE chunk_facets (
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            name     TEXT NOT NULL,
            value    TEXT NOT NULL
        );
        CREATE INDEX chunk_facets_by_value ON chunk_facets(name, value, chunk_id);
        CREATE INDEX chunk_facets_by_chunk ON chunk_facets(chunk_id);
        CREATE TABLE embedding_cache (
            embedder_id TEXT NOT NULL,
            text_hash   TEXT NOT NULL,
            vector      BLOB NOT NULL,
            PRIMARY KEY (embedder_id, text_hash)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "0002_chunks_fts",
        """
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            title, text, content='chunks', content_rowid='id', tokenize='porter unicode61'
        );
        INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('rank', 'bm25(2.0, 1.0)');
        CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts(rowid, title, text) VALUES (new.id, new.title, new.text);
        END;
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, title, text) VALUES ('delete', old.id, old.title, old.text);
        END;
        CREATE TRIGGER chunks_fts_update AFTER UPDATE OF title, text ON chunks BEGIN
            INSERT INTO chunks_fts(chunks_fts, rowid, title, text) VALUES ('delete', old.id, old.title, old.text);
            INSERT INTO chunks_fts(rowid, title, text) VALUES (new.id, new.title, new.text);
        END;
        """,
    ),
    (
        "0003_item_links",
        """
        -- Links between items (wikilinks, replies): target is the raw link text, resolved at query time.
        CREATE TABLE item_links (
            item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
            target  TEXT NOT NULL
        );
        CREATE INDEX item_links_by_item ON item_links(item_id);
        CREATE INDEX item_links_by_target ON item_links(target COLLATE NOCASE);
        """,
    ),
    (
        "0004_sources",
        """
        -- Items of any source: a change stamp (size:mtime for files, a row version for records) and
        -- the source of the collection it came from.
        ALTER TABLE items ADD COLUMN stamp TEXT;
        ALTER TABLE items ADD COLUMN source TEXT;
        UPDATE items SET stamp = size || ':' || mtime_ns WHERE size IS NOT NULL AND mtime_ns IS NOT NULL;
        CREATE INDEX items_by_source ON items(collection_id, source);
        -- The last scan of each source: how many items it matched, or why it could not be read.
        CREATE TABLE source_scans (
            collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
            source        TEXT NOT NULL,
            type          TEXT NOT NULL,
            matched       INTEGER NOT NULL DEFAULT 0,
            problems      INTEGER NOT NULL DEFAULT 0,
            scanned_at    TEXT NOT NULL,
            seconds       REAL,
            error         TEXT,
            PRIMARY KEY (collection_id, source)
        );
        """,
    ),
    ("0005_code_terms", CODE_TERMS_SQL),
    (
        "0006_item_fts",
        """
        -- Whole-item keyword index: BM25 over an item's full text, so terms split across chunks still
        -- match together. Contentless (the text lives in chunks); rowid = items.id. Written with the item's
        -- chunks in the same transaction (rag_search.store.writes.replace_item), removed with the item.
        CREATE VIRTUAL TABLE items_fts USING fts5(
            title, text, content='', contentless_delete=1, tokenize='porter unicode61'
        );
        INSERT INTO items_fts(items_fts, rank) VALUES ('rank', 'bm25(2.0, 1.0)');
        CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
            DELETE FROM items_fts WHERE rowid = old.id;
        END;
        INSERT INTO items_fts(rowid, title, text) ITEM_TEXT_SQL;
        """.replace("ITEM_TEXT_SQL", ITEM_TEXT_SQL.format(where="1")),
    ),
    (
        "0007_item_texts",
        """
        -- An item's text as written (a note's Markdown: heading levels, link syntax, code), stored when it is
        -- indexed so rag_get_document answers from the index alone, even with the source unmounted or gone.
        -- Items indexed before this migration have no row; their text is rebuilt from chunks until re-indexed.
        CREATE TABLE item_texts (
            item_id INTEGER PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
            text    TEXT NOT NULL
        );
        """,
    ),
    (
        "0008_cache_rowid",
        """
        -- The embedding cache as a rowid table: WITHOUT ROWID rows of a 1.5 KB vector spill into an overflow page
        -- of their own (4.7 KB a vector, half the file); a rowid table keeps two vectors a page (~1.7 KB each).
        -- The freed pages are reused by later writes; VACUUM returns them to the file system.
        CREATE TABLE embedding_cache_rows (
            id          INTEGER PRIMARY KEY,
            embedder_id TEXT NOT NULL,
            text_hash   TEXT NOT NULL,
            vector      BLOB NOT NULL
        );
        INSERT INTO embedding_cache_rows(embedder_id, text_hash, vector)
            SELECT embedder_id, text_hash, vector FROM embedding_cache;
        DROP TABLE embedding_cache;
        ALTER TABLE embedding_cache_rows RENAME TO embedding_cache;
        CREATE UNIQUE INDEX embedding_cache_key ON embedding_cache(embedder_id, text_hash);
        """,
    ),
]

# 0009_item_names: an item's names (title, aliases, file name, a book's authors: rag_search.store.names) in a table of
# their own, one row each (rowid = item id * MAX_NAMES + n), searched as a ranked list (retrieval/titles.py).
# Written with the item (derived_rows.write_item_names); existing items are filled by `backfill_item_names`.
ITEM_NAMES_SQL = """
        CREATE VIRTUAL TABLE item_names USING fts5(name, kind UNINDEXED, tokenize='porter unicode61');
        CREATE TRIGGER item_names_delete AFTER DELETE ON items BEGIN
            DELETE FROM item_names WHERE rowid BETWEEN old.id * {n} AND old.id * {n} + {last};
        END;
""".format(n=MAX_NAMES, last=MAX_NAMES - 1)
MIGRATIONS.append(("0009_item_names", ITEM_NAMES_SQL))
# 0010_cjk_bigrams: chunks holding unspaced script (Chinese, Japanese) get its bigrams as keywords (rag_search.cjk);
# the work is backfill_cjk_keywords.
MIGRATIONS.append(("0010_cjk_bigrams", "SELECT 1;"))

SCHEMA_VERSION = len(MIGRATIONS)


def backfill_item_names(conn: Any) -> None:
    """Names of items indexed before 0009, from each item's row and its first chunk (inside the migration)."""
    rows = conn.execute("SELECT i.id, i.title, i.key, i.source_type, c.metadata, c.participants FROM items i "
                        "JOIN chunks c ON c.item_id = i.id AND c.idx = (SELECT min(idx) FROM chunks WHERE item_id = i.id)")
    for item_id, title, key, stype, meta, people in rows.fetchall():
        write_item_names(conn, item_id, title, key, stype, json.loads(meta or "{}"), tuple(json.loads(people or "[]")))


def backfill_cjk_keywords(conn: Any) -> None:
    """Chunks written before 0010 that hold unspaced script get its bigrams as keywords (chunks_fts follows by its
    update trigger); their items' whole-text rows are written again."""
    rows = conn.execute("SELECT id, item_id, keywords, title, text FROM chunks WHERE text GLOB ? OR title GLOB ?",
                        (cjk.GLOB, cjk.GLOB)).fetchall()
    for chunk_id, _, keywords, title, text in rows:
        conn.execute("UPDATE chunks SET keywords = ? WHERE id = ?", (chunk_keywords(keywords, title, text), chunk_id))
    for item_id in sorted({r[1] for r in rows}):
        write_item_text(conn, item_id)


AFTER = {"0009_item_names": backfill_item_names, "0010_cjk_bigrams": backfill_cjk_keywords}  # Python steps run inside a migration's transaction, after its SQL


def applied(conn: Any) -> list[str]:
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='migrations'").fetchone()
    if not exists:
        return []
    return [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY id")]


def pending(conn: Any) -> list[str]:
    done = set(applied(conn))
    return [name for name, _ in MIGRATIONS if name not in done]


def migrate(conn: Any) -> list[str]:
    """Apply every pending migration, each in its own transaction; returns the names applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, applied_at TEXT NOT NULL)"
    )
    conn.commit()
    done = set(applied(conn))
    ran = []
    for number, (name, sql) in enumerate(MIGRATIONS, start=1):
        if name in done:
            continue
        _announce(conn, name)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        script = f"BEGIN;\n{sql}\nINSERT INTO migrations(name, applied_at) VALUES ('{name}', '{now}');\n"
        script += f"INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', '{number}');"
        try:
            conn.executescript(script)
            if name in AFTER:
                AFTER[name](conn)
            conn.execute("COMMIT")
        except Exception:
            conn.rollback()
            if name in applied(conn):  # another process (two `local-rag index` on a new home) applied it meanwhile
                continue
            raise
        ran.append(name)
    return ran


def _announce(conn: Any, name: str) -> None:
    """Say so on stderr before a migration that rewrites a large table (stdout may be an MCP stream)."""
    if name != "0008_cache_rowid":
        return
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'embedding_cache'").fetchone()
    rows = conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0] if exists else 0
    if rows > 50_000:
        import sys

        print(f"local-rag: moving {rows:,} cached vectors to a layout ~55% smaller (once, about "
              f"{max(rows // 20_000, 1)} s); afterwards `local-rag compact` returns the "
              "freed space to the disk", file=sys.stderr, flush=True)
