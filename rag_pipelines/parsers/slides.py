"""Slides → sections (PPTX and ODP share it): one per slide, cited as "Slide N: its title", notes beneath it.

A slide's section carries its number as the page (chunks never span two slides) and the heading
"Slide 3: Quarterly results" (just "Slide 3" without a title); its body is the text of its other shapes and
tables in reading order (a table row per line, cells joined by " | "); its speaker notes follow as a
sub-section "Speaker notes". Reading stops after limits.max_slides slides or limits.max_text_mb of text;
the warning names the slides not read (`count`, when known).
"""

from __future__ import annotations

from rag_search.records import Section

from rag_pipelines.parsers.limits import MB, Limits, human_size
from rag_pipelines.parsers.webpage import label

NOTES = "Speaker notes"


class DeckText:
    """Collects the sections of a deck's slides within the slide and text limits."""

    def __init__(self, limits: Limits, count: int = 0):
        self.max_slides, self.max_text, self.count = limits.max_slides, int(limits.max_text_mb * MB), count
        self.sections: list[Section] = []
        self.titles: list[str] = []
        self.slides = self.size = 0
        self.stopped: int | None = None
        self.why = ""

    @property
    def full(self) -> bool:
        return self.stopped is not None

    def room(self, number: int) -> bool:
        """Whether slide `number` may be read; records where reading stopped when not."""
        if self.full:
            return False
        if self.slides >= self.max_slides or self.size > self.max_text:
            self.stopped = number
            self.why = (f"the deck has more than {self.max_slides:,} slides (limits.max_slides)"
                        if self.slides >= self.max_slides else
                        f"its text passed {human_size(self.max_text)} (limits.max_text_mb)")
            return False
        return True

    def add(self, number: int, title: str, body: list[str], notes: list[str]) -> None:
        self.slides += 1
        title = label(title)
        head = f"Slide {number}: {title}" if title else f"Slide {number}"
        text, notes_text = "\n".join(b for b in body if b.strip()), "\n".join(n for n in notes if n.strip())
        if title:
            self.titles.append(title)
        if text or (title and not notes_text):
            self.sections.append(Section(text=text or title, heading_path=(head,), page=number))
        if notes_text:
            self.sections.append(Section(text=notes_text, heading_path=(head, NOTES), page=number))
        self.size += len(text) + len(notes_text) + len(title)

    def warning(self) -> str | None:
        if self.stopped is None:
            return None
        slides = (f"slides {self.stopped}–{self.count}" if self.stopped < self.count else f"slide {self.stopped}"
                  if self.count else f"slides from {self.stopped} on")
        return f"{slides} not read: {self.why}; raise the limit to index the whole deck"
