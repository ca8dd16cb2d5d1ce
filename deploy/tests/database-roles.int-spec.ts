import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client } from 'pg';
import { billingEnvSchema } from '@sts/billing-infra/billing-config';
import { startBillingService } from '@sts/billing-infra/start-billing-service';
import { loadConfig } from '@sts/config/load-config';
import { enrollmentEnvSchema } from '@sts/enrollment-infra/enrollment-config';
import { startEnrollmentService } from '@sts/enrollment-infra/start-enrollment-service';
import { identityEnvSchema } from '@sts/identity-infra/identity-config';
import { startIdentityService } from '@sts/identity-infra/start-identity-service';
import { createLogger } from '@sts/logger/create-logger';
import { notificationEnvSchema } from '@sts/notification-infra/notification-config';
import { startNotificationService } from '@sts/notification-infra/start-notification-service';
import type { RunningService } from '@sts/service-host/service-host';
import { createTestDatabase, type TestDatabase } from '@sts/testing/postgres';
import { testServiceAuth } from '@sts/testing/service-auth';

/**
 * deploy/postgres/service-roles.sql (Compose runs it at PostgreSQL's first start; deploy/README.md gives it for
 * Kubernetes) against the real PostgreSQL: each service migrates and works in its schema with its own role, and
 * no role reads or changes another's. The roles are named with a prefix of this run (roles are the cluster's).
 */
const ROOT = join(__dirname, '..', '..');
const SCHEMAS = ['identity', 'notification', 'billing', 'enrollment'] as const;
type Schema = (typeof SCHEMAS)[number];

const logger = createLogger('database-roles', 'silent');
const serviceAuth = testServiceAuth();
const key = () => randomBytes(32).toString('base64');
/** Each service's migration job (MIGRATIONS=only), the way the release runs it, on `databaseUrl`. */
const MIGRATE: Record<Schema, (databaseUrl: string) => Promise<RunningService>> = {
  identity: (url) =>
    startIdentityService(
      loadConfig(identityEnvSchema, {
        ...serviceAuth.envOf('identity'),
        DATABASE_URL: url,
        MIGRATIONS: 'only',
        SECRET_SEALING_KEY: key(),
      }),
      logger,
    ),
  notification: (url) =>
    startNotificationService(
      loadConfig(notificationEnvSchema, {
        ...serviceAuth.envOf('notification'),
        DATABASE_URL: url,
        MIGRATIONS: 'only',
        SECRET_SEALING_KEY: key(),
      }),
      logger,
    ),
  billing: (url) =>
    startBillingService(
      loadConfig(billingEnvSchema, {
        ...serviceAuth.envOf('billing'),
        DATABASE_URL: url,
        MIGRATIONS: 'only',
      }),
      logger,
    ),
  enrollment: (url) =>
    startEnrollmentService(
      loadConfig(enrollmentEnvSchema, {
        ...serviceAuth.envOf('enrollment'),
        DATABASE_URL: url,
        MIGRATIONS: 'only',
        SECRET_SEALING_KEY: key(),
        ENROLLMENT_KEY_ENCRYPTION_KEY: key(),
      }),
      logger,
    ),
};

describe('deploy/postgres/service-roles.sql: a database role per service schema', () => {
  const prefix = `t${randomBytes(4).toString('hex')}_`;
  const passwords = Object.fromEntries(
    SCHEMAS.map((name) => [name, randomBytes(12).toString('hex')]),
  ) as Record<Schema, string>;
  const databases: TestDatabase[] = [];

  const roleUrl = (database: TestDatabase, schema: Schema) => {
    const url = new URL(database.url);
    url.username = `${prefix}${schema}`;
    url.password = passwords[schema];
    return url.toString();
  };
  const applyRoles = (database: TestDatabase, given: Partial<Record<Schema, string>> = passwords) =>
    spawnSync(
      'psql',
      [
        database.url,
        '--quiet',
        '-v',
        `role_prefix=${prefix}`,
        ...Object.entries(given).flatMap(([schema, password]) => ['-v', `${schema}_password=${password}`]),
        '-f',
        join(ROOT, 'deploy/postgres/service-roles.sql'),
      ],
      { encoding: 'utf8' },
    );
  const migrate = async (schema: Schema, url: string) => {
    const job = await MIGRATE[schema](url);
    expect([schema, job.migratedOnly]).toEqual([schema, true]);
  };
  /** Runs `sql` as `url`'s role; the SQLSTATE of its failure, or 'ok'. */
  const outcome = async (url: string, sql: string) => {
    const client = new Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(sql);
      return 'ok';
    } catch (error) {
      return (error as { code?: string }).code ?? String(error);
    } finally {
      await client.end();
    }
  };
  const newDatabase = async () => {
    const database = await createTestDatabase('roles');
    databases.push(database);
    return database;
  };

  /** Each role works in its own schema, and gets `insufficient_privilege` in every other. */
  const expectIsolated = async (database: TestDatabase) => {
    for (const schema of SCHEMAS) {
      const url = roleUrl(database, schema);
      expect([schema, await outcome(url, `select count(*) from ${schema}.schema_migrations`)]).toEqual([
        schema,
        'ok',
      ]);
      // A change of schema a later migration could make, undone.
      expect([
        schema,
        await outcome(
          url,
          `begin; alter table ${schema}.schema_migrations add column probe int; create table ${schema}.probe (a int); rollback`,
        ),
      ]).toEqual([schema, 'ok']);
      for (const other of SCHEMAS.filter((candidate) => candidate !== schema)) {
        for (const sql of [
          `select count(*) from ${other}.schema_migrations`,
          `delete from ${other}.schema_migrations`,
          `create table ${other}.planted (a int)`,
        ]) {
          expect([schema, sql, await outcome(url, sql)]).toEqual([schema, sql, '42501']);
        }
      }
    }
  };

  afterAll(async () => {
    for (const database of databases) await database.drop();
    // Roles belong to the cluster: dropped once the databases holding their schemas are gone.
    const admin = new Client({
      connectionString:
        process.env.TEST_DATABASE_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
    });
    await admin.connect();
    try {
      for (const schema of SCHEMAS) await admin.query(`drop role if exists "${prefix}${schema}"`);
    } finally {
      await admin.end().catch(() => undefined);
    }
  });

  it("lets each service migrate its schema with its own role, and no role read or change another's", async () => {
    const database = await newDatabase();
    const applied = applyRoles(database);
    expect(applied.stderr).toBe('');
    expect(applied.status).toBe(0);
    for (const schema of SCHEMAS) await migrate(schema, roleUrl(database, schema));
    await expectIsolated(database);
    // Each role is a plain login: no superuser, no making roles or databases.
    const admin = new Client({ connectionString: database.url });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ rolname: string; powers: boolean }>(
        `select rolname, rolsuper or rolcreaterole or rolcreatedb or rolbypassrls or rolreplication as powers
           from pg_roles where rolname like $1 order by rolname`,
        [`${prefix}%`],
      );
      expect(rows).toEqual(
        [...SCHEMAS].sort().map((schema) => ({ rolname: `${prefix}${schema}`, powers: false })),
      );
    } finally {
      await admin.end();
    }
  });

  it('hands over a database whose schemas one shared role made (an upgrade), with everything in them', async () => {
    const database = await newDatabase();
    // Before: every service migrated as the database's owner (one role for all).
    for (const schema of SCHEMAS) await migrate(schema, database.url);
    const applied = applyRoles(database);
    expect(applied.stderr).toBe('');
    expect(applied.status).toBe(0);
    const admin = new Client({ connectionString: database.url });
    await admin.connect();
    try {
      // Every table, sequence, view and function of a schema (but an extension's) is now its role's.
      const { rows } = await admin.query<{ schema: string; object: string; owner: string }>(
        `select n.nspname as schema, c.relname as object, pg_get_userbyid(c.relowner) as owner
           from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = any($1) and c.relkind in ('r', 'p', 'v', 'm', 'S')
            and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
         union all
         select n.nspname, p.proname, pg_get_userbyid(p.proowner)
           from pg_proc p join pg_namespace n on n.oid = p.pronamespace
          where n.nspname = any($1)
            and not exists (select 1 from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')`,
        [SCHEMAS],
      );
      expect(rows.length).toBeGreaterThan(20);
      expect(rows.filter((row) => row.owner !== `${prefix}${row.schema}`)).toEqual([]);
      expect(rows).toContainEqual({
        schema: 'enrollment',
        object: 'retry_unless',
        owner: `${prefix}enrollment`,
      });
    } finally {
      await admin.end();
    }
    await expectIsolated(database);
    // The next release migrates with the roles (nothing pending here, but the lock and the ledger are theirs).
    for (const schema of SCHEMAS) await migrate(schema, roleUrl(database, schema));
    // Running it again changes nothing but the passwords.
    expect(applyRoles(database).status).toBe(0);
  });

  it('refuses to run without a password for every role', async () => {
    const database = await newDatabase();
    const refused = applyRoles(database, { identity: passwords.identity, billing: passwords.billing });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('give every role its password');
  });
});
