"""People's identifiers in one normal form, shared by every source and by the `--with` filter.

A participant is stored as `Name <identifier>` (or just the identifier, or just the name) where the
identifier is normalised:

- e-mail addresses lower-cased (`Ann@Example.COM` → `ann@example.com`);
- phone numbers in E.164 (`+49 (171) 555-0100`, `0049 171 5550100` → `+491715550100`; a national number
  without a country code uses `region` when one is given, else keeps its digits);
- chat ids prefixed by their system (`slack:U024BE7LH`), so a people file can name them.

Sources build participants with `participant(name, identifier)`; the search side compares the same forms.
"""

from __future__ import annotations

import re
from pathlib import Path

PHONE_CHARS = re.compile(r"^[+(]?[\d\s().\-/]{5,}$")
EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")


def normalise_email(address: str) -> str:
    return address.strip().strip("<>").removeprefix("mailto:").strip().lower()


def looks_like_phone(text: str) -> bool:
    text = text.strip().removeprefix("tel:")
    return bool(PHONE_CHARS.match(text)) and sum(c.isdigit() for c in text) >= 5


def normalise_phone(number: str, region: str | None = None) -> str:
    """E.164 when the number can be read as one (`+491715550100`); else its digits (with a leading + kept)."""
    raw = number.strip().removeprefix("tel:")
    if raw.startswith("00"):
        raw = "+" + raw[2:]
    try:
        import phonenumbers

        parsed = phonenumbers.parse(raw, region.upper() if region else None)
        if phonenumbers.is_possible_number(parsed):
            return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)
    except Exception:  # noqa: BLE001 - not a number phonenumbers can read: fall back to its digits
        pass
    digits = "".join(c for c in raw if c.isdigit())
    return ("+" + digits) if raw.lstrip().startswith("+") else digits


def normalise_identifier(identifier: str, region: str | None = None) -> str:
    """One identifier (an address, a phone number, `slack:U…`, a handle) in its normal form."""
    text = " ".join((identifier or "").split())
    if not text:
        return ""
    bare = text.strip("<>").removeprefix("mailto:")
    if EMAIL.match(bare):
        return normalise_email(bare)
    if looks_like_phone(text):
        return normalise_phone(text, region)
    system, sep, rest = text.partition(":")
    if sep and system.isalpha() and rest and " " not in text:
        return f"{system.lower()}:{rest}"
    return text


def participant(name: str | None, identifier: str | None, region: str | None = None) -> str:
    """`Name <identifier>` with the identifier normalised; one of them alone when the other is missing."""
    name = " ".join((name or "").replace('"', "").split())
    ident = normalise_identifier(identifier or "", region)
    if name and ident and name.lower() != ident.lower():
        return f"{name} <{ident}>"
    return ident or name


def split_participant(value: str) -> tuple[str, str]:
    """(name, identifier) of a stored participant; either may be ''."""
    value = value.strip()
    if value.endswith(">") and "<" in value:
        name, _, ident = value[:-1].rpartition("<")
        return name.strip(), ident.strip()
    if EMAIL.match(value) or looks_like_phone(value) or re.match(r"^[a-z]+:\S+$", value):
        return "", value
    return value, ""


# -- the people directory: several identifiers, one person ---------------------------------------------


class Person:
    __slots__ = ("name", "identifiers", "words")

    def __init__(self, name: str, identifiers: list[str]):
        self.name = " ".join(name.split())
        self.identifiers = tuple(dict.fromkeys(i for i in identifiers if i))
        self.words = tuple(w.lower() for w in re.split(r"[\s,.'\"()-]+", self.name) if w)


class PeopleDirectory:
    """Who is who: from `people.known` in the config and/or `people.file` (YAML or a vCard export)."""

    def __init__(self, people: list[Person] | None = None, region: str | None = None):
        self.people, self.region = people or [], region

    def __len__(self) -> int:
        return len(self.people)

    @classmethod
    def from_settings(cls, settings) -> "PeopleDirectory":
        cfg, region = settings.people, settings.people.phone_region
        raw: dict[str, list[str]] = {}
        if cfg.file:
            raw.update(read_people_file(Path(cfg.file).expanduser()))
        for name, ids in cfg.known.items():
            raw.setdefault(name, []).extend(ids)
        return cls([Person(n, [normalise_identifier(i, region) for i in ids]) for n, ids in raw.items()], region)

    def matching(self, term: str) -> list[Person]:
        """The people a `--with` term names: a word of their name starts with it, or one of their identifiers is it."""
        text = " ".join(term.split()).lower()
        if not text:
            return []
        ident = normalise_identifier(term, self.region).lower()
        # a number written without its country matches the end of a stored E.164 number (at least 7 digits)
        digits = "".join(c for c in term if c.isdigit()) if looks_like_phone(term) else ""
        words = text.split()
        out = []
        for p in self.people:
            ids = [i.lower() for i in p.identifiers]
            if p.name.lower() == text or ident in ids or \
                    (len(digits) >= 7 and any(i.startswith("+") and i.endswith(digits) for i in ids)):
                out.append(p)
            elif all(any(w.startswith(t) for w in p.words) for t in words):
                out.append(p)
        return out

    def alternatives(self, term: str) -> tuple[str, ...]:
        """What a participant must contain to be this term: its normal form, and the names and ids of the
        people of the directory it names. Name-like alternatives match at word starts (see `like_patterns`)."""
        alts = [normalise_identifier(term, self.region) or term.strip()]
        for p in self.matching(term):
            alts.append(p.name)
            alts.extend(p.identifiers)
        return tuple(dict.fromkeys(a for a in alts if a))


NAME_LIKE = re.compile(r"[^\W\d_]+(?:[\s.'-]+[^\W\d_]+)*\.?")
WORD_STARTS = ("", " ", "<", "@", ".", '"')  # what may precede a name-like alternative in a stored participant


def like_patterns(alternative: str) -> list[str]:
    """LIKE patterns (escape '\\') for one alternative: anywhere for ids and numbers, at a word start for names,
    so `ann` finds `Ann Lee` and `ann@x.org` but not `Joanna`."""
    esc = alternative.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    if NAME_LIKE.fullmatch(alternative):
        return [f"{before}{esc}%" if not before else f"%{before}{esc}%" for before in WORD_STARTS]
    return [f"%{esc}%"]


def read_people_file(path: Path) -> dict[str, list[str]]:
    """{person: [identifiers]} from a YAML mapping or a vCard (.vcf) file."""
    from rag_search.errors import ConfigError

    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise ConfigError(f"Cannot read the people file {path}: {exc.strerror or exc}. Fix people.file in the "
                          "config (a YAML {Person: [ids]} or a .vcf contacts export).") from exc
    if "BEGIN:VCARD" in text[:4096].upper():
        return read_vcards(text)
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"The people file {path} is not valid YAML ({exc}). Write it as "
                          "`Ann Example: [ann@example.com, '+49 171 5550100']`.") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"The people file {path} must map each person to a list of identifiers, e.g. "
                          "`Ann Example: [ann@example.com, '+49 171 5550100']`.")
    return {str(k): [str(v) for v in (vs if isinstance(vs, list) else [vs]) if v is not None] for k, vs in data.items()}


def read_vcards(text: str) -> dict[str, list[str]]:
    """FN (or N), EMAIL, TEL and IMPP of each card of a vCard 2.1/3.0/4.0 export."""
    lines: list[str] = []
    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if raw[:1] in (" ", "\t") and lines:
            lines[-1] += raw[1:]  # folded line
        else:
            lines.append(raw)
    people: dict[str, list[str]] = {}
    name, n_name, ids = "", "", []
    for line in lines:
        head, sep, value = line.partition(":")
        if not sep:
            continue
        prop = head.split(";")[0].split(".")[-1].upper()  # item1.EMAIL;TYPE=work → EMAIL
        value = value.strip().replace("\\,", ",").replace("\\;", ";")
        if prop == "BEGIN":
            name, n_name, ids = "", "", []
        elif prop == "FN":
            name = value
        elif prop == "N":
            parts = [p for p in value.split(";")[:2] if p]
            n_name = " ".join(reversed(parts))
        elif prop in ("EMAIL", "TEL", "IMPP") and value:
            ids.append(value.split(":", 1)[1] if prop == "IMPP" and ":" in value else value)
        elif prop == "END" and (name or n_name) and ids:
            people.setdefault(name or n_name, []).extend(ids)
    return people


def resolve_filters(filters, directory: "PeopleDirectory | None"):
    """The filters with each `participants` term, and the `author` term, expanded to its alternatives (normal
    form, ids, names): `--from ann` then finds the chat windows her number wrote in, as `--with ann` does."""
    if not filters.participants and not filters.author:
        return filters
    from dataclasses import replace

    directory = directory or PeopleDirectory()
    return replace(filters, people=tuple(directory.alternatives(p) for p in filters.participants),
                   authors=directory.alternatives(filters.author) if filters.author else ())
