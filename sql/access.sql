-- Tenants: which roles see which catalogs under row-level security (migrations 0005, 0006).

-- name: role_exists
select 1 from pg_roles where rolname = %(role)s;

-- name: owns_tables
-- Whether the role owns toolstore's tables (it reads and writes every catalog without a grant; a REVOKE of the
-- grants' privileges would take its own away).
select exists (select 1 from pg_tables where schemaname = current_schema() and tablename = 'tools'
               and tableowner = %(role)s);

-- name: grant_catalog
insert into catalog_grants (catalog_id, role, can_write) values (%(catalog)s, %(role)s, %(write)s)
on conflict (catalog_id, role) do update set can_write = excluded.can_write;

-- name: grant_tenant
insert into tenant_roles (role, can_write) values (%(role)s, %(write)s)
on conflict (role) do update set can_write = excluded.can_write;

-- name: revoke_catalog
delete from catalog_grants where catalog_id = %(catalog)s and role = %(role)s returning role;

-- name: revoke_tenant
delete from tenant_roles where role = %(role)s returning role;

-- name: list_grants
select c.name as catalog, g.role, g.can_write as write
from catalog_grants g
join catalogs c on c.id = g.catalog_id
union all
select null, t.role, t.can_write from tenant_roles t
order by 2, 1 nulls first;

-- name: role_access
-- Whether a role still has any grant, and any grant to write: what its table privileges must allow.
select exists (select 1 from catalog_grants where role = %(role)s)
       or exists (select 1 from tenant_roles where role = %(role)s) as reads,
       exists (select 1 from catalog_grants where role = %(role)s and can_write)
       or exists (select 1 from tenant_roles where role = %(role)s and can_write) as writes;

-- name: schema_denied
-- The connected role and whether it may not use the schema (no grant, or its last one revoked): Postgres then leaves
-- the schema off the search_path, and a statement fails with "relation ... does not exist". A row too, not denied,
-- when the schema has no toolstore tables (migrated down or dropped under open stores); no row when it may use them.
select current_user::text, n.oid is not null and not has_schema_privilege(n.oid, 'USAGE')
from (values (%(schema)s::name)) s (name)
left join pg_namespace n on n.nspname = s.name
where n.oid is null
   or not has_schema_privilege(n.oid, 'USAGE')
   or not exists (select from pg_class c where c.relnamespace = n.oid and c.relname = 'catalogs');

-- name: granted_roles
-- Every existing role with a grant: a migration to head sets their table privileges again.
select r.rolname
from pg_roles r
where r.rolname in (select role from catalog_grants union select role from tenant_roles)
order by 1;

-- name: sets_privileges
-- Whether the migrating role may set the grants' privileges: it owns toolstore's tables (or is a member of, or
-- a superuser over, the role that does).
select exists (select 1 from pg_tables where schemaname = current_schema() and tablename = 'tools'
               and pg_has_role(current_user, tableowner, 'MEMBER'));

-- Table privileges that go with the grants. GRANT takes no bind parameters: the two templates below are composed
-- with psycopg.sql (Identifier for the schema and the role) in toolstore/_access.py.

-- name: privileges_revoke
revoke all on all tables in schema {schema} from {role};
revoke all on all sequences in schema {schema} from {role};
revoke usage on schema {schema} from {role};

-- name: privileges_read
grant usage on schema {schema} to {role};
grant select on all tables in schema {schema} to {role};
revoke select on {schema}.catalog_grants, {schema}.tenant_roles from {role};

-- name: privileges_write
-- Not mcp_upstreams: the gateway starts a stdio upstream's command and expands the variable references of its env,
-- arguments and headers from its own environment, so how an upstream is reached is the owner's to record.
grant insert, update, delete on {schema}.tools, {schema}.postings, {schema}.lexeme_stats, {schema}.field_stats,
    {schema}.tool_vectors, {schema}.intent_examples, {schema}.sessions, {schema}.session_calls,
    {schema}.session_seen_calls, {schema}.tool_transitions, {schema}.anchors to {role};
-- Of a catalog's own row, only what the write path changes (a model switch, settings, tuning): its name, id, version
-- and creation date stay the owner's (a renamed catalog is one the owner's application no longer finds). The row
-- lock every write takes (FOR NO KEY UPDATE) needs UPDATE on one column; the version trigger bumps it as the owner.
grant update (embed_model, embed_dim, settings, updated_at) on {schema}.catalogs to {role};
grant usage on all sequences in schema {schema} to {role};

-- name: migration_lock
-- Taken by every migration (`_migrate`), and before any other change of the grants' privileges (a grant, a revoke:
-- `_migrate.privileges_lock`): one at a time.
select pg_advisory_xact_lock(%(key)s);

-- name: migration_lock_try
-- `migration_lock` when no one holds it: true when taken.
select pg_try_advisory_xact_lock(%(key)s);

-- name: migration_lock_holder
-- The backend holding `migration_lock`, if any (a bigint key shows in pg_locks as its two halves, objsubid 1).
select pid from pg_locks
where locktype = 'advisory' and granted and objsubid = 1
  and database = (select oid from pg_database where datname = current_database())
  and classid = (%(key)s::bigint >> 32)::oid and objid = (%(key)s::bigint & 4294967295)::oid;
