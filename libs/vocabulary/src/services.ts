/** The processes of the system that talk to each other (gRPC callers and servers, NATS users). */
export const SERVICE_NAMES = [
  'gateway',
  'identity',
  'notification',
  'billing',
  'enrollment',
  'analytics',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];
