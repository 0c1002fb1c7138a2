"""The local completion cache: an in-memory LRU in front of a SQLite file."""

from .cache import CacheHit, CompletionCache
from .keys import CacheKey

__all__ = ["CacheHit", "CacheKey", "CompletionCache"]
