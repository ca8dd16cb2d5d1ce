export const DEVICE_STATUSES = ['active', 'disabled'] as const;
export type DeviceStatus = (typeof DEVICE_STATUSES)[number];

/** A JSON object as the agent reported it (validated: see `device-input.ts`). */
export type DeviceMetadata = Record<string, unknown>;

export interface Device {
  id: string;
  orgId: string;
  /** Unique across all organizations: a machine is enrolled in at most one. */
  machineId: string;
  /** The hostname reported at the latest (re-)enrollment; the contract's `name`. */
  hostname: string;
  status: DeviceStatus;
  metadata: DeviceMetadata;
  /** First enrollment; kept when the machine re-enrolls. */
  enrolledAt: Date;
  lastSeenAt: Date;
}

/**
 * A device as listed. Listing only passes the metadata on, so it stays the JSON text the store
 * holds (parsing and re-serializing it was a tenth of a device page's cost).
 */
export type ListedDevice = Omit<Device, 'metadata'> & { metadataJson: string };

/** The organization's current enrollment key as the API shows it (plain text, owner's eyes only). */
export interface EnrollmentKey {
  orgId: string;
  key: string;
  createdAt: Date;
}

export interface IssuedEnrollmentCode {
  /** Canonical form, `XXXX-XXXX`; exists only in the response (and sealed, in the e-mail event). */
  code: string;
  expiresAt: Date;
}

/** What the device's agent gets back from a successful enrollment. */
export interface EnrollmentResult {
  deviceId: string;
  orgId: string;
  /** Shown once; stored as SHA-256 only. */
  deviceToken: string;
  reEnrolled: boolean;
}

/** Who a device token belongs to. */
export interface DeviceIdentity {
  deviceId: string;
  orgId: string;
  status: DeviceStatus;
}

export interface DeviceFilter {
  status: DeviceStatus | null;
  /** Case-insensitive substring of hostname or machine_id; null for all. */
  query: string | null;
}

/**
 * How long an administrator's approval to re-enroll a device without its token stays usable (once): while
 * it does, any enrollment of the machine id with a valid code takes the device, so it is kept to the time a
 * reinstall takes rather than a day.
 */
export const RE_ENROLLMENT_APPROVAL_TTL_MS = 3_600_000;
/** Codes live 24 hours (contract section 8). */
export const ENROLLMENT_CODE_TTL_MS = 24 * 3_600_000;
/** Most codes one request may generate (contract: "not shown"; ours). */
export const MAX_CODES_PER_REQUEST = 100;
/** Consumed or expired codes are purged (per organization, when new ones are made) this long after expiry. */
export const CODE_RETENTION_AFTER_EXPIRY_MS = 7 * 24 * 3_600_000;
