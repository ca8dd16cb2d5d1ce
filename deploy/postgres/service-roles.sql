-- One login role per service schema (identity, notification, billing, enrollment), each the owner of its own
-- schema and of nothing else, so that one service's credentials read and change no other service's tables
-- (docs/decisions.md, "Trust between services"). Run by the database's owner or a superuser, with psql:
--
--   psql "postgresql://<admin>@<host>:5432/sts" -v identity_password=… -v notification_password=… \
--     -v billing_password=… -v enrollment_password=… -f deploy/postgres/service-roles.sql
--
-- Compose runs it at PostgreSQL's first start (init-service-roles.sh). It may run again at any time: it sets
-- the given passwords, and a schema made before (by a role the services shared) is handed over to its service's
-- role with everything in it. Passwords: letters and digits (they go into DATABASE_URL as they are). They reach
-- the server in ALTER ROLE statements: a server that logs every statement logs them.
-- `role_prefix` (default none) names the roles <prefix>identity, … : for tests, which share one cluster.
\set ON_ERROR_STOP on
\if :{?role_prefix}
\else
  \set role_prefix ''
\endif
\if :{?identity_password}
\else
  \set identity_password ''
\endif
\if :{?notification_password}
\else
  \set notification_password ''
\endif
\if :{?billing_password}
\else
  \set billing_password ''
\endif
\if :{?enrollment_password}
\else
  \set enrollment_password ''
\endif
select :'identity_password' <> '' and :'notification_password' <> '' and :'billing_password' <> ''
  and :'enrollment_password' <> '' as passwords_given \gset
\if :passwords_given
\else
  do $$ begin raise exception 'give every role its password: psql -v identity_password=… -v notification_password=… -v billing_password=… -v enrollment_password=…'; end $$;
\endif

begin;
set local client_min_messages = warning;
create temporary table sts_service_roles (schema_name name, role_name name, password text) on commit drop;
insert into sts_service_roles values
  ('identity', :'role_prefix' || 'identity', :'identity_password'),
  ('notification', :'role_prefix' || 'notification', :'notification_password'),
  ('billing', :'role_prefix' || 'billing', :'billing_password'),
  ('enrollment', :'role_prefix' || 'enrollment', :'enrollment_password');

-- The roles: they log in, and may do nothing else but what is granted below.
select format('create role %I', role_name) from sts_service_roles
  where not exists (select 1 from pg_roles where rolname = role_name) \gexec
select format(
    'alter role %I with login nosuperuser nocreatedb nocreaterole noinherit noreplication nobypassrls password %L',
    role_name, password)
  from sts_service_roles \gexec

-- CREATE on the database: the migrations say `create schema if not exists` (PostgreSQL asks for this privilege
-- even when the schema is there) and enrollment's installs pg_trgm, a trusted extension. It lets a role make
-- new schemas of its own, never enter another's.
select format('grant connect, create on database %I to %I', current_database(), role_name)
  from sts_service_roles \gexec

-- Each schema is its role's: made for it, or handed over with its tables, sequences, views and functions.
select format('create schema if not exists %I authorization %I', schema_name, role_name) from sts_service_roles \gexec
select format('alter schema %I owner to %I', schema_name, role_name) from sts_service_roles \gexec
select format(
    'alter %s %I.%I owner to %I',
    case c.relkind when 'S' then 'sequence' when 'v' then 'view' when 'm' then 'materialized view'
      when 'f' then 'foreign table' else 'table' end,
    n.nspname, c.relname, r.role_name)
  from pg_class c
  join pg_namespace n on n.oid = c.relnamespace
  join sts_service_roles r on r.schema_name = n.nspname
  where c.relkind in ('r', 'p', 'v', 'm', 'S', 'f')
    and c.relowner <> (select oid from pg_roles where rolname = r.role_name)
    -- Left out: an extension's own objects, and sequences that belong to a column (they follow their table).
    and not exists (
      select 1 from pg_depend d
      where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('e', 'a', 'i'))
  order by c.relkind = 'S' \gexec
select format('alter routine %s owner to %I', p.oid::regprocedure, r.role_name)
  from pg_proc p
  join pg_namespace n on n.oid = p.pronamespace
  join sts_service_roles r on r.schema_name = n.nspname
  where p.proowner <> (select oid from pg_roles where rolname = r.role_name)
    and not exists (
      select 1 from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e') \gexec
commit;
