"""Settings: the declarative config file says *what*, environment variables say *where*.

Read once at the edge (CLI, MCP server, Dagster definitions) and passed down as one object; long-running processes
(the MCP server, the watcher, `local-rag ui`) follow edits of the file through LiveSettings / FileWatch.

Where things live (environment):
    LOCAL_RAG_HOME     the local-rag home (default ~/.local-rag)
    LOCAL_RAG_CONFIG   the config file (default $LOCAL_RAG_HOME/config.yaml, else config.json; absent = defaults)
    LOCAL_RAG_DB       the index file (default $LOCAL_RAG_HOME/rag.db)
    DAGSTER_HOME       the Dagster instance (default $LOCAL_RAG_HOME/dagster)
    OLLAMA_HOST        the Ollama server (default http://127.0.0.1:11434)
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, ValidationInfo

from rag_search.errors import ConfigError

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
WATCH_STATS = "watch-stats.json"  # written by `local-rag watch` in the home, read by the MCP server


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


BUILTIN_MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")  # the first is the default


class EmbedderSettings(_Section):
    provider: Literal["builtin", "ollama"] = Field(
        "builtin", description="Which embedder builds the index: 'builtin' (bundled ONNX models, offline) or 'ollama'."
    )
    model: str | None = Field(
        None, description="builtin: all-MiniLM-L6-v2 (default; English) or multilingual-e5-small (~100 languages, "
                          "slower); ollama: the model name (default bge-m3).",
    )
    batch_size: int | None = Field(
        None, ge=1, le=512, description="Texts per embedding call (default: builtin 1, ollama 32)."
    )
    timeout_seconds: float = Field(
        120.0, gt=0, description="Ollama: seconds one batch may take before it is abandoned."
    )
    threads: int | None = Field(
        None, ge=1, description="Builtin: texts embedded at once, one CPU thread each (default: all cores)."
    )

    @field_validator("model")
    @classmethod
    def _known_builtin_model(cls, model: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("provider") == "builtin" and model not in (None, *BUILTIN_MODELS):
            raise ValueError(f"the builtin embedder's models are {', '.join(BUILTIN_MODELS)}, not '{model}' "
                             "(an Ollama model needs provider: ollama)")
        return model


class SearchSettings(_Section):
    top_k: int = Field(10, ge=1, le=200, description="Hits returned when the caller does not say.")
    # rrf_k, the weights and the reranker's weights: chosen by cross-validation over every judged set (bench/cv.py,
    # docs/ranking.md "How the defaults are chosen").
    rrf_k: int = Field(5, ge=1, description="Reciprocal Rank Fusion constant k.")
    vector_weight: float = Field(0.4, ge=0, description="RRF weight of the vector (semantic) retriever.")
    keyword_weight: float = Field(
        0.6, ge=0, description="RRF weight of the keyword retriever over whole items (BM25 of an item's full text)."
    )
    keyword_chunk_weight: float = Field(
        0.0, ge=0, description="RRF weight of the keyword retriever over chunks (an item ranked by its best chunk)."
    )
    title_weight: float = Field(
        0.25, ge=0, description="RRF weight of the names retriever (items whose title, alias or file name the query "
                               "names; 0: off).",
    )
    candidates: int = Field(
        50, ge=10, le=1000, description="Items each retriever hands to fusion (at least top_k)."
    )
    exact_max_items: int = Field(
        1, ge=0, le=100, description="A query term found in at most this many items puts them first (0: off).",
    )
    reranker: Literal["off", "features", "ollama"] = Field(
        "features",
        description="Rerank the fused top items: 'features' (offline, fitted; the default), 'ollama' (embedding "
                    "model on your Ollama server), 'off'.",
    )
    rerank_top: int = Field(30, ge=2, le=200, description="How many fused items the reranker reorders.")
    vectors_in_ram_mb: int = Field(
        256, ge=0,
        description="A server (`local-rag serve`, the MCP server) keeps every chunk's float vector in RAM when they "
                    "fit in this many MiB (1,536 bytes a chunk at 384 dimensions: 100k chunks take 147 MB); searches "
                    "then read none from the index, with the same results. 0: read them from the index. Read when "
                    "the server starts.",
    )

    @field_validator("reranker", mode="before")
    @classmethod
    def _yaml_off(cls, value):
        """`reranker: off` unquoted is YAML's false (and `on` its true): read them as meant."""
        return {False: "off", True: "features"}.get(value, value) if isinstance(value, bool) else value
    rerank_budget_ms: float = Field(
        100.0, gt=0, description="Time the reranker may take per query; past it the fused order stands."
    )
    rerank_model: str | None = Field(None, description="Ollama reranker: the embedding model (default bge-m3).")
    weaker_below: float = Field(
        0.45, ge=0, le=1,
        description="For people (the search page, `local-rag search`): hits whose relevance (0..1) is below this are "
                    "folded away as weaker matches, and none above it reads 'nothing found'; 0: every hit is shown. "
                    "MCP answers keep every hit (min_score is the agent's).",
    )


class McpSettings(_Section):
    allowed_roots: list[str] = Field(
        default_factory=list,
        description="Folders outside your home in which AI assistants may create collections (rag_index); "
                    "empty = only under your home.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Extra browser Origins trusted by the HTTP server (e.g. http://localhost:5173); its own are always.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Extra Host names the HTTP server answers to (e.g. a LAN name when bound to 0.0.0.0).",
    )


class UserSettings(_Section):
    key_sha256: str = Field(
        ..., pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 (hex) of the user's key; `local-rag users add` writes it. The key itself is never stored.",
    )
    id: str | None = Field(
        None, pattern=r"^u:[0-9a-f]{16,64}$",
        description="The user's stable id (`local-rag users add` makes one): collections they add with rag_index "
                    "belong to it, so a later user given the same name does not inherit them. Unset: the name.",
    )
    collections: list[str] = Field(
        default_factory=list,
        description="Collections this user may search and read over HTTP (besides those they add with rag_index).",
    )
    admin: bool = Field(False, description="Sees and indexes every collection, as the owner does.")
    roots: list[str] = Field(
        default_factory=list,
        description="Folders under which this user's rag_index may add collections; empty = rag_index cannot add "
                    "folders for them.",
    )


class ServerSettings(_Section):
    query_log: bool | None = Field(
        None, description="Record each query in query-log.jsonl in the home: true, false, or unset = on for the "
                          "HTTP server, off for stdio.",
    )
    query_log_max_mb: float = Field(10.0, gt=0, description="Size at which the query log is rotated.")
    query_log_files: int = Field(5, ge=1, le=100, description="Rotated query logs kept (query-log.1.jsonl ...).")
    tls_cert: str | None = Field(
        None, description="Certificate (PEM) for `serve --tls`; unset = a self-signed one made in the home.",
    )
    tls_key: str | None = Field(None, description="Private key (PEM) of tls_cert.")
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Reverse proxies (addresses or networks, e.g. 127.0.0.1 or 10.0.0.0/8) whose X-Forwarded-For and "
                    "X-Forwarded-Proto the HTTP server believes; empty = the connection's own address counts.",
    )
    dagster_url: str | None = Field(
        None, description="The Dagster UI's address as people's browsers reach it (e.g. https://nas.example:3000), "
                          "for the search page's run links; unset = links only for browsers on this machine.",
    )


class PeopleSettings(_Section):
    file: str | None = Field(
        None, description="A people file: YAML {Person: [identifiers]} or a vCard (.vcf) export of your contacts."
    )
    known: dict[str, list[str]] = Field(
        default_factory=dict,
        description="People inline: {Ann Example: [ann@example.com, '+49 171 5550100', 'slack:U024BE7LH']}.",
    )
    phone_region: str | None = Field(
        None, description="Country of phone numbers written without one (ISO code such as DE or US), for E.164."
    )


class DagsterSettings(_Section):
    storage: str = Field(
        "sqlite",
        description="Where Dagster keeps runs and events: 'sqlite' (files under $LOCAL_RAG_HOME/dagster, one run at "
                    "a time) or a PostgreSQL URL postgresql://user:password@host:5432/database (runs of different "
                    "collections in parallel; needs pip install 'local-rag[postgres]').",
    )
    max_concurrent_runs: int | None = Field(
        None, ge=1, le=64,
        description="Runs at once (default 1 on sqlite, 4 on PostgreSQL); never two of one collection.",
    )
    embedder_slots: int = Field(
        1, ge=1, le=64,
        description="Embedding calls at once across all runs on PostgreSQL (Dagster pool local_rag_embedder): 1 = "
                    "one Ollama request or one CPU model at a time; raise it for a GPU server or an Ollama pool.",
    )
    workers: int = Field(
        1, ge=1, le=64,
        description="Processes that index one run's items at once (default 1). Each loads its own model and writes "
                    "to the store; pays with the index on PostgreSQL (store: postgresql://) and the embedding on "
                    "an Ollama pool or more cores than one model uses. Runs of fewer than 50 items per worker use "
                    "fewer.",
    )

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str) -> str:
        if value.lower() == "sqlite":
            return "sqlite"
        scheme, sep, rest = value.partition("://")
        if sep and rest and scheme.lower() in ("postgresql", "postgres"):
            return "postgresql://" + rest  # SQLAlchemy (Dagster's) knows only postgresql://
        raise ValueError(f"'{mask_password(value)}' is not a Dagster storage local-rag knows: use sqlite (the "
                         "default) or postgresql://user:password@host:5432/database")

    @property
    def on_postgres(self) -> bool:
        return self.storage != "sqlite"

    @property
    def runs(self) -> int:
        return self.max_concurrent_runs or (4 if self.on_postgres else 1)


def mask_password(url: str) -> str:
    """A URL fit for messages and logs: its password replaced by ***."""
    import re

    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


class Settings(_Section):
    store: str | None = Field(
        None, description="Where the index lives: unset = rag.db beside the config (SQLite, embedded); "
                          "postgresql://user:password@host:5432/db = a PostgreSQL server with pgvector (`pip install "
                          "'local-rag[postgres]'`; copy an existing rag.db there with `local-rag migrate-store`).",
    )
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings, description="The embedder.")

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (e.g. postgresql://rag:secret@db.local:5432/rag), "
                             "or left out for rag.db")
        return value or None

    def store_location(self, paths: Paths) -> str | Path:
        """The configured store: its postgresql:// URL, else rag.db's path."""
        return self.store or paths.db
    search: SearchSettings = Field(default_factory=SearchSettings, description="Search defaults.")
    mcp: McpSettings = Field(default_factory=McpSettings, description="The MCP server: rag_index roots, HTTP hosts.")
    collections: dict[str, Any] = Field(
        default_factory=dict,
        description="Collections and their sources; validated by rag_pipelines (see config/local-rag.example.yaml).",
    )
    # The seed configuration's names (config.json of the design), each a shortcut for one collection.
    emclient_db_path: str | None = Field(
        None, description="eM Client data folder (or one mail_data.dat): indexed as collection 'email'."
    )
    calibre_libraries: list[str] = Field(
        default_factory=list, description="Calibre library folders: indexed as collection 'calibre'."
    )
    netnewswire_db_path: str | None = Field(
        None, description="NetNewsWire account folder or DB.sqlite3: indexed as collection 'rss'."
    )
    server: ServerSettings = Field(
        default_factory=ServerSettings, description="The HTTP server: query log, TLS certificate."
    )
    users: dict[str, UserSettings] = Field(
        default_factory=dict,
        description="People who reach the HTTP server with a key: {name: {key_sha256, collections, admin, roots}}.",
    )
    users_file: str | None = Field(
        None, description="Keep `users:` in this file instead (absolute, or relative to the config file's folder): "
                          "for a config.yaml that is read-only (a Kubernetes ConfigMap, deploy/k8s); `local-rag "
                          "users` writes there, and a running server re-reads it when it changes.",
    )
    people: PeopleSettings = Field(
        default_factory=PeopleSettings, description="Who is who across sources: `--with ann` finds all of Ann's ids."
    )
    code_groups: dict[str, list[str]] = Field(
        default_factory=dict, description="Git repositories by group: {group: [repo paths]}; each repo a collection."
    )
    git_history_in_months: int = Field(
        6, ge=0, description="Months of commit history indexed for code groups (0 = none)."
    )
    disabled_collections: list[str] = Field(
        default_factory=list, description="Collections that are configured but not indexed or scanned."
    )
    dagster: DagsterSettings = Field(
        default_factory=DagsterSettings,
        description="The Dagster instance: `dagster: postgresql://...` (or storage:, max_concurrent_runs:, "
                    "embedder_slots:); local-rag writes it into $DAGSTER_HOME/dagster.yaml.",
    )

    @field_validator("dagster", mode="before")
    @classmethod
    def _dagster_url(cls, value):
        """`dagster: postgresql://...` is short for `dagster: {storage: postgresql://...}`."""
        return {"storage": value} if isinstance(value, str) else value


@dataclass(frozen=True)
class Paths:
    """Where local-rag keeps its files, from the environment."""

    home: Path
    config: Path
    db: Path
    dagster_home: Path
    ollama_host: str

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Paths:
        env = dict(os.environ if env is None else env)
        home = Path(env.get("LOCAL_RAG_HOME") or "~/.local-rag").expanduser()
        return cls(
            home=home,
            config=Path(env.get("LOCAL_RAG_CONFIG") or _default_config(home)).expanduser(),
            db=Path(env.get("LOCAL_RAG_DB") or home / "rag.db").expanduser(),
            dagster_home=Path(env.get("DAGSTER_HOME") or home / "dagster").expanduser(),
            ollama_host=env.get("OLLAMA_HOST") or DEFAULT_OLLAMA_HOST,
        )


def dagster_runs_possible(paths: Paths, settings: DagsterSettings) -> bool:
    """Whether the Dagster instance may hold runs: one on PostgreSQL (ask it), or a SQLite one whose runs file exists
    (so a home never indexed is not given an instance just to be told it has no runs)."""
    return settings.on_postgres or (paths.dagster_home / "history" / "runs.db").exists()


def _default_config(home: Path) -> Path:
    """config.yaml, or the seed's config.json when only that exists (JSON is read by the YAML parser)."""
    yaml_file, json_file = home / "config.yaml", home / "config.json"
    return json_file if json_file.exists() and not yaml_file.exists() else yaml_file


def load_settings(path: Path | None = None) -> Settings:
    """Read and validate a config file; a missing file means all defaults."""
    path = path or Paths.from_env().config
    if not path.exists():
        return Settings()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc}). Fix the file or remove it to use defaults.") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping (embedder:, search:, collections:).")
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(path, exc)) from exc
    return _with_users_file(path, settings) if settings.users_file else settings


def users_path(config: Path, settings: Settings) -> Path:
    """The file that holds the users: the config file itself, or its `users_file`."""
    if not settings.users_file:
        return config
    file = Path(settings.users_file).expanduser()
    return file if file.is_absolute() else config.parent / file


def _with_users_file(config: Path, settings: Settings) -> Settings:
    """The settings with the users of their users_file (none while it does not exist yet)."""
    file = users_path(config, settings)
    if settings.users:
        raise ConfigError(f"{config}: users are kept in {file} (users_file:), but this file has a users: section "
                          "too. Move its entries there (or remove users_file:).")
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return settings
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"Cannot read the users file {file} ({exc}). Fix it, or restore it from a backup.") from exc
    if not isinstance(raw, dict) or set(raw) - {"users"}:
        raise ConfigError(f"{file} (users_file: of {config}) may hold only a users: section; move the rest to "
                          f"{config}.")
    try:
        return settings.model_copy(update={"users": Settings.model_validate(raw).users})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(file, exc)) from exc


def describe_validation_error(path: Path, exc: ValidationError) -> str:
    """One line per problem, naming the file and the dotted field."""
    lines = [f"{path}: invalid configuration"]
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        lines.append(f"  {where}: {err['msg']}")
    lines.append("Fix these fields; config/local-rag.example.yaml documents every setting.")
    return "\n".join(lines)


# -- following edits ----------------------------------------------------------------------------

FileStamp = tuple[int, int, int] | None  # (inode, mtime_ns, size); None: no such file
RACY_SECONDS = 2.0  # a file changed this recently may change again within its mtime's granularity: compare content
log = logging.getLogger("local_rag")


def file_stamp(path: Path) -> FileStamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class FileWatch:
    """Whether some files changed since they were last taken in: their stamps (inode, mtime, size), and their
    content while a change is so recent that a second one could keep the same stamp (git's "racy" files)."""

    def __init__(self, files: list[Path] | tuple[Path, ...]):
        self.files = tuple(files)
        self.stamps, self.digest = self._look()

    def _look(self) -> tuple[tuple[FileStamp, ...], str | None]:
        stamps = tuple(file_stamp(f) for f in self.files)
        racy = any(s and time.time() - s[1] / 1e9 < RACY_SECONDS for s in stamps)
        return stamps, (self._content() if racy else None)

    def _content(self) -> str:
        digest = hashlib.sha1()
        for f in self.files:
            try:
                digest.update(f.read_bytes())
            except OSError:
                digest.update(b"\0missing")
        return digest.hexdigest()

    def changed(self) -> bool:
        """True (once) when a file changed since the last call that returned True, or since this was made."""
        stamps = tuple(file_stamp(f) for f in self.files)
        if stamps == self.stamps and (self.digest is None or self._content() == self.digest):
            if self.digest is not None and not self._look()[1]:
                self.digest = None  # old enough now: stamps alone tell
            return False
        self.stamps, self.digest = self._look()
        return True


class LiveSettings:
    """The settings of a running process, following edits of the config file: its stamp is looked at at most
    once per `interval` seconds (a stat, ~2 us), and the file re-read when it changed. A broken edit keeps the
    last good settings; `error` says why (and the log, once) until the file is fixed."""

    def __init__(self, path: Path, interval: float = 1.0, settings: Settings | None = None):
        self.path, self.interval = path, interval
        self.watch = FileWatch([path])
        self.settings = settings if settings is not None else load_settings(path)
        self.error: str | None = None
        self.loaded_at = time.time()
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    def current(self, max_age: float | None = None) -> Settings:
        """The settings, re-read first if the file changed (looked at when the last look is older than `max_age`,
        default `interval`; 0: now)."""
        self.check(max_age)
        return self.settings

    def check(self, max_age: float | None = None) -> bool:
        """True when new settings were loaded just now."""
        if time.monotonic() - self._checked < (self.interval if max_age is None else max_age):
            return False
        with self._lock:
            self._checked = time.monotonic()
            if not self.watch.changed():
                return False
            try:
                self.settings, self.error, self.loaded_at = load_settings(self.path), None, time.time()
            except ConfigError as exc:
                self.error = f"{exc} (the settings loaded before this edit stay in use until the file is fixed)"
                log.warning("%s", self.error)
                return False
            log.info("%s: re-read, the new settings are in use", self.path)
            return True

    def state(self) -> dict[str, Any]:
        """For status output: the file, when it was last read successfully, and why an edit is not in use."""
        loaded = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.loaded_at))
        return {"file": str(self.path), "loaded": loaded, **({"error": self.error} if self.error else {})}
