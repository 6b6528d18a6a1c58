"""Identifier words: parseConfig ↔ parse config, for keyword search over code.

FTS5's unicode61 tokenizer already splits snake_case, kebab-case and dotted names at their punctuation
(parse_config → parse, config) but keeps a camelCase word whole (parseConfig → parseconfig). So:

- index side (`code_terms`): the split form of every mixed-case identifier of a chunk goes into the
  chunk's `keywords` (indexed, never shown): a chunk holding parseConfig also holds "parse config";
- query side (`split_identifier`): a mixed-case query word is searched as itself OR its split form, so
  parseConfig finds parse_config and prose "parse config" too.

An exact match still ranks first: a chunk's own words weigh more than its keywords.
"""

from __future__ import annotations

import re

_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_MIXED = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
MAX_TERMS_CHARS = 4_000  # keywords kept per chunk: a generated blob must not double a chunk's index size


def is_mixed_case(word: str) -> bool:
    """parseConfig, ParseConfig, HTTPServer, getHTTPResponse: yes; Paris, NASA, parse_config: no."""
    return bool(_MIXED.search(word))


def split_identifier(word: str) -> list[str]:
    """The lower-case words of an identifier: getHTTPResponse → [get, http, response]; parse_config → [parse, config]."""
    return [p.lower() for chunk in re.split(r"[^A-Za-z0-9]+", word) for p in _PART.findall(chunk)]


def code_terms(text: str) -> str:
    """Split forms of the text's mixed-case identifiers, each once, space-joined: what `keywords` holds."""
    seen: dict[str, None] = {}
    size = 0
    for word in _WORD.findall(text):
        if len(word) > 80 or not is_mixed_case(word):
            continue
        split = " ".join(split_identifier(word))
        if split not in seen:
            size += len(split) + 1
            if size > MAX_TERMS_CHARS:
                break
            seen[split] = None
    return " ".join(seen)
