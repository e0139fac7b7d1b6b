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
  /**
   * In a fleet, the host createSession makes it on (its airlockd --host-id); default: the one
   * with room. A one-shot run is made on the host called and refuses it.
   */
  host?: string;
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
  /** Of all vCPUs together, over the last interval. */
  cpuPercent: number;
  memoryUsed: number;
  memoryTotal: number;
  processes: number;
  diskUsed: number;
  diskTotal: number;
  /** Egress since the VM started (or was last resumed): bytes of connections that ended. */
  netBytesOut: number;
  netBytesIn: number;
  netConnections: number;
  /** DNS answers and connections refused. */
  netDenied: number;
}

/**
 * One thing that happened in a session (Session.timeline). Every string from the guest (output,
 * transcripts, file names) is hostile: show it as text.
 */
export interface TimelineEvent {
  /** 1, 2, ... in time order. */
  seq: number;
  time: Date;
  /** session.create, session.pause, exec, file.write, network.allow, net.connect, ... */
  kind: string;
  /** One line for a person. */
  summary: string;
  /** Who asked (uid:0, cert:NAME, airlockd), or the agent's name. */
  actor: string;
  /** A denial, a failure, a non-zero exit. */
  failed: boolean;
  /** kind "exec" (and agent.*): the command. */
  execId: number;
  argv: Buffer[];
  user: string;
  cwd: string;
  tty: boolean;
  /** Seconds it ran; undefined while it still runs (or when airlockd lost it). */
  duration?: number;
  exitCode: number;
  /** Its output, stdout and stderr interleaved as they came, from its start (cut short). */
  output: Buffer;
  outputTotal: number;
  /** agent.*: the tool call's id, the tool, and the text. */
  toolId: string;
  tool: string;
  text: Buffer;
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
  /** In a fleet, the other host that has the session ("": airlockd's own host). */
  host: string;
}

/** What airlockd speaks (Client.version): its API level, the oldest it serves, its release. */
export interface Version {
  level: number;
  oldestClientLevel: number;
  /** airlockd's release, like "0.1.0". */
  daemonVersion: string;
}

/** Where a session's workspace came from: the project as the CLI captured it. */
export interface WorkspaceBase {
  /** The project directory on the capturing host. */
  path: string;
  /** Its HEAD commit (git projects), else "". */
  head: string;
  /** Its branch then ("main"); "" when detached. */
  branch: string;
  /** "sha256:..." of the manifest. */
  treeDigest: string;
  files: number;
  /** Bytes of file content. */
  bytes: number;
}

/** A file or symlink of a workspace's base. */
export interface WorkspaceEntry {
  /** Relative, like "src/main.c" (bytes: names need not be UTF-8). */
  path: Buffer;
  /** st_mode: the type (regular file or symlink) and permission bits. */
  mode: number;
  size: number;
  /** Regular files: the content's SHA-256, hex. */
  sha256: string;
  /** Symlinks: where it points. */
  target: Buffer;
}

/** A session's workspace (Workspace.info). */
export interface WorkspaceInfo {
  base: WorkspaceBase;
  /** The base's files, with `info({ entries: true })`; else empty. */
  entries: WorkspaceEntry[];
  /** When `airlock sync` last advanced the base; undefined: never. */
  synced?: Date;
  /** Paths sync wrote into the session. */
  syncedPaths: Buffer[];
}

/** A path the session changed in /workspace against its base (Workspace.diff). */
export interface WorkspaceChange {
  kind: 'added' | 'modified' | 'deleted';
  /** Relative to /workspace (bytes: names need not be UTF-8). */
  path: Buffer;
  /** st_mode in the base and in the session; 0: absent on that side. */
  oldMode: number;
  newMode: number;
  oldSize: number;
  newSize: number;
  /** Symlinks: where each side points. */
  oldTarget: Buffer;
  newTarget: Buffer;
  /** A side holds a NUL byte: no content shown. */
  binary: boolean;
  /** A side is over 1 MiB: no content shown. */
  tooLarge: boolean;
  /** The diff's budget for content ran out: no content shown. */
  omitted: boolean;
  /** Each side's content, when shown (from the guest: untrusted). */
  oldContent?: Buffer;
  newContent?: Buffer;
}

/** What Workspace.bundle asks for. */
export interface BundleOptions {
  /**
   * Commit what is not committed yet on top of the session's HEAD, in the bundle only (the
   * session's branch stays as it is).
   */
  includeUncommitted?: boolean;
  /** Only the info: the commits and the uncommitted work; no bundle. */
  dryRun?: boolean;
  /** The branch you will make of it, for the audit record. */
  branch?: string;
}

/** What a workspace bundle holds. The log and the diffs come from the guest: untrusted. */
export interface WorkspaceBundleInfo {
  /** The commit the session started from. */
  baseCommit: string;
  /** The bundle's tip. */
  headCommit: string;
  /** The session's current branch ("main"; "HEAD" when detached). */
  branch: string;
  /** The one ref the bundle holds. */
  ref: string;
  /** New commits since the base, uncommitted work included. */
  commits: number;
  /** `git log --stat` of those commits. */
  log: string;
  /** `git diff --stat` of the work not committed. */
  uncommittedStat: string;
  /** With dryRun: that work as a diff. */
  uncommittedDiff: string;
}

/** The session's new commits as a git bundle (`git fetch` it, or `git bundle verify` it). */
export interface WorkspaceBundle {
  info: WorkspaceBundleInfo;
  /** The bundle (`# v2 git bundle` ...); empty with dryRun. */
  data: Buffer;
}

/** A secret bound to a session: its name, source, hosts and placeholder, never its value. */
export interface SecretInfo {
  name: string;
  /** "env:OPENAI_API_KEY", "op://vault/item/field". */
  source: string;
  hosts: string[];
  /** Swapped in request bodies too. */
  body: boolean;
  /** What the guest holds in its environment instead of the value. */
  placeholder: string;
  /** The value is in airlockd's memory (false after a restart for env: and file: sources, until set again). */
  available: boolean;
  /** undefined: not used yet. */
  lastUsed?: Date;
}

/** A record of the host's audit log. */
export interface AuditRecord {
  /** 1, 2, ... in the order written. */
  seq: number;
  time: Date;
  /** Who asked: uid:N, cert:NAME. */
  principal: string;
  /** Whose sessions or images it concerned. */
  tenant: string;
  /** session.create, file.read, network.allow, quota.refuse, ... */
  action: string;
  /** A session id, image name, path, ... */
  target: string;
  /** "ok..." or what went wrong. */
  outcome: string;
  /** SHA-256 hex of the previous hash and this record's fields. */
  hash: string;
}

/** Whether the audit log's hash chain is whole (Client.verifyAudit). */
export interface AuditVerification {
  ok: boolean;
  records: number;
  lastSeq: number;
  /** The first break in the chain; "" when ok. */
  problem: string;
  firstBadSeq: number;
}
