"""Keeping credentials out of everything a collection writes or prints.

A key is only ever read from an environment variable named on the command line
(``--api-key-env NAME``); no option takes a key. What could still carry one:

- a ``base_url`` with credentials (``https://user:key@host/v1``, ``...?api-key=...``): refused by
  :func:`check_base_url` (command line and :class:`~moralkit.collect.backends.OpenAIBackend`), whatever
  the credentials' length and however the option is spelled, so they are never sent, stored or printed;
- a server's error text that echoes the key back, as it is or encoded (``Authorization: Bearer KEY``,
  Basic auth, base64);
- a traceback or a message on stderr.

:class:`Redactor` replaces every known secret, and its base64 forms at any byte alignment, in a text
before it is recorded or printed, and cuts a text to length only *after* redacting it (a cut key
would otherwise survive as a prefix). :class:`moralkit.collect.store.RecordStore` passes every line
and manifest it writes through one; the runner passes every error through one; the command line
passes what it prints on stderr (messages and tracebacks) through one (:func:`process_redactor`).

Examples
--------
>>> strip_url("https://alice:s3cr3t-token@api.example.com/v1?api-key=abcdefgh123&x=1")
'https://api.example.com/v1?api-key=REDACTED&x=1'
>>> r = Redactor(["s3cr3t-token-0123"])
>>> r("HTTP 401: invalid key s3cr3t-token-0123")
'HTTP 401: invalid key [REDACTED]'
>>> r.error_text("cannot reach https://bob:pw@host/v1")
'cannot reach https://host/v1'
>>> import base64
>>> r("Basic " + base64.b64encode(b"user:s3cr3t-token-0123").decode())
'Basic dXNlcjp[REDACTED]w=='
"""

from __future__ import annotations

import base64
import os
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import MoralkitError

__all__ = ["strip_url", "url_secrets", "Redactor", "ENV_NAME_RE", "check_env_name", "MIN_SECRET_LENGTH",
           "check_base_url", "encoded_forms", "process_redactor"]

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


def check_base_url(url) -> str:
    """Return ``url`` if it is an http(s) endpoint without credentials, else raise without echoing it.

    Credentials in a URL (``http://user:key@host``, ``?api-key=...``) would be sent as HTTP Basic auth
    in place of the key, kept in shell history and easily recorded; they are refused whatever their
    length. A key goes in an environment variable named by ``--api-key-env`` (sent as
    ``Authorization: Bearer``, and redacted wherever it could be echoed).

    Examples
    --------
    >>> check_base_url("http://127.0.0.1:8000/v1")
    'http://127.0.0.1:8000/v1'
    >>> check_base_url("http://u:pw@127.0.0.1/v1")
    Traceback (most recent call last):
    ...
    moralkit.errors.MoralkitError: base_url (--base-url) holds credentials (user:password@ or a key-like query parameter); they are refused and were not sent, stored or printed: put the key in an environment variable and pass its NAME with --api-key-env
    """
    hint = "an http(s) endpoint such as http://127.0.0.1:8000/v1 or https://api.openai.com/v1"
    if not isinstance(url, str) or not url or any(c.isspace() for c in url):
        raise MoralkitError(f"base_url (--base-url) must be {hint}; the value given is not (it is not shown, "
                            "in case it holds a secret)")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a malformed port
        host = parts.hostname
    except ValueError:
        parts, host, port = None, None, None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not host:
        raise MoralkitError(f"base_url (--base-url) must be {hint}; the value given is not (it is not shown, "
                            "in case it holds a secret)")
    del port
    if "@" in parts.netloc or url_secrets(url):
        raise MoralkitError("base_url (--base-url) holds credentials (user:password@ or a key-like query "
                            "parameter); they are refused and were not sent, stored or printed: put the key in an "
                            "environment variable and pass its NAME with --api-key-env")
    return url


def encoded_forms(secret: str) -> list[str]:
    """The base64 (standard and URL-safe) cores of ``secret`` at each of the three byte alignments.

    A secret inside a longer base64 text (``Basic base64("user:" + key)``, a base64-encoded header)
    starts at byte offset 0, 1 or 2 of a 3-byte group; at each alignment the characters that depend on
    the secret's bytes alone are the same whatever surrounds it. Those are returned (the one or two
    characters at each end that mix with neighbouring bytes cannot reveal the secret).

    Examples
    --------
    >>> encoded_forms("sk-test-fault-server-key-0000")[0]
    'c2stdGVzdC1mYXVsdC1zZXJ2ZXIta2V5LTAwMD'
    """
    raw = secret.encode("utf-8")
    out = []
    for o, start in ((0, 0), (1, 2), (2, 3)):
        end = ((o + len(raw)) * 8) // 6
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            core = enc(b"\0" * o + raw).decode("ascii")[start:end]
            if len(core) >= MIN_SECRET_LENGTH and core not in out:
                out.append(core)
    return out


class Redactor:
    """Replace known secrets (and credentials inside URLs) in texts.

    Parameters
    ----------
    secrets : iterable of str
        Values to hide, with their base64 forms (:func:`encoded_forms`). Strings shorter than
        :data:`MIN_SECRET_LENGTH` are ignored.
    """

    def __init__(self, secrets=()):
        self.secrets: list[str] = []
        self.add(*secrets)

    def add(self, *secrets) -> None:
        for s in secrets:
            if isinstance(s, str) and len(s) >= MIN_SECRET_LENGTH:
                for v in [s] + encoded_forms(s):
                    if v not in self.secrets:
                        self.secrets.append(v)
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

    def error_text(self, text, limit: int | None = None):
        """An error message as it may be recorded or printed: secrets and URL credentials removed, *then*
        cut to ``limit`` characters (cutting first would leave a prefix of a key that no longer matches)."""
        if not isinstance(text, str):
            return text
        text = _URL_USERINFO.sub(r"\1", self(text))
        if limit is not None and len(text) > limit:
            text = text[:limit] + "..."
        return text


def process_redactor(api_key_env=None, base_url=None) -> Redactor:
    """A :class:`Redactor` of everything this process could leak: the key in ``api_key_env`` (when that
    is a valid variable name), the usual provider variables, and credentials in ``base_url``."""
    names = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    if isinstance(api_key_env, str) and ENV_NAME_RE.match(api_key_env):
        names.add(api_key_env)
    return Redactor([os.environ.get(n) for n in sorted(names)] + url_secrets(base_url))


_URL_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@")
