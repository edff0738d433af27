"""Megatron's indexed dataset (``.bin``/``.idx``) written without importing megatron-core, hashed as it is written.

Importing megatron-core's ``IndexedDatasetBuilder`` imports torch, about 10 s on a 2-core machine, longer than
encoding a 200 MB corpus. The format is small and fixed (``megatron/core/datasets/indexed_dataset.py``); the output
is checked byte for byte against the builder (tests/unit/data/test_data_encode.py).
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

INDEX_MAGIC = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
# megatron-core's DType codes (indexed_dataset.py), the ones a token dataset can use.
DTYPE_CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float64: 6, np.float32: 7,
               np.uint16: 8}


def optimal_dtype(vocab_size: int) -> type:
    """megatron-core's ``DType.optimal_dtype``: uint16 below 65,500 token ids, else int32."""
    return np.uint16 if vocab_size < 65500 else np.int32


class IndexWriter:
    """``IndexedDatasetBuilder(bin_path, dtype)`` + ``add_document`` per document + ``finalize(idx_path)``. A document
    of length 0 ends a document without a sequence, as ``add_document([], [])`` does in ``tools/preprocess_data.py``."""

    def __init__(self, bin_path: Path, dtype: type) -> None:
        self.dtype = dtype
        self._stream: BinaryIO = Path(bin_path).open("wb")  # noqa: SIM115  (finalize() or close() closes it)
        self._bin_hash = hashlib.sha256()
        self._lengths: list[np.ndarray] = []
        self._documents: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        self._sequences = 0
        self.tokens = 0

    def add_documents(self, tokens: np.ndarray, sizes: np.ndarray) -> None:
        data = np.ascontiguousarray(tokens, dtype=self.dtype)
        view = memoryview(data).cast("B")
        self._stream.write(view)
        self._bin_hash.update(view)
        lengths = sizes[sizes > 0].astype(np.int32)
        self._lengths.append(lengths)
        self._documents.append(self._sequences + np.cumsum(sizes > 0, dtype=np.int64))
        self._sequences += len(lengths)
        self.tokens += len(data)

    def finalize(self, idx_path: Path) -> tuple[str, str]:
        """Close the ``.bin`` and write the ``.idx``; returns the sha256 of each (bin, idx)."""
        self._stream.close()
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int32)
        documents = np.concatenate(self._documents)
        pointers = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], dtype=np.int64, out=pointers[1:])
        pointers *= np.dtype(self.dtype).itemsize
        header = INDEX_MAGIC + struct.pack("<Q", INDEX_VERSION) + struct.pack("<B", DTYPE_CODES[self.dtype])
        idx_hash = hashlib.sha256()
        with Path(idx_path).open("wb") as stream:
            for part in (header, struct.pack("<Q", len(lengths)), struct.pack("<Q", len(documents)),
                         lengths.tobytes(), pointers.tobytes(), documents.tobytes()):
                stream.write(part)
                idx_hash.update(part)
        return self._bin_hash.hexdigest(), idx_hash.hexdigest()

    def close(self) -> None:
        """Close the ``.bin`` without an index (an interrupted encode; the caller removes the file)."""
        self._stream.close()
