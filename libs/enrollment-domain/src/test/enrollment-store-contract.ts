import { createHash, randomUUID } from 'node:crypto';
import { UniqueConflict } from '@sts/errors/unique-conflict';
import { failureOf } from '@sts/testing/failure-of';
import type { Device } from '../enrollment-model';
import type {
  ConsumeCodeInput,
  DeviceWrite,
  EnrollmentStore,
  StoredEnrollmentCode,
} from '../enrollment-ports';

/** A store to check, and what the contract must see of it that the ports do not show. */
export interface EnrollmentStoreUnderTest {
  store: EnrollmentStore;
  /** How many outbox events (committed) name the organization in their data. */
  outboxEvents(orgId: string): Promise<number>;
  close?(): Promise<void>;
}

/**
 * The behaviour every `EnrollmentStore` owes its callers, run against the in-memory store
 * (`in-memory-enrollment-store.spec.ts`) and the PostgreSQL store (enrollment-infra's
 * `postgres-enrollment-store.int-spec.ts`) alike. The domain's unit tests trust the in-memory store to
 * behave as PostgreSQL does (atomic code consumption, unique keys, scoping, ordering); this suite is
 * what holds the two to one contract, so that a check written for one is never missing from the other.
 * Each check works in an organization of its own, so one store serves the whole suite.
 */
export function describeEnrollmentStoreContract(
  name: string,
  open: () => Promise<EnrollmentStoreUnderTest>,
): void {
  describe(`EnrollmentStore contract: ${name}`, () => {
    let subject: EnrollmentStoreUnderTest;
    let store: EnrollmentStore;

    beforeAll(async () => {
      subject = await open();
      store = subject.store;
    });

    afterAll(async () => {
      await subject?.close?.();
    });

    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    const at = (iso: string) => new Date(iso);
    const NOW = at('2026-03-01T12:00:00.000Z');
    const LATER = at('2026-03-01T13:00:00.000Z');

    interface Org {
      orgId: string;
      keyHash: string;
      codeHashes: string[];
    }

    const code = (orgId: string, codeHash: string, expiresAt: Date): StoredEnrollmentCode => ({
      id: randomUUID(),
      orgId,
      codeHash,
      createdAt: NOW,
      expiresAt,
      consumedAt: null,
      consumedByDeviceId: null,
    });

    /** An organization with a key and `codes` live codes. */
    async function organization(codes = 1): Promise<Org> {
      const org = {
        orgId: randomUUID(),
        keyHash: sha256(randomUUID()),
        codeHashes: Array.from({ length: codes }, () => sha256(randomUUID())),
      };
      await store.transaction(async (repos) => {
        await repos.upsertKey({
          orgId: org.orgId,
          keyHash: org.keyHash,
          keySealed: 'sealed',
          createdAt: NOW,
        });
        await repos.insertCodes(
          org.codeHashes.map((hash) => code(org.orgId, hash, at('2026-03-02T12:00:00.000Z'))),
        );
      });
      return org;
    }

    const device = (orgId: string, overrides: Partial<Device> = {}): Device => ({
      id: randomUUID(),
      orgId,
      machineId: `machine-${randomUUID()}`,
      hostname: 'laptop-01',
      status: 'active',
      metadata: { os: 'linux' },
      enrolledAt: NOW,
      lastSeenAt: NOW,
      ...overrides,
    });

    const consume = (
      org: Org,
      codeHash: string,
      write: DeviceWrite,
      overrides: Partial<ConsumeCodeInput> = {},
    ): ConsumeCodeInput => {
      const deviceId = write.kind === 'insert' ? write.device.id : write.deviceId;
      return {
        keyHash: org.keyHash,
        orgId: org.orgId,
        codeHash,
        deviceId,
        now: NOW,
        write,
        event: {
          type: 'device.enrolled',
          data: {
            org_id: org.orgId,
            device_id: deviceId,
            machine_id: 'm',
            hostname: 'h',
            enrolled_at: NOW.toISOString(),
            re_enrolled: write.kind === 're-enroll',
          },
        },
        ...overrides,
      };
    };

    /** Enrolls a new device with the organization's code `index`; returns it and its token hash. */
    async function enrolled(org: Org, index: number, overrides: Partial<Device> = {}) {
      const enrolledDevice = device(org.orgId, overrides);
      const tokenHash = sha256(randomUUID());
      const outcome = await store.consumeCode(
        consume(org, org.codeHashes[index]!, { kind: 'insert', device: enrolledDevice, tokenHash }),
      );
      expect(outcome).toBe('consumed');
      return { device: enrolledDevice, tokenHash };
    }

    const reEnroll = (deviceId: string, presentedTokenHash: string | null, hostname = 'taken-over') =>
      ({
        kind: 're-enroll',
        deviceId,
        hostname,
        metadata: { os: 'windows' },
        tokenHash: sha256(randomUUID()),
        lastSeenAt: LATER,
        presentedTokenHash,
      }) satisfies DeviceWrite;

    /** The state of the organization's code, as an enrollment attempt would read it. */
    const codeState = async (org: Org, codeHash: string, now = NOW) =>
      (await store.read((repos) => repos.findEnrollmentTarget(org.keyHash, 'nobody', codeHash, null, now)))
        ?.code;

    describe('consuming a code (the write of an enrollment, atomic on its own)', () => {
      it('consumes a live code once, writing the device and its event; the next consumer gets `used`', async () => {
        const org = await organization(1);
        const { device: first, tokenHash } = await enrolled(org, 0);
        const second = device(org.orgId);
        expect(
          await store.consumeCode(
            consume(org, org.codeHashes[0]!, { kind: 'insert', device: second, tokenHash: sha256('x') }),
          ),
        ).toBe('used');
        expect(await codeState(org, org.codeHashes[0]!)).toBe('used');
        expect(await store.read((repos) => repos.findDeviceByTokenHash(tokenHash))).toEqual({
          deviceId: first.id,
          orgId: org.orgId,
          status: 'active',
        });
        const target = await store.read((repos) =>
          repos.findEnrollmentTarget(org.keyHash, first.machineId, null, tokenHash, NOW),
        );
        expect(target).toEqual({
          orgId: org.orgId,
          existing: { id: first.id, orgId: org.orgId, proven: true },
          code: 'unknown',
        });
        expect(await subject.outboxEvents(org.orgId)).toBe(1);
      });

      it('gives exactly one `consumed` to concurrent consumers of one code', async () => {
        const org = await organization(1);
        const outcomes = await Promise.all(
          Array.from({ length: 5 }, () =>
            store.consumeCode(
              consume(org, org.codeHashes[0]!, {
                kind: 'insert',
                device: device(org.orgId),
                tokenHash: sha256(randomUUID()),
              }),
            ),
          ),
        );
        expect(outcomes.sort()).toEqual(['consumed', 'used', 'used', 'used', 'used']);
        expect(await subject.outboxEvents(org.orgId)).toBe(1);
      });

      it('tells unknown and expired codes apart, changing nothing', async () => {
        const org = await organization(0);
        const expired = sha256(randomUUID());
        await store.transaction((repos) => repos.insertCodes([code(org.orgId, expired, NOW)]));
        const insert = () => ({
          kind: 'insert' as const,
          device: device(org.orgId),
          tokenHash: sha256(randomUUID()),
        });
        expect(await store.consumeCode(consume(org, sha256('no such code'), insert()))).toBe('unknown');
        expect(await store.consumeCode(consume(org, expired, insert()))).toBe('expired');
        expect(await codeState(org, expired)).toBe('expired');
        expect(await subject.outboxEvents(org.orgId)).toBe(0);
      });

      it("changes nothing when the key is no longer the organization's", async () => {
        const org = await organization(1);
        const rotated = sha256(randomUUID());
        await store.transaction((repos) =>
          repos.upsertKey({ orgId: org.orgId, keyHash: rotated, keySealed: 'sealed-2', createdAt: LATER }),
        );
        const write: DeviceWrite = {
          kind: 'insert',
          device: device(org.orgId),
          tokenHash: sha256(randomUUID()),
        };
        expect(await store.consumeCode(consume(org, org.codeHashes[0]!, write))).toBe('key-invalid');
        expect(await codeState({ ...org, keyHash: rotated }, org.codeHashes[0]!)).toBe('live');
        expect(await subject.outboxEvents(org.orgId)).toBe(0);
      });

      it('undoes itself when the machine id is enrolled already (UniqueConflict): the code stays unused, no event', async () => {
        const first = await organization(1);
        const { device: taken } = await enrolled(first, 0);
        const other = await organization(1);
        const write: DeviceWrite = {
          kind: 'insert',
          device: device(other.orgId, { machineId: taken.machineId }),
          tokenHash: sha256(randomUUID()),
        };
        expect(
          await failureOf(store.consumeCode(consume(other, other.codeHashes[0]!, write))),
        ).toBeInstanceOf(UniqueConflict);
        expect(await codeState(other, other.codeHashes[0]!)).toBe('live');
        expect(await subject.outboxEvents(other.orgId)).toBe(0);
      });

      it('undoes itself when the device to re-enroll is gone: the code stays unused, no event', async () => {
        const org = await organization(1);
        const write = reEnroll(randomUUID(), null);
        expect(await failureOf(store.consumeCode(consume(org, org.codeHashes[0]!, write)))).toBeInstanceOf(
          UniqueConflict,
        );
        expect(await codeState(org, org.codeHashes[0]!)).toBe('live');
        expect(await subject.outboxEvents(org.orgId)).toBe(0);
      });

      it('undoes itself when the device no longer accepts the proof: the code stays unused, no event', async () => {
        const org = await organization(2);
        const { device: target, tokenHash } = await enrolled(org, 1);
        const eventsBefore = await subject.outboxEvents(org.orgId);
        // A token that is not (or no longer) the device's, and no token without an approval.
        for (const presented of [sha256('not the token'), null]) {
          expect(
            await failureOf(
              store.consumeCode(consume(org, org.codeHashes[0]!, reEnroll(target.id, presented))),
            ),
          ).toBeInstanceOf(UniqueConflict);
        }
        // An approval that has expired.
        await store.transaction((repos) =>
          repos.allowReEnrollment(org.orgId, target.id, at('2026-03-01T11:59:59.000Z')),
        );
        expect(
          await failureOf(store.consumeCode(consume(org, org.codeHashes[0]!, reEnroll(target.id, null)))),
        ).toBeInstanceOf(UniqueConflict);
        expect(await codeState(org, org.codeHashes[0]!)).toBe('live');
        expect(await subject.outboxEvents(org.orgId)).toBe(eventsBefore);
        const unchanged = await store.transaction((repos) => repos.lockDevice(org.orgId, target.id));
        expect(unchanged?.hostname).toBe('laptop-01');
        // The device's own token applies, and replaces what the machine reports.
        expect(
          await store.consumeCode(consume(org, org.codeHashes[0]!, reEnroll(target.id, tokenHash))),
        ).toBe('consumed');
        const changed = await store.transaction((repos) => repos.lockDevice(org.orgId, target.id));
        expect(changed).toMatchObject({
          id: target.id,
          machineId: target.machineId,
          hostname: 'taken-over',
          metadata: { os: 'windows' },
          enrolledAt: NOW,
          lastSeenAt: LATER,
        });
        expect(await store.read((repos) => repos.findDeviceByTokenHash(tokenHash))).toBeNull();
      });

      it("lets one re-enrollment through on an administrator's approval, and uses it up", async () => {
        const org = await organization(3);
        const { device: target } = await enrolled(org, 0);
        await store.transaction((repos) => repos.allowReEnrollment(org.orgId, target.id, LATER));
        const proven = await store.read((repos) =>
          repos.findEnrollmentTarget(org.keyHash, target.machineId, null, null, NOW),
        );
        expect(proven?.existing).toEqual({ id: target.id, orgId: org.orgId, proven: true });
        expect(await store.consumeCode(consume(org, org.codeHashes[1]!, reEnroll(target.id, null)))).toBe(
          'consumed',
        );
        expect(
          await failureOf(store.consumeCode(consume(org, org.codeHashes[2]!, reEnroll(target.id, null)))),
        ).toBeInstanceOf(UniqueConflict);
        expect(await codeState(org, org.codeHashes[2]!)).toBe('live');
      });
    });

    describe('transactions, keys and codes', () => {
      it('leaves no rows and no events behind when the work throws', async () => {
        const org = await organization(0);
        const hash = sha256(randomUUID());
        const error = await failureOf(
          store.transaction(async (repos) => {
            await repos.insertCodes([code(org.orgId, hash, LATER)]);
            await repos.emit('device.enrolled', {
              org_id: org.orgId,
              device_id: randomUUID(),
              machine_id: 'm',
              hostname: 'h',
              enrolled_at: NOW.toISOString(),
              re_enrolled: false,
            });
            throw new Error('changed my mind');
          }),
        );
        expect((error as Error).message).toBe('changed my mind');
        expect(await codeState(org, hash)).toBe('unknown');
        expect(await subject.outboxEvents(org.orgId)).toBe(0);
      });

      it("refuses a code hash the organization has already (UniqueConflict); another organization's may match", async () => {
        const org = await organization(1);
        const other = await organization(0);
        expect(
          await failureOf(
            store.transaction((repos) => repos.insertCodes([code(org.orgId, org.codeHashes[0]!, LATER)])),
          ),
        ).toBeInstanceOf(UniqueConflict);
        await store.transaction((repos) => repos.insertCodes([code(other.orgId, org.codeHashes[0]!, LATER)]));
        expect(await codeState(other, org.codeHashes[0]!)).toBe('live');
      });

      it('replaces the key on upsert, finds it by hash only while current, and says whether a delete found one', async () => {
        const org = await organization(0);
        const replaced = sha256(randomUUID());
        await store.transaction((repos) =>
          repos.upsertKey({ orgId: org.orgId, keyHash: replaced, keySealed: 'sealed-2', createdAt: LATER }),
        );
        expect(await store.read((repos) => repos.findKey(org.orgId))).toEqual({
          orgId: org.orgId,
          keyHash: replaced,
          keySealed: 'sealed-2',
          createdAt: LATER,
        });
        const target = (keyHash: string) =>
          store.read((repos) => repos.findEnrollmentTarget(keyHash, 'nobody', null, null, NOW));
        expect(await target(org.keyHash)).toBeNull();
        expect(await target(replaced)).toEqual({ orgId: org.orgId, existing: null, code: 'unknown' });
        expect(await store.transaction((repos) => repos.deleteKey(org.orgId))).toBe(true);
        expect(await store.transaction((repos) => repos.deleteKey(org.orgId))).toBe(false);
        expect(await store.read((repos) => repos.findKey(org.orgId))).toBeNull();
      });

      it("purges only the organization's codes that expired before the given time", async () => {
        const org = await organization(0);
        const other = await organization(0);
        const [old, recent, others] = [sha256('old'), sha256('recent'), sha256('others')];
        await store.transaction((repos) =>
          repos.insertCodes([
            code(org.orgId, old, at('2026-02-01T00:00:00.000Z')),
            code(org.orgId, recent, at('2026-02-27T00:00:00.000Z')),
            code(other.orgId, others, at('2026-02-01T00:00:00.000Z')),
          ]),
        );
        const purged = await store.transaction((repos) =>
          repos.purgeCodes(org.orgId, at('2026-02-15T00:00:00.000Z')),
        );
        expect(purged).toBe(1);
        expect(await codeState(org, old)).toBe('unknown');
        expect(await codeState(org, recent)).toBe('expired');
        expect(await codeState(other, others)).toBe('expired');
      });
    });

    describe('devices', () => {
      it('are changed and deleted only within their organization; a deleted one is no longer found', async () => {
        const org = await organization(1);
        const stranger = await organization(0);
        const { device: own, tokenHash } = await enrolled(org, 0);
        await store.transaction(async (repos) => {
          expect(await repos.lockDevice(stranger.orgId, own.id)).toBeNull();
          await repos.setDeviceStatus(stranger.orgId, own.id, 'disabled');
          await repos.deleteDevice(stranger.orgId, own.id);
        });
        expect(await store.read((repos) => repos.findDeviceByTokenHash(tokenHash))).toMatchObject({
          status: 'active',
        });
        await store.transaction((repos) => repos.setDeviceStatus(org.orgId, own.id, 'disabled'));
        expect(await store.read((repos) => repos.findDeviceByTokenHash(tokenHash))).toMatchObject({
          status: 'disabled',
        });
        await store.transaction((repos) => repos.deleteDevice(org.orgId, own.id));
        expect(await store.read((repos) => repos.findDeviceByTokenHash(tokenHash))).toBeNull();
        expect(await store.transaction((repos) => repos.lockDevice(org.orgId, own.id))).toBeNull();
        expect(
          await store.read((repos) =>
            repos.findEnrollmentTarget(org.keyHash, own.machineId, null, null, NOW),
          ),
        ).toEqual({ orgId: org.orgId, existing: null, code: 'unknown' });
      });

      it('are found by id within their organization only, as they are listed', async () => {
        const org = await organization(1);
        const stranger = await organization(0);
        const { device: own } = await enrolled(org, 0, { metadata: { os: 'linux', tags: ['a', 'b'] } });
        await store.transaction((repos) => repos.setDeviceStatus(org.orgId, own.id, 'disabled'));
        const found = await store.read((repos) => repos.findDevice(org.orgId, own.id));
        const [listed] = await store.read((repos) =>
          repos.listDevices(org.orgId, { status: null, query: null }, { limit: 10, after: null }),
        );
        // The same device as the list gives, its metadata the same object (the JSON text may be spaced otherwise).
        const parsed = (device: typeof found) =>
          device && { ...device, metadataJson: JSON.parse(device.metadataJson) as unknown };
        expect(parsed(found)).toEqual(parsed(listed!));
        expect(parsed(found)).toEqual({
          id: own.id,
          orgId: org.orgId,
          machineId: own.machineId,
          hostname: own.hostname,
          status: 'disabled',
          enrolledAt: own.enrolledAt,
          lastSeenAt: own.lastSeenAt,
          metadataJson: { os: 'linux', tags: ['a', 'b'] },
        });
        expect(await store.read((repos) => repos.findDevice(stranger.orgId, own.id))).toBeNull();
        expect(await store.read((repos) => repos.findDevice(org.orgId, randomUUID()))).toBeNull();
        expect(await store.read((repos) => repos.findDevice(org.orgId, 'not-a-uuid'))).toBeNull();
        await store.transaction((repos) => repos.deleteDevice(org.orgId, own.id));
        expect(await store.read((repos) => repos.findDevice(org.orgId, own.id))).toBeNull();
      });

      it('move last_seen_at forward only, skipping devices of another organization and deleted ones', async () => {
        const org = await organization(3);
        const { device: a } = await enrolled(org, 0);
        const { device: b } = await enrolled(org, 1);
        const { device: gone } = await enrolled(org, 2);
        await store.transaction((repos) => repos.deleteDevice(org.orgId, gone.id));
        const moved = await store.transaction((repos) =>
          repos.markSeen([
            { orgId: org.orgId, deviceId: a.id, at: LATER },
            { orgId: org.orgId, deviceId: b.id, at: at('2026-03-01T11:00:00.000Z') },
            { orgId: randomUUID(), deviceId: b.id, at: LATER },
            { orgId: org.orgId, deviceId: gone.id, at: LATER },
          ]),
        );
        expect(moved).toBe(1);
        const lastSeen = async (id: string) =>
          (await store.transaction((repos) => repos.lockDevice(org.orgId, id)))?.lastSeenAt;
        expect(await lastSeen(a.id)).toEqual(LATER);
        expect(await lastSeen(b.id)).toEqual(NOW);
      });

      it('are listed in enrollment order, paged by cursor, filtered by status and searched literally, case aside', async () => {
        const org = await organization(4);
        const hosts = ['db_01', 'DB101', '100%-ready', 'web'];
        const devices: Device[] = [];
        for (const [index, hostname] of hosts.entries()) {
          const enrolledAt = new Date(NOW.getTime() + index * 60_000);
          devices.push(
            // Digits only besides the prefix: a search for `db` or `_` must not match a machine id by chance.
            (
              await enrolled(org, index, {
                hostname,
                machineId: `m${index}-${randomUUID().replace(/\D/g, '')}`,
                enrolledAt,
                lastSeenAt: enrolledAt,
              })
            ).device,
          );
        }
        await store.transaction((repos) => repos.setDeviceStatus(org.orgId, devices[3]!.id, 'disabled'));
        const list = (
          filter: { status?: 'active' | 'disabled'; query?: string },
          limit = 10,
          after = null as Device | null,
        ) =>
          store.read((repos) =>
            repos.listDevices(
              org.orgId,
              { status: filter.status ?? null, query: filter.query ?? null },
              { limit, after: after && { at: after.enrolledAt.toISOString(), id: after.id } },
            ),
          );
        const names = (rows: { hostname: string }[]) => rows.map((row) => row.hostname);

        const all = await list({});
        expect(names(all)).toEqual(hosts);
        expect(all[0]).toMatchObject({
          id: devices[0]!.id,
          orgId: org.orgId,
          machineId: devices[0]!.machineId,
          status: 'active',
          enrolledAt: devices[0]!.enrolledAt,
          lastSeenAt: devices[0]!.enrolledAt,
        });
        expect(JSON.parse(all[0]!.metadataJson)).toEqual({ os: 'linux' });
        // Up to limit + 1 rows, the extra one telling the caller there is a next page.
        expect(names(await list({}, 2))).toEqual(['db_01', 'DB101', '100%-ready']);
        expect(names(await list({}, 2, devices[1]))).toEqual(['100%-ready', 'web']);
        expect(names(await list({ status: 'disabled' }))).toEqual(['web']);
        expect(names(await list({ status: 'active', query: 'db' }))).toEqual(['db_01', 'DB101']);
        expect(names(await list({ query: '_' }))).toEqual(['db_01']);
        expect(names(await list({ query: '%' }))).toEqual(['100%-ready']);
        expect(names(await list({ query: devices[3]!.machineId.toUpperCase() }))).toEqual(['web']);
        expect(
          await store.read((repos) =>
            repos.listDevices(randomUUID(), { status: null, query: null }, { limit: 10, after: null }),
          ),
        ).toEqual([]);
      });
    });
  });
}
