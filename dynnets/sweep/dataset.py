"""A sweep's data, and every run's: :func:`load_data` reads an SST-format folder
once (the bytes workers receive and the run keys hash, parsed here so a bad
file is an error before anything starts); ``dynnets train``/``compare``
(:mod:`dynnets.runs`) load their data with it too."""
from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .grid import SweepError

__all__ = ["SweepData", "DataError", "load_data"]


class DataError(SweepError, FileNotFoundError):
    """A data folder that is missing, or lacks train.txt or dev.txt: a
    :class:`SweepError` for the sweep's callers and a FileNotFoundError for
    :mod:`dynnets.runs`' (as its own loader raised before the two became one)."""


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


_SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class SweepData:
    """The data of a sweep as workers receive it: the split files' bytes.

    ``key`` hashes the bytes (and ``max_sentences``); ``name`` describes the
    source. :meth:`splits` parses them (once per process).
    """

    files: tuple           # ((split, bytes), ...) in the order train, dev, test
    max_sentences: int | None
    key: str
    name: str

    def __iter__(self):
        # unpacks as (splits, name): what dynnets.runs' callers take
        return iter((self.splits(), self.name))

    def splits(self):
        """Split name -> list of trees (parsed by :func:`dynnets.data.load_sst`, cached per process)."""
        got = _PARSED.get(self.key)
        if got is None:
            from ..data import load_sst
            with tempfile.TemporaryDirectory(prefix="dynnets-sweep-data-") as tmp:
                for split, raw in self.files:
                    Path(tmp, f"{split}.txt").write_bytes(raw)
                got = load_sst(tmp)
            if self.max_sentences is not None:
                got = {k: v[:self.max_sentences] for k, v in got.items()}
            _PARSED.clear()         # one data set per process: a sweep's
            _PARSED[self.key] = got
        return got


# Parsed splits by data key, so a worker parses its sweep's data once, not
# once per run; the trees are immutable, so sharing them changes no result.
_PARSED: dict = {}


def load_data(folder=None, max_sentences=None):
    """Read an SST-format folder (default: the shipped samples): the one
    loader of sweeps and of ``dynnets train``/``compare`` (:mod:`dynnets.runs`).

    The files are parsed here, so a file that does not parse is an error
    (naming file, line and column) before any run starts.

    Parameters
    ----------
    folder : path or None
        A folder with ``train.txt``, ``dev.txt`` and optionally ``test.txt``.
    max_sentences : int, optional
        Keep only the first ``max_sentences`` trees of each split (quick runs).

    Returns
    -------
    SweepData
        Its :meth:`~SweepData.splits` always has ``train`` and ``dev``; it
        unpacks as ``(splits, name)``.
    """
    from ..data import samples_dir
    if max_sentences is not None and (isinstance(max_sentences, bool) or not isinstance(max_sentences, int)
                                      or max_sentences < 1):
        raise SweepError(f"max_sentences: expected a positive integer, got {max_sentences!r}")
    d = samples_dir() if folder is None else Path(folder)
    name = "the shipped sample treebank, dynnets/data/samples" if folder is None else str(folder)
    if not d.is_dir():
        raise DataError(f"--data '{folder}': no such folder (expected a folder with train.txt, dev.txt and "
                        f"optionally test.txt)")
    files = []
    for split in _SPLITS:
        p = d / f"{split}.txt"
        if p.is_file():
            files.append((split, p.read_bytes()))
        elif split != "test":
            found = sorted(q.name + ("/" if q.is_dir() else "") for q in d.iterdir())
            listing = ", ".join(found[:20]) + (f", ... ({len(found)} entries)" if len(found) > 20 else "")
            raise DataError(f"--data '{folder}' has no {split}.txt (train.txt and dev.txt are needed; test.txt is "
                            f"optional; found: {listing or 'an empty directory'})")
    h = hashlib.sha256()
    for split, raw in files:
        h.update(f"{split}\0{len(raw)}\0".encode())
        h.update(raw)
    h.update(f"max_sentences={max_sentences}".encode())
    data = SweepData(tuple(files), max_sentences, h.hexdigest(), name)
    from ..data import load_sst
    try:
        # errors name the real file (and line and column); a file with no trees is one too
        splits = load_sst(d, splits=[s for s, _ in files])
    except ValueError as exc:
        raise SweepError(" ".join(str(exc).split())) from None
    if max_sentences is not None:
        splits = {k: v[:max_sentences] for k, v in splits.items()}
    _PARSED.clear()
    _PARSED[data.key] = splits
    return data
