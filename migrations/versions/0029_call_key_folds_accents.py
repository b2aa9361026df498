"""call_key() folds Latin letters to ASCII as the model-facing names do: ``café`` has the key of ``cafe``.

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-27

A tool's model-facing names (``toolstore/_formats/names.py``) fold its Latin letters to ASCII before anything else
(``fold``: Unicode NFKD, a few letters NFKD leaves whole by hand, combining marks dropped), so ``café`` is offered as
``cafe`` and ``Straße`` as ``Strasse``. ``call_key()`` (migration 0020) kept only ASCII letters and digits: ``café``
had the key ``caf``, and a model's call of ``cafe`` did not find the tool by ``call_candidates`` (``sql/sessions.sql``),
which could then resolve the call to another tool that answers to it, or miss an ambiguity. Here it folds the same:
NFKD (``normalize``), the same letters by hand (``translate`` for one letter, ``replace`` for two; the case does not
matter, the key is lower-cased), then only ASCII letters and digits, lower-cased, as before (combining marks go with
the other characters). Its two indexes are built again: an expression index is not rebuilt when the function is
replaced.

Python and Postgres each decompose by their own Unicode version (Python 3.11's 14.0, Postgres 18's 16.0):
decompositions of assigned characters never change, but a character assigned after the older of the two (the
"outlined" Latin letters of Unicode 16, U+1CCD6...) folds on one side only: a call naming it may find no tool by
index, and is then resolved across the whole catalog.

``normalize`` works only in a database whose encoding is UTF8 (initdb's default, and the embedded server's); in any
other the function stays 0020's, and a call of a folded name is resolved across the whole catalog instead
(``_steps.resolve_steps``: no tool found by index).
"""

from __future__ import annotations

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

DROP_INDEXES = """
drop index tools_call_id_idx;
drop index tools_call_name_idx;
"""

CREATE_INDEXES = """
create index tools_call_name_idx on tools (catalog_id, call_key(name));
create index tools_call_id_idx on tools (catalog_id, call_key(id));
"""

# The letters folded by hand, as Unicode escapes: the statement's text stays ASCII, which a client whose encoding is not
# UTF8 can send. In the order of ``_formats.names.FOLDED``: translate() ø Ø đ Đ ð Ð ł Ł ı ħ Ħ to one letter each,
# replace() ß ẞ æ Æ œ Œ þ Þ with two.
UPGRADE = r"""
do $do$
begin
    if getdatabaseencoding() = 'UTF8' then
        create or replace function call_key(p_name text) returns text
        language sql immutable parallel safe strict as $fn$
            select lower(regexp_replace(
                replace(replace(replace(replace(replace(replace(replace(replace(
                    translate(normalize(p_name, NFKD),
                              U&'\00F8\00D8\0111\0110\00F0\00D0\0142\0141\0131\0127\0126', 'oOdDdDlLihH'),
                    U&'\00DF', 'ss'), U&'\1E9E', 'ss'), U&'\00E6', 'ae'), U&'\00C6', 'ae'),
                    U&'\0153', 'oe'), U&'\0152', 'oe'), U&'\00FE', 'th'), U&'\00DE', 'th'),
                '[^a-zA-Z0-9]+', '', 'g'))
        $fn$;
    end if;
end
$do$;
"""

DOWNGRADE = """
create or replace function call_key(p_name text) returns text
language sql immutable parallel safe strict as $$
    select lower(regexp_replace(p_name, '[^a-zA-Z0-9]+', '', 'g'))
$$;
"""


def upgrade() -> None:
    op.execute(DROP_INDEXES + UPGRADE + CREATE_INDEXES)


def downgrade() -> None:
    op.execute(DROP_INDEXES + DOWNGRADE + CREATE_INDEXES)
