// The errors the SDK throws: one class per kind of failure a program handles differently. Each
// carries airlockd's message (which says what to do) and the gRPC status code.
import { status as Status, type ServiceError } from '@grpc/grpc-js';
import type { ExecResult } from './types.js';

/** A call to airlockd failed. `code` is the gRPC status code, `message` airlockd's words. */
export class AirlockError extends Error {
  readonly code?: Status;
  constructor(message: string, code?: Status) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}
/** The request was refused as malformed (a bad limit, rule, path or argument). */
export class InvalidArgument extends AirlockError {}
/** No such session or image (another tenant's sessions are never found either). */
export class NotFound extends AirlockError {}
/** The caller may not do this. */
export class PermissionDenied extends AirlockError {}
/** airlockd could not identify the caller (no client certificate, not on the socket). */
export class Unauthenticated extends AirlockError {}
/** A quota or limit refused the request (RESOURCE_EXHAUSTED). */
export class LimitExceeded extends AirlockError {}
/** The session is in the wrong state for this (e.g. pausing while a command runs). */
export class FailedPrecondition extends AirlockError {}
/** The session's VM died or could not start; `reason` says why, as airlockd recorded it. */
export class SessionFailed extends FailedPrecondition {
  readonly reason: string;
  constructor(message: string, reason: string, code?: Status) {
    super(message, code);
    this.reason = reason;
  }
}
/** A deadline passed. For a command's own timeout, `result` holds what it printed. */
export class Timeout extends AirlockError {
  readonly result?: ExecResult;
  constructor(message: string, result?: ExecResult, code?: Status) {
    super(message, code);
    this.result = result;
  }
}
/** airlockd cannot be reached (not running, no permission on its socket, connection lost). */
export class Unavailable extends AirlockError {}
/**
 * airlockd and this SDK speak different levels of the API (checked before a client's first
 * call): `message` says which to upgrade. `daemonLevel` is airlockd's level (0 when it predates
 * levels or refused to say), `clientLevel` this SDK's.
 */
export class VersionMismatch extends AirlockError {
  readonly daemonLevel: number;
  readonly clientLevel: number;
  constructor(message: string, daemonLevel: number, clientLevel: number, code?: Status) {
    super(message, code);
    this.daemonLevel = daemonLevel;
    this.clientLevel = clientLevel;
  }
}
/** `exec(..., { check: true })`: the command ended with a non-zero exit; `result` has it all. */
export class CommandFailed extends AirlockError {
  readonly result: ExecResult;
  constructor(message: string, result: ExecResult) {
    super(message);
    this.result = result;
  }
}

const byCode = new Map<Status, new (message: string, code?: Status) => AirlockError>([
  [Status.INVALID_ARGUMENT, InvalidArgument],
  [Status.OUT_OF_RANGE, InvalidArgument],
  [Status.NOT_FOUND, NotFound],
  [Status.PERMISSION_DENIED, PermissionDenied],
  [Status.UNAUTHENTICATED, Unauthenticated],
  [Status.RESOURCE_EXHAUSTED, LimitExceeded],
  [Status.FAILED_PRECONDITION, FailedPrecondition],
  [Status.UNAVAILABLE, Unavailable],
]);

/** The SDK's error for a failed gRPC call. */
export function fromServiceError(error: unknown): AirlockError {
  if (error instanceof AirlockError) return error;
  // A call the version check held and failed carries the check's own error (see afterCheck).
  const held = (error as { airlockError?: unknown })?.airlockError;
  if (held instanceof AirlockError) return held;
  const e = error as Partial<ServiceError>;
  if (typeof e?.code !== 'number') {
    return new AirlockError(error instanceof Error ? error.message : String(error));
  }
  let details = e.details ?? '';
  if (e.code === Status.UNAVAILABLE && !details) details = 'lost the connection to airlockd';
  if (e.code === Status.DEADLINE_EXCEEDED) return new Timeout(details || 'deadline exceeded', undefined, e.code);
  const cls = byCode.get(e.code) ?? AirlockError;
  return new cls(details || e.message || 'airlockd refused the call', e.code);
}
