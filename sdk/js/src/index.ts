/**
 * Airlock's TypeScript SDK: sessions in microVMs for code you do not trust.
 *
 * ```ts
 * import { Client } from '@airlock/sdk';
 * const c = await Client.connect();            // VersionMismatch if airlockd speaks another API level
 * await c.withSession({ memory: '1g', allow: ['pypi.org'] }, async (s) => {
 *   const r = await s.exec(['python3', '-c', 'print(6*7)']);   // r.exitCode, r.stdout
 *   for await (const event of s.execStream(['pytest', '-q'])) console.log(event);
 *   await s.files.write('/tmp/x.py', 'print(1)');
 *   await s.pause();
 *   const kids = await s.fork(3);
 * });
 * c.close();
 * ```
 * @packageDocumentation
 */
export {
  Audit, Client, DEFAULT_SOCKET, ExecStream, Files, Forward, Network, Ports, Secrets, Session, WatchStream, Workspace,
} from './client.js';
export type { ClientOptions, TlsOptions } from './client.js';
export {
  AirlockError, CommandFailed, FailedPrecondition, InvalidArgument, LimitExceeded, NotFound,
  PermissionDenied, SessionFailed, Timeout, Unauthenticated, Unavailable, VersionMismatch,
} from './errors.js';
export { API_LEVEL, SDK_VERSION } from './version.js';
export type * from './types.js';
export { parseSize } from './convert.js';
export type { FileData } from './convert.js';
