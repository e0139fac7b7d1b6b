// Plain values the SDK returns and takes.

/** Bytes as a number, or a size like "512m", "1g" (binary units, as the CLI's). */
export type Size = number | string;

/** A piece of a command's output as it came. */
export interface Output {
  type: 'stdout' | 'stderr';
  data: Buffer;
}
/** How a command ended: its exit code (128+N after signal N), and why when Airlock ended it. */
export interface Exit {
  type: 'exit';
  exitCode: number;
  signal: number;
  timedOut: boolean;
  message: string;
}
export type ExecEvent = Output | Exit;

/** A finished command: its exit and all its output, stdout and stderr apart. */
export interface ExecResult {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  signal: number;
  timedOut: boolean;
  message: string;
}

export type SessionState = 'creating' | 'running' | 'paused' | 'stopped' | 'failed' | 'unknown';

export interface Limits {
  vcpus: number;
  memory: number;
  pids: number;
  disk: number;
  ttl: number;
  idleTimeout: number;
  netRate: number;
}

/** A session as airlockd last described it. */
export interface SessionInfo {
  id: string;
  image: string;
  imageDigest: string;
  state: SessionState;
  /** Why it paused, stopped or failed. */
  reason: string;
  hostname: string;
  created: Date;
  lastUsed: Date;
  limits: Limits;
}

/** What Client.buildImage builds. */
export interface BuildImageOptions {
  /** The image's name in your images, like team/devbox:1. */
  tag: string;
  /** A Debian suite: bookworm, trixie... */
  suite: string;
  /** Debian packages besides minbase, like ['python3', 'git']. */
  packages?: string[];
  /** npm packages, like `left-pad` or `@scope/name`, each with an optional `@1.2.3` version (adds Node.js). */
  npm?: string[];
  /** The image's environment. */
  env?: Record<string, string>;
}

/** What a new session gets; unset fields take airlockd's defaults. */
export interface SessionOptions {
  /** An image airlockd has; default: its default image. */
  image?: string;
  vcpus?: number;
  memory?: Size;
  disk?: Size;
  pids?: number;
  /** Seconds until the session is destroyed; 0: never. */
  ttl?: number;
  /** Seconds without use until it pauses itself; 0: never. */
  idleTimeout?: number;
  /** Egress bandwidth, bytes per second each way. */
  netRate?: Size;
  /** Egress rules: "pypi.org", "*.example.com:8443", "10.0.0.0/8:5432". Nothing by default. */
  allow?: string[];
  /** Rule sets: "pypi", "npm", "github", ... */
  presets?: string[];
  /**
   * Protected credentials: {"NAME=env:VAR@api.host": null}. The guest sees a placeholder;
   * airlockd puts the value into HTTPS requests to the hosts. env:, file: and op:// values are
   * read here, with this process's rights (shared: ones by airlockd); give a value instead of
   * null to pass it directly.
   */
  secrets?: Record<string, string | Buffer | null>;
  /**
   * Your volumes to attach, like ["data:/data", "models:/models:ro"]: read-write by one session
   * at a time, read-only (:ro) by any number.
   */
  volumes?: string[];
}

export interface ExecOptions {
  /** stdin: all of it, or an async iterable of pieces. Without: /dev/null. */
  stdin?: string | Buffer | Uint8Array | AsyncIterable<Buffer | Uint8Array | string>;
  env?: Record<string, string>;
  cwd?: string;
  /** NAME or UID, optionally :GROUP; default: the image's user, else root. */
  user?: string;
  /** Seconds; the command is killed after it. */
  timeout?: number;
  /** Throw CommandFailed on a non-zero exit. */
  check?: boolean;
}

export interface StreamOptions extends Omit<ExecOptions, 'check' | 'stdin'> {
  /** true: stdin stays open for ExecStream.write() / closeStdin(); else as ExecOptions.stdin. */
  stdin?: true | ExecOptions['stdin'];
}

export interface NetworkRule {
  rule: string;
  source: string;
  deny: boolean;
  expires?: Date;
}

/** A guest port reached as a URL through airlockd's HTTP gateway. */
export interface Exposure {
  port: number;
  /** To open: carries ?airlock_token=TOKEN unless public. */
  url: string;
  /** Send as the header X-Airlock-Token; "" when public. */
  token: string;
  public: boolean;
  /** PORT-ID.DOMAIN, the Host a request names. */
  host: string;
  created: Date;
}

export interface Image {
  name: string;
  digest: string;
  size: number;
  created: Date;
  /** What it came from: a registry reference, an archive, a build. */
  source: string;
}

/** A named disk of yours that outlives sessions (`airlock volume --help`). */
export interface Volume {
  name: string;
  /** Its filesystem's size in bytes. */
  size: number;
  /** A read-only copy (NAME@TAG). */
  snapshot: boolean;
  /** "", "snapshot of NAME", "fork of NAME for session ID". */
  origin: string;
  /** Grows with every import. */
  generation: number;
  created: Date;
  /** Sessions (running or paused) that attach it now. */
  holders: string[];
  /** One of them writes it. */
  heldReadWrite: boolean;
}

/** A live VM process on airlockd's host (the caller's own). */
export interface Vm {
  sessionId: string;
  pid: number;
  accelerator: string;
  vcpus: number;
  hostCpuPercent: number;
  hostRss: number;
}

export interface Metrics {
  time: Date;
  cpuPercent: number;
  memoryUsed: number;
  memoryTotal: number;
  processes: number;
  diskUsed: number;
  diskTotal: number;
}

export interface LogEntry {
  time: Date;
  execId: number;
  stream: 'stdout' | 'stderr' | 'event' | 'unknown';
  data: Buffer;
}

/**
 * Something that happened to a session (Client.watch): `kind` "state" (the session is now in
 * `state`, for `reason`), "execStart" (`execId`, `argv`), "execExit" (`execId`, `exitCode`,
 * `reason`), "denied" (egress refused `destination`, for `reason`) or "removed". `lost`: events
 * this watcher missed just before this one (it fell behind).
 */
export interface SessionEvent {
  kind: 'state' | 'execStart' | 'execExit' | 'denied' | 'removed' | 'unknown';
  time: Date;
  sessionId: string;
  state?: SessionState;
  reason: string;
  execId: number;
  argv: Buffer[];
  exitCode: number;
  destination: string;
  lost: number;
}
