"""Every file the command line reads (tools, labelled requests and sessions, negatives, anchors, messages) says what is
wrong with it in one shape, 'FILE line N[, column C]: ...', from one reader of JSON (Lines): `_input.read_json`,
`_input.json_lines`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolstore import InvalidInputError, InvalidToolError, InvalidTypeError, load_examples
from toolstore._abstain import load_negatives
from toolstore._anchors import load_anchors
from toolstore._formats import load_tools_file
from toolstore._input import parse_json
from toolstore._metrics import load_judgements, load_sessions
from toolstore.cli.route import read_messages_file

READERS: dict[str, tuple[str, Callable[[Path], Any]]] = {
    "tools .jsonl": ("tools.jsonl", load_tools_file),
    "tools .json": ("tools.json", load_tools_file),
    "queries": ("queries.jsonl", load_judgements),
    "sessions": ("sessions.jsonl", load_sessions),
    "negatives": ("negatives.jsonl", load_negatives),
    "anchors": ("anchors.json", load_anchors),
    "messages": ("messages.json", read_messages_file),
}


def refused(tmp_path: Path, reader: str, content: bytes) -> InvalidInputError:
    """What ``reader`` raises for a file of ``content``."""
    name, read = READERS[reader]
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InvalidInputError) as raised:
        read(path)
    if name.startswith("tools"):
        assert isinstance(raised.value, InvalidToolError)
    return raised.value


@pytest.mark.parametrize("reader", list(READERS))
def test_json_that_is_malformed_is_named_by_file_line_and_column(tmp_path: Path, reader: str) -> None:
    """A tools file said 'FILE line N column C: invalid JSON: ...' (.json) or 'FILE line N: invalid JSON at column C:
    ...' (.jsonl), a labelled file 'FILE, line N: invalid JSON (...)', an anchors file 'FILE: not valid JSON (... line
    N column C (char X))', a messages file 'FILE: invalid JSON (...)'. All say the same now."""
    error = refused(tmp_path, reader, b"\n{not json\n")
    name = READERS[reader][0]
    assert str(error) == (
        f"{tmp_path / name} line 2, column 2: invalid JSON: Expecting property name enclosed in double quotes"
    )


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'{"query": "two\tcolumns"}\n', "line 1, column 15: invalid JSON: a control character inside a string"),
        (b'\n{"query": "open', "line 2, column 11: invalid JSON: a string not closed (its opening quote is there)"),
    ],
    ids=["raw-tab", "unterminated"],
)
def test_json_whose_message_ends_in_at_says_what_is_wrong(
    tmp_path: Path, reader: str, content: bytes, said: str
) -> None:
    """json's messages that end in "at" (the position it appends after them) ended the error line so: 'FILE line 1,
    column 15: invalid JSON: Invalid control character at'. They say what is wrong, where the line and column are."""
    error = str(refused(tmp_path, reader, content))
    assert error.startswith(f"{tmp_path / READERS[reader][0]} {said}") and not error.endswith(" at"), error


@pytest.mark.parametrize("reader", list(READERS))
def test_json_with_more_after_its_value_says_what_json_lines_are(tmp_path: Path, reader: str) -> None:
    """Two JSON values where one is read (a JSON Lines file given where a JSON document is read, or two values on one
    line) said json's 'Extra data'; it says there is more after a whole value, and that values a line are JSON
    Lines."""
    error = str(refused(tmp_path, reader, b'{"query": "x"} {"query": "y"}\n'))
    assert error == (
        f"{tmp_path / READERS[reader][0]} line 1, column 16: invalid JSON: more after a whole JSON value (several "
        "values, one a line, are JSON Lines: a .jsonl file)"
    )


@pytest.mark.parametrize("reader", list(READERS))
def test_a_trailing_comma_is_said_the_same_on_every_python(tmp_path: Path, reader: str) -> None:
    """A comma before a closing brace was 'line 2, column 14: invalid JSON: Expecting property name enclosed in double
    quotes' (where the brace is) up to Python 3.12 and 'line 2, column 13: ... Illegal trailing comma before end of
    object' (where the comma is) on 3.13: every Python says the latter now."""
    error = refused(tmp_path, reader, b'\n{"name": "x",}\n')
    name = READERS[reader][0]
    said = "line 2, column 13: invalid JSON: Illegal trailing comma before end of object"
    assert str(error) == f"{tmp_path / name} {said}"


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("[1, 2,]", "Illegal trailing comma before end of array", 1, 6),
        ('[\n  {"a": 1},\n\t\r\n]', "Illegal trailing comma before end of array", 2, 11),
        ('{"a": [1], "b": 2 , }', "Illegal trailing comma before end of object", 1, 19),
        ("[,]", "Expecting value", 1, 2),  # no value before the comma: no trailing comma
        ("[1,,]", "Expecting value", 1, 4),
        ("[1,}", "Expecting value", 1, 4),  # the brace closes no array
        ('{"a": 1,]', "Expecting property name enclosed in double quotes", 1, 9),
        ('{"a": ,}', "Expecting value", 1, 7),
        ("[1, 2", "Expecting ',' delimiter", 1, 6),
    ],
)
def test_a_json_error_is_said_the_same_on_every_python(text: str, message: str, line: int, column: int) -> None:
    """parse_json, which every file is read with, says a JSON error as Python 3.13 does on every Python."""
    with pytest.raises(json.JSONDecodeError) as raised:
        parse_json(text)
    assert (raised.value.msg, raised.value.lineno, raised.value.colno) == (message, line, column)


#: A line each JSON Lines reader takes.
RECORDS: dict[str, dict[str, Any]] = {
    "tools .jsonl": {"name": "x", "description": "a tool"},
    "queries": {"qid": "1", "query": "x", "relevant": ["a.b"]},
    "sessions": {"sid": "s", "turns": [{"query": "x", "calls": ["a.b"]}]},
    "negatives": {"query": "x"},
}


@pytest.mark.parametrize("reader", list(RECORDS))
def test_a_json_lines_file_written_as_one_document_over_several_lines_says_so(tmp_path: Path, reader: str) -> None:
    """Intent examples (or queries, sessions, negatives, tools .jsonl) written as a JSON array, or one object, over
    several lines (json.dump(..., indent=2)) said 'FILE line 1, column 2: invalid JSON: Expecting value': true of
    the line '[', but not what is wrong (and a negatives file whose first line is no object was read as plain text,
    a request per line: '[', '  {', ...). When a line is no JSON and the file is one JSON document, the error says
    that a JSON Lines file holds one whole value per line."""
    record = RECORDS[reader]
    for document in ([record, record], record):
        error = refused(tmp_path, reader, json.dumps(document, indent=2).encode())
        assert str(error) == (
            f"{tmp_path / READERS[reader][0]} line 1: invalid JSON Lines: the file is one JSON document over several "
            "lines, where a JSON Lines file holds one whole JSON value per line (each object on a line of its own)"
        )
    error = refused(tmp_path, reader, (json.dumps(record) + "\n{not json\n").encode())  # one bad line: as before
    assert str(error).endswith("line 2, column 2: invalid JSON: Expecting property name enclosed in double quotes")


@pytest.mark.parametrize("reader", list(READERS))
def test_a_value_json_refuses_is_named_by_file_and_line_of_a_json_lines_file(tmp_path: Path, reader: str) -> None:
    """NaN (no position from the parser): the line of a JSON Lines file, the file alone for a JSON document."""
    name = READERS[reader][0]
    error = refused(tmp_path, reader, b'\n{"query": NaN}\n')
    line = " line 2" if name.endswith(".jsonl") else ""
    assert str(error) == f"{tmp_path / name}{line}: invalid JSON: NaN is not valid JSON"


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize(
    ("content", "where"),
    [
        ('\n{"query": "caf\u00e9 '.encode() + b'\xff"}\n', "line 2, column 17"),
        (b'\xef\xbb\xbf{"\xff', "line 1, column 3"),
    ],
    ids=["line 2", "after a byte order mark"],
)
def test_invalid_utf8_is_named_by_file_line_and_column(tmp_path: Path, reader: str, content: bytes, where: str) -> None:
    """Invalid UTF-8 said 'FILE line N: not valid UTF-8 (...)' (a messages file: 'FILE: invalid JSON (FILE line N:
    ...)'): no column, where a JSON error gives one; it names the column in characters, as a JSON error counts them."""
    error = refused(tmp_path, reader, content)
    assert str(error) == f"{tmp_path / READERS[reader][0]} {where}: not valid UTF-8 (invalid start byte)"


@pytest.mark.parametrize(
    ("messages", "request_text", "error"),
    [
        ([{"role": "user", "content": "hi"}, 5], None, "messages[1]: expected an object, got int"),
        ([{"role": "assistant", "content": "hi"}], None, "no user message with text in messages: nothing to route"),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "weather", "messages[0]"),
    ],
    ids=["not an object", "no request", "with a request"],
)
def test_a_messages_files_own_errors_name_the_file(
    tmp_path: Path, messages: list[Any], request_text: str | None, error: str
) -> None:
    """route --messages FILE read the list at route time, so what was wrong with it (a message that is no object, no
    user request to route) was said without the file: 'error: no user message with text in messages: nothing to
    route'; the file is read there as route() reads it, and its errors name it. The request's own do not."""
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(messages))
    with pytest.raises(InvalidInputError) as raised:
        read_messages_file(path, request_text)
    assert str(raised.value).startswith(f"{path}: {error}"), raised.value
    with pytest.raises(InvalidInputError, match="^query is empty$"):
        read_messages_file(path, "")


PATH_READERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "tools": ("tools file", load_tools_file),
    "intent examples": ("queries file", load_examples),
    "queries": ("queries file", load_judgements),
    "sessions": ("sessions file", load_sessions),
    "negatives": ("negatives file", load_negatives),
    "anchors": ("anchors file", load_anchors),
}


@pytest.mark.parametrize("reader", PATH_READERS, ids=list(PATH_READERS))
@pytest.mark.parametrize("given", [None, 5, ["tools.json"], b"tools.json"], ids=["None", "int", "list", "bytes"])
def test_a_file_reader_given_no_path_names_the_file_it_wanted(reader: str, given: object) -> None:
    # A library user passing None (an unset setting), a number or the file's lines got Python's TypeError from deep in
    # the reader ("expected str, bytes or os.PathLike object, not NoneType"), naming neither argument nor file.
    what, read = PATH_READERS[reader]
    with pytest.raises(InvalidTypeError) as caught:
        read(given)
    assert str(caught.value) == f"the {what} must be a path (a str or os.PathLike), got {type(given).__name__}"
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, InvalidInputError)
