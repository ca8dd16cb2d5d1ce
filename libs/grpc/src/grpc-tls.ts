import { readFileSync } from 'node:fs';
import { credentials, ServerCredentials, type ChannelCredentials } from '@grpc/grpc-js';

/** Where the PEM files of mutual TLS between the services are (GRPC_TLS_*): all three, or none. */
export interface GrpcTlsFiles {
  GRPC_TLS_CA_FILE?: string | undefined;
  GRPC_TLS_CERT_FILE?: string | undefined;
  GRPC_TLS_KEY_FILE?: string | undefined;
}

/** This process's certificate and key, and the CA its peers' certificates must chain to. */
export interface GrpcTls {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/**
 * The TLS material named by the environment, read once at start; null when none is named (plaintext,
 * for one host and development). Some but not all of the three is a configuration error.
 */
export function loadGrpcTls(files: GrpcTlsFiles): GrpcTls | null {
  const named = [files.GRPC_TLS_CA_FILE, files.GRPC_TLS_CERT_FILE, files.GRPC_TLS_KEY_FILE];
  if (named.every((file) => !file)) return null;
  if (named.some((file) => !file)) {
    throw new Error(
      'GRPC_TLS_CA_FILE, GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE go together: set all three or none',
    );
  }
  return {
    ca: readFileSync(files.GRPC_TLS_CA_FILE!),
    cert: readFileSync(files.GRPC_TLS_CERT_FILE!),
    key: readFileSync(files.GRPC_TLS_KEY_FILE!),
  };
}

/** A server that requires every client to present a certificate of the CA (mutual TLS), or plaintext. */
export function grpcServerCredentials(tls: GrpcTls | null): ServerCredentials {
  return tls
    ? ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], true)
    : ServerCredentials.createInsecure();
}

/** A channel that checks the server's certificate against the CA and presents this process's own. */
export function grpcChannelCredentials(tls: GrpcTls | null): ChannelCredentials {
  return tls ? credentials.createSsl(tls.ca, tls.key, tls.cert) : credentials.createInsecure();
}
