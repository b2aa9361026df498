"""How to reach an MCP server (:class:`Upstream`), what makes two of them one, and its row in ``mcp_upstreams``.

An upstream is everything that decides which server answers and as whom: the command with its arguments and environment,
or the URL with its headers (:meth:`Upstream.target`, by which the gateway keeps a session of its own per upstream,
``_mcp_sessions``). Its identity (:meth:`Upstream.identity`) leaves the values out: the command and its arguments (a
secret flag's value left out, :data:`SECRET_FLAG`, ``--api-key X`` and ``--API_KEY=X`` alike) or the URL (its query's
names, whether it has credentials) and the NAMES of its env variables or headers (a header's in any case, as in HTTP).
Two upstreams alike in all but values are one server with other secrets: the same account's rotated token, or another
account's, which no value tells apart; a sync decides with the provider's name (``_mcp_sync``). Env and header values,
and a secret flag's value among the arguments, may be ``${VAR}`` references, expanded when connecting, so a stored
upstream need not hold a secret, and such a reference stays the same when the secret it names changes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import SplitResult, parse_qsl, urlsplit, urlunsplit

from ._errors import SECRET_FLAG, URL_PARTS, InvalidInputError, McpSyncError, flag_value, redact

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

Target = tuple[str, str | None, tuple[str, ...], str | None, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Upstream:
    """How to reach an MCP server: a command on stdio (``env`` merged over the SDK's safe default environment) or
    a streamable-HTTP ``url`` with ``headers``. Values in ``env`` and ``headers`` may be ``${VAR}`` references,
    expanded from this process's environment when connecting, so a stored upstream need not hold a secret."""

    transport: Literal["stdio", "http"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def target(self) -> Target:
        """Everything that decides which server answers and as whom: the transport, the command with its arguments and
        env, or the URL with its headers (values as stored: a ``${VAR}`` reference, not what it expands to)."""
        env, headers = tuple(sorted(self.env.items())), tuple(sorted(_by_name(self.headers).items()))
        return self.transport, self.command, tuple(self.args), self.url, env, headers

    def identity(self) -> tuple[Any, ...]:
        """:meth:`target` without the values that may be secrets: the transport, the command and its arguments (a
        secret flag's value left out, :data:`SECRET_FLAG`, and the flag written one way: :func:`_joined`) or the URL
        without its query's values and credentials (:func:`_url_identity`), and the env or header names (a header's in
        lower case: HTTP's are case-insensitive)."""
        url = _url_identity(self.url) if self.url is not None else None
        headers = tuple(sorted(_by_name(self.headers)))
        args = tuple(shown + (REDACTED if secret is not None else "") for shown, secret in _joined(self.args))
        return self.transport, self.command, args, url, tuple(sorted(self.env)), headers

    def alike(self, other: Upstream) -> bool:
        """Whether ``other`` has the same :meth:`target` but for how a secret flag is written: ``--api-key X`` or
        ``--api-key=X``, the flag's name in any case, with ``_`` or ``-`` or neither between its words (``--API_KEY``,
        ``--apiKey``: :func:`_joined`). The server is started with the arguments as given (:meth:`command_args`)."""
        return _spelt_alike(self).target() == _spelt_alike(other).target()

    def command_args(self) -> list[str]:
        """The arguments as the server is started with them: a secret flag's value (:data:`SECRET_FLAG`) may be a
        ``${VAR}`` reference, expanded from the environment (:func:`expand_vars`), so a stored upstream need not hold
        that secret; no other argument is expanded."""
        parts = _arguments(self.args)
        secrets = {  # not a word taken for a bare flag's value that starts with "--": it may be a flag, run as given
            str(i): secret
            for i, (shown, secret) in enumerate(parts)
            if secret is not None and (shown or not secret.startswith("--"))
        }
        expanded = expand_vars(secrets, "a secret flag's value")
        return [shown + expanded.get(str(i), secret or "") for i, (shown, secret) in enumerate(parts)]

    def secrets(self) -> list[str]:
        """What the server is handed that is secret by definition, as handed (``${VAR}`` expanded): the values of its
        env and of its secret flags (:meth:`command_args`)."""
        flagged = [
            arg[len(shown) :]
            for (shown, secret), arg in zip(_arguments(self.args), self.command_args())
            if secret is not None
        ]
        return [*expand_vars(self.env, "the server's environment").values(), *flagged]

    def key(self) -> str:
        """:meth:`target` as a string, for a dictionary of sessions."""
        return json.dumps(self.target())

    def describe(self) -> str:
        """A loggable description: the command with the value of a secret flag (:data:`SECRET_FLAG`) and what else
        looks like a credential in its arguments redacted (a DSN's password: ``_errors.redact``), a URL among them
        without query or fragment (``mcp-remote https://host/sse?key=X``), or the URL without credentials or query;
        a URL's path with each part that may be a token redacted (:func:`_shown_path`); never a header or env value."""
        return self._described(_arguments(self.args))

    def _described(self, parts: list[tuple[str, str | None]]) -> str:
        """:meth:`describe` with the arguments as ``parts`` (:func:`_arguments` or :func:`_joined`)."""
        if self.transport == "stdio":
            args = [
                (shlex.quote(URL_PARTS.sub(_arg_url, shown)) if shown else "")
                + (REDACTED if secret is not None else "")
                for shown, secret in parts
            ]
            return f"stdio: {redact(' '.join([shlex.quote(self.command or ''), *args]))}"
        url = urlsplit(self.url or "")
        names = f" (headers: {', '.join(sorted(self.headers))})" if self.headers else ""
        return f"http: {urlunsplit((url.scheme, _server(url), _shown_path(url.path), '', ''))}{names}"

    def differences(self, other: Upstream) -> str:
        """What sets ``other`` apart when its description is the same: the env or header names whose values differ,
        and the parts of the URL that a description leaves out (never a value); empty when the descriptions already
        differ."""
        described = {_spelt_alike(u)._described(_joined(u.args)) for u in (self, other)}  # secret flags one way
        if len(described) > 1:
            return ""
        if self.transport == "stdio":
            mine, theirs, shown = dict(self.env), dict(other.env), {n: n for n in {*self.env, *other.env}}
        else:  # by name in any case, shown as written (this upstream's spelling first)
            mine, theirs = _by_name(self.headers), _by_name(other.headers)
            shown = {n.lower(): n for n in [*other.headers, *self.headers]}
        names = sorted(shown[n] for n in {*mine, *theirs} if mine.get(n) != theirs.get(n))
        found = [f"{'env' if self.transport == 'stdio' else 'headers'} {', '.join(names)} differ"] if names else []
        if self.transport == "stdio" and _spelt_alike(self).args != _spelt_alike(other).args:  # but for the redacted
            ours, others = _secret_flags(self.args), _secret_flags(other.args)
            written = {f: flag for f, (flag, _) in [*others.items(), *ours.items()]}  # this upstream's spelling first
            flags = sorted(
                written[f] for f in {*ours, *others} if ours.get(f, ("", None))[1] != others.get(f, ("", None))[1]
            )
            found.append(
                f"the values of {', '.join(flags)} differ" if flags else "arguments differ in a redacted value"
            )
        if self.transport == "http" and self.url != other.url:
            found.append(_url_differences(self.url or "", other.url or ""))
        return "; ".join(found)


def _arguments(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """Each argument as what may be shown of it and the secret it holds (None: none): ``--token=X`` is
    (``--token=``, X), the X of ``--token X`` is ("", X) unless X is ``--`` alone (:func:`flag_value`: the rule
    ``_errors.redact`` follows), a long flag too (``--token --abc123``: a secret may start so), and when that X is
    itself a secret flag, the word after it is one too (``--token --db-password pw0rd``); see :data:`SECRET_FLAG`."""
    parts: list[tuple[str, str | None]] = []
    follows = False  # the previous argument is a secret flag without its value, or may be one
    for arg in args:
        flag, equals, value = arg.partition("=")
        if follows and flag_value(arg):
            parts.append(("", arg))
            follows = SECRET_FLAG.fullmatch(arg) is not None
        elif SECRET_FLAG.fullmatch(flag) and equals:
            parts.append((f"{flag}=", value))
            follows = False
        else:
            parts.append((arg, None))
            follows = SECRET_FLAG.fullmatch(arg) is not None
    return parts


def _flag_name(flag: str) -> str:
    """A secret flag's name written one way, as :data:`SECRET_FLAG` reads it: case-folded, without the ``-`` or ``_``
    between its words (``--API_KEY``, ``--api-key`` and ``--apiKey`` are all ``--apikey``)."""
    return "--" + re.sub("[-_]", "", flag[2:]).casefold()


def _joined(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """:func:`_arguments` with a secret flag and its value as one argument, written one way: ``--Api_Key X`` and
    ``--api-key=X`` are both (``--apikey=``, X), the flag's name as :func:`_flag_name` writes it."""
    joined: list[tuple[str, str | None]] = []
    for shown, secret in _arguments(args):
        if secret is None:
            joined.append((shown, None))
        elif shown:  # "--Api_Key=" and X
            joined.append((f"{_flag_name(shown[:-1])}=", secret))
        elif joined[-1][1] is not None:  # the pw0rd of "--token --db-password pw0rd": after a secret, a secret
            joined.append(("", secret))
        else:  # the X of "--Api_Key X": the flag is the argument before it
            joined[-1] = (f"{_flag_name(joined[-1][0])}=", secret)
    return joined


def _spelt_alike(upstream: Upstream) -> Upstream:
    """``upstream`` with its header names in lower case and each secret flag written one way (:func:`_joined`)."""
    args = tuple(shown + (secret or "") for shown, secret in _joined(upstream.args))
    return replace(upstream, args=args, headers=_by_name(upstream.headers))


def _secret_flags(args: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Each secret flag in ``args`` as written and its value (the last one given), by its name written one way
    (:func:`_flag_name`)."""
    found: dict[str, tuple[str, str]] = {}
    flag = ""
    for shown, secret in _arguments(args):
        flag = shown.rstrip("=") or flag
        if secret is not None:
            found[_flag_name(flag)] = (flag, secret)
            flag = secret if not shown and SECRET_FLAG.fullmatch(secret) else flag  # --token --db-password pw0rd
    return found


def _by_name(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` by their names in lower case: HTTP header names are case-insensitive."""
    return {name.lower(): value for name, value in headers.items()}


def _url_identity(url: str) -> tuple[Any, ...]:
    """What of a URL names its server: all but its credentials (present or not) and its query's values."""
    parts = urlsplit(url)
    names = tuple(sorted(name for name, _ in parse_qsl(parts.query, keep_blank_values=True)))
    credentials = parts.username is not None or parts.password is not None
    return parts.scheme, parts.hostname, parts.port, parts.path, parts.fragment, names, credentials


def _url_differences(first: str, second: str) -> str:
    """Which parts of two URLs that describe alike differ, by name: credentials, path, query, fragment."""
    a, b = urlsplit(first), urlsplit(second)
    parts = [
        part
        for part, mine, theirs in [
            ("credentials", (a.username, a.password), (b.username, b.password)),
            ("path", a.path, b.path),  # a part of it that may be a token is not described
            ("query", a.query, b.query),
            ("fragment", a.fragment, b.fragment),
        ]
        if mine != theirs
    ]
    if not parts:
        return "the URLs differ only in how they are written"
    return f"the URLs differ in their {' and '.join(parts)}"


#: A value that stands for one not shown (``--env GITHUB_TOKEN=...``, copied from a message that hid the secret): never
#: a value to record, as it would replace the real one.
PLACEHOLDER = "..."
#: What ``_errors.redact`` writes for a secret (a log line's command, copied): never a value either.
REDACTED = "[redacted]"


def _placeholder(value: str) -> bool:
    """``...`` alone or after a scheme word (``Bearer ...``), or a redacted secret."""
    value = value.strip()
    return value == PLACEHOLDER or value.endswith(f" {PLACEHOLDER}") or REDACTED in value.lower()


def check_values(upstream: Upstream) -> None:
    """InvalidInputError naming a header given twice (its names differ only in case: one header in HTTP, which value
    would be sent is unclear), else the first env variable, header, URL query parameter, URL credential or command
    argument of ``upstream`` whose value is a placeholder: :data:`PLACEHOLDER` alone or after a scheme word, or holds
    :data:`REDACTED` (in any case)."""
    for name in sorted(upstream.headers):
        same = sorted(other for other in upstream.headers if other.lower() == name.lower())
        if len(same) > 1:
            raise InvalidInputError(
                f"headers {', '.join(map(repr, same))} are one header (HTTP header names are case-insensitive): "
                "give it once"
            )
    parts = urlsplit(upstream.url or "")
    referable = [("env variable", upstream.env), ("header", upstream.headers)]  # a ${VAR} reference may stand there
    credentials = (("user", parts.username), ("password", parts.password))
    values = [
        *((f"{kind} {name!r}", value, True) for kind, given in referable for name, value in sorted(given.items())),
        *((f"the URL's query parameter {name!r}", value, False) for name, value in parse_qsl(parts.query)),
        *((f"the URL's {part}", value, False) for part, value in credentials),
        *(  # a secret flag's value may be a ${VAR} reference (Upstream.command_args)
            (f"argument #{i}", shown if secret is None else secret, secret is not None)
            for i, (shown, secret) in enumerate(_arguments(upstream.args), 1)
        ),
    ]
    for what, value, reference in values:
        if value is not None and _placeholder(value):
            hint = ", or a '${VAR}' reference to a variable that holds it" if reference else ""
            raise InvalidInputError(f"{what} is {value.strip()!r}: a placeholder, not a value. Give the value{hint}")


def expand_vars(values: Mapping[str, str], what: str) -> dict[str, str]:
    """``values`` with every ``${VAR}`` replaced from the environment; McpSyncError naming a variable not set."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise McpSyncError(f"{what} refers to ${{{name}}}, which is not set in this environment")
        return os.environ[name]

    return {key: _VAR.sub(one, value) for key, value in values.items()}


def upstream_params(catalog: int, provider: str, upstream: Upstream) -> dict[str, Any]:
    """The bound parameters of ``save_upstream``."""
    return {
        "catalog": catalog,
        "provider": provider,
        "transport": upstream.transport,
        "command": upstream.command,
        "args": list(upstream.args),
        "env": json.dumps(dict(upstream.env)),
        "url": upstream.url,
        "headers": json.dumps(dict(upstream.headers)),
    }


def upstream_from_row(row: Sequence[Any]) -> Upstream:
    """A ``get_upstream`` row (transport, command, args, env, url, headers) as an Upstream."""
    transport, command, args, env, url, headers = row
    return Upstream(
        transport=transport,
        command=command,
        args=tuple(args or ()),
        env=dict(env or {}),
        url=url,
        headers=dict(headers or {}),
    )


#: A URL inside an error's text (an HTTP client names the URL it was refused at).
_URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^\s'\"<>]+")
# A part of a URL's path that a description shows: lower-case words (``mcp``, ``v1``, ``server-github``,
# ``@smithery-ai``) of at most 40 characters and :data:`_PATH_DIGITS` digits, and a part of at most 4 letters in any
# case and as many digits (``MCP``, ``SSE``, ``API``, ``V2``): too short to be a token. Any other may be one, as
# webhooks and hosted MCP servers put one in the path (``/services/T0AB12CD/B0CD34EF/Xy9...``, ``/bot123456:AAH.../``,
# a UUID, a key's letters and digits), and is shown as [redacted]: a longer path part in upper case or of more digits
# (``/KEYINCAPS``, ``/db_2024``) too, which no rule tells from one.
_PATH_WORD = re.compile(r"[@~]?[a-z][a-z0-9._-]{0,39}|(?i:[a-z][a-z0-9]{0,3})")
_PATH_DIGITS = 2


def _shown_path(path: str) -> str:
    """``path`` with each part that is no :data:`_PATH_WORD` redacted."""
    return "/".join(
        part
        if not part or (_PATH_WORD.fullmatch(part) and sum(c.isdigit() for c in part) <= _PATH_DIGITS)
        else REDACTED
        for part in path.split("/")
    )


def _arg_url(match: re.Match[str]) -> str:
    """A URL among a command's arguments (``_errors.URL_PARTS``) as a description shows it: without its query or
    fragment (they may hold a token, as an HTTP upstream's), its path as :func:`_shown_path`, its credentials for
    ``_errors.redact`` to hide the password of."""
    return match["scheme"] + (match["credentials"] or "") + match["server"] + _shown_path(match["path"])


def client_text(text: str) -> str:
    """An upstream's error text as the gateway's client (the model) may read it: every URL cut to its scheme and host
    (its path, query and credentials may hold a token) and what else looks like a credential redacted."""

    def origin(match: re.Match[str]) -> str:
        try:
            parts = urlsplit(match.group())
        except ValueError:  # not a URL urllib reads (a bad host): nothing of it shown
            return "[url]"
        if not parts.netloc:  # file:///path, urn-like: no server, nothing to cut
            return match.group()
        return f"{parts.scheme}://{_server(parts)}"

    return redact(_URL_IN_TEXT.sub(origin, text))


def _server(parts: SplitResult) -> str:
    """``host[:port]`` of a URL, never its credentials: an IPv6 host in brackets, a port that is no number left out."""
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"[{host}]{port}" if ":" in host else f"{host}{port}"
