"""Files under root folders (an Obsidian vault, project folders): the first Source.

os.scandir walk that prunes excluded folders before entering them (the config's globs, then the `.ragignore` files
on the way: ragignore.py), follows symlinked folders once (cycles are cut) and never follows a link that leads
outside the source's roots unless the config says so. Scans never read contents; sha256 is computed only for
candidates. Images are included (and read by OCR) while the source's `ocr` option is on; a note's embedded images
add their text to it (note_images.py).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal, Mapping, Sequence

from pydantic import Field, field_validator

from rag_pipelines import parsers
from rag_pipelines.parsers.images import SUFFIXES as IMAGE_SUFFIXES
from rag_pipelines.sources import ragignore
from rag_pipelines.parsers.limits import Limits
from rag_pipelines.parsers.ocr import OcrSettings
from rag_pipelines.sources import note_images
from rag_pipelines.sources.base import BaseSource, Loaded, ScanResult, SourceUnavailable, Stamp
from rag_pipelines.sources.globs import GlobSet
from rag_search.keys import path_key, readable
from rag_pipelines.sources.options import Capture, Model, SourceOptions, compile_capture, expand_paths

DEFAULT_EXCLUDES = (".obsidian/**", ".trash/**", ".git/**", "**/.*", "**/.*/**", "node_modules/**",
                    "**/node_modules/**", "__pycache__/**", "**/__pycache__/**", ".venv/**", "**/.venv/**")
# Office documents (slides, workbooks, OpenDocument) are attachments a vault or a project folder holds as much
# as PDFs; legacy .doc/.xls/.ppt are included so that each is recorded with how to convert it.
TEXT_SUFFIXES = ("md", "markdown", "canvas", "txt", "pdf", "docx", "html", "htm", "epub", "csv", "json", "yaml", "yml",
                 "rst", "pptx", "xlsx", "xlsm", "odt", "ods", "odp", "doc", "xls", "ppt")
DATA_SUFFIXES = ("csv", "json", "yaml", "yml")  # data and settings: a project's documents, never a vault's notes
DEFAULT_INCLUDES = tuple(f"**/*.{s}" for s in TEXT_SUFFIXES)
# A vault's notes, canvases and attached documents; not its data or settings files (site-options.json, a
# plugin's data.json or .yaml exports outside .obsidian/), which are not notes.
OBSIDIAN_INCLUDES = tuple(f"**/*.{s}" for s in TEXT_SUFFIXES if s not in DATA_SUFFIXES)
IMAGE_INCLUDES = tuple(f"**/*.{s}" for s in IMAGE_SUFFIXES)  # while OCR is on: scans, screenshots, photos of text
PLAIN_TYPES = {"text", "csv", "json", "yaml"}


def default_includes(source_type: str, ocr: bool = True) -> tuple[str, ...]:
    base = OBSIDIAN_INCLUDES if source_type == "obsidian" else DEFAULT_INCLUDES
    return base + (IMAGE_INCLUDES if ocr else ())


class OcrOptions(Model):
    enabled: bool = Field(True, description="Read images and image-only PDF pages with OCR (on by default).")
    engine: Literal["auto", "rapidocr", "tesseract"] = Field(
        "auto", description="auto (RapidOCR, bundled, unless only Tesseract reads your languages), rapidocr or tesseract.")
    languages: tuple[str, ...] = Field(("en",), min_length=1, description=(
        "Languages of the text in your images (ISO codes: en, de, fr, zh, ...; Tesseract codes work too)."))

    def settings(self) -> OcrSettings:
        return OcrSettings(enabled=self.enabled, engine=self.engine, languages=self.languages)


class FileOptions(SourceOptions):
    type: Literal["obsidian", "project"] = Field(description="obsidian (a vault) or project (any folder of documents).")
    paths: tuple[Path, ...] = Field(min_length=1, description="Root folders of the source.")
    include: tuple[str, ...] | None = Field(None, description=(
        "Globs of files to index (relative to a root). Default for obsidian: **/*.{"
        + ",".join(s for s in TEXT_SUFFIXES if s not in DATA_SUFFIXES) + "}; project also "
        + ",".join(DATA_SUFFIXES) + "."))
    exclude: tuple[str, ...] = Field((), description="Globs to skip, added to the defaults (.obsidian, .trash, .git, hidden, node_modules).")
    exclude_folders: tuple[str, ...] = Field((), description="Folders (relative to a root) to skip entirely.")
    captures: tuple[Capture, ...] = Field((), description="Path patterns whose named captures become chunk metadata.")
    follow_symlinks_outside: bool = Field(False, description="Follow symlinks that lead outside the source's roots.")
    ocr: OcrOptions = Field(default_factory=OcrOptions, description=(
        "OCR of images, scanned PDF pages and a note's embedded images: `false` turns it off, or "
        "{enabled, engine, languages}."))

    @field_validator("ocr", mode="before")
    @classmethod
    def _ocr_switch(cls, v):
        return {"enabled": v} if isinstance(v, bool) else v

    @field_validator("paths")
    @classmethod
    def _expand(cls, v: tuple[Path, ...]) -> tuple[Path, ...]:
        return expand_paths(v)

    @property
    def includes(self) -> tuple[str, ...]:
        return self.include if self.include is not None else default_includes(self.type, self.ocr.enabled)

    @property
    def excludes(self) -> tuple[str, ...]:
        return DEFAULT_EXCLUDES + self.exclude + tuple(f"{f.strip('/')}/**" for f in self.exclude_folders)


@dataclass(frozen=True)
class FileEntry:
    key: str
    path: Path
    relpath: str
    size: int
    mtime_ns: int

    @property
    def suffix(self) -> str:
        return self.path.suffix.lower().lstrip(".")

    @property
    def uri(self) -> str:
        return readable(str(self.path))  # a name with bytes that are not UTF-8 is shown (and stored) readably


def root_labels(roots: Sequence[Path]) -> list[tuple[Path, str | None]]:
    """(root, label) per root; labels (the folder's name, made unique) only when there are several."""
    if len(roots) == 1:
        return [(roots[0], None)]
    labels, out = set(), []
    for root in roots:
        label, n = root.name or "root", 2
        while label in labels:
            label, n = f"{root.name}-{n}", n + 1
        labels.add(label)
        out.append((root, label))
    return out


class FileSource(BaseSource):
    """Files under the roots of one source config; keys are relative POSIX paths (see rag_search.keys)."""

    def __init__(self, options: FileOptions, label: str | None = None, limits: Limits | None = None):
        super().__init__(label)
        self.options = options
        self.type = options.type  # type: ignore[misc]
        self.limits = limits or Limits()
        self.ocr = options.ocr.settings()
        self.globs = GlobSet(options.includes, options.excludes)
        self.roots = [(root, self._join(sub)) for root, sub in root_labels(list(options.paths))]
        self._entries: dict[str, FileEntry] | None = None
        self._problems: dict[str, tuple[str, str]] = {}
        self._unavailable: str | None = None
        self._ignores = ragignore.Cache()
        self._name_index: tuple | None = None

    def _join(self, sub: str | None) -> str | None:
        parts = [p for p in (self.label, sub) if p]
        return "/".join(parts) or None

    # -- scan ----------------------------------------------------------------------------------

    def scan(self) -> ScanResult:
        result, entries = ScanResult(), {}
        missing = [str(root) for root, _ in self.roots if not root.is_dir()]
        if missing:
            raise SourceUnavailable(
                f"{', '.join(missing)} is missing or not a folder (a drive not mounted? moved?). Nothing indexed "
                "from it was removed. Fix the path in the config, or delete the collection if it is gone for good.")
        for root, label in self.roots:
            for rel, st, problem in _walk(root, self.globs, self._allowed_roots()):
                key = path_key(rel, label)
                if problem:
                    result.problems[key] = problem
                    continue
                entries[key] = FileEntry(key, root / rel, rel, st.st_size, st.st_mtime_ns)
                result.items[key] = Stamp(self._stamp(entries[key].suffix, st), entries[key].uri)
        self._entries, self._problems = entries, dict(result.problems)
        return result

    def _allowed_roots(self) -> list[Path] | None:
        if self.options.follow_symlinks_outside:
            return None
        return [Path(os.path.realpath(r)) for r, _ in self.roots]

    def owns(self, key: str) -> bool:
        labels = [label for _, label in self.roots]
        return labels == [None] or any(key.startswith(f"{lb}/") for lb in labels if lb)

    def _stamp(self, suffix: str, st: os.stat_result) -> str:
        """Size and mtime, the parser's version and what OCR reads the file with (parsers.version_tag, ocr_tag): a change
        of any reads it again."""
        return f"{st.st_size}:{st.st_mtime_ns}{parsers.version_tag(suffix)}{parsers.ocr_tag(suffix, self.ocr)}"

    def same_content(self, key: str, sha256: str | None) -> bool:
        entry = (self._entries or {}).get(key)
        if entry is None or sha256 is None:
            return False
        try:
            return parsers.content_id(sha256_file(entry.path), entry.suffix, self.ocr) == sha256
        except OSError:
            return False

    def watch_paths(self) -> list[Path]:
        return [root for root, _ in self.roots]

    def key_for_path(self, path: Path) -> str | None:
        """The key of a file path under a root, if this source wants it (for the watcher)."""
        for root, label in self.roots:
            try:
                rel = Path(path).relative_to(root).as_posix()
            except ValueError:
                continue
            folders = [str(p) for p in list(Path(rel).parents)[:-1]]
            if (self.globs.wants_file(rel) and not any(self.globs.skips_folder(f) for f in folders)
                    and not self._ignores.ignores(root, rel)):
                return path_key(rel, label)
        return None

    def replans(self, path: Path) -> bool:
        """Whether a change of `path` means planning the whole source again (the watcher): a .ragignore the scan
        reads, in a root or a folder it enters."""
        if Path(path).name != ragignore.RAGIGNORE:
            return False
        for root, _ in self.roots:
            try:
                folder = Path(path).parent.relative_to(root)
            except ValueError:
                continue
            folders = [str(p) for p in [folder, *folder.parents] if str(p) != "."]
            return not any(self.globs.skips_folder(f) for f in folders)
        return False

    # -- load ----------------------------------------------------------------------------------

    def entries(self, keys: Sequence[str], known_uris: Mapping[str, str]) -> dict[str, FileEntry]:
        """FileEntry per key: from the index's known path when it still maps to the key, else by a scan."""
        found: dict[str, FileEntry] = {}
        for key in keys:
            entry = self._entry_from_path(key, Path(known_uris[key])) if key in known_uris else None
            if entry:
                found[key] = entry
        missing = [k for k in keys if k not in found and k not in (self._entries or {})]
        self._unavailable = None
        if missing and not all(k in self._problems for k in missing):  # new since the last scan (or none yet)
            try:
                self.scan()
            except SourceUnavailable as exc:  # unmounted mid-run: its items must not look deleted
                self._entries, self._unavailable = self._entries or {}, str(exc)
        cached = self._entries or {}
        found.update({k: cached[k] for k in keys if k not in found and k in cached})
        return found

    def _entry_from_path(self, key: str, path: Path) -> FileEntry | None:
        if self.key_for_path(path) != key:  # no longer wanted there (excluded, ignored since): gone from the source
            return None
        for root, label in self.roots:
            try:
                rel = path.relative_to(root).as_posix()
                st = path.stat()
            except (ValueError, OSError):
                continue
            if path_key(rel, label) == key and path.is_file() and _inside(path, self._allowed_roots()):
                return FileEntry(key, path, rel, st.st_size, st.st_mtime_ns)
        return None

    def load(self, keys: Sequence[str], known_uris: Mapping[str, str] | None = None) -> Iterator[Loaded]:
        known_uris = known_uris or {}
        entries = self.entries(keys, known_uris)
        for key in keys:
            entry, uri = entries.get(key), known_uris.get(key, key)
            if entry:
                yield self._load_one(entry)
            elif self._unavailable:
                yield Loaded(key, uri, "unknown", stamp="unavailable", error=("unavailable", self._unavailable))
            elif key in self._problems:
                yield Loaded(key, uri, "folder" if key.endswith("/") else "unknown", stamp=f"problem:{self._problems[key][0]}",
                             error=self._problems[key])
            else:
                yield Loaded(key, uri, "unknown", gone=True)

    def _load_one(self, entry: FileEntry) -> Loaded:
        stype = parsers.source_type(entry.suffix)
        base = dict(key=entry.key, uri=entry.uri, source_type=stype, plain=stype in PLAIN_TYPES)
        if not _inside(entry.path, self._allowed_roots()):
            return Loaded(**base, gone=True)  # became a link out of the roots since the scan: not read
        try:
            st = entry.path.stat()
            try:
                parsers.check_size(st.st_size, readable(entry.relpath), self.limits)  # before reading a byte of it
            except parsers.ParseError as exc:
                return Loaded(**base, stamp=self._stamp(entry.suffix, st), size=st.st_size, mtime_ns=st.st_mtime_ns,
                              error=(exc.kind, str(exc)))
            data = entry.path.read_bytes()
        except FileNotFoundError:
            return Loaded(**base, gone=True)
        except OSError as exc:
            return Loaded(**base, error=("unreadable", f"cannot read the file ({exc.strerror or exc}); check its permissions"))
        rel, mtime, limits, ocr = readable(entry.relpath), st.st_mtime_ns, self.limits, self.ocr
        meta = captured_metadata(self.options, rel)
        root = entry.path.parents[entry.relpath.count("/")]

        def parse():
            doc = parsers.parse(data, rel, mtime, limits, ocr)
            if stype == "markdown":
                doc = note_images.with_embedded_images(doc, entry.relpath, lambda t, n: self._image(root, t, n),
                                                       limits, ocr)
            return _with_metadata(doc, meta)

        content = parsers.content_id(hashlib.sha256(data).hexdigest(), entry.suffix, ocr)
        return Loaded(**base, stamp=self._stamp(entry.suffix, st), content_hash=content, parse=parse, size=st.st_size,
                      mtime_ns=st.st_mtime_ns)


    def _image(self, root: Path, target: str, note: str) -> Path | None:
        """The file an embed names, as Obsidian resolves it (see note_images), inside the source's roots."""
        direct = [target.lstrip("/"), os.path.normpath(os.path.join(os.path.dirname(note), target))]
        for rel in direct:
            path = root / rel
            if not rel.startswith("..") and path.is_file() and _inside(path, self._allowed_roots()):
                return path
        rel = note_images.shortest(self._names().get((root, os.path.basename(target).lower()), ()))
        return root / rel if rel and _inside(root / rel, self._allowed_roots()) else None

    def _names(self) -> dict[tuple[Path, str], list[str]]:
        """(root, lower-case file name) → the relative paths of the scanned files of that name (built once a scan)."""
        if self._name_index is None or self._name_index[0] is not self._entries:
            names: dict[tuple[Path, str], list[str]] = {}
            for e in (self._entries or {}).values():
                root = e.path.parents[e.relpath.count("/")]
                names.setdefault((root, e.path.name.lower()), []).append(e.relpath)
            self._name_index = (self._entries, names)
        return self._name_index[1]


def _with_metadata(doc, meta: dict):
    if not meta:
        return doc
    from dataclasses import replace

    return replace(doc, metadata={**doc.metadata, **meta})


def _inside(path: Path, allowed: list[Path] | None) -> bool:
    if allowed is None:
        return True
    real = Path(os.path.realpath(path))
    return any(real == r or r in real.parents for r in allowed)


Walked = tuple[str, "os.stat_result | None", "tuple[str, str] | None"]


def _walk(root: Path, globs: GlobSet, allowed: list[Path] | None) -> Iterator[Walked]:
    """(relpath, stat, None) per wanted file; (relpath/, None, (kind, message)) per folder or file it cannot read."""
    seen_dirs = {_dir_id(root)}
    stack: list[tuple[Path, str, tuple[ragignore.Rules, ...]]] = [(root, "", ())]
    while stack:
        folder, rel_folder, ignores = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            if rel_folder:
                yield rel_folder, None, ("unreadable", f"cannot list the folder {readable(str(folder))} ({exc.strerror or exc}); "
                                         "check its permissions, or exclude it with exclude_folders")
            continue
        if any(e.name == ragignore.RAGIGNORE for e in entries):
            try:
                ignores += (ragignore.load(folder / ragignore.RAGIGNORE, rel_folder),)
            except (OSError, ragignore.IgnoreFileError) as exc:
                yield rel_folder + ragignore.RAGIGNORE, None, ragignore.problem(folder / ragignore.RAGIGNORE, exc)
                continue
        for entry in entries:
            rel = f"{rel_folder}{entry.name}"
            try:
                if entry.is_symlink() and not _inside(Path(entry.path), allowed):
                    continue  # a link out of the roots: not followed unless follow_symlinks_outside
                if entry.is_dir():
                    if globs.skips_folder(rel) or ragignore.ignored(ignores, rel, True):
                        continue
                    ident = _dir_id(Path(entry.path))
                    if ident not in seen_dirs:
                        seen_dirs.add(ident)
                        stack.append((Path(entry.path), rel + "/", ignores))
                elif globs.wants_file(rel) and not ragignore.ignored(ignores, rel, False):
                    yield (rel, entry.stat(), None) if entry.is_file() else (rel, None, _not_a_file(entry))
            except OSError as exc:
                if globs.wants_file(rel) and not ragignore.ignored(ignores, rel, False):
                    yield rel, None, ("unreadable", f"cannot read {readable(entry.path)} ({exc.strerror or exc}); "
                                      "shorten the path or fix its permissions")


def _not_a_file(entry: os.DirEntry) -> tuple[str, str]:
    """Why a name the globs want is not read: a dangling link, a named pipe, a socket, a device."""
    if entry.is_symlink():
        return "broken_link", (f"{readable(entry.path)} is a symbolic link to {readable(os.readlink(entry.path))}, "
                               "which does not exist; fix or remove the link")
    mode = entry.stat(follow_symlinks=False).st_mode
    what = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return "not_a_file", (f"{readable(entry.path)} is {what}, not a file, so it is not read (reading could block); "
                          "remove it or exclude it")


def _dir_id(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


def captured_metadata(src: FileOptions, relpath: str) -> dict[str, str]:
    """Static metadata plus named captures of the source's path patterns that match this path."""
    meta: dict = dict(src.metadata)
    for cap in src.captures:
        m = compile_capture(cap.pattern).match(relpath)
        if m:
            meta.update({k: v for k, v in m.groupdict().items() if v is not None})
    return meta


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _build(options: FileOptions, label: str | None, limits: Limits | None = None) -> FileSource:
    return FileSource(options, label, limits)


def _source_type(name: str, summary: str, kind: str):
    from rag_pipelines.sources.registry import SourceType

    return SourceType(type=name, options=FileOptions, build=_build, summary=summary, kind=kind)


SOURCES = [
    _source_type("obsidian", "An Obsidian vault: notes, canvases, attached documents and images (OCR).", "system"),
    _source_type("project", "Folders of documents: Markdown, PDF, DOCX, PPTX, XLSX, OpenDocument, HTML, EPUB, "
                            "text, images (OCR).", "project"),
]
