"""Bad input: the documented limits, and the checks every entry point shares (text, JSON values, session calls; a
file's reading: ``_textfile``).

Everything a caller hands toolstore is checked here or against these limits before it reaches Postgres, so bad
input is always an :class:`InvalidInputError` (or :class:`InvalidToolError`) naming what is wrong, never a driver
error, a RecursionError or a half-written catalog.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from ._errors import InvalidInputError, InvalidTypeError
from ._models import SessionCall, Tool

MAX_ID_CHARS = 256  # a tool id
MAX_NAME_CHARS = 128  # a tool name (OpenAI and Anthropic accept at most 64; MCP names may be longer)
MAX_TEXT_CHARS = 100_000  # any one text field of a tool (description, expansion, ...)
MAX_DOC_CHARS = 200_000  # the text indexed for one lexical field (Postgres caps a tsvector at 1 MB)
MAX_LIST_ITEMS = 1_000  # categories, tags, keywords or examples of one tool
MAX_JSON_DEPTH = 64  # nesting of a parameter schema or spec
MAX_JSON_CHARS = 1_000_000  # a parameter schema or spec as JSON (not counting escapes)
MAX_DOCUMENT_DEPTH = 100  # nesting of a JSON document read from a file (an OpenAPI spec wraps schemas in ~10 levels)
MAX_INT_BITS = 1_000  # integers in JSON values (about 300 digits)
MAX_FILE_BYTES = 256 * 2**20  # a file to import
MAX_QUERY_CHARS = 20_000  # a request to route
MAX_K = 1_000  # tools routed per request
MAX_OVERFETCH = 10_000  # candidates per retriever
MAX_WEIGHT = 1e6  # a fusion weight or k_rrf
MAX_TOKEN_BUDGET = 10_000_000
MAX_FILTER_VALUES = 10_000  # ids or categories in one filter
MAX_SESSION_CHARS = 200  # a session id
MAX_CATALOG_CHARS = 200  # a catalog name
MAX_CALLS_PER_WRITE = 10_000  # tool calls logged by one record_calls
MAX_CLOCK_SKEW = timedelta(minutes=5)  # how far ahead of the database's time a logged call's time may be
MAX_TURNS = 100  # user turns of a message list route() reads
MAX_PATTERN_CHARS = 500  # an anchor's regular expression
MAX_ANCHORS = 1_000  # anchors of one catalog (route() matches every one against each request)
MAX_BOOST = 10.0  # an anchor's boost, either sign (a fused score is at most about 1)


def text_problem(text: str) -> str | None:
    """Why a string cannot be stored (a NUL byte, a lone surrogate: not encodable as UTF-8), or None."""
    if "\x00" in text:
        return "contains a NUL byte"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (a lone surrogate, e.g. from undecodable bytes)"
    return None


def check_text(value: object, what: str, *, max_chars: int, empty: bool = False) -> str:
    """``value`` as a storable string of at most ``max_chars`` characters; InvalidInputError naming ``what``."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{what} must be a string, got {type(value).__name__}")
    if not empty and not value.strip():
        raise InvalidInputError(f"{what} is empty")
    if len(value) > max_chars:
        raise InvalidInputError(f"{what} is {len(value):,} characters long; the limit is {max_chars:,}")
    problem = text_problem(value)
    if problem:
        raise InvalidInputError(f"{what} {problem}")
    return value


def check_catalog_name(name: object) -> str:
    """A catalog name: a non-empty string of at most 200 characters, without control characters."""
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name) > MAX_CATALOG_CHARS
        or any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in name)
    ):
        raise InvalidInputError(
            f"catalog name must be a non-empty string of at most {MAX_CATALOG_CHARS} printable characters, "
            f"got {name!r:.80}"
        )
    return name


def check_tool_id(value: object) -> str:
    """A tool id as a store's methods take one: a non-empty string of at most :data:`MAX_ID_CHARS` characters."""
    return check_text(value, "tool id", max_chars=MAX_ID_CHARS)


def check_session(value: object) -> str:
    """A session id: a non-empty string of at most :data:`MAX_SESSION_CHARS` characters, without NUL."""
    return check_text(value, "session id", max_chars=MAX_SESSION_CHARS)


def json_problem(value: Any, *, max_depth: int = MAX_JSON_DEPTH, max_chars: int = MAX_JSON_CHARS) -> str | None:
    """Why a JSON-like value cannot be stored (too deep, too long, NaN, a huge integer, bad text, a non-JSON type), or
    None. Its length is counted about as compact JSON without escapes (which make a text at most 6 times longer).

    Iterative, so any depth is safe to inspect.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    chars = 0
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"is nested deeper than {max_depth} levels"
        if chars > max_chars:
            return f"is over {max_chars:,} characters long as JSON"
        if isinstance(item, str):
            chars += len(item) + 2
            problem = text_problem(item)
            if problem:
                return problem
        elif isinstance(item, bool) or item is None:
            chars += 5
        elif isinstance(item, int):
            chars += item.bit_length() // 3 + 2
            if item.bit_length() > MAX_INT_BITS:
                return f"holds an integer over {MAX_INT_BITS} bits"
        elif isinstance(item, float):
            chars += 24
            if not math.isfinite(item):
                return "holds NaN or Infinity (not JSON)"
        elif isinstance(item, dict):
            chars += 2 + 2 * len(item)
            for key, sub in item.items():
                if not isinstance(key, str):
                    return f"has a non-string key {key!r:.40}"
                stack.append((key, depth + 1))
                stack.append((sub, depth + 1))
        elif isinstance(item, (list, tuple)):
            chars += 2 + len(item)
            stack.extend((sub, depth + 1) for sub in item)
        else:
            return f"holds a {type(item).__name__}, which is not JSON"
    return f"is over {max_chars:,} characters long as JSON" if chars > max_chars else None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_TRAILING = {("Expecting value", "]"): "array", ("Expecting property name enclosed in double quotes", "}"): "object"}


def decode_error(exc: json.JSONDecodeError) -> json.JSONDecodeError:
    """``exc`` as every Python says it: a comma before the end of an array or object is "Illegal trailing comma before
    end of array" where the comma is, as Python 3.13 says it, where an earlier one said "Expecting value" where the
    bracket is (a line further on, in a file written one item a line)."""
    kind = _TRAILING.get((exc.msg, exc.doc[exc.pos : exc.pos + 1]))
    if kind is None:
        return exc
    before = exc.doc[: exc.pos].rstrip(" \t\n\r")  # JSON's whitespace
    if not before.endswith(","):
        return exc
    return json.JSONDecodeError(f"Illegal trailing comma before end of {kind}", exc.doc, len(before) - 1)


def parse_json(text: str, *, allow_nan: bool = False) -> Any:
    """``json.loads``, the same on every Python: NaN/Infinity refused (unless ``allow_nan``), a huge integer and
    nesting deeper than :data:`MAX_DOCUMENT_DEPTH` a ValueError (before anything recursive walks the document), a
    JSONDecodeError as :func:`decode_error` says it. The depth at which ``json.loads`` itself gives up (a
    RecursionError) differs by version: under 1,000 levels on Python 3.11, 1,500 on 3.12, 10,000 on 3.13."""
    try:
        data = json.loads(text) if allow_nan else json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DOCUMENT_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise decode_error(exc) from None
    except ValueError as exc:  # an integer of thousands of digits
        raise ValueError(plain_problem(exc)) from None
    check_document_depth(data)
    return data


def read_json(
    text: str, name: str, *, line: int | None = None, error: type[InvalidInputError] = InvalidInputError
) -> Any:
    """The JSON value of ``text``: the whole of file ``name``, or its line ``line``. One that is no JSON (NaN, a huge
    integer, nesting past :data:`MAX_DOCUMENT_DEPTH` included) is an ``error`` (InvalidInputError or a subclass, as
    InvalidToolError for a tools file) of the one shape every file's errors have: ``NAME line N[, column C]: ...``."""
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:  # its position is in ``text``: a line of the file when ``line`` is given
        at = f"line {exc.lineno if line is None else line}, column {exc.colno}"
        raise error(f"{name} {at}: invalid JSON: {decode_problem(exc.msg)}") from None
    except ValueError as exc:
        where = f"{name} line {line}" if line is not None else name
        raise error(f"{where}: invalid JSON: {exc}") from None


def decode_problem(message: str) -> str:
    """The json module's ``message`` as an error line ends: without the ``at`` it ends some with (``Invalid control
    character at``, the position appended after it by json, given here as the line and column before it), a raw
    control character said as what it most often is."""
    if message.startswith("Invalid control character"):
        return "a control character inside a string (a raw tab or line break: write it as \\t or \\n)"
    if message.startswith("Unterminated string"):
        return "a string not closed (its opening quote is there)"
    if message == "Extra data":  # JSON Lines in a file read as one JSON document, or two values on one line
        return "more after a whole JSON value (several values, one a line, are JSON Lines: a .jsonl file)"
    return message.removesuffix(" at")


def json_lines(
    text: str, name: str, *, error: type[InvalidInputError] = InvalidInputError
) -> Iterator[tuple[int, str, Any]]:
    """Each non-blank line of the JSON Lines ``text`` of file ``name`` as its line number, where it is (``NAME line
    N``, which the reader's own errors start with) and its JSON value: the one rule of every JSON Lines file's reader
    (tools, queries and train sets, sessions, negatives): a line that is no JSON is an ``error`` naming the file,
    line and column (:func:`read_json`)."""
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = read_json(line, name, line=lineno, error=error)
        except InvalidInputError:
            if one_document(text):  # a JSON array or object written over several lines: say what the file must be
                raise error(over_lines(name, lineno)) from None
            raise
        yield lineno, f"{name} line {lineno}", value


def one_document(text: str) -> bool:
    """Whether ``text`` is one JSON array or object (asked of a JSON Lines file one of whose lines is no JSON, or of a
    negatives file read as plain text): a document written over several lines, not one value per line."""
    if "\n" not in text.strip():
        return False
    try:
        return isinstance(parse_json(text), (list, dict))
    except ValueError:
        return False


def over_lines(name: str, lineno: int) -> str:
    """The error of a JSON Lines file that is one JSON document over several lines (:func:`one_document`)."""
    return (
        f"{name} line {lineno}: invalid JSON Lines: the file is one JSON document over several lines, where a JSON "
        "Lines file holds one whole JSON value per line (each object on a line of its own)"
    )


def check_at(where: str, value: object, what: str, *, max_chars: int) -> str:
    """:func:`check_text` for a value read from a file, its error starting with ``where`` (``NAME line N``)."""
    try:
        return check_text(value, what, max_chars=max_chars)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: {exc}") from None


def plain_problem(exc: BaseException) -> str:
    """An error's text without Python's advice to the programmer (``; use sys.set_int_max_str_digits() ...``, after
    an integer of thousands of digits), which a user giving a file cannot follow."""
    return str(exc).split("; use sys.")[0]


def check_document_depth(data: Any) -> None:
    """ValueError when a decoded document (dicts, lists and tuples) nests deeper than :data:`MAX_DOCUMENT_DEPTH`;
    iterative, so before anything recursive walks it."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DOCUMENT_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DOCUMENT_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)


def single(value: object) -> bool:
    """Whether ``value`` is one value where a list of them goes: a str (read letter by letter), bytes, a mapping (read
    by its keys), or anything not iterable (one Tool, a number)."""
    return isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable)


def not_a_list(value: object, *, typed: bool = False) -> str:
    """How an error says what was given where a list goes: ``got None`` (an unset value, not a single "NoneType"), else
    ``not a single str`` and the like (``typed``: ``not a single value (str)``)."""
    if value is None:
        return "got None"
    return f"not a single value ({type(value).__name__})" if typed else f"not a single {type(value).__name__}"


def _items(value: object) -> Iterable[Any]:
    """``value`` as the iterable :func:`single` found it to be (for the type checker, which cannot tell)."""
    return cast(Iterable[Any], value)


def given_dsn(dsn: object) -> str | None:
    """A store's ``dsn`` argument: None, or a DSN string (``_dsn.check_dsn`` reads it). An empty or blank one is
    refused, not taken for None (a setting's unset value would open the embedded server, another database), and so is
    any other type (named, never quoted: it may hold a password)."""
    if dsn is None:
        return None
    if not isinstance(dsn, str):
        raise InvalidTypeError(f"dsn must be a string or None, got {type(dsn).__name__}")
    if not dsn.strip():
        raise InvalidInputError("dsn is empty: give a Postgres DSN, or None for $TOOLSTORE_DSN or the embedded server")
    return dsn


def flag(value: object, name: str) -> bool:
    """A True/False argument of a store (``prune``, ``replace``, ``create``...), refused when it is anything else: a
    setting's ``"false"`` or ``"no"`` is true, and ``upsert(tools, prune="false")`` pruned the catalog."""
    if not isinstance(value, bool):
        raise InvalidTypeError(f"{name} must be True or False, got {value!r:.80}")
    return value


def listed(values: object, what: str) -> list[Any]:
    """A write's items (``upsert``'s tools, ``add_examples``' examples, anchors, anchor ids, ``tune``'s labels), any
    iterable read once, as a list; a single value (one Tool, a str, a mapping, a number) is InvalidInputError naming
    ``what``."""
    if single(values):
        raise InvalidInputError(f"{what} must be a list, {not_a_list(values)}")
    return list(_items(values))


def session_pairs(sessions: object) -> list[tuple[object, object]]:
    """``import_sessions``' argument as (session id, calls) pairs: from a mapping of session id to calls, or an iterable
    of pairs, each one's calls listed (a generator read once: a write tried again reads the list). InvalidInputError
    for a single value or an item that is no pair (the ids and calls are checked later)."""
    if isinstance(sessions, Mapping):
        return [_listed(pair) for pair in sessions.items()]
    if single(sessions):
        raise InvalidInputError(
            "sessions must be (session id, calls) pairs or a mapping of session id to calls, not a single value"
        )
    pairs: list[tuple[object, object]] = []
    for index, item in enumerate(_items(sessions)):
        if single(item) or len(pair := tuple(_items(item))) != 2:
            raise InvalidInputError(f"session #{index + 1}: expected a (session id, calls) pair, got {item!r:.80}")
        pairs.append(_listed((pair[0], pair[1])))
    return pairs


def call_id_list(call_ids: object) -> Any:
    """``new_calls``' call ids listed (a generator read once: a write tried again reads the list); a single value (a
    str, a number) as it is, for the check of them to refuse."""
    return call_ids if single(call_ids) else list(_items(call_ids))


def _listed(pair: tuple[object, object]) -> tuple[object, object]:
    """A (session id, calls) pair, its calls listed unless they are a single value (refused later, naming it)."""
    session, calls = pair
    return session, calls if single(calls) else list(_items(calls))


def check_session_calls(calls: object) -> list[SessionCall]:
    """Calls as SessionCalls: a tool id or name, a SessionCall, or a resolved call (anything with a ``tool`` Tool and
    an ``id``, as :class:`toolstore.ResolvedCall`). InvalidInputError names the call and the field."""
    if single(calls):  # a str, a SessionCall, a number
        raise InvalidInputError(f"calls must be a list of tool calls, {not_a_list(calls, typed=True)}")
    out: list[SessionCall] = []
    for index, call in enumerate(_items(calls)):
        where = f"calls[{index}]"
        if index >= MAX_CALLS_PER_WRITE:
            raise InvalidInputError(f"more than {MAX_CALLS_PER_WRITE:,} calls in one write")
        if isinstance(call, str):
            call = SessionCall(call)
        elif isinstance(getattr(call, "tool", None), Tool):
            call = SessionCall(call.tool.id, call_id=getattr(call, "id", None))  # type: ignore[attr-defined]
        elif not isinstance(call, SessionCall):
            raise InvalidInputError(
                f"{where}: expected a tool id, a SessionCall or a resolved call, got {type(call).__name__}"
            )
        check_text(call.tool, f"{where}.tool", max_chars=MAX_ID_CHARS)
        if not isinstance(call.ok, bool):
            raise InvalidInputError(f"{where}.ok: expected True or False, got {call.ok!r}")
        if call.at is not None and (not isinstance(call.at, datetime) or call.at.utcoffset() is None):
            raise InvalidInputError(
                f"{where}.at: expected a datetime with a time zone (or None for now), got {call.at!r}"
            )
        if call.call_id is not None:
            check_text(call.call_id, f"{where}.call_id", max_chars=MAX_ID_CHARS)
        out.append(call)
    return out


def check_call_times(calls: Sequence[SessionCall | str], now: datetime, where: str = "calls") -> None:
    """InvalidInputError naming the first of ``calls`` made more than :data:`MAX_CLOCK_SKEW` after ``now``, the
    database's time (another host's clock may be that far ahead of it): a call logged in the future would sort after
    the calls made after it and outlive the retention's age. A str (a call id, or a tool's) has no time."""
    for index, call in enumerate(calls):
        if isinstance(call, SessionCall) and call.at is not None and call.at > now + MAX_CLOCK_SKEW:
            minutes = MAX_CLOCK_SKEW.total_seconds() / 60
            raise InvalidInputError(
                f"{where}[{index}].at: the call of {call.tool!r} is dated {call.at.isoformat()}, more than {minutes:g} "
                f"minutes after the database's time ({now.isoformat(timespec='seconds')}): a call's time may be ahead "
                "of it by clock skew only (None: now)"
            )
