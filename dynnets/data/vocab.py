"""Word <-> id vocabulary and pretrained embeddings.

``Vocabulary`` reserves id 0 for ``<pad>`` (so zero-initialised id arrays are
padding) and id 1 for ``<unk>``; corpus words follow by decreasing frequency,
ties broken alphabetically, so a vocabulary is a deterministic function of its
training words.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..io import atomic_write_text
from .encoding import describe_decode_error

__all__ = ["Vocabulary", "Embeddings", "load_embeddings", "PAD", "UNK", "PAD_ID", "UNK_ID"]

PAD = "<pad>"
UNK = "<unk>"
PAD_ID = 0
UNK_ID = 1
_FORMAT = "dynnets.vocabulary/1"


class Vocabulary:
    """Mapping from words to ids; unseen words map to ``<unk>``.

    Parameters
    ----------
    words : iterable of str
        Corpus words in id order (ids 2, 3, ...); duplicates are an error.
    lowercase : bool
        Lowercase every word, at construction and at lookup.
    counts : dict, optional
        Training frequencies, kept for reference (saved with the vocabulary).
    min_freq : int
        Recorded for reference.

    Examples
    --------
    >>> v = Vocabulary.build(["a", "b", "a"], min_freq=2)
    >>> v["a"], v["b"], v.pad_id, v.unk_id
    (2, 1, 0, 1)
    """

    pad = PAD
    unk = UNK
    pad_id = PAD_ID
    unk_id = UNK_ID

    def __init__(self, words: Iterable[str] = (), *, lowercase: bool = False, counts: dict[str, int] | None = None,
                 min_freq: int = 1):
        self.lowercase = bool(lowercase)
        self.min_freq = int(min_freq)
        self._itos: list[str] = [PAD, UNK]
        self._stoi: dict[str, int] = {PAD: PAD_ID, UNK: UNK_ID}
        for w in words:
            if not isinstance(w, str):
                raise TypeError(f"Vocabulary: words must be str, got {type(w).__name__} ({w!r})")
            if self.lowercase:
                w = w.lower()
            if w in self._stoi:
                raise ValueError(f"Vocabulary: duplicate word {w!r} (ids {self._stoi[w]} and {len(self._itos)})")
            self._stoi[w] = len(self._itos)
            self._itos.append(w)
        self.counts: dict[str, int] = dict(counts) if counts else {}

    @classmethod
    def build(cls, words: Iterable[str], *, min_freq: int = 1, lowercase: bool = False,
              max_size: int | None = None) -> Vocabulary:
        """Count ``words`` (e.g. every token of the training split) and keep those seen
        at least ``min_freq`` times; at most ``max_size`` corpus words (specials excluded)."""
        if min_freq < 1:
            raise ValueError(f"Vocabulary.build: min_freq must be >= 1, got {min_freq}")
        counter = Counter(w.lower() for w in words) if lowercase else Counter(words)
        counter.pop(PAD, None)
        counter.pop(UNK, None)
        kept = sorted((w for w, c in counter.items() if c >= min_freq), key=lambda w: (-counter[w], w))
        if max_size is not None:
            kept = kept[:max_size]
        return cls(kept, lowercase=lowercase, counts={w: counter[w] for w in kept}, min_freq=min_freq)

    @classmethod
    def from_trees(cls, trees: Iterable[Any], **kwargs: Any) -> Vocabulary:
        """:meth:`build` from the leaf words of ``trees`` (objects with a ``words()`` method)."""
        return cls.build((w for t in trees for w in t.words()), **kwargs)

    # -- lookup ------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._itos)

    def __iter__(self) -> Iterator[str]:
        return iter(self._itos)

    def __contains__(self, word: object) -> bool:
        if not isinstance(word, str):
            return False
        return (word.lower() if self.lowercase else word) in self._stoi

    def __getitem__(self, word: str) -> int:
        """Id of ``word``; ``unk_id`` when unseen."""
        if self.lowercase:
            word = word.lower()
        return self._stoi.get(word, UNK_ID)

    __call__ = __getitem__

    def ids(self, words: Iterable[str]) -> np.ndarray:
        """Ids of a sequence of words, shape ``(len(words),)``, int64."""
        get = self._stoi.get
        if self.lowercase:
            return np.fromiter((get(w.lower(), UNK_ID) for w in words), dtype=np.int64)
        return np.fromiter((get(w, UNK_ID) for w in words), dtype=np.int64)

    def word(self, i: int) -> str:
        """The word with id ``i``."""
        return self._itos[i]

    def words(self, ids: Iterable[int]) -> list[str]:
        """Words of a sequence of ids."""
        itos = self._itos
        return [itos[int(i)] for i in ids]

    @property
    def itos(self) -> list[str]:
        """All words in id order (a copy)."""
        return list(self._itos)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self._itos == other._itos and self.lowercase == other.lowercase

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} words, lowercase={self.lowercase}, min_freq={self.min_freq})"

    # -- persistence -------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"format": _FORMAT, "lowercase": self.lowercase, "min_freq": self.min_freq,
                "words": self._itos[2:], "counts": [self.counts.get(w, 0) for w in self._itos[2:]]}

    def save(self, path: str | os.PathLike) -> None:
        """Write JSON atomically (:func:`dynnets.io.atomic_write_text`)."""
        atomic_write_text(path, json.dumps(self.to_dict(), ensure_ascii=False, indent=0))

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocabulary:
        """Read a vocabulary written by :meth:`save`."""
        path = Path(path)
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{e.lineno}:{e.colno}: Vocabulary.load: invalid JSON: {e.msg}") from None
            except UnicodeDecodeError as e:
                line, col, reason = describe_decode_error(path, e)
                raise ValueError(f"{path}:{line}:{col}: Vocabulary.load: {reason}") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            got = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{path}: Vocabulary.load: expected format {_FORMAT!r}, got {got!r}")
        words = data["words"]
        counts = data.get("counts") or []
        return cls(words, lowercase=data["lowercase"], min_freq=data.get("min_freq", 1),
                   counts={w: c for w, c in zip(words, counts) if c})


class Embeddings(NamedTuple):
    """Result of :func:`load_embeddings`.

    Attributes
    ----------
    matrix : ndarray, shape (len(vocab), dim), float32
        Row ``i`` is the vector of word ``i``; ``<pad>`` is zeros; words not in
        the file (and ``<unk>``) are random.
    found : ndarray, shape (len(vocab),), bool
        Which rows came from the file.
    """

    matrix: np.ndarray
    found: np.ndarray

    @property
    def n_found(self) -> int:
        """Vocabulary words (``<pad>``/``<unk>`` excluded) found in the file."""
        return int(self.found[2:].sum())

    @property
    def n_words(self) -> int:
        """Vocabulary words, ``<pad>``/``<unk>`` excluded."""
        return max(len(self.found) - 2, 0)

    @property
    def coverage(self) -> float:
        """``n_found / n_words``."""
        return self.n_found / self.n_words if self.n_words else 0.0

    def report(self) -> str:
        return f"found {self.n_found} of {self.n_words} vocabulary words ({100 * self.coverage:.1f}%)"


def load_embeddings(path: str | os.PathLike, vocab: Vocabulary, *, rng: np.random.Generator,
                    scale: float = 0.05) -> Embeddings:
    """Read pretrained vectors in GloVe or word2vec text format.

    GloVe lines are ``word x1 ... xd``; word2vec text files start with a
    ``count dim`` header line. The format is detected from the first line.
    Only lines whose word is in ``vocab`` are converted (so a 5 GB file costs
    one string split per line). With a lowercase vocabulary, file words are
    lowercased; an exact match wins over a case-folded one.

    Parameters
    ----------
    path : path-like
    vocab : Vocabulary
    rng : numpy.random.Generator
        Rows of words not in the file are ``rng.uniform(-scale, scale, dim)``.
        The whole random matrix is drawn before reading, so the result does
        not depend on which words the file contains.
    scale : float

    Returns
    -------
    Embeddings
        ``(matrix, found)`` with ``coverage`` / ``n_found`` / ``report()``.
    """
    path = Path(path)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"load_embeddings: rng must be a numpy.random.Generator, got {type(rng).__name__}")
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            return _read_vectors(f, path, vocab, rng, scale)
    except UnicodeDecodeError as e:
        line, col, reason = describe_decode_error(path, e)
        raise ValueError(f"{path}:{line}:{col}: load_embeddings: {reason}") from None


def _read_vectors(f, path: Path, vocab: Vocabulary, rng: np.random.Generator, scale: float) -> Embeddings:
    V = len(vocab)
    first = f.readline()
    if not first:
        raise ValueError(f"{path}:1:1: load_embeddings: expected a header 'count dim' or a vector line, "
                         "got an empty file")
    parts = first.split()
    lineno = 1
    pending: str | None
    if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
        dim = int(parts[1])
        pending = None
    else:
        dim = len(parts) - 1
        pending = first
    if dim < 1:
        raise ValueError(f"{path}:1:1: load_embeddings: expected 'word x1 ... xd' or 'count dim', "
                         f"got {first.strip()[:60]!r}")
    matrix = rng.uniform(-scale, scale, size=(V, dim)).astype(np.float32)
    matrix[PAD_ID] = 0.0
    found = np.zeros(V, dtype=bool)
    exact = np.zeros(V, dtype=bool)
    stoi = vocab._stoi
    lower = vocab.lowercase

    def take(line: str, lineno: int) -> None:
        word, sep, rest = line.partition(" ")
        if not sep:
            raise ValueError(f"{path}:{lineno}:1: load_embeddings: expected 'word' and {dim} numbers, "
                             f"got {line.strip()[:60]!r}")
        key = word.lower() if lower else word
        i = stoi.get(key)
        if i is None or i < 2 or exact[i]:
            return
        fields = rest.split()
        if len(fields) != dim:
            raise ValueError(f"{path}:{lineno}:{len(word) + 2}: load_embeddings: expected {dim} numbers after "
                             f"the word {word!r}, got {len(fields)}")
        try:
            with np.errstate(over="ignore"):      # a value beyond float32 is reported below
                vec = np.array(fields, dtype=np.float32)
        except ValueError:
            bad = next(x for x in fields if not _is_float(x))
            col = len(word) + 2 + rest.find(bad)
            raise ValueError(f"{path}:{lineno}:{col}: load_embeddings: expected a number, got {bad!r}") from None
        if not np.isfinite(vec).all():
            k = int(np.flatnonzero(~np.isfinite(vec))[0])
            col = _field_column(rest, k) + len(word) + 1
            if np.isnan(vec[k]):
                what = "NaN"
            elif math.isfinite(float(fields[k])):
                what = "a number beyond float32's range"
            else:
                what = "inf"
            raise ValueError(f"{path}:{lineno}:{col}: load_embeddings: the vector of {word!r} has {what} "
                             f"at component {k + 1} ({fields[k]!r}); expected finite numbers")
        if key == word or not found[i]:
            matrix[i] = vec
            found[i] = True
            exact[i] = key == word

    if pending is not None:
        take(pending.rstrip("\n"), 1)
    for lineno, line in enumerate(f, 2):
        if line.strip():
            take(line.rstrip("\n"), lineno)
    return Embeddings(matrix, found)


def _field_column(rest: str, k: int) -> int:
    """1-based column within ``rest`` of its ``k``-th whitespace-separated field."""
    for i, m in enumerate(re.finditer(r"\S+", rest)):
        if i == k:
            return m.start() + 1
    return 1


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True
