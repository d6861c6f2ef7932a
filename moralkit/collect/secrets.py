"""Keeping credentials out of everything a collection writes or prints.

A key is only ever read from an environment variable named on the command line
(``--api-key-env NAME``); no option takes a key. What could still carry one:

- a ``base_url`` with credentials (``https://user:key@host/v1``, ``...?api-key=...``);
- a server's error text that echoes the key back;
- the command line recorded in the manifest.

:func:`strip_url` removes credentials from a URL, :func:`url_secrets` lists them, and
:class:`Redactor` replaces every known secret in a text before it is recorded or printed.
:class:`moralkit.collect.store.RecordStore` passes every line it writes through one.

Examples
--------
>>> strip_url("https://alice:s3cr3t-token@api.example.com/v1?api-key=abcdefgh123&x=1")
'https://api.example.com/v1?api-key=REDACTED&x=1'
>>> r = Redactor(["s3cr3t-token-0123"])
>>> r("HTTP 401: invalid key s3cr3t-token-0123")
'HTTP 401: invalid key [REDACTED]'
>>> r.error_text("cannot reach https://bob:pw@host/v1")
'cannot reach https://host/v1'
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import MoralkitError

__all__ = ["strip_url", "url_secrets", "Redactor", "ENV_NAME_RE", "check_env_name", "MIN_SECRET_LENGTH"]

#: Shorter strings are not treated as secrets (placeholders such as ``EMPTY`` would redact ordinary words).
MIN_SECRET_LENGTH = 8

#: What ``--api-key-env`` accepts: an upper-case environment-variable name. Real keys (``sk-...``,
#: ``AIza...``, ``hf_...``) do not match, so a key pasted there is refused, not stored.
ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")

_SECRET_QUERY = re.compile(r"key|token|secret|password|passwd|auth|sig|credential", re.I)


def check_env_name(name) -> str:
    """Return ``name`` if it is an environment-variable name, else raise without echoing it.

    Examples
    --------
    >>> check_env_name("OPENAI_API_KEY")
    'OPENAI_API_KEY'
    """
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        raise MoralkitError("api_key_env (--api-key-env) takes the NAME of an environment variable that holds the "
                         "key (upper-case letters, digits and _, e.g. OPENAI_API_KEY), never the key itself; "
                         "the value given does not look like a name and was not stored or printed")
    return name


def url_secrets(url) -> list[str]:
    """The credentials inside a URL: user info and the values of key-like query parameters."""
    if not url:
        return []
    parts = urlsplit(str(url))
    out = []
    if parts.username:
        out.append(parts.username)
    if parts.password:
        out.append(parts.password)
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_QUERY.search(k) and v:
            out.append(v)
    return out


def strip_url(url):
    """``url`` without user info, and with key-like query values replaced by ``REDACTED``."""
    if not url:
        return url
    parts = urlsplit(str(url))
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc += f":{parts.port}"
    query = parts.query
    if query:
        query = urlencode([(k, "REDACTED" if _SECRET_QUERY.search(k) and v else v)
                           for k, v in parse_qsl(query, keep_blank_values=True)], safe="")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Redactor:
    """Replace known secrets (and credentials inside URLs) in texts.

    Parameters
    ----------
    secrets : iterable of str
        Values to hide. Strings shorter than :data:`MIN_SECRET_LENGTH` are ignored.
    """

    def __init__(self, secrets=()):
        self.secrets: list[str] = []
        self.add(*secrets)

    def add(self, *secrets) -> None:
        for s in secrets:
            if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH and s not in self.secrets:
                self.secrets.append(s)
        self.secrets.sort(key=len, reverse=True)

    def __bool__(self):
        return bool(self.secrets)

    def __call__(self, text):
        """``text`` with every known secret replaced by ``[REDACTED]``."""
        if text is None or not isinstance(text, str):
            return text
        for s in self.secrets:
            if s in text:
                text = text.replace(s, "[REDACTED]")
        return text

    def error_text(self, text):
        """An error message as it may be recorded or printed: secrets and URL credentials removed."""
        return _URL_USERINFO.sub(r"\1", self(text)) if isinstance(text, str) else text


_URL_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@")
