"""Code of other files that looks like the code around the cursor (:class:`ChunkIndex`).

Every indexed file is cut into chunks of ``CHUNK_LINES`` lines. A chunk is the set of
its identifier tokens (3+ characters, not keywords: ``index.identifiers_of``). A query is
the set of identifiers in the lines around the cursor; chunks are ranked by BM25 (Robertson
and Zaragoza's Okapi BM25, with every term frequency taken as 1, so it weighs shared
identifiers by how rare they are in the workspace and by the chunk's length, as Copilot's
neighbouring-snippet Jaccard score and Tabby's repository retrieval do). Query terms in
more than ``MAX_DF_SHARE`` of the chunks carry almost no weight and are skipped, and
only the ``MAX_QUERY_TERMS`` rarest terms count (a query costs a few milliseconds).

Memory: a posting list per identifier (``array('I')`` of chunk numbers, 4 bytes a
posting) and three arrays per chunk; a removed file's chunks are marked dead and the
lists are compacted when the dead outnumber the living. Not thread-safe: the
workspace index calls it under its lock. See docs/architecture.md ("The workspace index").
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable

CHUNK_LINES = 10
MAX_DF_SHARE = 0.01
MAX_QUERY_TERMS = 16  # the rarest query terms are used, at most this many
K1 = 1.2
B = 0.75


class ChunkIndex:
    """BM25 over identifier sets of ``CHUNK_LINES``-line chunks (see module doc)."""

    def __init__(self) -> None:
        self._vocab: dict[str, int] = {}
        self._postings: list[array] = []
        self._file = array("I")  # chunk -> file number
        self._line = array("I")  # chunk -> 0-based first line
        self._size = array("H")  # chunk -> distinct identifiers
        self._alive = bytearray()
        self._by_file: dict[int, array] = {}
        self._live = 0
        self._live_size = 0

    def __len__(self) -> int:
        return self._live

    def add(self, file_no: int, line_tokens: list[list[str]]) -> None:
        """Add the chunks of file number ``file_no`` (replacing any it had);
        ``line_tokens[i]`` are the identifiers of its line ``i``."""
        self.remove(file_no)
        mine = self._by_file.setdefault(file_no, array("I"))
        for start in range(0, len(line_tokens), CHUNK_LINES):
            words: set[str] = set()
            for toks in line_tokens[start : start + CHUNK_LINES]:
                words.update(toks)
            if len(words) < 3:
                continue
            no = len(self._file)
            self._file.append(file_no)
            self._line.append(start)
            self._size.append(min(len(words), 65535))
            self._alive.append(1)
            mine.append(no)
            self._live += 1
            self._live_size += len(words)
            for w in words:
                tid = self._vocab.get(w)
                if tid is None:
                    tid = len(self._postings)
                    self._vocab[w] = tid
                    self._postings.append(array("I"))
                self._postings[tid].append(no)
        if not mine:
            del self._by_file[file_no]

    def remove(self, file_no: int) -> None:
        """Forget the chunks of file number ``file_no``."""
        for no in self._by_file.pop(file_no, ()):
            if self._alive[no]:
                self._alive[no] = 0
                self._live -= 1
                self._live_size -= self._size[no]
        if len(self._alive) - self._live > max(self._live, 4096):
            self._compact()

    def search(self, query: Iterable[str], exclude: set[int], k: int) -> list[tuple[float, int, int]]:
        """The ``k`` best chunks for the identifiers ``query``, best first, as
        ``(score, file number, first line)``; chunks of files in ``exclude`` are skipped."""
        if not self._live:
            return []
        n = self._live
        avg = self._live_size / n
        scores: dict[int, float] = {}
        terms = [self._postings[t] for t in (self._vocab.get(w) for w in set(query)) if t is not None]
        terms = sorted((p for p in terms if len(p) <= max(8, MAX_DF_SHARE * n)), key=len)[:MAX_QUERY_TERMS]
        for plist in terms:
            df = len(plist)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for no in plist:
                if self._alive[no]:
                    scores[no] = scores.get(no, 0.0) + idf
        best: list[tuple[float, int, int]] = []
        for no, s in scores.items():
            f = self._file[no]
            if f in exclude:
                continue
            norm = (K1 + 1) / (1 + K1 * (1 - B + B * self._size[no] / avg))
            best.append((s * norm, f, self._line[no]))
        best.sort(key=lambda x: (-x[0], x[1], x[2]))
        return best[:k]

    def _compact(self) -> None:
        keep = [no for no in range(len(self._file)) if self._alive[no]]
        renum = {old: new for new, old in enumerate(keep)}
        self._file = array("I", (self._file[no] for no in keep))
        self._line = array("I", (self._line[no] for no in keep))
        self._size = array("H", (self._size[no] for no in keep))
        self._alive = bytearray(b"\x01" * len(keep))
        vocab: dict[str, int] = {}
        postings: list[array] = []
        for w, tid in self._vocab.items():
            plist = array("I", (renum[no] for no in self._postings[tid] if no in renum))
            if plist:
                vocab[w] = len(postings)
                postings.append(plist)
        self._vocab, self._postings = vocab, postings
        self._by_file = {f: array("I", (renum[no] for no in nos if no in renum)) for f, nos in self._by_file.items()}

    def memory_bytes(self) -> int:
        """Roughly what the arrays hold (bytes), for stats."""
        return sum(p.itemsize * len(p) for p in self._postings) + 10 * len(self._file)
