"""The page allocator with its prefix cache (host side; the pages' contents live in `paged`).

A page is free, held (by one or more sequences: a reference count), or cached: no sequence
holds it, but its tokens are known and it may be taken up again. A full page of a sequence is
keyed by a digest chained over every token from the sequence's start to the page's end (the
same tokens at the same positions give the same keys and values). A new sequence whose first
pages have cached keys takes those pages instead of reading its prompt again: GRPO's group
reads its prompt once, a chat turn reuses the conversation's pages, a common system prompt is
kept once. Only full pages are shared and a sequence only writes past its last full page, so a
shared page is never written (no copy on write is needed).

A page whose key is known before it is written (a prompt's page, keyed at admission) is pending
until the step that writes its last token ends; a sequence that would share a pending page waits
a step, so that a group admitted together still reads its prompt once. Allocation takes a free
page, else the least recently used cached one (its key forgotten).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence


def chain(key: bytes, tokens: Sequence[int]) -> bytes:
    """The key of a page holding `tokens`, after the page keyed `key` (b"": the first page)."""
    return hashlib.blake2b(key + b"|" + ",".join(map(str, tokens)).encode(), digest_size=16).digest()


class Pages:
    """Pages 1..n-1 of a pool (page 0 is the null page, never handed out)."""

    def __init__(self, n: int, page_size: int, sharing: bool = True):
        self.page_size, self.sharing, self.n = page_size, sharing, n
        # the free pages: those handed back (taken again first, the last back first), then the pages never
        # handed out, from `fresh` on (a count, not a list: a pool of millions of pages costs nothing here)
        self.returned: List[int] = []
        self.fresh = 1
        self.refs: Dict[int, int] = {}
        self.by_key: Dict[bytes, int] = {}
        self.key_of: Dict[int, bytes] = {}
        self.ready: set = set()  # keyed pages whose tokens are all written
        self.cached: "OrderedDict[int, None]" = OrderedDict()  # keyed, ready, held by none: least recent first
        self.hits = 0  # pages taken from the cache instead of read again

    @property
    def free(self) -> List[int]:
        """Every free page (not cached), as a list (for tests and reports)."""
        return [*self.returned, *range(self.fresh, self.n)]

    def available(self) -> int:
        return len(self.returned) + (self.n - self.fresh) + len(self.cached)

    def held(self) -> int:
        return len(self.refs)

    def take(self) -> int:
        """A page for new tokens (held once)."""
        if self.returned:
            page = self.returned.pop()
        elif self.fresh < self.n:
            page, self.fresh = self.fresh, self.fresh + 1
        else:
            page, _ = self.cached.popitem(last=False)
            self._forget(page)
        self.refs[page] = 1
        return page

    def _forget(self, page: int) -> None:
        key = self.key_of.pop(page, None)
        if key is not None and self.by_key.get(key) == page:
            del self.by_key[key]
        self.ready.discard(page)

    def drop(self, pages: Sequence[int]) -> None:
        """A sequence lets go of its pages: each is freed, or cached when its tokens are known."""
        for page in reversed(pages):
            self.refs[page] -= 1
            if self.refs[page]:
                continue
            del self.refs[page]
            if page in self.ready and self.sharing:
                self.cached[page] = None
            else:
                self._forget(page)
                self.returned.append(page)

    def prefix(self, tokens: Sequence[int], root: bytes = b"") -> tuple:
        """(the cached pages that begin `tokens`, their keys chained from `root`; None instead when
        the next one is pending). At least one token is left after them (its logits are sampled)."""
        ps, pages, keys, key = self.page_size, [], [], root
        if not self.sharing:
            return pages, keys
        for j in range((len(tokens) - 1) // ps):
            key = chain(key, tokens[j * ps:(j + 1) * ps])
            page = self.by_key.get(key)
            if page is None:
                break
            if page not in self.ready:
                return None
            pages.append(page)
            keys.append(key)
        return pages, keys

    def share(self, pages: Sequence[int]) -> None:
        """Hold these cached or held pages once more (`prefix`'s)."""
        for page in pages:
            self.cached.pop(page, None)
            self.refs[page] = self.refs.get(page, 0) + 1
        self.hits += len(pages)

    def key(self, page: int, key: bytes) -> None:
        """Page `page` holds the tokens keyed `key` (pending until `written`), unless another page
        already does."""
        if self.sharing and key not in self.by_key:
            self.by_key[key] = page
            self.key_of[page] = key

    def written(self, page: int) -> None:
        if page in self.key_of:
            self.ready.add(page)

    def spare(self, shared: Sequence[int]) -> int:
        """Pages available to a sequence that shares `shared` (cached ones it takes are not spare)."""
        return self.available() - sum(p in self.cached for p in shared)

    def keyed(self, page: int) -> Optional[bytes]:
        return self.key_of.get(page)
