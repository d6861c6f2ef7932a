"""A response cache across runs, keyed by the full request (opt-in: ``--cache``).

A cached answer is served only to a request whose every sent field is the same: the API
(``openai.chat.completions`` or ``anthropic.messages``), the endpoint (base URL without credentials),
and the request body exactly as sent (model, messages, temperature, top_p, max_tokens, seed, ``n``,
every extra field), plus the collector's derived seed and nothing else. The derived seed is part of
the key even when it is not sent (Anthropic has no seed): it is a function of the run seed, the task
(which names the sample index) and the attempt, so two samples of one prompt never share an entry.

Why opt-in. A cached answer is an earlier draw, not a new one. A second run meant to measure
run-to-run variation, or a model alias that now points to a newer snapshot (``gpt-4o``), would
silently get the old answers. So the cache is used only when asked for (``--cache``, or
``cache=ResponseCache()`` from Python), and every record served from it says so (``cached``: the time
the entry was stored).

Where it lives: ``$MORALKIT_CACHE_DIR/responses.sqlite``, else the user cache directory
(``platformdirs.user_cache_dir("moralkit")``, i.e. ``~/.cache/moralkit`` on Linux, beside the model
cache of :func:`moralkit.collect.localmodels.model_cache_dir`). It is one SQLite file in WAL mode:
several collectors can read and write it at once; an entry is written in one transaction
(``INSERT OR IGNORE``: the first answer stored for a request stays). ``python -m moralkit cache``
reports its size and entries, ``--clear`` empties it.

Examples
--------
>>> import tempfile
>>> c = ResponseCache(tempfile.mkdtemp() + "/r.sqlite")
>>> k = c.key("openai.chat.completions", "http://127.0.0.1:1/v1", {"model": "m", "seed": 1}, 1)
>>> c.get(k) is None
True
>>> c.put(k, {"text": "A"}); c.get(k)["text"]
'A'
>>> c.get(c.key("openai.chat.completions", "http://127.0.0.1:1/v1", {"model": "m", "seed": 2}, 2)) is None
True
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

from ..errors import MoralkitError
from .backends import Completion
from .store import utc_now

__all__ = ["ResponseCache", "CachedBackend", "cache_dir", "OPENAI_API", "ANTHROPIC_API",
           "DEFAULT_OPENAI_URL", "DEFAULT_ANTHROPIC_URL"]

OPENAI_API = "openai.chat.completions"
ANTHROPIC_API = "anthropic.messages"
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"


def cache_dir(create: bool = True) -> Path:
    """The response cache's directory: ``$MORALKIT_CACHE_DIR``, else the user cache directory."""
    env = os.environ.get("MORALKIT_CACHE_DIR")
    if env:
        p = Path(env)
    else:
        try:
            from platformdirs import user_cache_dir

            p = Path(user_cache_dir("moralkit", appauthor=False))
        except ImportError:  # pragma: no cover - platformdirs is a dependency
            p = Path.home() / ".cache" / "moralkit"
    if create:
        p.mkdir(parents=True, exist_ok=True)
    return p


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class ResponseCache:
    """The response cache (see the module docstring).

    Parameters
    ----------
    path : path-like, optional
        The SQLite file (default ``cache_dir() / "responses.sqlite"``).
    """

    def __init__(self, path=None):
        self.path = Path(path) if path is not None else cache_dir() / "responses.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=60000")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, request TEXT NOT NULL, "
                         "response TEXT NOT NULL, created TEXT NOT NULL)")
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(api: str, base_url: str | None, body: dict, seed: int) -> tuple[str, str]:
        """``(sha256, canonical request)`` of one request: the API, endpoint, full body and derived seed."""
        req = _canonical({"api": api, "base_url": base_url, "body": body, "seed": int(seed)})
        return hashlib.sha256(req.encode()).hexdigest(), req

    def get(self, key) -> dict | None:
        """The stored response of exactly this request (``None`` if absent); ``created`` is added."""
        h, req = key
        with self._lock:
            row = self._db.execute("SELECT request, response, created FROM responses WHERE key = ?", (h,)).fetchone()
        if row is None or row[0] != req:  # the full request is compared, not only its hash
            self.misses += 1
            return None
        self.hits += 1
        return dict(json.loads(row[1]), created=row[2])

    def put(self, key, response: dict) -> None:
        """Store a response (the first one stored for a request stays)."""
        h, req = key
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO responses (key, request, response, created) VALUES (?, ?, ?, ?)",
                             (h, req, _canonical(response), utc_now()))

    def stats(self) -> dict:
        """``path``, ``entries`` and ``bytes`` (the database file with its WAL)."""
        with self._lock:
            n = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        size = sum(p.stat().st_size for p in (self.path, Path(str(self.path) + "-wal")) if p.exists())
        return dict(path=str(self.path), entries=int(n), bytes=int(size))

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""
        with self._lock:
            n = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
            self._db.execute("DELETE FROM responses")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")
        return int(n)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def completion_to_cache(c: Completion) -> dict:
    """A usable completion as a cache entry: ``texts`` and ``reasons`` of its choices, ``meta`` (tokens, model)
    and the response's JSON when it was kept (``data``). Batch results are stored in the same form."""
    texts, reasons = [c.text], [c.finish_reason]
    if isinstance(c.data, dict) and isinstance(c.data.get("choices"), list):
        ch = sorted((x for x in c.data["choices"] if isinstance(x, dict)), key=lambda x: x.get("index", 0) or 0)
        if ch and all(isinstance((x.get("message") or {}).get("content"), str) for x in ch):
            texts = [x["message"]["content"] for x in ch]
            reasons = [x.get("finish_reason") for x in ch]
    return dict(texts=texts, reasons=reasons, data=c.data,
                meta=dict(prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens, model=c.model))


def completion_from_cache(v: dict) -> Completion:
    """The :class:`~moralkit.collect.backends.Completion` of a cache entry, marked ``cached``."""
    meta = v.get("meta") or {}
    reasons = v.get("reasons") or [None] * len(v["texts"])
    data = v.get("data") or {
        "model": meta.get("model"),
        "choices": [{"index": j, "message": {"role": "assistant", "content": t}, "finish_reason": r}
                    for j, (t, r) in enumerate(zip(v["texts"], reasons))],
        "usage": {"prompt_tokens": meta.get("prompt_tokens"), "completion_tokens": meta.get("completion_tokens")}}
    c = Completion(text=v["texts"][0], prompt_tokens=meta.get("prompt_tokens"),
                   completion_tokens=meta.get("completion_tokens"), latency_s=0.0, finish_reason=reasons[0],
                   model=meta.get("model"), started=time.time(), data=data)
    c.cached = v["created"]  # the runner records it: this answer was served from the cache
    return c


class CachedBackend:
    """An online backend (``open_session()``, e.g. :class:`~moralkit.collect.backends.OpenAIBackend`) whose
    answers go through a :class:`ResponseCache`: a hit is answered without a request, a usable answer is
    stored. Everything else (name, model, concurrency, ``info()``, ``secrets()``) is the wrapped backend's.

    ``sent`` counts the requests that reached the server in this object's life.
    """

    def __init__(self, backend, cache: ResponseCache):
        if not hasattr(backend, "open_session"):
            raise MoralkitError("the response cache serves API backends (openai); local models are not cached")
        self._backend = backend
        self.cache = cache
        self.sent = 0

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def request_key(self, req):
        b = self._backend
        body = b.request_body(req)  # exactly what the backend sends
        return self.cache.key(OPENAI_API, b.base_url or DEFAULT_OPENAI_URL, body, req.seed)

    def info(self) -> dict:
        return dict(self._backend.info(), response_cache=str(self.cache.path))

    def open_session(self):
        outer = self
        inner_cm = self._backend.open_session()

        class _Session:
            async def __aenter__(self):
                self.inner = await inner_cm.__aenter__()
                return self

            async def __aexit__(self, *exc):
                return await inner_cm.__aexit__(*exc)

            async def complete(self, req):
                k = outer.request_key(req)
                hit = outer.cache.get(k)
                if hit is not None:
                    return completion_from_cache(hit)
                outer.sent += 1
                c = await self.inner.complete(req)
                if c.error is None and c.text is not None:
                    outer.cache.put(k, completion_to_cache(c))
                return c

        return _Session()

    def generate(self, requests):
        from .backends import run_sync

        async def go():
            async with self.open_session() as s:
                return [await s.complete(r) for r in requests]

        return run_sync(go())
