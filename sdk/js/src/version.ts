// The API level this SDK speaks, and the check that airlockd speaks it too: once per client,
// before its first call, so that an SDK and a daemon that disagree fail loudly and say what to
// upgrade instead of failing later on a call one of them does not know.
import * as grpc from '@grpc/grpc-js';
import { createRequire } from 'node:module';
import { AirlockError, VersionMismatch, fromServiceError } from './errors.js';
import type { ApiClient } from './generated/airlock/v1/Api.js';
import type { VersionReply__Output } from './generated/airlock/v1/VersionReply.js';
import type { Version } from './types.js';

/**
 * The level of airlockd's API this SDK was built for (the `Api` service in the proto): it needs
 * an airlockd of this level or newer.
 */
export const API_LEVEL = 1;

/** This package's release, as its package.json says. */
export const SDK_VERSION: string = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

let clientLevel = API_LEVEL;

/**
 * @internal Not for users: the SDK's tests claim another level to see a mismatch fail. Resolves
 * nothing by itself; clients made after it send and check `level`. Returns the level before.
 */
export function overrideApiLevelForTests(level: number): number {
  const before = clientLevel;
  clientLevel = level;
  return before;
}

/** @internal Asks airlockd what it speaks; rejects with VersionMismatch when it and this SDK disagree. */
export function checkVersion(stub: ApiClient, where: string): Promise<Version> {
  const level = clientLevel;
  const request = { clientLevel: level, client: `js-sdk ${SDK_VERSION}` };
  return new Promise((resolve, reject) => {
    stub.Version(request, (error, reply?: VersionReply__Output) => {
      if (error) {
        if (error.code === grpc.status.UNIMPLEMENTED) {
          return reject(new VersionMismatch(
            `airlockd at ${where} predates API levels (it answers no Api.Version); this SDK needs level ${level}: upgrade airlockd`,
            0, level, error.code));
        }
        if (error.code === grpc.status.FAILED_PRECONDITION) {
          // airlockd refuses a client older than it serves, and says so.
          return reject(new VersionMismatch(error.details || 'airlockd no longer serves this SDK: upgrade the SDK',
                                            0, level, error.code));
        }
        return reject(fromServiceError(error));
      }
      const v: Version = {
        level: reply!.level, oldestClientLevel: reply!.oldestClientLevel, daemonVersion: reply!.daemonVersion,
      };
      if (v.level < level) {
        return reject(new VersionMismatch(
          `airlockd ${v.daemonVersion} speaks API level ${v.level}; this SDK needs ${level}: upgrade airlockd`,
          v.level, level));
      }
      if (level < v.oldestClientLevel) {
        return reject(new VersionMismatch(
          `airlockd ${v.daemonVersion} serves API levels ${v.oldestClientLevel} to ${v.level}; this SDK speaks ${level}: upgrade the SDK`,
          v.level, level));
      }
      resolve(v);
    });
  });
}

/**
 * @internal A gRPC interceptor that holds each call until `checked` resolves, and fails it with that
 * rejection instead of sending it. The error rides on the call's status (grpc-js copies the
 * status's fields onto the error it raises), where fromServiceError finds it.
 */
export function afterCheck(checked: () => Promise<unknown>): grpc.Interceptor {
  return (options, nextCall) => {
    let state: 'held' | 'started' | 'ended' = 'held';
    let listener: grpc.InterceptingListener | undefined;
    const end = (status: Partial<grpc.StatusObject> & { airlockError?: AirlockError }) => {
      state = 'ended';
      listener?.onReceiveStatus({ metadata: new grpc.Metadata(), ...status } as grpc.StatusObject);
    };
    return new grpc.InterceptingCall(nextCall(options), {
      start(metadata, callListener, next) {
        listener = callListener;
        checked().then(() => {
          if (state !== 'held') return;
          state = 'started';
          next(metadata, callListener);
        }, (error: unknown) => {
          if (state !== 'held') return;
          const e = error instanceof AirlockError ? error : fromServiceError(error);
          end({ code: e.code ?? grpc.status.FAILED_PRECONDITION, details: e.message, airlockError: e });
        });
      },
      cancel(next) {
        // Cancelled while held: the call never started below, so nothing else would end it.
        if (state === 'held') end({ code: grpc.status.CANCELLED, details: 'Cancelled on client' });
        next();
      },
    });
  };
}
