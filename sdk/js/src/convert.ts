// Arguments to requests and replies to plain values. Wrong types are refused here, before
// anything reaches the wire.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { InvalidArgument, Timeout } from './errors.js';
import type { ExecStart } from './generated/airlock/v1/ExecStart.js';
import type { Limits as LimitsProto } from './generated/airlock/v1/Limits.js';
import type { SecretBinding } from './generated/airlock/v1/SecretBinding.js';
import type { VolumeMount } from './generated/airlock/v1/VolumeMount.js';
import type { Session__Output } from './generated/airlock/v1/Session.js';
import type { NetworkPolicy__Output } from './generated/airlock/v1/NetworkPolicy.js';
import type { Exposure__Output } from './generated/airlock/v1/Exposure.js';
import type { ExecResponse__Output } from './generated/airlock/v1/ExecResponse.js';
import type { SessionEvent__Output } from './generated/airlock/v1/SessionEvent.js';
import type { TimelineEvent__Output } from './generated/airlock/v1/TimelineEvent.js';
import type { WorkspaceInfo__Output } from './generated/airlock/v1/WorkspaceInfo.js';
import type { WorkspaceChange__Output } from './generated/airlock/v1/WorkspaceChange.js';
import type { WorkspaceBundleInfo__Output } from './generated/airlock/v1/WorkspaceBundleInfo.js';
import type { SecretInfo__Output } from './generated/airlock/v1/SecretInfo.js';
import type { AuditRecord__Output } from './generated/airlock/v1/AuditRecord.js';
import type { AuditVerification__Output } from './generated/airlock/v1/AuditVerification.js';
import type {
  AuditRecord, AuditVerification, BuildImageOptions, ExecEvent, ExecOptions, ExecResult, Exit, Exposure, Image,
  NetworkRule, SecretInfo, SessionEvent, SessionInfo, SessionOptions, SessionState, Size, StreamOptions,
  TimelineEvent, Volume, WorkspaceBundleInfo, WorkspaceChange, WorkspaceInfo,
} from './types.js';

export const EXIT_AIRLOCK_ERROR = 125;
export const STDIN_PIECE = 256 * 1024;

const units: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };

/** Bytes from 536870912, "512m", "1g", "1GiB". */
export function parseSize(value: Size, what: string): number {
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new InvalidArgument(`${what} is a whole number of bytes, zero or more`);
    }
    return value;
  }
  if (typeof value !== 'string') {
    throw new InvalidArgument(`${what} is a number of bytes or a size like "512m" or "1g", not ${typeof value}`);
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$/i.exec(value);
  if (!m) {
    throw new InvalidArgument(`${what} "${value}" is not a size: give bytes, or a number with k, m, g or t ("512m", "1g")`);
  }
  return Math.floor(Number(m[1]) * units[m[2].toLowerCase()]);
}

export function count(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgument(`${what} is a whole number, zero or more`);
  }
  return value;
}

export function seconds(value: unknown, what: string): number {
  if (value === undefined) return 0;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new InvalidArgument(`${what} is a number of seconds, zero or more`);
  }
  return value;
}

export function strings(value: unknown, what: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
    throw new InvalidArgument(`${what} is an array of strings`);
  }
  return value as string[];
}

export function bytes(value: unknown, what: string): Buffer {
  if (typeof value === 'string') return Buffer.from(value);
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw new InvalidArgument(`${what} must be a string, Buffer or Uint8Array`);
}

export function limits(o: SessionOptions): LimitsProto | undefined {
  const l: LimitsProto = {};
  let any = false;
  if (o.vcpus !== undefined) { l.vcpus = count(o.vcpus, 'vcpus'); any = true; }
  if (o.pids !== undefined) { l.pids = count(o.pids, 'pids'); any = true; }
  if (o.memory !== undefined) { l.memoryBytes = parseSize(o.memory, 'memory'); any = true; }
  if (o.disk !== undefined) { l.diskBytes = parseSize(o.disk, 'disk'); any = true; }
  if (o.netRate !== undefined) { l.netBytesPerSecond = parseSize(o.netRate, 'netRate'); any = true; }
  if (o.ttl !== undefined) { l.ttlSeconds = Math.floor(seconds(o.ttl, 'ttl')); any = true; }
  if (o.idleTimeout !== undefined) {
    l.idleTimeoutSeconds = Math.floor(seconds(o.idleTimeout, 'idleTimeout'));
    any = true;
  }
  return any ? l : undefined;
}

/** The value 1Password's `op read` prints for a reference, as this process's user. */
function opRead(spec: string, reference: string): Buffer {
  const r = spawnSync('op', ['read', reference], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 30000 });
  if (r.error !== undefined) throw new InvalidArgument(`secret ${spec}: cannot run 1Password's op: ${r.error.message}`);
  if (r.status !== 0) {
    throw new InvalidArgument(`secret ${spec}: \`op read\` failed: ${r.stderr.toString().split('\n')[0]}`);
  }
  const out = r.stdout;
  return out.length > 0 && out[out.length - 1] === 0x0a ? out.subarray(0, out.length - 1) : out;
}

export function secrets(map: SessionOptions['secrets']): SecretBinding[] {
  if (map === undefined) return [];
  if (typeof map !== 'object' || map === null) {
    throw new InvalidArgument('secrets is an object: {"NAME=SOURCE@HOST": null or a value}');
  }
  return Object.entries(map).map(([spec, value]) => {
    if (value !== null && value !== undefined) return { spec, value: bytes(value, 'a secret\'s value') };
    const source = spec.includes('=') ? spec.split('=', 2)[1].split('@')[0] : '';
    if (source.startsWith('env:')) {
      const env = process.env[source.slice(4)];
      if (env === undefined) throw new InvalidArgument(`secret ${spec}: $${source.slice(4)} is not set`);
      return { spec, value: Buffer.from(env) };
    }
    if (source.startsWith('file:')) return { spec, value: readFileSync(source.slice(5)) };
    if (source.startsWith('op://')) return { spec, value: opRead(spec, source) };
    return { spec };
  });
}

/** Volumes to attach: each "NAME:/PATH" or "NAME:/PATH:ro", as airlock's --volume. */
export function volumeMounts(values: SessionOptions['volumes']): VolumeMount[] {
  return strings(values, 'volumes').map((spec) => {
    const colon = spec.indexOf(':');
    let path = colon < 0 ? '' : spec.slice(colon + 1);
    const readOnly = path.endsWith(':ro');
    if (readOnly || path.endsWith(':rw')) path = path.slice(0, -3);
    if (colon <= 0 || !path.startsWith('/')) {
      throw new InvalidArgument(`${JSON.stringify(spec)} is not a volume to attach: write NAME:/PATH or NAME:/PATH:ro (like "data:/data:ro")`);
    }
    return { name: spec.slice(0, colon), path, readOnly };
  });
}

/** A Volume as the API sends it. */
export interface VolumeProto {
  name: string; sizeBytes: number; readOnly: boolean; origin: string; generation: number;
  createdUnixMs: number; holders: string[]; heldReadWrite: boolean;
}

export function volume(v: VolumeProto): Volume {
  return {
    name: v.name, size: v.sizeBytes, snapshot: v.readOnly, origin: v.origin, generation: v.generation,
    created: new Date(v.createdUnixMs), holders: v.holders, heldReadWrite: v.heldReadWrite,
  };
}

/** An Images.Build request; airlockd checks what the strings say. */
export function buildRequest(o: BuildImageOptions): { suite: string; packages: string[]; npm: string[]; env: string[]; tag: string } {
  checkOptions(o, 'build options');
  if (o === undefined || typeof o.tag !== 'string' || !o.tag) {
    throw new InvalidArgument('give the image a name (tag), like team/devbox:1');
  }
  if (typeof o.suite !== 'string') throw new InvalidArgument('suite is a Debian suite name, like bookworm');
  let env: string[] = [];
  if (o.env !== undefined) {
    if (typeof o.env !== 'object' || o.env === null) throw new InvalidArgument('env is an object of names to values');
    env = Object.entries(o.env).map(([k, v]) => {
      if (typeof v !== 'string') throw new InvalidArgument(`env ${k} must be a string`);
      return `${k}=${v}`;
    });
  }
  return { suite: o.suite, packages: strings(o.packages, 'packages'), npm: strings(o.npm, 'npm'), env, tag: o.tag };
}

export function hostId(host: unknown): string {
  if (host === undefined) return '';
  if (typeof host !== 'string') throw new InvalidArgument('host is a host id of the fleet (a string, like "host-b")');
  return host;
}

export function checkOptions(o: unknown, what: string): void {
  if (o !== undefined && (typeof o !== 'object' || o === null || Array.isArray(o))) {
    throw new InvalidArgument(`${what} is an object of options`);
  }
}

export function execStart(argv: unknown, o: StreamOptions | ExecOptions, sessionId: string,
                          session?: SessionOptions): ExecStart {
  checkOptions(o, 'exec options');
  if (!Array.isArray(argv)) {
    throw new InvalidArgument('argv is an array (like ["python3", "-c", "pass"]), not one string; for a shell line use ["sh", "-c", LINE]');
  }
  const start: ExecStart = {
    sessionId,
    argv: argv.map((a) => bytes(a, 'argv')),
    stdin: o.stdin !== undefined,
    timeoutSeconds: seconds(o.timeout, 'timeout'),
  };
  if (o.env !== undefined) {
    if (typeof o.env !== 'object' || o.env === null) throw new InvalidArgument('env is an object of names to values');
    start.env = Object.entries(o.env).map(([k, v]) => {
      if (typeof v !== 'string') throw new InvalidArgument(`env ${k} must be a string`);
      return Buffer.from(`${k}=${v}`);
    });
  }
  if (o.cwd !== undefined) start.cwd = bytes(o.cwd, 'cwd');
  if (o.user !== undefined) start.user = String(o.user);
  if (!sessionId && session) {
    if (session.host !== undefined) {
      throw new InvalidArgument('host is for createSession: a one-shot run is made on the host called');
    }
    start.image = session.image ?? '';
    const l = limits(session);
    if (l) start.limits = l;
    start.allow = strings(session.allow, 'allow');
    start.allowPreset = strings(session.presets, 'presets');
    start.secrets = secrets(session.secrets);
    start.volumes = volumeMounts(session.volumes);
  }
  return start;
}

export async function* stdinPieces(data: ExecOptions['stdin']): AsyncGenerator<Buffer> {
  if (data === undefined) return;
  if (typeof data === 'string' || data instanceof Uint8Array) {
    const b = bytes(data, 'stdin');
    for (let at = 0; at < b.length; at += STDIN_PIECE) yield b.subarray(at, at + STDIN_PIECE);
    return;
  }
  const source = data as unknown as Partial<AsyncIterable<unknown> & Iterable<unknown>>;
  if (typeof source[Symbol.asyncIterator] !== 'function' && typeof source[Symbol.iterator] !== 'function') {
    throw new InvalidArgument('stdin is a string, a Buffer, or an (async) iterable of them');
  }
  for await (const piece of data as AsyncIterable<unknown>) yield bytes(piece, 'a piece of stdin');
}

const states: Record<string, SessionState> = {
  SESSION_STATE_CREATING: 'creating',
  SESSION_STATE_RUNNING: 'running',
  SESSION_STATE_STOPPED: 'stopped',
  SESSION_STATE_FAILED: 'failed',
  SESSION_STATE_PAUSED: 'paused',
};

export function sessionInfo(s: Session__Output): SessionInfo {
  const l = s.limits;
  return {
    id: s.id,
    image: s.image,
    imageDigest: s.imageDigest,
    state: states[s.state as string] ?? 'unknown',
    reason: s.reason,
    hostname: s.hostname,
    created: new Date(s.createdUnixMs),
    lastUsed: new Date(s.lastUsedUnixMs),
    limits: {
      vcpus: l?.vcpus ?? 0,
      memory: l?.memoryBytes ?? 0,
      pids: l?.pids ?? 0,
      disk: l?.diskBytes ?? 0,
      ttl: l?.ttlSeconds ?? 0,
      idleTimeout: l?.idleTimeoutSeconds ?? 0,
      netRate: l?.netBytesPerSecond ?? 0,
    },
  };
}

export function execEvent(r: ExecResponse__Output): ExecEvent | undefined {
  switch (r.kind) {
    case 'stdout': return { type: 'stdout', data: r.stdout ?? Buffer.alloc(0) };
    case 'stderr': return { type: 'stderr', data: r.stderr ?? Buffer.alloc(0) };
    case 'exit': return {
      type: 'exit',
      exitCode: r.exit?.code ?? 0,
      signal: r.exit?.signal ?? 0,
      timedOut: r.exit?.timedOut ?? false,
      message: r.exit?.message ?? '',
    };
    default: return undefined;
  }
}

export function result(out: Buffer[], err: Buffer[], exit: Exit): ExecResult {
  return {
    exitCode: exit.exitCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err),
    signal: exit.signal, timedOut: exit.timedOut, message: exit.message,
  };
}

function name(argv: unknown[]): string {
  return argv.length ? String(argv[0]) : "the image's command";
}

export function timedOut(r: ExecResult, argv: unknown[]): Timeout {
  return new Timeout(`${name(argv)} ran past its timeout and was killed`, r);
}

export function failedMessage(r: ExecResult, argv: unknown[]): string {
  return `${name(argv)} exited with ${r.exitCode}${r.message ? ': ' + r.message : ''}`;
}

export function networkRules(p: NetworkPolicy__Output): NetworkRule[] {
  return p.rules.map((r) => ({
    rule: r.rule, source: r.source, deny: r.deny,
    ...(r.expiresUnixMs ? { expires: new Date(r.expiresUnixMs) } : {}),
  }));
}

export function exposure(e: Exposure__Output): Exposure {
  return {
    port: e.port, url: e.url, token: e.token, public: e.public, host: e.host,
    created: new Date(Number(e.createdUnixMs)),
  };
}

/** A TCP port, 1 to 65535. */
export function port(value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    throw new InvalidArgument(`${String(value)} is not a TCP port; give one from 1 to 65535`);
  }
  return value;
}

/** An Image as the API sends it. */
export interface ImageProto { name: string; digest: string; sizeBytes: number; createdUnix: number; source: string }

export function image(i: ImageProto): Image {
  return { name: i.name, digest: i.digest, size: i.sizeBytes, created: new Date(i.createdUnix * 1000), source: i.source };
}

/** A file's content for Files.write. */
export type FileData = string | Uint8Array | Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>;

/** airlockd takes a file in messages of at most 1 MiB. */
export const FILE_PIECE = 1 << 20;

export function fileMode(mode: unknown): number {
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw new InvalidArgument(`a file's mode is its permission bits, like 0o644, not ${String(mode)}`);
  }
  return mode;
}

export function byteCount(value: unknown, what: string): number {
  return count(value, `${what} (bytes; 0: no limit)`);
}

/** The content as an async iterable, checked before anything is sent. */
export function fileSource(data: unknown): AsyncIterable<unknown> | Iterable<unknown> {
  if (typeof data === 'string' || data instanceof Uint8Array) return [data];
  if (data !== null && typeof data === 'object' &&
      (Symbol.asyncIterator in data || Symbol.iterator in data)) {
    return data as AsyncIterable<unknown> | Iterable<unknown>;
  }
  throw new InvalidArgument('a file\'s content is a string, Buffer or Uint8Array, or an iterable or async iterable of them');
}

/** One piece of the content, in messages airlockd takes. */
export function filePieces(piece: unknown): Buffer[] {
  const b = bytes(piece, 'a piece of a file');
  const out: Buffer[] = [];
  for (let at = 0; at < b.length; at += FILE_PIECE) out.push(b.subarray(at, at + FILE_PIECE));
  return out;
}

export function guestPath(path: unknown): Buffer {
  const p = bytes(path, 'path');
  if (p[0] !== 0x2f) throw new InvalidArgument('give an absolute path in the guest, like /root/data.txt');
  return p;
}

export function sessionId(id: unknown): string {
  if (typeof id !== 'string' || !id) {
    throw new InvalidArgument('a session id is a non-empty string (as createSession returned)');
  }
  return id;
}

const eventKinds: Record<string, SessionEvent['kind']> = {
  KIND_STATE: 'state', KIND_EXEC_START: 'execStart', KIND_EXEC_EXIT: 'execExit',
  KIND_DENIED: 'denied', KIND_REMOVED: 'removed',
};

export function sessionEvent(e: SessionEvent__Output): SessionEvent {
  const kind = eventKinds[e.kind as string] ?? 'unknown';
  return {
    kind, time: new Date(e.unixMs), sessionId: e.sessionId,
    ...(kind === 'state' ? { state: states[e.state as string] ?? 'unknown' } : {}),
    reason: e.reason, execId: e.execId, argv: e.argv, exitCode: e.exitCode,
    destination: e.destination, lost: e.lost, host: e.host,
  };
}

export function timelineEvent(e: TimelineEvent__Output): TimelineEvent {
  return {
    seq: e.seq, time: new Date(e.unixMs), kind: e.kind, summary: e.summary, actor: e.actor, failed: e.failed,
    execId: e.execId, argv: e.argv, user: e.user, cwd: e.cwd, tty: e.tty,
    ...(e.durationMs >= 0 ? { duration: e.durationMs / 1000 } : {}),
    exitCode: e.exitCode, output: e.output, outputTotal: e.outputTotal, toolId: e.toolId, tool: e.tool, text: e.text,
  };
}

export function workspaceInfo(w: WorkspaceInfo__Output): WorkspaceInfo {
  const b = w.base;
  return {
    base: {
      path: b?.path ?? '', head: b?.head ?? '', branch: b?.branch ?? '', treeDigest: b?.treeDigest ?? '',
      files: b?.files ?? 0, bytes: b?.bytes ?? 0,
    },
    entries: w.entries.map((e) => ({ path: e.path, mode: e.mode, size: e.size, sha256: e.sha256, target: e.target })),
    ...(w.syncedUnixMs ? { synced: new Date(w.syncedUnixMs) } : {}),
    syncedPaths: w.synced,
  };
}

const changeKinds: Record<string, WorkspaceChange['kind']> = {
  KIND_ADDED: 'added', KIND_MODIFIED: 'modified', KIND_DELETED: 'deleted',
};

export function workspaceChange(c: WorkspaceChange__Output): WorkspaceChange {
  return {
    kind: changeKinds[c.kind as string] ?? 'modified', path: c.path,
    oldMode: c.oldMode, newMode: c.newMode, oldSize: c.oldSize, newSize: c.newSize,
    oldTarget: c.oldTarget, newTarget: c.newTarget,
    binary: c.binary, tooLarge: c.tooLarge, omitted: c.omitted,
    ...(c.hasOldContent ? { oldContent: c.oldContent } : {}),
    ...(c.hasNewContent ? { newContent: c.newContent } : {}),
  };
}

export function bundleInfo(i: WorkspaceBundleInfo__Output): WorkspaceBundleInfo {
  return {
    baseCommit: i.baseCommit, headCommit: i.headCommit, branch: i.branch, ref: i.ref, commits: i.commits,
    log: i.log, uncommittedStat: i.uncommittedStat, uncommittedDiff: i.uncommittedDiff,
  };
}

export function secretInfos(reply: { secrets: SecretInfo__Output[] }): SecretInfo[] {
  return reply.secrets.map((s) => ({
    name: s.name, source: s.source, hosts: s.hosts, body: s.body, placeholder: s.placeholder,
    available: s.available, ...(s.lastUsedUnixMs ? { lastUsed: new Date(s.lastUsedUnixMs) } : {}),
  }));
}

export function auditRecord(r: AuditRecord__Output): AuditRecord {
  return {
    seq: r.seq, time: new Date(r.unixMs), principal: r.principal, tenant: r.tenant, action: r.action,
    target: r.target, outcome: r.outcome, hash: r.hash,
  };
}

export function auditVerification(v: AuditVerification__Output): AuditVerification {
  return { ok: v.ok, records: v.records, lastSeq: v.lastSeq, problem: v.problem, firstBadSeq: v.firstBadSeq };
}

/** A time for a request: milliseconds since the epoch; undefined: 0 (from the start). */
export function unixMs(value: unknown, what: string): number {
  if (value === undefined) return 0;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) throw new InvalidArgument(`${what} is a Date`);
  return value.getTime();
}
