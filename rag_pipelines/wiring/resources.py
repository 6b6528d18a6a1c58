"""The Dagster resource that opens rag.db and the embedder once per process."""


import dagster as dg

from rag_search.config import Paths, load_settings
from rag_search.embedders import Embedder, load_embedder
from rag_search.errors import ConfigError
from rag_search.store import Store, open_store

_open: dict[tuple, object] = {}
_located: dict[str, object] = {}  # per home: where its store was, from the last good config.yaml


def paths_for(home: str) -> Paths:
    paths = Paths.from_env()
    if home:
        from pathlib import Path

        env_home = Path(home).expanduser()
        paths = Paths(env_home, env_home / "config.yaml", env_home / "rag.db", env_home / "dagster", paths.ollama_host)
    return paths


class RagResource(dg.ConfigurableResource):
    """rag.db and the configured embedder (LOCAL_RAG_HOME unless `home` is set)."""

    home: str = ""

    def paths(self) -> Paths:
        return paths_for(self.home)

    def store(self) -> Store:
        paths = self.paths()
        try:
            location = load_settings(paths.config).store_location(paths)
            _located[str(paths.home)] = location
        except ConfigError:  # config.yaml edited into an error: the store opened before stays in use
            location = _located.get(str(paths.home))
            if location is None:
                raise
        key = ("store", str(location))
        if key not in _open:
            _open[key] = open_store(location, indexing=True)  # searches open their own connection
        return _open[key]  # type: ignore[return-value]

    def embedder(self) -> Embedder:
        paths = self.paths()
        settings = load_settings(paths.config).embedder
        key = ("embedder", settings.model_dump_json(), paths.ollama_host)
        if key not in _open:
            _open[key] = load_embedder(settings, paths)
        return _open[key]  # type: ignore[return-value]


def close_all() -> None:
    for key, value in list(_open.items()):
        if key[0] == "store":
            value.close()  # type: ignore[attr-defined]
        del _open[key]
