"""Alembic environment for toolstore's own migrations.

toolstore drives alembic from code (``toolstore.migrate``): the connection, the target schema and the
version table name arrive through ``config.attributes``; nothing is read from an ini file. Every object is
created in the toolstore schema, which is first on the connection's search_path while migrations run.
"""

from __future__ import annotations

from alembic import context

from toolstore._migrate import prepare_connection
from toolstore._revisions import VERSION_TABLE

config = context.config
connection = config.attributes["connection"]
schema = config.attributes["schema"]

prepare_connection(connection, schema)
context.configure(
    connection=connection,
    version_table=VERSION_TABLE,
    version_table_schema=schema,
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
