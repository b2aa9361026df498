"""Redaction, its one home in the tests: redact() hides what it hides and no more (a dict keyed by a secret flag keeps
its closing quote and bracket, prose about a quoted flag is kept, adversarial text is read a bounded number of times),
and an MCP upstream's description (Upstream.describe) and error text (client_text) hide what redact() does, by the
same rule for a secret flag's value."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from toolstore import _errors
from toolstore._errors import redact
from toolstore._mcp_upstream import Upstream, client_text


def test_a_secret_value_in_a_dict_or_call_keeps_the_text_that_closes_it() -> None:
    """A quoted value that a closing bracket follows took the bracket for part of the secret and lost its own closing
    quote with it (``{"--api-key": "abc"}`` became ``{"--api-key": "[redacted]``), and a dict keyed by a secret flag
    that no credential pattern knows (``--client-secret``) showed its value."""
    for text, shown in [
        ('{"--api-key": "abc"}', '{"--api-key": "[redacted]"}'),
        ('{"token": "abc"}', '{"token": "[redacted]"}'),
        ("(token='abc');", "(token='[redacted]');"),
        ("[password='a b']", "[password='[redacted]']"),
        ('{"--client-secret": "abc", "user": "x"}', '{"--client-secret": "[redacted]", "user": "x"}'),
        ("{'--db-password': 'abc'}", "{'--db-password': '[redacted]'}"),
    ]:
        assert redact(f"srv {text}") == f"srv {shown}", text


def test_prose_about_a_quoted_secret_flag_is_kept() -> None:
    """A quoted flag followed by prose took its first word for the flag's value (``'--token' is required`` hid "is",
    click's ``Option '--token' requires an argument.`` hid "requires"); a value given after it is still hidden."""
    for text in (
        "'--token' is required",
        "Error: Option '--api-key' requires an argument.",
        'option "--client-secret" expects a value',
    ):
        assert redact(text) == text
    for text, shown in [
        ("'--token' abc123 is wrong", "'--token' [redacted] is wrong"),
        ("'--client-secret': missing value", "'--client-secret': [redacted] value"),  # as "token: X" (_SECRETS)
        ("'--token' hunter -v", "'--token' [redacted] -v"),
        ("'--token' hunter", "'--token' [redacted]"),
        ("'--token' 'is' required", "'--token' '[redacted]' required"),
        ("--token is required", "--token [redacted] required"),  # unquoted, a command line's: any word is the value
    ]:
        assert redact(text) == shown, text


def test_a_secret_that_runs_on_past_a_quoted_part_or_a_line_end_stays_hidden() -> None:
    """A closing bracket or ";" right after a quoted part ended the value even where the word went on (``"a"]b``, one
    word to a shell: its rest shown), and a word that ended a line after a quoted flag was taken for prose when the next
    line began with a letter; both were hidden before either rule."""
    for text, shown in [
        ('srv --token="SEK"x"]RIT" is required', 'srv --token="[redacted]" is required'),
        ('srv {"token":"SEK");RIT"}', 'srv {"token":"[redacted]"}'),
        ("srv password: SEK'a'}RIT more", "srv password: [redacted] more"),
        ("'--api-key' 'SEK'];RIT", "'--api-key' '[redacted]'];RIT"),  # a quoted item alone: as Python prints a list
        ("'--client-secret' SEKRIT\nNext line", "'--client-secret' [redacted]\nNext line"),
        (
            "['--token', 'x']\n'--password' hunter\nstarting",
            "['--token', '[redacted]']\n'--password' [redacted]\nstarting",
        ),
    ]:
        assert redact(text) == shown, text
    for text in ('{"token": "abc"}.', "(token='abc'));", '{"token": "abc"}, "user": "x"}'):
        assert "abc" not in redact(text) and redact(text).endswith(text[text.index("abc") + 4 :]), text


N = 100_000
ADVERSARIAL = [  # (text, redacted)
    ("'--token' " + "a" * N, "'--token' [redacted]"),
    ("'--token' a" + " " * N + "b", None),  # prose: kept
    ("'--token' " + "ab " * (N // 3), None),
    ("'--token': " + "a" * N, "'--token': [redacted]"),
    ("'--client-secret'," + " " * N + "is it", None),
    ("'--token'" + " " * N + ":", "'--token'" + " " * N + "[redacted]"),
    ("--token " + '"a"' * (N // 3) + "}", '--token "[redacted]"}'),
    ("token=" + '"a"}' * (N // 4), 'token="[redacted]"}' + '"a"}' * (N // 4 - 1)),
    ("'--token' is " * (N // 13), "'--token' [redacted] " * (N // 13)),
    ("'--token' \"a\"} is " * (N // 18), "'--token' \"[redacted]\"} is " * (N // 18)),
    ('token="a"' + "]" * N + "b", 'token="[redacted]'),
    ("token=" + ('"a"' + "]" * 50) * (N // 53), 'token="[redacted]"' + "]" * 50 + ('"a"' + "]" * 50) * (N // 53 - 1)),
    ("'--token' a" + "\n" * N + "b", "'--token' [redacted]" + "\n" * N + "b"),
    ("password: " + "ab " * (N // 3), "password: [redacted] "),
    ("password: a b, " * (N // 15), "password: [redacted], " * (N // 15)),
    ("password: a" + " " * N + "1", "password: [redacted]" + " " * N + "1"),
    ("sort_key=a " * (N // 11), None),
]


@pytest.mark.parametrize(("text", "redacted"), ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redact_reads_adversarial_text_a_bounded_number_of_times(
    text: str, redacted: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text of 100,000 characters made of the shapes above, repeated, is read by each of redact's patterns once over
    (one substitution over the whole text, none restarted after each match); a pattern that backtracked over the rest
    of the text from each position would not end here (quadratic in its length)."""
    read = {"chars": 0}

    class Counted:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def sub(self, repl: Any, string: str) -> str:
            read["chars"] += len(string)
            return self.pattern.sub(repl, string)

        def search(self, string: str) -> re.Match[str] | None:
            read["chars"] += len(string)
            return self.pattern.search(string)

    for name in ("_SECRETS", "_FLAG_WORDS", "_FLAG_ITEMS", "_FLAG_EQUALS", "_URI_RUN", "_DSN_PARSE", "_QUOTED"):
        monkeypatch.setattr(_errors, name, Counted(getattr(_errors, name)))
    hidden = redact(text)
    assert hidden == (text if redacted is None else redacted)
    assert read["chars"] <= 8 * max(len(text), len(hidden)), read  # 7 patterns, each over the text as it then is


def test_an_upstreams_description_and_error_text_hide_its_secrets() -> None:
    """An HTTP upstream is described by its URL without credentials or query and its header names; a stdio one by
    its command with a DSN's password and a secret flag's value hidden; an upstream's error text (what the gateway's
    client reads) has its URLs cut to their server and what looks like a key hidden, and nothing else."""
    secret = Upstream(
        "http", url="https://user:pw@mcp.example.com/mcp?token=abc", headers={"Authorization": "Bearer x"}
    )
    assert secret.describe() == "http: https://mcp.example.com/mcp (headers: Authorization)"
    assert Upstream("http", url="http://[::1]:8000/mcp").describe() == "http: http://[::1]:8000/mcp"
    assert Upstream("http", url="http://h.example:x/mcp").describe() == "http: http://h.example/mcp"
    assert (
        client_text("at http://[::1]:8000/mcp?t=1 and http://h.example:x/a")
        == "at http://[::1]:8000 and http://h.example"
    )
    dsn = Upstream("stdio", command="pg-mcp", args=("--dsn", "postgresql://app:pw0rd@db/app", "--api-key=sk-abc"))
    assert dsn.describe() == "stdio: pg-mcp --dsn postgresql://app:[redacted]@db/app --api-key=[redacted]"
    other = Upstream("stdio", command="pg-mcp", args=("--dsn", "postgresql://app:other@db/app", "--api-key=sk-abc"))
    assert dsn.differences(other) == "arguments differ in a redacted value"
    plain = Upstream("stdio", command="srv", args=("--disk-cache-dir", "/tmp/c", "--task-queue-name", "jobs"))
    assert plain.describe() == "stdio: srv --disk-cache-dir /tmp/c --task-queue-name jobs"  # no "sk-" inside a word
    ordinary = "tool ask-for-approval failed: see file:///srv/data/in.csv"
    assert client_text(ordinary) == ordinary  # no key inside a word, no server in a file URL
    assert client_text("sk-live-abcdefgh12 at https://u:p@h.example/x?token=t") == "[redacted] at https://h.example"


def test_an_upstreams_error_text_never_shows_a_secret_flags_value() -> None:
    """An upstream's error may quote its own command line: a secret flag's value after a space is redacted like one
    after '=', while the end of the options ('--') after it, a --no- flag or a word merely ending in a flag's name is
    left alone."""
    quoted = "gh-mcp exited: usage: gh-mcp --GitHub-Token 'ghp_s3cr3t' --db-password  pw0rd --verbose"
    assert (
        client_text(quoted)
        == "gh-mcp exited: usage: gh-mcp --GitHub-Token '[redacted]' --db-password  [redacted] --verbose"
    )
    assert client_text("srv --api-key -Xq3_s3cr3t -v") == "srv --api-key [redacted] -v"  # a secret may start with -
    camel = "srv --githubToken ghp_s3cr3t --clientSecret=c_s3cr3t --noToken 1"  # camelCase names, not --noToken
    assert client_text(camel) == "srv --githubToken [redacted] --clientSecret=[redacted] --noToken 1"
    for alone in ("srv --token -- serve", "srv --no-token 1", "see my--token x"):
        assert client_text(alone) == alone


@pytest.mark.parametrize("flag", ["--secret", "--client-secret", "--passwd", "--access-key", "--secret-key", "--token"])
def test_an_upstreams_error_text_never_shows_a_secret_flags_value_after_equals(flag: str) -> None:
    """An upstream's error quoting its command line with ``--client-secret=X`` (every secret flag's name, not only
    those a credential pattern knows, ``token=``, ``password=``): the value is redacted there as in its description,
    a value starting with "--" too."""
    for value in ("s3cr3tValue", "--s3cr3tValue"):
        args = ("--org", "acme", f"{flag}={value}", "-v")
        described = Upstream("stdio", command="srv", args=args).describe()
        quoted = client_text(f"srv exited: usage: {shlex.join(['srv', *args])}")
        assert described == f"stdio: srv --org acme {flag}=[redacted] -v"
        assert quoted == f"srv exited: usage: srv --org acme {flag}=[redacted] -v", quoted


def test_a_quoted_secret_value_is_hidden_whole() -> None:
    """redact() hid the first word of a quoted secret value alone (``--token "abc def"`` showed ``def``); a quoted
    value is hidden whole, in either quote, after a space or '=', a secret flag's or a ``key:`` secret's, in an
    argument shlex.join quoted whole, and a shell word of quoted parts (``'it'"'"'s'``); describe() hides them too."""
    for text, shown in [
        ('--token "abc def" -v', '--token "[redacted]" -v'),
        ("--token 'abc def' -v", "--token '[redacted]' -v"),
        ("--token='abc def' -v", "--token='[redacted]' -v"),
        ('--client-secret="abc def" -v', '--client-secret="[redacted]" -v'),
        ('--token --db-password "abc def" -v', '--token [redacted] "[redacted]" -v'),
        ('{"password": "abc def", "user": "x"}', '{"password": "[redacted]", "user": "x"}'),
        ('--token "--" serve', '--token "--" serve'),
    ]:
        assert redact(f"srv {text}") == f"srv {shown}"
    for args in [
        ("--token", "abc def", "-v"),
        ("--token=abc def", "-v"),
        ("--api-key", "it's abc def", "-v"),
        ("sh", "-c", "srv --token 'abc def' -v"),
    ]:
        described = Upstream("stdio", command="srv", args=args).describe()
        quoted = client_text(f"srv failed: usage: {shlex.join(['srv', *args])}")
        for text in (described, quoted):
            assert "abc" not in text and "def" not in text and "[redacted]" in text and "-v" in text, text


def test_a_secret_flags_value_is_the_same_word_to_describe_and_redact() -> None:
    """After a secret flag without '=' (``--token X``), the next word is taken for its value whatever it is but '--'
    alone: a secret may start with '-' or '--' (``--token --abc123``), which no rule tells from a flag, so it is never
    shown; when that word is itself a secret flag, the word after it is hidden too (either may be the secret). One rule,
    so an upstream's description, its identity and the redaction of its command line in an error's text agree; the
    server is still started with its arguments as given."""
    for args, shown in [
        (("--token", "--abc123", "-v"), "--token [redacted] -v"),
        (("--token", "--verbose"), "--token [redacted]"),
        (("--token", "-Xq3_s3cr3t", "-v"), "--token [redacted] -v"),
        (("--api-key", "--", "serve"), "--api-key -- serve"),
        (("--token", "--db-password", "pw0rd", "serve"), "--token [redacted] [redacted] serve"),
        (("--token", "--db-password", "--", "serve"), "--token [redacted] -- serve"),
    ]:
        upstream = Upstream("stdio", command="srv", args=args)
        assert upstream.describe() == f"stdio: srv {shown}"
        assert redact(shlex.join(["srv", *args])) == f"srv {shown}"
        assert client_text(f"srv failed: usage: {shlex.join(['srv', *args])}") == f"srv failed: usage: srv {shown}"
        assert upstream.command_args() == list(args)
    first, rotated, other = (
        Upstream("stdio", command="srv", args=("--token", word, "serve")) for word in ("--abc123", "--xyz789", "-x")
    )
    assert first.identity() == rotated.identity() == other.identity()  # the secret is no part of which server it is
    assert first.differences(rotated) == "the values of --token differ"


def test_a_secret_flag_in_a_quoted_argument_or_a_list_of_arguments_is_hidden_and_the_text_after_it_kept() -> None:
    """A secret flag's value ran on past a quote closing the argument around it (``'--token abc' more`` lost ``'
    more``, as a message quoting a command does), and a flag quoted alone before its value, as Python prints an argument
    list (``CalledProcessError``: ``['--token', 'abc']``), JSON writes one or shlex quotes a flag, hid nothing."""
    for text, shown in [
        ("'--token abc123' more", "'--token [redacted]' more"),
        ("'srv --api-key abc123', exit 1", "'srv --api-key [redacted]', exit 1"),
        ("['--token', 'abc123', '-v']", "['--token', '[redacted]', '-v']"),
        ('["--client-secret", "abc123"]', '["--client-secret", "[redacted]"]'),
        ("['--token', '--db-password', 'abc123', 'serve']", "['--token', '[redacted]', '[redacted]', 'serve']"),
        ("'--token' 'abc 123' -v", "'--token' '[redacted]' -v"),
        ("'--token' abc123 -v", "'--token' [redacted] -v"),
        ("['--token', '--', 'serve']", "['--token', '--', 'serve']"),
        ("--token 'it'\"'\"'s' -v", "--token '[redacted]' -v"),
    ]:
        assert redact(f"srv {text}") == f"srv {shown}", text


def test_a_secret_in_a_list_of_arguments_is_hidden_whole_whatever_quotes_it_holds() -> None:
    """A value Python or JSON prints with an escaped quote in it (a password holding a quote) was hidden up to that
    quote only: ``["--password", "pa\\"ss"]`` showed ``ss"``."""
    for arguments in (["--password", 'pa"ss\\w0rd', "-v"], ["--token", 'it\'s "q"', "-v"], ["--api-key", "a\\", "-v"]):
        assert redact(str(arguments)) == f"['{arguments[0]}', '[redacted]', '-v']", arguments
        assert redact(json.dumps(arguments)) == f'["{arguments[0]}", "[redacted]", "-v"]', arguments


@pytest.mark.parametrize(
    "args, shown",
    [
        (("--pat", "ghp_s3cr3t"), "--pat [redacted]"),
        (("--github-pat=ghp_s3cr3t",), "--github-pat=[redacted]"),
        (("--key", "k3y"), "--key [redacted]"),
        (("--private-key", "-----BEGIN"), "--private-key [redacted]"),
        (("--api-keys", "a1b2"), "--api-keys [redacted]"),
        (("--auth", "user:pw"), "--auth [redacted]"),
        (("--basicAuth=user:pw",), "--basicAuth=[redacted]"),
        (("--credentials", "c.json"), "--credentials [redacted]"),
        (("--db-pass", "pw"), "--db-pass [redacted]"),
        (("--passphrase", "pw"), "--passphrase [redacted]"),
        (("--cookie", "sid=1"), "--cookie [redacted]"),
        (("--bearer", "t0k"), "--bearer [redacted]"),
    ],
)
def test_a_flag_naming_a_key_a_pat_or_an_auth_has_its_value_hidden(args: tuple[str, ...], shown: str) -> None:
    """Only --token, --password, --secret and the api/access/secret key flags were secret flags: ``--pat X``, ``--key
    X``, ``--auth X`` (a personal access token, a key, a user:password) were described, logged and quoted in an
    upstream's error text as given, and a rotated value was another server. Their values are hidden wherever a secret
    flag's are, and are no part of the upstream's identity."""
    upstream = Upstream("stdio", command="srv", args=(*args, "-v"))
    assert upstream.describe() == f"stdio: srv {shown} -v"
    assert redact(shlex.join(["srv", *args, "-v"])) == f"srv {shown} -v"
    assert client_text(f"srv failed: {shlex.join(['srv', *args])}") == f"srv failed: srv {shown}"
    rotated = Upstream("stdio", command="srv", args=(*args[:-1], args[-1].replace(args[-1][-2:], "zz"), "-v"))
    assert rotated.identity() == upstream.identity() and "differ" in upstream.differences(rotated)


def test_only_a_long_flag_ending_in_a_secret_word_is_a_secret_flag_and_a_key_word_only_in_a_longer_name() -> None:
    """What the wider secret words leave readable: a short flag (``-p 5432`` is a port as often as a password), a flag
    only starting or ending like one (``--keep``, ``--path``, ``--author``, ``--bypass``, ``--oauth``), a ``--no-``
    flag; and in ``name=value`` text ``key``, ``auth`` or ``pass`` as a plain word (``{"key": "name"}``, ``auth=none``)
    and a plural (``'max_tokens': integer``), where a longer name ending in one is a secret's (``LICENSE_KEY=X``,
    ``GITHUB_PAT: X``, ``-e DB_PASS=X``)."""
    args = ("-p", "5432", "--keep", "3", "--path", "/srv", "--author", "me", "--bypass", "x", "--oauth", "y")
    assert Upstream("stdio", command="srv", args=(*args, "--no-auth", "1")).describe() == (
        f"stdio: srv {' '.join(args)} --no-auth 1"
    )
    for text in ('{"key": "name"}', "auth=none", "bypass=1", "Invalid 'max_tokens': integer below 1", "monkey=5"):
        assert redact(text) == text
    for text, shown in [
        ("docker run -e LICENSE_KEY=abc srv", "docker run -e LICENSE_KEY=[redacted] srv"),
        ("GITHUB_PAT: ghp_x", "GITHUB_PAT: [redacted]"),
        ("-e DB_PASS=pw -e GOOGLE_CREDENTIALS=c", "-e DB_PASS=[redacted] -e GOOGLE_CREDENTIALS=[redacted]"),
    ]:
        assert redact(text) == shown
        assert Upstream("stdio", command="srv", args=tuple(text.split())).describe() == f"stdio: srv {shown}"


@pytest.mark.parametrize(
    "url, token, shown",
    [
        (
            "https://hooks.slack.com/services/T0AB12CD/B0CD34EF/Xy9kQ2",
            "Xy9kQ2",
            "https://hooks.slack.com/services/*/*/*",
        ),
        ("https://api.telegram.org/bot123456:AAHdqTcv/sendMessage", "AAHdqTcv", "https://api.telegram.org/*/*"),
        (
            "https://mcp.example.com/api/mcp/s/NzQ1YmJkZjkt/mcp",
            "NzQ1YmJkZjkt",
            "https://mcp.example.com/api/mcp/s/*/mcp",
        ),
        ("https://mcp.example.com/u/550e8400-e29b-41d4/sse", "550e8400", "https://mcp.example.com/u/*/sse"),
        ("https://mcp.example.com/KEYINCAPS/sse", "KEYINCAPS", "https://mcp.example.com/*/sse"),
        ("https://user:pa/ss@host/v1", "pa/ss", "https://user/*/v1"),  # a password's unescaped "/": none of it shown
        ("https://server.example.ai/@acme-ai/github/mcp", None, "https://server.example.ai/@acme-ai/github/mcp"),
        ("http://127.0.0.1:8000/v1/mcp/", None, "http://127.0.0.1:8000/v1/mcp/"),
    ],
)
def test_a_token_in_a_urls_path_is_not_described(url: str, token: str | None, shown: str) -> None:
    """A description left a URL's query out but showed its path, where webhooks and hosted MCP servers put a token
    (``/services/T.../B.../XXXX``, ``/bot<token>/``, ``/s/<key>/mcp``): a part of the path that is no lower-case word
    of at most two digits is redacted, an HTTP upstream's and a URL among a command's arguments alike; two upstreams
    described alike say that their paths differ."""
    hidden = shown.replace("*", "[redacted]")
    assert Upstream("http", url=url).describe() == f"http: {hidden}"
    argument = Upstream("stdio", command="mcp-remote", args=(f"{url}?key=k3y", "-v")).describe()
    assert "k3y" not in argument and (token is None or token.split("/")[-1] not in argument), argument
    if "@host" not in url:  # else the URL's credentials are shown as a URI's are, its password redacted
        assert argument == f"stdio: mcp-remote {shlex.quote(hidden)} -v"
    if token is not None:
        other = Upstream("http", url=url.replace(token, token[::-1]))
        assert Upstream("http", url=url).differences(other) == "the URLs differ in their path"


def test_a_secret_flags_value_holding_a_comma_is_hidden_whole() -> None:
    """A secret flag's value ended at a comma in text (``--api-keys a1,b2`` showed ``,b2``, an upstream's error quoting
    its command line), where its description hid it whole: the value of a flag is one shell word, commas and all; a
    ``key=value`` secret's still ends at one (``token=abc, user=x``), and a quoted flag's text at its closing quote."""
    for text, shown in [
        ("--api-keys a1,b2 -v", "--api-keys [redacted] -v"),
        ("--token=a1,b2 -v", "--token=[redacted] -v"),
        ("'--token' a1,b2 -v", "'--token' [redacted] -v"),
        ('"srv --token abc", "user"', '"srv --token [redacted]", "user"'),
        ("token=abc, user=x", "token=[redacted], user=x"),
    ]:
        assert redact(f"srv {text}") == f"srv {shown}", text
    args = ("--api-keys", "a1,b2", "-v")
    assert client_text(f"srv exited: {shlex.join(['srv', *args])}") == "srv exited: srv --api-keys [redacted] -v"
    assert Upstream("stdio", command="srv", args=args).describe() == "stdio: srv --api-keys [redacted] -v"


def test_a_key_that_orders_splits_or_caches_data_is_no_secret() -> None:
    """``--sort-key X`` was a secret flag, as every flag ending in ``-key`` is: its value hidden in logs and errors and
    no part of an MCP upstream's identity, though it names a field to sort by. The whole names of a key that orders,
    splits or caches data (sort, partition, range, shard, foreign, cache, dedup) are no secret, as a flag or as
    ``key=X`` text; a longer name ending so, every other ``...-key`` and a secret flag after one stay hidden."""
    for text in (
        "srv --sort-key name --partition-key pk --rangeKey r --shard_keys s --foreign-key f --cacheKey c --dedup-key d",
        "srv --sort-key=name --SORT_KEY=x",
        'sort_key: name, CACHE_KEY=abc {"partition_key": "pk"}',
        "['--sort-key', 'name']",
    ):
        assert redact(text) == text
    for text, shown in [
        (
            "srv --db-sort-key x --primary-key y --routing-key z",
            "srv --db-sort-key [redacted] --primary-key [redacted] --routing-key [redacted]",
        ),
        (
            "DB_SORT_KEY=y resort_key=z LICENSE_KEY=k",
            "DB_SORT_KEY=[redacted] resort_key=[redacted] LICENSE_KEY=[redacted]",
        ),
        ("srv --sort-key --token abc -v", "srv --sort-key --token [redacted] -v"),
        ("srv --sort-key name --api-key=abc", "srv --sort-key name --api-key=[redacted]"),
    ]:
        assert redact(text) == shown, text
    sorted_by = [Upstream("stdio", command="srv", args=("--sort-key", field)) for field in ("name", "date")]
    assert sorted_by[0].describe() == "stdio: srv --sort-key name"
    assert sorted_by[0].identity() != sorted_by[1].identity()  # another field: another server's set-up, no rotation


def test_a_passphrase_after_password_is_hidden_whole() -> None:
    """``password: correct horse battery staple`` hid ``correct`` alone, a passphrase's first word. After an unquoted
    ``password:`` (``passphrase:``, ``DB_PASSWORD:``) whose first word is letters alone, every word is hidden to the end
    of the line or to a comma, ";", quote or closing bracket; a first word of other characters is one word as before,
    and a quoted flag's prose keeps its rule."""
    for text, shown in [
        ("password: correct horse battery staple", "password: [redacted]"),
        ("DB_PASSWORD: Correct Horse Battery, user: bob", "DB_PASSWORD: [redacted], user: bob"),
        ("passphrase: correct horse\nnext line", "passphrase: [redacted]\nnext line"),
        ('login failed ("password: correct horse battery") for bob', 'login failed ("password: [redacted]") for bob'),
        ("password: hunter2 more", "password: [redacted] more"),
        ("srv password: SEK'a'}RIT more", "srv password: [redacted] more"),
        ("'--password': missing value", "'--password': [redacted] value"),
    ]:
        assert redact(text) == shown, text


@pytest.mark.parametrize(
    "url, shown",
    [
        ("https://mcp.example.com/MCP", "https://mcp.example.com/MCP"),
        ("https://mcp.example.com/v1/SSE", "https://mcp.example.com/v1/SSE"),
        ("https://mcp.example.com/API/V2/mcp", "https://mcp.example.com/API/V2/mcp"),
        ("https://mcp.example.com/AB12/mcp", "https://mcp.example.com/AB12/mcp"),
        ("https://mcp.example.com/MCPS1/mcp", "https://mcp.example.com/[redacted]/mcp"),
        ("https://mcp.example.com/A123/mcp", "https://mcp.example.com/[redacted]/mcp"),
        ("https://mcp.example.com/db_2024", "https://mcp.example.com/[redacted]"),
    ],
)
def test_a_short_upper_case_path_part_is_described(url: str, shown: str) -> None:
    """A URL's path showed only lower-case words, so ``/MCP``, ``/SSE`` or ``/API/V2`` were described as
    ``/[redacted]``, as a token in the path is: a part of at most 4 letters in any case and 2 digits, too short to be a
    token, is shown; a longer one in upper case, or of more digits, is still taken for one."""
    assert Upstream("http", url=url).describe() == f"http: {shown}"
    argument = Upstream("stdio", command="mcp-remote", args=(f"{url}?key=k3y",)).describe()
    assert argument == f"stdio: mcp-remote {shlex.quote(shown)}"
