"""Errors raised by toolstore. Every one subclasses :class:`ToolstoreError`."""

from __future__ import annotations

import re

# A secret's value in text: one word as a shell reads it, its quoted parts whole to their closing quote (or the end
# of the line): ``"a b"``, ``'a b'``, ``'it'"'"'s'`` (as shlex.quote writes a quote); :func:`_hidden` replaces it. A
# quote after its first part that a space, a comma, a bracket or the end follows closes text around it (``'--token
# abc' more``, as a message quotes a command), so it ends the value there; so do closing brackets or ";" right after a
# quoted part that no letter, digit, "_" or "-" follows: they close the text around it (``{"token": "abc"}``,
# ``(token='abc');``), where ``"a"]b`` is one word.
_QUOTED_PART = r"\"[^\"\n]*(?:\"|(?=\n)|$)|'[^'\n]*(?:'|(?=\n)|$)"
_CLOSERS = r";)\]}"
_NOT_CLOSING = rf"(?![{_CLOSERS}]+(?:[^\w\-{_CLOSERS}]|$))"  # closers then what is no part of a word, nor a closer


def _value(plain: str) -> str:
    """The pattern of a secret's value whose unquoted characters are ``plain`` (but after a quoted part)."""
    return (
        rf"(?:{_QUOTED_PART}|{plain})"
        rf"(?:(?![\"'](?:[\s,;)\]}}]|$))(?:{_QUOTED_PART})|(?<![\"']){plain}|(?<=[\"']){_NOT_CLOSING}[^\s'\",])*"
    )


# A value in ``key=value`` text ends at a comma (``token=abc, user=x``); a secret flag's is a shell word, commas and
# all (``--api-keys a1,b2``: none of it shown).
_VALUE = _value(r"[^\s'\",]")
_WORD_VALUE = _value(r"[^\s'\"]")
# The last word of a name whose value is a secret, in :data:`_SECRETS` (``key=X``) and :data:`SECRET_FLAG` alike (a
# flag's in the plural too, ``--api-keys``; not a key's, ``max_tokens: ...``). :data:`_SUFFIX_WORDS` are secret in
# ``key=X`` only as the last word of a longer name joined by "_" or "-" (``LICENSE_KEY=X``, ``GITHUB_PAT: X``): as
# plain words they are too common (``{"key": "name"}``, ``auth=none``); a flag's always (``--key X``, ``--pat X``).
_WORDS = r"(?:token|password|passwd|secret|api[_-]?key|access[_-]?key|secret[_-]?key|bearer)"
_SUFFIX_WORDS = r"(?:key|pat|auth|pass(?:phrase)?|credentials?|cookie)"
# The names of a key that orders, splits or caches data, never a secret: ``--sort-key``, ``--partition-key``,
# ``--range-key``, ``--shard-key``, ``--foreign-key``, ``--cache-key``, ``--dedup-key`` (in any case, joined by "-",
# "_", nothing or camelCase, a plural too), and ``sort_key: X`` in text. Only these whole names: a longer one ending
# so (``--db-sort-key``) and every other ``...-key`` (``--primary-key``, ``--routing-key``: PagerDuty's is a secret)
# stay secret, since a secret shown is worse than a word hidden.
_DATA_KEYS = ("sort", "partition", "range", "shard", "foreign", "cache", "dedup")
_DATA_KEY_FLAG = rf"(?:{'|'.join(_DATA_KEYS)})[-_]?keys?(?![\w-])"
# In ``key=X`` text: not a data key's name (the word before "key" not one of them, or part of a longer name).
_NOT_DATA_KEY = "".join(
    rf"(?:(?<!{word}[_-])|(?<=[a-z0-9_]{word}[_-])|(?<=[a-z0-9_]-{word}[_-]))" for word in _DATA_KEYS
)
_KEY_SUFFIX = rf"(?:{_NOT_DATA_KEY}key|pat|auth|pass(?:phrase)?|credentials?|cookie)"
# A passphrase after ``password:`` (``passphrase:``, ``passwd:``, ``DB_PASSWORD:``: the colon right after the name,
# not ``'--password':``, a quoted flag in prose), when its first word is letters alone: ``password: correct horse
# battery staple`` hides every word to the end of the line, or to a comma, ";", quote or closing bracket, not the first
# word alone (what :data:`_SECRETS` takes of any other value). A first word holding other characters (``password:
# hunter2 more``) is the value alone, as before.
_PASSPHRASE = (
    r"((?<![\w-])(?:[a-z0-9]+[_-])*(?:password|passphrase|passwd)[ \t]*:[ \t]*)"
    r"(?=[a-z]+[ \t]+[a-z])[^\n,;'\")\]}]*[^\s,;'\")\]}]"
)
# API keys and credentials that a provider's error text may echo back (OpenAI keys, bearer tokens, key=value; an
# authorization's scheme word shown, ``Authorization: Bearer [redacted]``, never its credential). A key's name ends
# in a word of :data:`SECRET_FLAG`'s (``GITHUB_TOKEN=``, ``CLIENT_SECRET=``, ``AWS_SECRET_ACCESS_KEY=``, ``passwd:``,
# ``GITHUB_PAT=``): an MCP server's arguments (``docker run -e CLIENT_SECRET=X``) are shown redacted
# (``Upstream.describe``). A word after ``password:`` is its value even when it reads as prose (``'--password': missing
# value`` shows ``[redacted] value``): a passphrase may be words, and no rule tells them apart; after an unquoted
# ``password:``, words of letters are hidden to the line's end (:data:`_PASSPHRASE`).
_SECRETS = re.compile(
    rf"(?i)((?<![a-z0-9])sk-[a-z0-9_\-]{{8,}})|(bearer\s+)[^\s'\",]+|{_PASSPHRASE}"
    r"|(?:(authorization[\"']?\s*[:=]\s*(?:(?:bearer|basic|digest|token)\s+)?)"
    rf"|((?:{_WORDS}|(?<=[a-z0-9][_-]){_KEY_SUFFIX})[\"']?\s*[:=]\s*))" + _VALUE
)
#: A command-line flag whose value is a secret: ``--token``, ``--password`` (``--passwd``, ``--pass``,
#: ``--passphrase``), ``--secret``, ``--api-key`` (``--apikey``), ``--access-key``, ``--secret-key``, ``--key``,
#: ``--pat`` (a personal access token), ``--auth``, ``--credentials``, ``--cookie``, ``--bearer``, alone, as a plural
#: or at the end of a longer name (``--github-token``, ``--client-secret``, ``--db-password``, ``--private-key``,
#: ``--basic-auth``; not ``--sort-key``, nor a name of :data:`_DATA_KEYS`), in any case, its words joined by ``-``,
#: ``_`` or in camelCase (``--api_key``, ``--apiKey``, ``--accessToken``, ``--clientSecret``); never ``--no-...``
#: (``--noToken``), nor a short flag (``-p X`` is a port as often as a password). Its value, ``--token=X`` or the next
#: argument of ``--token X`` (any word but ``--``: :func:`flag_value`), is a secret: :func:`redact` hides it in text,
#: and an MCP upstream treats it like an env value (``_mcp_upstream``: not part of its identity, never described).
_FLAG = (  # words ending in "-" or "_", then perhaps camelCase ones (each split one way: no backtracking blow-up)
    rf"--(?!no(?:[-_]|(?-i:[A-Z]))|{_DATA_KEY_FLAG})(?:[a-z0-9]+[-_])*(?-i:[A-Za-z0-9]*[a-z0-9](?=[A-Z]))?"
    rf"(?:{_WORDS}|{_SUFFIX_WORDS})s?"
)
SECRET_FLAG = re.compile(_FLAG, re.IGNORECASE)
#: What is never the value of a bare secret flag: ``--`` alone, the end of the options (``--token -- serve``). Any
#: other word after it is taken for its value and never shown, one starting with "-" or "--" too (a secret may: a
#: ``secrets.token_urlsafe``): ``--token --abc123`` or ``--token --verbose``, which no rule tells apart. When that word
#: is itself a secret flag (``--token --db-password pw0rd``), the word after it is hidden too: either may be the
#: secret. The one rule of :func:`flag_value` and :func:`redact`.
_NOT_A_VALUE = re.compile(r"--(?![^\s'\",])")


def flag_value(word: str) -> bool:
    """Whether ``word``, following a secret flag given without ``=`` (``--token X``), is taken for that flag's value:
    any word but ``--`` alone (:data:`_NOT_A_VALUE`)."""
    return _NOT_A_VALUE.match(word) is None


# A secret flag and its value in text (a command line an error quotes): what follows its "=" (``--client-secret=X``),
# or the word after it unless ``--`` (``--token X``), each bare secret flag between them hidden too (``--token
# --db-password X``), by the rule of flag_value.
# A whole argument quoted (``'--token=a b'``, as shlex.join writes it) has its value run to its closing quote.
_FLAG_EQUALS = re.compile(rf"((?<![\w-])([\"'])?{_FLAG}=)((?(2)(?:(?!\2).)*\2?|{_WORD_VALUE}))", re.IGNORECASE)
_FLAG_WORDS = re.compile(
    rf"(?P<flag>(?<![\w-]){_FLAG}\s+)(?P<chain>(?:[\"']?{_FLAG}[\"']?\s+)*)(?![\"']?{_NOT_A_VALUE.pattern})"
    rf"(?P<value>{_WORD_VALUE})",
    re.IGNORECASE,
)
# A secret flag quoted alone, then its value: an argument list as Python prints it (``['--token', 'X']``, a
# CalledProcessError's), as JSON writes it, or shlex.join a flag it quotes, or a dict keyed by it (``{"--api-key":
# "X"}``); the value a quoted item alone, its quotes escaped within it as Python and JSON write them (``'it\'s "q"'``,
# ``"pa\"ss"``), else a word, but for one of letters alone that a space and a letter follow: prose about the flag
# (``'--token' is required``, click's ``Option '--token' requires an argument``), where no list puts a value unquoted;
# on its line (a word that ends a line is a value).
_ITEM_GAP = r"(?:\s*[,:]\s*|\s+)"
_PROSE = r"[a-z]+[ \t]+[a-z]"
_FLAG_ITEMS = re.compile(
    rf"(?P<flag>(?<![\w-])([\"']){_FLAG}\2{_ITEM_GAP})(?P<chain>(?:[\"']{_FLAG}[\"']{_ITEM_GAP})*)"
    rf"(?![\"']?{_NOT_A_VALUE.pattern})"
    rf"(?P<value>\"(?:[^\"\\\n]|\\.)*\"?|'(?:[^'\\\n]|\\.)*'?|(?!{_PROSE}){_WORD_VALUE})",
    re.IGNORECASE,
)
_CHAINED = re.compile(_FLAG, re.IGNORECASE)
# The password in a URI's user info (``postgresql://user:password@host``), looked for in each run of characters it
# may span (:func:`_uri_passwords`): its scheme at most 64 characters, so a long run of letters and dashes is not read
# again from each of its letters.
_URI_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]{0,63}://[^\s:/@\"']*:)[^\s\"']*@")
_URI_RUN = re.compile(r"[^\s\"']+")
# libpq's messages about a DSN it could not parse quote a piece of it, or all of it: its password, perhaps.
_DSN_PARSE = re.compile(r"in URI|URI query parameter|connection info string|percent-encoded|connection option")
_QUOTED = re.compile(r'"[^"]*"')


def redact(text: str) -> str:
    """``text`` with anything that looks like a credential replaced by ``[redacted]``: keys, bearer tokens,
    ``key=value`` secrets, a secret flag's value (``--token X``: :data:`SECRET_FLAG`), a URI's password, and what libpq
    quotes of a DSN it could not parse."""
    text = _SECRETS.sub(_secret, text)
    text = _FLAG_WORDS.sub(_flag_value, text)
    text = _FLAG_ITEMS.sub(_flag_value, text)
    text = _FLAG_EQUALS.sub(lambda m: m.group(1) + _hidden(m.group(3), m.group(2) or ""), text)
    text = _URI_RUN.sub(_uri_passwords, text)
    if _DSN_PARSE.search(text):  # a quoted character ("=", "]") is libpq's own
        text = _QUOTED.sub(lambda m: m.group() if len(m.group()) <= 3 else '"[redacted]"', text)
    return text


def _secret(match: re.Match[str]) -> str:
    """A :data:`_SECRETS` match hidden: a key whole, else what follows its ``bearer``, ``password:`` or ``key=``."""
    if match.group(1):
        return "[redacted]"
    prefix = match.group(2) or match.group(3) or match.group(4) or match.group(5)
    return prefix + _hidden(match.group()[len(prefix) :])


def _flag_value(match: re.Match[str]) -> str:
    """A :data:`_FLAG_WORDS` or :data:`_FLAG_ITEMS` match hidden: its flag shown, the secret flags chained after it and
    its value not."""
    return match["flag"] + _CHAINED.sub("[redacted]", match["chain"]) + _hidden(match["value"])


def _hidden(value: str, opened: str = "") -> str:
    """``value`` (a secret: :data:`_VALUE`) as ``[redacted]``, its quotes kept (``"a b"`` is ``"[redacted]"``); with
    ``opened``, the quote that opened the argument it ends (``a b'`` of ``'--token=a b'``), kept if it closes it."""
    if opened:
        return "[redacted]" + (opened if value.endswith(opened) else "")
    quote = value[0] if value[:1] in ("'", '"') else ""
    return quote + "[redacted]" + (quote if len(value) > 1 and value.endswith(quote) else "")


def _uri_passwords(run: re.Match[str]) -> str:
    """A run of characters without space or quote with each URI's password in it redacted (:data:`_URI_PASSWORD`),
    read only up to the run's last ``@`` (where a password ends), so text of many ``://`` and no ``@`` after them is
    read once, not once from each."""
    text = run.group()
    end = text.rfind("@") + 1
    if not end or "://" not in text[:end]:
        return text
    return _URI_PASSWORD.sub(r"\1[redacted]@", text[:end]) + text[end:]


#: A URL's parts as redaction reads them: its scheme; its credentials, to the last "@" after a "user:" (where a
#: password ends, as :data:`_URI_PASSWORD` reads one: it may hold "/", "?" or "#") or to an "@" before any "/"; its
#: server; its path; its query and fragment.
URL_PARTS = re.compile(
    r"(?i)\b(?P<scheme>[a-z][a-z0-9+.\-]{0,63}://)"
    r"(?P<credentials>[^\s'\"<>:/@]*:[^\s'\"<>]*@|[^\s'\"<>:/@]*@)?"
    r"(?P<server>[^\s'\"<>/?#]*)(?P<path>[^\s'\"<>?#]*)(?P<rest>[^\s'\"<>]*)"
)


def url_shown(url: str) -> str:
    """What an error refusing ``url`` quotes of it: its scheme and server as written (``ftp://host``,
    ``https://host:notaport``), never its credentials, path, query or fragment, where a token may be; a text of no
    scheme without what comes before its last "@" nor after a "?" or "#" (``user:pw@host/v1?key=X`` is ``host/v1``),
    redacted."""
    text = url.strip()
    found = URL_PARTS.match(text)
    if found is None:
        return redact(re.split(r"[?#]", text.rpartition("@")[2], maxsplit=1)[0])
    return found["scheme"] + found["server"]


def first_line(exc: BaseException) -> str:
    """The first line of a driver error's message for a DatabaseError's text, credentials redacted."""
    return redact((str(exc).strip().splitlines() or [type(exc).__name__])[0])


def add_notes(exc: BaseException, *notes: str) -> None:
    """PEP 678's notes on ``exc``, which a traceback prints after its message (``BaseException.add_note`` from Python
    3.11; toolstore runs on 3.10 too)."""
    exc.__notes__ = [*getattr(exc, "__notes__", ()), *notes]  # type: ignore[attr-defined,unused-ignore]


class ToolstoreError(Exception):
    """Base class of every error toolstore raises on purpose."""


class InvalidInputError(ToolstoreError, ValueError):
    """A query, option or argument is not acceptable (empty query, bad weight, ...)."""


class InvalidTypeError(InvalidInputError, TypeError):
    """An argument of the wrong type (a tool id that is not a string, say): a TypeError too, as Python's own
    checks of a call raise."""


class InvalidToolError(InvalidInputError):
    """A tool definition cannot be imported; the message names the tool and, for files, the line."""


class StoreClosedError(InvalidInputError):
    """A call on a store after its ``close()`` (an AsyncToolStore's: also a write that ``close()`` overtook)."""


class UnmatchedFilterError(InvalidInputError):
    """A route filter's value (allow, category, provider, tag) matches no tool of the catalog as the database that
    ran the route has it. The caller's error on the primary; a read replica may only be behind it, so ToolStore hands
    such a route on to the primary, as it does a catalog or a model switch the replica has not replayed."""


class UnknownCatalogError(ToolstoreError, LookupError):
    """The named catalog does not exist."""


class UnknownToolError(ToolstoreError, LookupError):
    """The tool id does not exist in the catalog."""


class EmbedderError(ToolstoreError):
    """The embedder failed (provider down, bad key, malformed response)."""


class EmbedderUnavailableError(EmbedderError):
    """The embedder's server could not be reached, or kept answering that it is busy or failing (a connection error,
    a timeout, HTTP 408, 409, 429 or 5xx), through all its retries: a failure that says nothing of its model."""


class ModelMismatchError(ToolstoreError):
    """The catalog was embedded with another model than the one asked to route or import with."""


class DatabaseError(ToolstoreError):
    """The database is unreachable or not migrated, or refuses the connecting role what it asked."""


class SchemaAccessError(DatabaseError):
    """The connecting database role may not use toolstore's schema: it has no grant (never made, or its last one
    revoked). The owner of toolstore's tables grants one (``toolstore -c CATALOG grant ROLE``)."""


class TransactionPoolingError(DatabaseError):
    """The store reaches Postgres through a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``) but was
    not told so: the session it set on a connection (search_path, tenant, prepared statements) is not where its
    statements run, and is left to the pooler's other clients. Give it ``transaction_pooling=True`` (the command
    line: ``--transaction-pooling`` or ``$TOOLSTORE_TRANSACTION_POOLING=1``)."""


class StatementTimeoutError(DatabaseError):
    """A route's statement ran past the store's ``statement_timeout`` and Postgres cancelled it (nothing is tried
    again: not on the primary after a replica, nor a second time)."""


class ExpansionError(ToolstoreError):
    """The expansion model could not be asked (network, authentication, server error); finished batches are kept."""


class McpSyncError(ToolstoreError):
    """An MCP server could not be started, reached or listed."""
