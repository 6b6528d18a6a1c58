"""Writing the `users:` section of the config file (`local-rag users ...`), leaving the rest of the file as written.

YAML: the `users:` block (from its line to the next line that starts at the first column) is replaced by the
new one, or appended when there is none; comments elsewhere stay. A seed config.json is rewritten as JSON.
The new file is validated before it replaces the old one, so a bad edit never leaves a broken config; each
change is made under the file's lock (file_updates.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

import yaml

from rag_search import file_updates
from rag_search.config import Settings, load_settings
from rag_search.errors import ConfigError

_SECTION = re.compile(r"users\s*:")


def read_users(path: Path) -> dict[str, dict[str, Any]]:
    """The users section as plain data (validated), {} when there is none."""
    return {name: {"key_sha256": u.key_sha256} | u.model_dump(exclude_defaults=True)
            for name, u in load_settings(path).users.items()}


def change_users(path: Path, change: Callable[[dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]) -> Settings:
    """Replace the users section of the config file at `path` (created if missing) by change(its entries), under the
    file's lock: two `local-rag users ...` at once both keep their change. `change` may raise to leave it as is."""
    with file_updates.locked(path):
        return _save(path, change(read_users(path) if path.exists() else {}))


def _save(path: Path, entries: dict[str, dict[str, Any]]) -> Settings:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if path.suffix == ".json":
        data = json.loads(text or "{}")
        data["users"] = entries
        new = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        new = replace_section(text, entries)
    tmp = path.with_name(f".{path.name}.new")
    file_updates.write_atomic(tmp, new, mode=0o600)  # it holds the keys' hashes, even for a moment
    try:
        settings = load_settings(tmp)
    except ConfigError as exc:
        raise ConfigError(f"{path} was left unchanged: the edit would not validate ({exc})") from exc
    finally:
        tmp.unlink()
    file_updates.write_atomic(path, new, mode=0o600)  # it holds the keys' hashes
    return settings


def replace_section(text: str, entries: dict[str, dict[str, Any]]) -> str:
    block = yaml.safe_dump({"users": entries}, sort_keys=False, allow_unicode=True, default_flow_style=None)
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    if start is None:
        lead = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + lead + block
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "\t", "\n", "\r")),
               len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # blank lines before the next section stay
    return "".join(lines[:start]) + block + "".join(lines[end:])
