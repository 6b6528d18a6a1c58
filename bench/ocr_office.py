"""OCR accuracy and speed on rendered text and real scans; a 1M-cell workbook and a 5,000-slide deck within the limits.

    python bench/ocr_office.py [--engines rapidocr,tesseract] [--only ocr,pages,pdf,public,office] [--images 6]

1. ocr: character accuracy (1 - edit distance / length, whitespace collapsed) per engine on text rendered by
   Pillow (tests/office_builders.text_image, DejaVu Sans where installed): clean 12 pt (33 px, 12 pt at 200
   dpi), small 9 pt, noisy (blur, gaussian noise sigma 40, JPEG q40), skewed 4 degrees, turned 90, 180 and 270
   degrees; `--images` images of 6 lines of real prose (docstrings) each; seconds per image.
2. pages: a dense page (A4 at 200 dpi, 40 lines): pages per second (wall and CPU of this process and the
   worker), peak RSS of this process and of the RapidOCR worker.
3. pdf: an image-only PDF of 5 rendered pages through parse() with OCR: pages per second; then again, from the
   OCR cache.
4. public: OCRmyPDF's tests/resources/c02-22.pdf (Huckleberry Finn p. 22, a scan, public domain; a copy is in
   tests/fixtures/public) through parse(); OCRmyPDF's linn.png with its transcription linn.txt (CC BY-SA 3.0)
   for accuracy on a real brochure scan, when a fetched mirror of OCRmyPDF is at --mirror.
5. office: a 1M-cell workbook (100k rows x 10) and a 5,000-slide deck, each parsed in a fresh process with the
   default limits and with the limit raised to read all: seconds, peak RSS, what was read, the warning.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from docstrings import docstrings  # noqa: E402
from office_builders import big_deck, big_workbook, image_pdf, text_image  # noqa: E402

from rag_pipelines.parsers import Limits, OcrSettings, parse  # noqa: E402
from rag_pipelines.parsers.ocr import OcrRun  # noqa: E402
from rag_pipelines.parsers.ocr.engines import ENGINES  # noqa: E402

VARIANTS = {"clean 12pt": {}, "small 9pt": {"size": 25}, "noisy": {"noise": 40, "jpeg": True},
            "skewed 4°": {"turn": 4}, "turned 90°": {"turn": 90}, "turned 180°": {"turn": 180},
            "turned 270°": {"turn": 270}}
MIRROR = Path("/work/.mirror/ocrmypdf+OCRmyPDF/repo")
GENEROUS = Limits(max_ocr_seconds=600, max_ocr_pages=1000)


def prose_lines(count: int, width: int = 58) -> list[list[str]]:
    """`count` blocks of 6 lines of real prose (ASCII, so any font renders it)."""
    text = " ".join(d.encode("ascii", "ignore").decode() for d in docstrings(count * 4))
    lines = textwrap.wrap(" ".join(text.split()), width)
    return [lines[i * 6:(i + 1) * 6] for i in range(count)]


def accuracy(found: str, truth: str) -> float:
    a, b = " ".join(found.split()), " ".join(truth.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return max(0.0, 1 - previous[-1] / max(len(b), 1))


def fresh_run(engine: str, cache: Path) -> OcrRun:
    return OcrRun(OcrSettings(engine=engine, cache_path=cache), GENEROUS)


def ocr_accuracy(engines: list[str], count: int, tmp: Path) -> None:
    from PIL import Image

    blocks = prose_lines(count)
    print(f"\n1. character accuracy on {count} rendered images of 6 lines each (mean; worst)")
    print(f"{'variant':<14}" + "".join(f"{e:>28}" for e in engines))
    for name, options in VARIANTS.items():
        cells = []
        for engine in engines:
            scores, seconds = [], []
            for i, lines in enumerate(blocks):
                image = Image.open(io.BytesIO(text_image(lines, seed=i, **options)))
                run = fresh_run(engine, tmp / f"acc-{engine}-{name}-{i}.sqlite")
                started = time.monotonic()
                found = run.read(image, f"{name}{i}", name)
                seconds.append(time.monotonic() - started)
                scores.append(accuracy(found.text if found else "", "\n".join(lines)))
            cells.append(f"{sum(scores) / len(scores):7.1%}; {min(scores):6.1%}; {sum(seconds) / len(seconds):5.2f} s")
        print(f"{name:<14}" + "".join(f"{c:>28}" for c in cells), flush=True)


def worker_peak_mb() -> float | None:
    proc = ENGINES["rapidocr"].proc
    if proc is None or proc.poll() is not None:
        return None
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return None


def page_speed(engines: list[str], tmp: Path) -> None:
    import resource

    from PIL import Image

    lines = [line for block in prose_lines(7) for line in block][:40]
    page = Image.open(io.BytesIO(text_image(lines, size=33))).convert("RGB")
    print(f"\n2. a dense page ({page.width}x{page.height}, {sum(map(len, lines)):,} characters), 3 reads each")
    for engine in engines:
        run = fresh_run(engine, tmp / f"page-{engine}.sqlite")
        run.read(page, "warm-up", "warm-up")  # the worker's start is not a page's cost
        wall, cpu, children = time.monotonic(), time.process_time(), _children_cpu()
        scores = [accuracy(run.read(page, f"p{i}", "page").text, "\n".join(lines)) for i in range(3)]
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu + _children_cpu() - children
        worker = worker_peak_mb() if engine == "rapidocr" else None
        print(f"  {engine}: {3 / wall:.2f} pages/s ({wall / 3:.1f} s wall, {cpu / 3:.1f} s CPU per page), accuracy "
              f"{min(scores):.1%}; peak RSS this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
              + (f", worker {worker:.0f} MB" if worker else ""), flush=True)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker = ENGINES["rapidocr"].proc
    extra = 0.0
    if worker is not None and worker.poll() is None:
        fields = Path(f"/proc/{worker.pid}/stat").read_text().rsplit(")", 1)[1].split()
        extra = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return usage.ru_utime + usage.ru_stime + extra


def pdf_speed(engines: list[str], tmp: Path) -> None:
    blocks = prose_lines(5)
    pdf = image_pdf([text_image(lines * 3) for lines in blocks])
    print("\n3. an image-only PDF of 5 pages (18 lines each) through parse()")
    for engine in engines:
        settings = OcrSettings(engine=engine, cache_path=tmp / f"pdf-{engine}.sqlite")
        for label in ("first read", "from the OCR cache"):
            started = time.monotonic()
            doc = parse(pdf, "scan.pdf", None, GENEROUS, settings)
            seconds = time.monotonic() - started
            score = sum(accuracy(s.text, "\n".join(b * 3)) for s, b in zip(doc.sections, blocks)) / len(blocks)
            print(f"  {engine}, {label}: {5 / seconds:.2f} pages/s ({seconds:.1f} s), {len(doc.sections)} pages with "
                  f"text, accuracy {score:.1%}, {doc.metadata.get('text_source')}", flush=True)


def public_scans(engines: list[str], tmp: Path, mirror: Path) -> None:
    print("\n4. real scans")
    scan = (ROOT / "tests/fixtures/public/c02-22.pdf").read_bytes()
    for engine in engines:
        started = time.monotonic()
        doc = parse(scan, "c02-22.pdf", None, GENEROUS, OcrSettings(engine=engine, cache_path=tmp / f"c02-{engine}"))
        text = " ".join(s.text for s in doc.sections)
        print(f"  c02-22.pdf (Huckleberry Finn p. 22) with {engine}: {time.monotonic() - started:.1f} s, "
              f"{len(text)} characters, confidence {doc.metadata.get('ocr_confidence')}: {text[:90]!r}", flush=True)
    if not (mirror / "HEAD").exists() and not (mirror / "objects").exists():
        print(f"  linn.png: no OCRmyPDF mirror at {mirror} (skipped)")
        return
    show = lambda path: subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{path}"],  # noqa: E731
                                       capture_output=True, check=True).stdout
    truth = show("tests/resources/linn.txt").decode()
    from PIL import Image

    image = Image.open(io.BytesIO(show("tests/resources/linn.png")))
    for engine in engines:
        started = time.monotonic()
        found = fresh_run(engine, tmp / f"linn-{engine}.sqlite").read(image, "linn", "linn.png")
        print(f"  linn.png ({image.width}x{image.height}, LinnSequencer brochure) with {engine}: "
              f"{accuracy(found.text, truth):.1%} against linn.txt, {time.monotonic() - started:.1f} s", flush=True)


# Peak RSS from VmHWM: ru_maxrss of a child started by subprocess carries the parent's size over the exec
OFFICE_PROBE = """
import json, re, sys, time
from rag_pipelines.parsers import Limits, parse
data = open(sys.argv[1], "rb").read()
started = time.monotonic()
doc = parse(data, sys.argv[1], None, Limits(**json.loads(sys.argv[2])))
print(json.dumps({"seconds": time.monotonic() - started, "sections": len(doc.sections),
                  "chars": sum(len(s.text) for s in doc.sections), "warning": doc.metadata.get("parse_warning"),
                  "rss_mb": int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1]) / 1024}))
"""


def office(tmp: Path) -> None:
    print("\n5. huge office files, each parsed in a fresh process")
    files = {"workbook_1M_cells.xlsx": (big_workbook(100_000, 10), {"max_cells": 1_000_000, "max_text_mb": 100}),
             "deck_5000_slides.pptx": (big_deck(5000), {"max_slides": 5000})}
    for name, (data, raised) in files.items():
        path = tmp / name
        path.write_bytes(data)
        for label, limits in (("default limits", {}), (f"raised {raised}", raised)):
            out = subprocess.run([sys.executable, "-c", OFFICE_PROBE, str(path), json.dumps(limits)],
                                 capture_output=True, text=True, timeout=600)
            if out.returncode:
                print(f"  {name} ({label}): failed: {out.stderr.strip()[-300:]}")
                continue
            r = json.loads(out.stdout)
            print(f"  {name} ({len(data) / 1e6:.1f} MB, {label}): {r['seconds']:.1f} s, peak RSS {r['rss_mb']:.0f} MB, "
                  f"{r['sections']:,} sections, {r['chars'] / 1e6:.1f} M characters; warning: {r['warning']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default="rapidocr,tesseract")
    parser.add_argument("--only", default="ocr,pages,pdf,public,office")
    parser.add_argument("--images", type=int, default=6)
    parser.add_argument("--mirror", type=Path, default=MIRROR)
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if not ENGINES[e].missing()]
    only = set(args.only.split(","))
    print(f"engines: {', '.join(ENGINES[e].key(('en',)) for e in engines)}; cores: {os.cpu_count()}; "
          f"load average: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        os.environ["LOCAL_RAG_HOME"] = str(tmp / "home")
        for section, run in (("ocr", lambda: ocr_accuracy(engines, args.images, tmp)),
                             ("pages", lambda: page_speed(engines, tmp)), ("pdf", lambda: pdf_speed(engines, tmp)),
                             ("public", lambda: public_scans(engines, tmp, args.mirror)),
                             ("office", lambda: office(tmp))):
            if section in only:
                run()


if __name__ == "__main__":
    main()
