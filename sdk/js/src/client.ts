// The client: sessions, commands, files, pause/resume/fork, network rules, workspaces, secrets,
// the audit log, and the check that airlockd speaks this SDK's API level.
import * as grpc from '@grpc/grpc-js';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import * as net from 'node:net';
import * as c from './convert.js';
import {
  AirlockError, CommandFailed, FailedPrecondition, InvalidArgument, SessionFailed, Unavailable, VersionMismatch,
  fromServiceError,
} from './errors.js';
import type { ApiClient } from './generated/airlock/v1/Api.js';
import type { AuditClient } from './generated/airlock/v1/Audit.js';
import type { AuditRecord__Output } from './generated/airlock/v1/AuditRecord.js';
import type { AuditVerification__Output } from './generated/airlock/v1/AuditVerification.js';
import type { ListSecretsResponse__Output } from './generated/airlock/v1/ListSecretsResponse.js';
import type { SecretsClient } from './generated/airlock/v1/Secrets.js';
import type { WorkspaceBundleChunk__Output } from './generated/airlock/v1/WorkspaceBundleChunk.js';
import type { WorkspaceChange__Output } from './generated/airlock/v1/WorkspaceChange.js';
import type { WorkspaceInfo__Output } from './generated/airlock/v1/WorkspaceInfo.js';
import type { WorkspacesClient } from './generated/airlock/v1/Workspaces.js';
import type { ExecRequest } from './generated/airlock/v1/ExecRequest.js';
import type { ExecStart } from './generated/airlock/v1/ExecStart.js';
import type { PortForwardRequest } from './generated/airlock/v1/PortForwardRequest.js';
import type { PortForwardResponse__Output } from './generated/airlock/v1/PortForwardResponse.js';
import type { Exposure__Output } from './generated/airlock/v1/Exposure.js';
import type { ImagesClient } from './generated/airlock/v1/Images.js';
import type { ListExposuresResponse__Output } from './generated/airlock/v1/ListExposuresResponse.js';
import type { NetworkClient } from './generated/airlock/v1/Network.js';
import type { SessionsClient } from './generated/airlock/v1/Sessions.js';
import type { Session__Output } from './generated/airlock/v1/Session.js';
import type { SessionEvent__Output } from './generated/airlock/v1/SessionEvent.js';
import type { VmsClient } from './generated/airlock/v1/Vms.js';
import type { VolumesClient } from './generated/airlock/v1/Volumes.js';
import { api } from './rpc.js';
import type {
  AuditRecord, AuditVerification, BuildImageOptions, BundleOptions, ExecEvent, ExecOptions, ExecResult, Exit, Exposure,
  Image, LogEntry, Metrics, NetworkRule, SecretInfo, SessionEvent, SessionInfo, SessionOptions, Size, StreamOptions,
  TimelineEvent, Version, Vm, Volume, WorkspaceBundle, WorkspaceChange, WorkspaceInfo,
} from './types.js';
import { afterCheck, checkVersion } from './version.js';

export const DEFAULT_SOCKET = '/run/airlock/airlockd.sock';

/** Mutual TLS for airlockd's TCP listener: PEM file paths. */
export interface TlsOptions {
  /** The CA that signed airlockd's certificate. */
  ca: string;
  /** This client's certificate and key. */
  cert: string;
  key: string;
  /** The name to check in airlockd's certificate, when it is not the host you dial. */
  serverName?: string;
}

export interface ClientOptions {
  tls?: TlsOptions;
  /** Seconds to wait for airlockd to answer; default 10. */
  connectTimeout?: number;
}

type Callback<T> = (error: grpc.ServiceError | null, value?: T) => void;

function call<T>(start: (callback: Callback<T>) => unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    start((error, value) => (error ? reject(fromServiceError(error)) : resolve(value as T)));
  });
}

async function collect<T, U>(stream: AsyncIterable<T>, map: (value: T) => U): Promise<U[]> {
  const out: U[] = [];
  try {
    for await (const value of stream) out.push(map(value));
  } catch (error) {
    throw fromServiceError(error);
  }
  return out;
}

/**
 * A connection to airlockd. `Client.connect()` uses the local socket ($AIRLOCK_SOCKET, else
 * /run/airlock/airlockd.sock); `Client.connect("/path/to.sock")` another socket;
 * `Client.connect("host:7443", { tls })` airlockd's TCP listener with mutual TLS. airlockd
 * decides the caller's tenant (the socket's peer credentials, or the client certificate).
 *
 * Before its first call a client asks airlockd which API level it speaks (`version()`); when
 * airlockd and this SDK disagree, `connect()` and every call reject with VersionMismatch, which
 * says what to upgrade.
 */
export class Client {
  /** @internal */ readonly sessions: SessionsClient;
  /** @internal */ readonly networkStub: NetworkClient;
  /** @internal */ readonly imagesStub: ImagesClient;
  /** @internal */ readonly vmsStub: VmsClient;
  /** @internal */ readonly volumesStub: VolumesClient;
  /** @internal */ readonly workspacesStub: WorkspacesClient;
  /** @internal */ readonly secretsStub: SecretsClient;
  /** The host's audit log: `client.audit.list(since, limit)`, `client.audit.verify()`. */
  readonly audit: Audit;
  /** @internal */ readonly auditStub: AuditClient;
  private readonly apiStub: ApiClient;
  private readonly target: string;
  private readonly connectTimeout: number;
  private checking?: Promise<Version>;

  constructor(address?: string, options: ClientOptions = {}) {
    c.checkOptions(options, 'client options');
    let target = address ?? (process.env.AIRLOCK_SOCKET || DEFAULT_SOCKET);
    let credentials = grpc.credentials.createInsecure();
    // Every call but the check itself waits for the check (and fails with its error).
    const interceptors = [afterCheck(() => this.version())];
    const channelOptions: grpc.ChannelOptions & grpc.ClientOptions = {
      'grpc.max_receive_message_length': 16 << 20,
      'grpc.max_send_message_length': 16 << 20,
      interceptors,
    };
    if (target.startsWith('/')) {
      target = 'unix:' + target;
    } else if (!target.startsWith('unix:')) {
      if (!options.tls) {
        throw new InvalidArgument(`${target}: airlockd listens on TCP only with mutual TLS; give { tls: { ca, cert, key } }, or a socket path`);
      }
      const t = options.tls;
      credentials = grpc.credentials.createSsl(readFileSync(t.ca), readFileSync(t.key), readFileSync(t.cert));
      if (t.serverName) {
        channelOptions['grpc.ssl_target_name_override'] = t.serverName;
        channelOptions['grpc.default_authority'] = t.serverName;
      }
    }
    this.target = target;
    this.connectTimeout = options.connectTimeout ?? 10;
    const v1 = api().airlock.v1;
    this.sessions = new v1.Sessions(target, credentials, channelOptions);
    const channel = { channelOverride: this.sessions.getChannel(), interceptors };
    this.networkStub = new v1.Network(target, credentials, channel);
    this.imagesStub = new v1.Images(target, credentials, channel);
    this.vmsStub = new v1.Vms(target, credentials, channel);
    this.volumesStub = new v1.Volumes(target, credentials, channel);
    this.workspacesStub = new v1.Workspaces(target, credentials, channel);
    this.secretsStub = new v1.Secrets(target, credentials, channel);
    this.auditStub = new v1.Audit(target, credentials, channel);
    this.audit = new Audit(this);
    this.apiStub = new v1.Api(target, credentials, { channelOverride: this.sessions.getChannel() });
  }

  /**
   * A client once airlockd answers (Unavailable if it does not within connectTimeout) and speaks
   * this SDK's API level (VersionMismatch if not).
   */
  static async connect(address?: string, options: ClientOptions = {}): Promise<Client> {
    const client = new Client(address, options);
    await client.ready();
    try {
      await client.version();
    } catch (error) {
      client.close();
      throw error;
    }
    return client;
  }

  /**
   * What airlockd speaks: its API level, the oldest level it serves, and its release. Asked once
   * per client, before its first call; rejects with VersionMismatch when airlockd and this SDK
   * disagree (and every call rejects with it then).
   */
  version(): Promise<Version> {
    if (!this.checking) {
      const checking = checkVersion(this.apiStub, this.where());
      // An airlockd that was not there yet is asked again by the next call; an answer is kept.
      checking.catch((error) => {
        if (!(error instanceof VersionMismatch) && this.checking === checking) this.checking = undefined;
      });
      this.checking = checking;
    }
    return this.checking;
  }

  private where(): string {
    return this.target.startsWith('unix:') ? this.target.slice(5) : this.target;
  }

  /** Waits until airlockd answers. */
  ready(): Promise<void> {
    const deadline = Date.now() + this.connectTimeout * 1000;
    return new Promise((resolve, reject) => {
      this.sessions.waitForReady(deadline, (error) => {
        if (!error) return resolve();
        this.close();
        reject(new Unavailable(`airlockd does not answer at ${this.where()} (is it running, and may you use it? members of the airlock group may use its socket)`));
      });
    });
  }

  close(): void {
    this.sessions.close();
  }

  /** Boots (or restores) a session and resolves once it runs commands. */
  async createSession(options: SessionOptions = {}): Promise<Session> {
    c.checkOptions(options, 'session options');
    const limits = c.limits(options);
    const request = {
      image: options.image ?? '',
      allow: c.strings(options.allow, 'allow'),
      allowPreset: c.strings(options.presets, 'presets'),
      secrets: c.secrets(options.secrets),
      volumes: c.volumeMounts(options.volumes),
      host: c.hostId(options.host),
      ...(limits ? { limits } : {}),
    };
    const s = await call<Session__Output>((cb) => this.sessions.Create(request, cb));
    return new Session(this, s);
  }

  /** Runs `use` with a new session, and removes the session after it (whatever happens). */
  async withSession<T>(options: SessionOptions, use: (session: Session) => Promise<T>): Promise<T> {
    const session = await this.createSession(options);
    try {
      return await use(session);
    } finally {
      await session.remove().catch(() => undefined);
    }
  }

  async getSession(id: string): Promise<Session> {
    const s = await call<Session__Output>((cb) => this.sessions.Get({ id: c.sessionId(id) }, cb));
    return new Session(this, s);
  }

  /** The caller's sessions, newest first (stopped and failed ones too). */
  async listSessions(): Promise<Session[]> {
    const reply = await call<{ sessions: Session__Output[] }>((cb) => this.sessions.List({}, cb));
    return reply.sessions.map((s) => new Session(this, s));
  }

  /** One command in a fresh session that is removed when it ends (`airlock run`). */
  async run(argv: Array<string | Buffer>, options: ExecOptions & SessionOptions = {}): Promise<ExecResult> {
    const start = c.execStart(argv, options, '', options);
    return finish(new ExecStream(this, start, options.stdin), argv, options.check ?? false);
  }

  /**
   * What happens to your sessions (or to one) from now on, as it happens: `for await` the
   * result for SessionEvent values; cancel() it (or leave the loop) to stop.
   */
  watch(sessionId?: string): WatchStream {
    const request = { sessionId: sessionId === undefined ? '' : c.sessionId(sessionId) };
    return new WatchStream(this.sessions.Watch(request));
  }

  /** The images you see: root's, and those you pulled or imported. */
  async images(): Promise<Image[]> {
    const reply = await call<{ images: c.ImageProto[] }>((cb) => this.imagesStub.List({}, cb));
    return reply.images.map(c.image);
  }

  /**
   * Has airlockd fetch an image from its registry into your images (root's are everyone's,
   * anyone else's their own); `onProgress(doneBytes, totalBytes)` as it downloads.
   */
  async pullImage(reference: string, onProgress?: (done: number, total: number) => void): Promise<Image> {
    if (typeof reference !== 'string' || !reference) throw new InvalidArgument('name an image to pull, like python:3.11-slim');
    const stream = this.imagesStub.Pull({ reference });
    stream.on('error', () => undefined);  // surfaced by the iterator
    let result: Image | undefined;
    try {
      for await (const p of stream as AsyncIterable<{ doneBytes: number; totalBytes: number; image?: c.ImageProto }>) {
        if (p.image) result = c.image(p.image);
        else onProgress?.(p.doneBytes, p.totalBytes);
      }
    } catch (error) {
      throw fromServiceError(error);
    }
    if (!result) throw new AirlockError('airlockd ended the pull without the image');
    return result;
  }

  /**
   * Has airlockd build an image from Debian packages (mmdebstrap: minbase of `suite` plus
   * `packages`) and, with `npm`, Node.js and those npm packages, whose install scripts run in a
   * build VM without network; `env` is the image's environment. Tagged `tag` in your images
   * (root's are everyone's, anyone else's their own). `onProgress(line)` gets each step and the
   * build VM's output. Bad input rejects with InvalidArgument before anything runs; a build
   * takes minutes (mmdebstrap's result is cached on the host).
   */
  async buildImage(options: BuildImageOptions, onProgress?: (line: string) => void): Promise<Image> {
    const stream = this.imagesStub.Build(c.buildRequest(options));
    stream.on('error', () => undefined);  // surfaced by the iterator
    let result: Image | undefined;
    try {
      for await (const p of stream as AsyncIterable<{ line: string; image?: c.ImageProto }>) {
        if (p.image) result = c.image(p.image);
        else onProgress?.(p.line);
      }
    } catch (error) {
      throw fromServiceError(error);
    }
    if (!result) throw new AirlockError('airlockd ended the build without the image');
    return result;
  }

  /**
   * Imports an image archive (an OCI image layout or `docker save` tar, any compression), or with
   * `rootfs` a root filesystem tar, sent as it is read (as for Files.write). `name` tags it (an
   * archive's own name otherwise; a root filesystem tar needs one).
   */
  async importImage(data: c.FileData, options: { name?: string; rootfs?: boolean } = {}): Promise<Image> {
    c.checkOptions(options, 'import options');
    const name = options.name ?? '';
    if (typeof name !== 'string' || (options.rootfs && !name)) {
      throw new InvalidArgument('name the image (like team/tool:1); a root filesystem tar has no name of its own');
    }
    const reply = await upload<c.ImageProto>((cb) => this.imagesStub.Import(cb), { name, rootfs: !!options.rootfs }, data);
    return c.image(reply);
  }

  /** A new, empty volume of `size` (bytes or "10g"), within your disk quota. */
  async createVolume(name: string, size: Size): Promise<Volume> {
    if (typeof name !== 'string' || !name) throw new InvalidArgument('name the volume, like "data"');
    const request = { name, sizeBytes: c.parseSize(size, 'size') };
    return c.volume(await call<c.VolumeProto>((cb) => this.volumesStub.Create(request, cb)));
  }

  /** Your volumes, with who holds each. */
  async volumes(): Promise<Volume[]> {
    const reply = await call<{ volumes: c.VolumeProto[] }>((cb) => this.volumesStub.List({}, cb));
    return reply.volumes.map(c.volume);
  }

  /** Removes a volume no session (running or paused) attaches. */
  async removeVolume(name: string): Promise<void> {
    await call<object>((cb) => this.volumesStub.Remove({ name }, cb));
  }

  /** A read-only copy of the volume as it is now, named `snapshot` (NAME@TAG). */
  async snapshotVolume(name: string, snapshot: string): Promise<Volume> {
    return c.volume(await call<c.VolumeProto>((cb) => this.volumesStub.Snapshot({ name, snapshot }, cb)));
  }

  /**
   * Replaces the volume's content with a tar (any compression), sent as it is read (as for
   * Files.write), while no session attaches it. Content that fails part-way changes nothing.
   */
  async importVolume(name: string, data: c.FileData): Promise<Volume> {
    if (typeof name !== 'string' || !name) throw new InvalidArgument('name the volume to import into');
    return c.volume(await upload<c.VolumeProto>((cb) => this.volumesStub.Import(cb), { name }, data));
  }

  /** The caller's live VM processes, with their host CPU and memory (`airlock ps`). */
  async vms(): Promise<Vm[]> {
    const reply = await call<{ vms: Array<{ sessionId: string; pid: number; accelerator: string; vcpus: number; hostCpuPercent: number; hostRssBytes: number }> }>(
      (cb) => this.vmsStub.List({}, cb));
    return reply.vms.map((v) => ({
      sessionId: v.sessionId, pid: v.pid, accelerator: v.accelerator, vcpus: v.vcpus,
      hostCpuPercent: v.hostCpuPercent, hostRss: v.hostRssBytes,
    }));
  }
}

/**
 * One upload stream (WriteFileStream, Images.Import): `head` names what is sent, then `data`
 * goes in pieces of at most 1 MiB as it is read, and a message with `last` ends it. If `data`
 * throws part-way the call is cancelled (airlockd keeps nothing of it) and that error rejects;
 * airlockd's refusals reject as AirlockError.
 */
async function upload<T>(start: (callback: Callback<T>) => grpc.ClientWritableStream<object>,
                         head: object, data: unknown): Promise<T> {
  const source = c.fileSource(data);
  let settled = false;
  let stream!: grpc.ClientWritableStream<object>;
  const reply = new Promise<T>((resolve, reject) => {
    stream = start((error, value) => {
      settled = true;
      if (error) reject(fromServiceError(error));
      else resolve(value as T);
    });
  });
  reply.catch(() => undefined);  // awaited below; the source may fail first
  stream.on('error', () => undefined);  // the callback has it
  let first: object | undefined = head;
  const send = async (message: { data?: Buffer; last?: boolean }): Promise<void> => {
    const ok = stream.write({ ...first, ...message });
    first = undefined;
    if (!ok && !settled) await Promise.race([once(stream, 'drain').catch(() => undefined), reply.then(() => undefined, () => undefined)]);
  };
  try {
    for await (const piece of source) {
      for (const part of c.filePieces(piece)) {
        if (settled) break;
        await send({ data: part });
      }
      if (settled) break;
    }
    if (!settled) await send({ last: true });
    stream.end();
  } catch (error) {
    stream.cancel();  // without `last`: airlockd keeps nothing of it
    throw error;
  }
  return reply;
}

/** A stream of SessionEvent values from Client.watch(); ends when cancelled. */
export class WatchStream implements AsyncIterable<SessionEvent> {
  /** @internal */
  constructor(private readonly call: grpc.ClientReadableStream<SessionEvent__Output>) {
    call.on('error', () => undefined);  // surfaced by the iterator
  }

  cancel(): void {
    this.call.cancel();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SessionEvent> {
    try {
      for await (const e of this.call) yield c.sessionEvent(e as SessionEvent__Output);
    } catch (error) {
      if ((error as grpc.ServiceError)?.code !== grpc.status.CANCELLED) throw fromServiceError(error);
    } finally {
      this.call.cancel();
    }
  }
}

/** A session's files, through its guest agent, of any size. A paused session is resumed first. */
export class Files {
  constructor(private readonly session: Session) {}

  /**
   * Creates or replaces the file (and its missing directories) with `data`: a string, Buffer or
   * Uint8Array, or an iterable or async iterable of them (a Node.js Readable is one), sent as it
   * is read. The file changes only once all of it is in the guest: if `data` throws part-way,
   * the old file stays and that error is what rejects. Resolves to the bytes written.
   */
  async write(path: string | Buffer, data: c.FileData, mode = 0o644): Promise<number> {
    const head = { sessionId: this.session.id, path: c.guestPath(path), mode: c.fileMode(mode) };
    try {
      const reply = await upload<{ bytes: number }>((cb) => this.session.client.sessions.WriteFileStream(cb), head, data);
      return reply.bytes;
    } catch (error) {
      throw error instanceof AirlockError ? await this.session.explained(error) : error;
    }
  }

  /** The file's content; rejects (InvalidArgument, out of range) once it is larger than maxBytes (0: no limit). */
  async read(path: string | Buffer, maxBytes = 0): Promise<Buffer> {
    const pieces: Buffer[] = [];
    for await (const piece of this.readStream(path, maxBytes)) pieces.push(piece);
    return Buffer.concat(pieces);
  }

  /** The file's content in pieces as the guest reads it, for files too large to hold; breaking out cancels the read. */
  async *readStream(path: string | Buffer, maxBytes = 0): AsyncGenerator<Buffer> {
    const request = { sessionId: this.session.id, path: c.guestPath(path), maxBytes: c.byteCount(maxBytes, 'maxBytes') };
    const stream = this.session.client.sessions.ReadFileStream(request);
    stream.on('error', () => undefined);  // surfaced by the iterator
    try {
      for await (const chunk of stream) yield (chunk as { data: Buffer }).data;
    } catch (error) {
      throw await this.session.explained(fromServiceError(error));
    } finally {
      stream.cancel();
    }
  }

}

/**
 * A session's workspace: a project the CLI put into the session at /workspace over a read-only
 * base (`airlock session create --workspace DIR`, or `airlock agent`), and what the session did
 * to it, as a diff against the base or as its new commits in a git bundle. This SDK works on
 * such a session by its id (Client.getSession); it does not capture projects itself. A session
 * without a workspace rejects with FailedPrecondition.
 */
export class Workspace {
  constructor(private readonly session: Session) {}

  /** Where the workspace came from; with `entries`, the base's files too. */
  async info(options: { entries?: boolean } = {}): Promise<WorkspaceInfo> {
    c.checkOptions(options, 'workspace info options');
    const request = { sessionId: this.session.id, entries: options.entries === true };
    return c.workspaceInfo(await this.session.call<WorkspaceInfo__Output>(
      (cb) => this.session.client.workspacesStub.Get(request, cb)));
  }

  /** What the session changed in /workspace against its base, path by path (sorted). */
  async diff(): Promise<WorkspaceChange[]> {
    const stream = this.session.client.workspacesStub.Diff({ sessionId: this.session.id });
    stream.on('error', () => undefined);  // surfaced by collect
    try {
      return await collect(stream, (change: WorkspaceChange__Output) => c.workspaceChange(change));
    } catch (error) {
      throw await this.session.explained(error as AirlockError);
    }
  }

  /**
   * The session's new commits since its base as a git bundle (made by git in the guest: fetch
   * it into the project, as `airlock promote` does after checking it), with what it holds. With
   * `dryRun`, only the info.
   */
  async bundle(options: BundleOptions = {}): Promise<WorkspaceBundle> {
    c.checkOptions(options, 'bundle options');
    if (options.branch !== undefined && typeof options.branch !== 'string') {
      throw new InvalidArgument('branch is the name of the branch you will make of the bundle');
    }
    const request = {
      sessionId: this.session.id, includeUncommitted: options.includeUncommitted === true,
      dryRun: options.dryRun === true, branch: options.branch ?? '',
    };
    const stream = this.session.client.workspacesStub.Bundle(request);
    stream.on('error', () => undefined);  // surfaced by collect
    let chunks: WorkspaceBundleChunk__Output[];
    try {
      chunks = await collect(stream, (chunk: WorkspaceBundleChunk__Output) => chunk);
    } catch (error) {
      throw await this.session.explained(error as AirlockError);
    }
    const info = chunks[0]?.info;
    if (!info) throw new AirlockError('airlockd ended the bundle without saying what it holds');
    return { info: c.bundleInfo(info), data: Buffer.concat(chunks.map((chunk) => chunk.data)) };
  }
}

/**
 * A session's secrets: names, sources, hosts and placeholders, never values. The guest holds
 * a placeholder; airlockd puts the value into HTTPS requests to the secret's hosts.
 */
/** The host's audit log ({@link Client.audit}): root over the Unix socket and read-only operators only (PermissionDenied otherwise). */
export class Audit {
  /** @internal */
  constructor(private readonly client: Client) {}

  /**
   * The records from `since` on (undefined: all of them): the newest `limit` records (0: 1000, at
   * most 100000), oldest first.
   */
  async list(since?: Date, limit = 0): Promise<AuditRecord[]> {
    const request = { sinceUnixMs: c.unixMs(since, 'since'), limit: c.count(limit, 'limit') };
    return collect(this.client.auditStub.List(request), (r: AuditRecord__Output) => c.auditRecord(r));
  }

  /** Walks the whole hash chain: whether a record was changed, removed or moved, and where. */
  async verify(): Promise<AuditVerification> {
    return c.auditVerification(
      await call<AuditVerification__Output>((cb) => this.client.auditStub.Verify({}, cb)),
    );
  }
}

export class Secrets {
  constructor(private readonly session: Session) {}

  async list(): Promise<SecretInfo[]> {
    return c.secretInfos(await this.session.call<ListSecretsResponse__Output>(
      (cb) => this.session.client.secretsStub.List({ sessionId: this.session.id }, cb)));
  }

  /**
   * Binds secrets, written as SessionOptions.secrets (`{"NAME=env:VAR@api.host": null}`), or
   * gives bound ones a new value or source (their placeholders stay). Resolves to all of them.
   */
  async set(secrets: Record<string, string | Buffer | null>): Promise<SecretInfo[]> {
    const request = { sessionId: this.session.id, secrets: c.secrets(secrets) };
    return c.secretInfos(await this.session.call<ListSecretsResponse__Output>(
      (cb) => this.session.client.secretsStub.Set(request, cb)));
  }

  /** Unbinds secrets by name; resolves to those left. */
  async remove(names: string[]): Promise<SecretInfo[]> {
    const request = { sessionId: this.session.id, names: c.strings(names, 'names') };
    return c.secretInfos(await this.session.call<ListSecretsResponse__Output>(
      (cb) => this.session.client.secretsStub.Remove(request, cb)));
  }
}

/** A session's egress policy: nothing is reachable until allowed. */
export class Network {
  constructor(private readonly session: Session) {}

  async rules(): Promise<NetworkRule[]> {
    const policy = await this.session.call<Parameters<typeof c.networkRules>[0]>(
      (cb) => this.session.client.networkStub.Get({ sessionId: this.session.id }, cb));
    return c.networkRules(policy);
  }

  /** Adds and removes rules in one step; applies at once to the running session. */
  async change(change: { allow?: string[]; presets?: string[]; deny?: string[]; remove?: string[]; ttl?: number }): Promise<NetworkRule[]> {
    c.checkOptions(change, 'a network change');
    const request = {
      sessionId: this.session.id,
      allow: c.strings(change.allow, 'allow'),
      allowPreset: c.strings(change.presets, 'presets'),
      deny: c.strings(change.deny, 'deny'),
      remove: c.strings(change.remove, 'remove'),
      ttlSeconds: c.seconds(change.ttl, 'ttl'),
    };
    const policy = await this.session.call<Parameters<typeof c.networkRules>[0]>(
      (cb) => this.session.client.networkStub.Change(request, cb));
    return c.networkRules(policy);
  }
}

/**
 * A listener here whose connections reach a port in a session's guest, each through airlockd
 * (like `airlock port-forward`). `port` is where it listens; `close()` stops listening.
 */
export class Forward {
  /** @internal */
  constructor(private readonly server: net.Server, readonly remote: number) {}

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Stops listening; connections already open run to their end. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function relay(session: Session, remote: number, socket: net.Socket): void {
  const call: grpc.ClientDuplexStream<PortForwardRequest, PortForwardResponse__Output> =
    session.client.sessions.ForwardPort();
  call.write({ start: { sessionId: session.id, port: remote } });
  socket.on('data', (data: Buffer) => {
    if (!call.write({ data })) {
      socket.pause();
      call.once('drain', () => socket.resume());
    }
  });
  socket.on('end', () => {
    call.write({ eof: true });
    call.end();
  });
  socket.on('error', () => call.cancel());
  call.on('data', (r: PortForwardResponse__Output) => {
    if (r.kind === 'data' && r.data) {
      if (!socket.write(r.data)) {
        call.pause();
        socket.once('drain', () => call.resume());
      }
    } else if (r.kind === 'eof') {
      socket.end();
    } else if (r.kind === 'reset') {
      socket.destroy();
    }
  });
  call.on('error', () => socket.destroy());  // the guest's server or this client went away
  call.on('end', () => socket.end());
}

/** A session's ports as URLs through airlockd's HTTP gateway (`airlock expose`), and forwarded here. */
export class Ports {
  constructor(private readonly session: Session) {}

  /**
   * The URL of a server listening on `port` in the guest, with a token unless `public`
   * (exposing a port again gives it a new token).
   */
  async expose(port: number, options: { public?: boolean } = {}): Promise<Exposure> {
    c.checkOptions(options, 'expose options');
    const request = { sessionId: this.session.id, port: c.port(port), public: options.public === true };
    return c.exposure(await this.session.call<Exposure__Output>(
      (cb) => this.session.client.sessions.Expose(request, cb)));
  }

  async list(): Promise<Exposure[]> {
    const reply = await this.session.call<ListExposuresResponse__Output>(
      (cb) => this.session.client.sessions.ListExposures({ sessionId: this.session.id }, cb));
    return reply.exposures.map(c.exposure);
  }

  /** Ends the exposure and cuts its open connections. */
  async unexpose(port: number): Promise<void> {
    const request = { sessionId: this.session.id, port: c.port(port) };
    await this.session.call((cb) => this.session.client.sessions.Unexpose(request, cb));
  }

  /**
   * Listens on `address:localPort` here (0: any free port, see `Forward.port`); each connection
   * reaches `port` in the guest, as `airlock port-forward` does.
   */
  async forward(port: number, options: { localPort?: number; address?: string } = {}): Promise<Forward> {
    c.checkOptions(options, 'forward options');
    const remote = c.port(port);
    const local = options.localPort === undefined || options.localPort === 0 ? 0 : c.port(options.localPort);
    await this.session.refresh();  // a session that is not the caller's is said now
    const server = net.createServer((socket) => relay(this.session, remote, socket));
    server.listen(local, options.address ?? '127.0.0.1');
    await once(server, 'listening');
    return new Forward(server, remote);
  }
}

/** One session. `info` is its last known state (`refresh()` asks again). */
export class Session {
  info: SessionInfo;
  readonly files: Files;
  readonly network: Network;
  readonly ports: Ports;
  readonly workspace: Workspace;
  readonly secrets: Secrets;

  /** @internal */
  constructor(readonly client: Client, info: Session__Output) {
    this.info = c.sessionInfo(info);
    this.files = new Files(this);
    this.network = new Network(this);
    this.ports = new Ports(this);
    this.workspace = new Workspace(this);
    this.secrets = new Secrets(this);
  }

  get id(): string {
    return this.info.id;
  }

  get state(): SessionInfo['state'] {
    return this.info.state;
  }

  /** @internal A call on this session; a FAILED_PRECONDITION on a failed VM becomes SessionFailed. */
  async call<T>(start: (callback: Callback<T>) => unknown): Promise<T> {
    try {
      return await call(start);
    } catch (error) {
      throw await this.explained(error as AirlockError);
    }
  }

  /** @internal */
  async explained(error: AirlockError): Promise<AirlockError> {
    if (error instanceof FailedPrecondition && !(error instanceof SessionFailed)) {
      const info = await this.refresh().catch(() => undefined);
      if (info?.state === 'failed') return new SessionFailed(error.message, info.reason, error.code);
    }
    return error;
  }

  async refresh(): Promise<SessionInfo> {
    const s = await call<Session__Output>((cb) => this.client.sessions.Get({ id: this.id }, cb));
    this.info = c.sessionInfo(s);
    return this.info;
  }

  /**
   * Runs a command and waits for it: its exit code, stdout and stderr. A timeout rejects with
   * Timeout (carrying what it printed); `check: true` rejects with CommandFailed on a non-zero
   * exit; a session whose VM died rejects with SessionFailed.
   */
  async exec(argv: Array<string | Buffer>, options: ExecOptions = {}): Promise<ExecResult> {
    const start = c.execStart(argv, options, this.id);
    return finish(new ExecStream(this.client, start, options.stdin, this), argv, options.check ?? false, this);
  }

  /**
   * Starts a command: `for await` the result for output pieces as they come, then one exit.
   * `stdin: true` keeps stdin open for ExecStream.write() / closeStdin().
   */
  execStream(argv: Array<string | Buffer>, options: StreamOptions = {}): ExecStream {
    const start = c.execStart(argv, options, this.id);
    return new ExecStream(this.client, start, options.stdin === true ? undefined : options.stdin, this);
  }

  /** Snapshots the session to disk and ends its VM (refused while a command runs). */
  async pause(): Promise<SessionInfo> {
    this.info = c.sessionInfo(await this.call<Session__Output>((cb) => this.client.sessions.Pause({ id: this.id }, cb)));
    return this.info;
  }

  async resume(): Promise<SessionInfo> {
    this.info = c.sessionInfo(await this.call<Session__Output>((cb) => this.client.sessions.Resume({ id: this.id }, cb)));
    return this.info;
  }

  /** `count` new sessions from one snapshot of this one, each with its own disk copy. */
  async fork(count = 1): Promise<Session[]> {
    if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1) {
      throw new InvalidArgument('fork count is a whole number, 1 or more');
    }
    const reply = await this.call<{ sessions: Session__Output[] }>(
      (cb) => this.client.sessions.Fork({ id: this.id, count }, cb));
    return reply.sessions.map((s) => new Session(this.client, s));
  }

  /** Destroys the VM and every file of the session; its record stays (state "stopped"). */
  async remove(): Promise<void> {
    await this.call((cb) => this.client.sessions.Remove({ id: this.id }, cb));
  }

  /** The stored output of the session's commands, oldest first. */
  logs(tail = 0): Promise<LogEntry[]> {
    const streams = ['unknown', 'stdout', 'stderr', 'event'] as const;
    return collect(this.client.sessions.Logs({ sessionId: this.id, tail }), (e) => ({
      time: new Date(e.unixMs),
      execId: e.execId,
      stream: streams[['STREAM_UNSPECIFIED', 'STREAM_STDOUT', 'STREAM_STDERR', 'STREAM_EVENT'].indexOf(e.stream as string)] ?? 'unknown',
      data: e.data,
    }));
  }

  async metrics(): Promise<Metrics> {
    const samples = await collect(this.client.sessions.Metrics({ sessionId: this.id, once: true }), (m) => ({
      time: new Date(m.unixMs), cpuPercent: m.cpuPercent, memoryUsed: m.memoryUsedBytes,
      memoryTotal: m.memoryTotalBytes, processes: m.processes, diskUsed: m.diskUsedBytes,
      diskTotal: m.diskTotalBytes, netBytesOut: m.netBytesOut, netBytesIn: m.netBytesIn,
      netConnections: m.netConnections, netDenied: m.netDenied,
    }));
    if (!samples.length) throw new AirlockError('airlockd sent no metrics');
    return samples[0];
  }

  /**
   * Everything the session did, oldest first: its lifecycle, each command with its output, file
   * transfers, egress decisions, secret uses, what agents in it did.
   */
  timeline(): Promise<TimelineEvent[]> {
    return collect(this.client.sessions.Timeline({ sessionId: this.id }), c.timelineEvent);
  }
}

/**
 * A running command: `for await` it for output pieces, then one exit (the last event). With
 * stdin open, write() and closeStdin() feed it; signal() signals its process group; cancel()
 * (or leaving the loop early) ends the command.
 */
export class ExecStream implements AsyncIterable<ExecEvent> {
  exit?: Exit;
  private readonly call: grpc.ClientDuplexStream<ExecRequest, import('./generated/airlock/v1/ExecResponse.js').ExecResponse__Output>;
  private ended = false;
  private feeding?: Promise<void>;

  /** @internal */
  constructor(client: Client, start: ExecStart, stdin: ExecOptions['stdin'], private readonly session?: Session) {
    this.call = client.sessions.Exec();
    this.call.on('error', () => undefined);  // surfaced by the iterator
    this.call.write({ start });
    if (stdin !== undefined) this.feeding = this.feed(stdin);
  }

  private async feed(stdin: ExecOptions['stdin']): Promise<void> {
    try {
      for await (const piece of c.stdinPieces(stdin)) {
        if (this.ended) return;
        await this.write(piece);
      }
    } catch {
      // a stdin source that fails ends stdin; the command sees its end
    } finally {
      this.closeStdin();
    }
  }

  /** Sends stdin; resolves when the transport has taken it (backpressure). */
  async write(data: string | Buffer | Uint8Array): Promise<void> {
    const b = c.bytes(data, 'stdin');
    for (let at = 0; at < b.length && !this.ended; at += c.STDIN_PIECE) {
      if (!this.call.write({ stdin: b.subarray(at, at + c.STDIN_PIECE) })) {
        await new Promise<void>((resolve) => {
          const done = () => { this.call.off('drain', done); this.call.off('close', done); resolve(); };
          this.call.on('drain', done);
          this.call.on('close', done);
        });
      }
    }
  }

  closeStdin(): void {
    if (!this.ended) this.call.write({ stdinEof: true });
  }

  signal(signal: number): void {
    if (!Number.isInteger(signal) || signal <= 0) throw new InvalidArgument('a signal is a positive number, like 15');
    if (!this.ended) this.call.write({ signal });
  }

  /** Ends the command (unless it has ended). */
  cancel(): void {
    if (!this.exit) this.call.cancel();
    this.halfClose();
  }

  private halfClose(): void {
    if (!this.ended) {
      this.ended = true;
      this.call.end();
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ExecEvent> {
    try {
      for await (const response of this.call) {
        const event = c.execEvent(response);
        if (!event) continue;
        if (event.type === 'exit') {
          this.exit = event;
          this.halfClose();  // airlockd ends the call after the exit once the client half-closes
        }
        yield event;
      }
    } catch (error) {
      const e = fromServiceError(error);
      throw this.session ? await this.session.explained(e) : e;
    } finally {
      this.cancel();
    }
  }
}

async function finish(stream: ExecStream, argv: unknown[], check: boolean, session?: Session): Promise<ExecResult> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let exit: Exit | undefined;
  for await (const event of stream) {
    if (event.type === 'stdout') out.push(event.data);
    else if (event.type === 'stderr') err.push(event.data);
    else if (event.type === 'exit') exit = event;
  }
  if (!exit) throw new AirlockError('airlockd ended the command without an exit status');
  const r = c.result(out, err, exit);
  if (r.timedOut) throw c.timedOut(r, argv);
  if (r.exitCode === c.EXIT_AIRLOCK_ERROR && r.message && session) {
    const info = await session.refresh().catch(() => undefined);
    if (info?.state === 'failed') throw new SessionFailed(r.message, info.reason);
  }
  if (check && r.exitCode !== 0) throw new CommandFailed(c.failedMessage(r, argv), r);
  return r;
}
