"""What the sync and asyncio clients share: arguments to requests, replies to plain Python
values, and how to reach airlockd. Nothing here does I/O."""
from __future__ import annotations

import datetime
import os
import re
import subprocess
import typing
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from airlock.errors import (AirlockError, CommandFailed, FailedPrecondition, InvalidArgument,
                            SessionFailed, Timeout, VersionMismatch)
from airlock.v1 import airlock_pb2 as pb

VERSION = "0.1.0"  # this SDK's release (airlock.__version__)
# The Airlock API level this SDK was built for (service Api in the proto): airlockd must speak
# at least this level and still serve it. Read at each check, so that a test may raise it.
API_LEVEL = 1

DEFAULT_SOCKET = "/run/airlock/airlockd.sock"
# Output arrives in pieces of at most 4 MiB; leave room for a whole-file read.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 16 << 20),
    ("grpc.max_send_message_length", 16 << 20),
]
STDIN_PIECE = 256 << 10
EXIT_AIRLOCK_ERROR = 125

Size = Union[int, str]
Seconds = Union[int, float, datetime.timedelta]
Argv = Sequence[Union[str, bytes]]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Size, what: str) -> int:
    """Bytes from 536870912, "512m", "1g", "1GiB" (binary units, as the CLI's)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidArgument(f"{what} is a number of bytes or a size like \"512m\" or \"1g\", "
                              f"not {type(value).__name__}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidArgument(f"{what} cannot be negative")
        return value
    m = _SIZE.match(value)
    if not m:
        raise InvalidArgument(f"{what} \"{value}\" is not a size: give bytes, or a number with "
                              "k, m, g or t (\"512m\", \"1g\")")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_seconds(value: Optional[Seconds], what: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidArgument(f"{what} is a number of seconds (or a timedelta), zero or more")
    return float(value)


def to_bytes(value: Union[str, bytes], what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise InvalidArgument(f"{what} must be str or bytes, not {type(value).__name__}")


def strings(values: Optional[Iterable[str]], what: str) -> List[str]:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        raise InvalidArgument(f"{what} is a list of strings, not one string")
    out = list(values)
    for v in out:
        if not isinstance(v, str):
            raise InvalidArgument(f"{what} holds strings, not {type(v).__name__}")
    return out


def limits(vcpus=None, memory=None, disk=None, pids=None, ttl=None, idle_timeout=None,
           net_rate=None) -> Optional[pb.Limits]:
    """Limits as airlockd takes them; None when nothing was asked (airlockd's defaults)."""
    if all(v is None for v in (vcpus, memory, disk, pids, ttl, idle_timeout, net_rate)):
        return None
    out = pb.Limits()
    for name, value in (("vcpus", vcpus), ("pids", pids)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} is a whole number, zero or more")
            setattr(out, name, value)
    if memory is not None:
        out.memory_bytes = parse_size(memory, "memory")
    if disk is not None:
        out.disk_bytes = parse_size(disk, "disk")
    if net_rate is not None:
        out.net_bytes_per_second = parse_size(net_rate, "net_rate")
    if ttl is not None:
        out.ttl_seconds = int(parse_seconds(ttl, "ttl"))
    if idle_timeout is not None:
        out.idle_timeout_seconds = int(parse_seconds(idle_timeout, "idle_timeout"))
    return out


def _op_read(spec: str, reference: str) -> bytes:
    """The value 1Password's `op read` prints for reference, as this process's user."""
    try:
        r = subprocess.run(["op", "read", reference], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30, check=False)
    except FileNotFoundError:
        raise InvalidArgument(f"secret {spec}: 1Password's `op` is not on the PATH") from None
    except subprocess.TimeoutExpired:
        raise InvalidArgument(f"secret {spec}: `op read` gave no answer within 30s") from None
    if r.returncode != 0:
        why = r.stderr.decode(errors="replace").splitlines()[:1]
        raise InvalidArgument(f"secret {spec}: `op read` failed: {why[0] if why else r.returncode}")
    return r.stdout[:-1] if r.stdout.endswith(b"\n") else r.stdout


def secrets(values: Optional[Mapping[str, Union[str, bytes]]]) -> List[pb.SecretBinding]:
    """{"NAME=SOURCE@HOST": value-or-None}: a protected credential per entry. For env:, file: and
    op:// sources the value is read here, with this process's rights, as the CLI does; shared:
    sources are read by airlockd."""
    if values is not None and not isinstance(values, Mapping):
        raise InvalidArgument("secrets map \"NAME=SOURCE@HOST[,HOST...]\" to a value (or None "
                              "to read env: and file: sources here)")
    out = []
    for spec, value in (values or {}).items():
        if not isinstance(spec, str):
            raise InvalidArgument("a secret is NAME=SOURCE@HOST[,HOST...]")
        b = pb.SecretBinding(spec=spec)
        if value is None:
            source = spec.split("=", 1)[1].split("@", 1)[0] if "=" in spec else ""
            if source.startswith("env:"):
                env = os.environ.get(source[4:])
                if env is None:
                    raise InvalidArgument(f"secret {spec}: ${source[4:]} is not set")
                b.value = env.encode()
            elif source.startswith("file:"):
                with open(source[5:], "rb") as f:
                    b.value = f.read(1 << 20)
            elif source.startswith("op://"):
                b.value = _op_read(spec, source)
        else:
            b.value = to_bytes(value, "a secret's value")
        out.append(b)
    return out


def volume_mounts(values) -> List[pb.VolumeMount]:
    """Volumes to attach: each "NAME:/PATH" (read-write) or "NAME:/PATH:ro" (read-only), as
    airlock's --volume."""
    out = []
    for spec in strings(values, "volumes"):
        name, _, path = spec.partition(":")
        read_only = path.endswith(":ro")
        if read_only or path.endswith(":rw"):
            path = path[:-3]
        if not name or not path.startswith("/"):
            raise InvalidArgument(f"{spec!r} is not a volume to attach: write NAME:/PATH or "
                                  "NAME:/PATH:ro (like \"data:/data:ro\")")
        out.append(pb.VolumeMount(name=name, path=path, read_only=read_only))
    return out


def create_request(image, limits_kwargs, allow, presets, secret_map, workspace=None,
                   volumes=None, host=None):
    if host is not None and not isinstance(host, str):
        raise InvalidArgument("host is a host id of the fleet (a string, like \"host-b\")")
    request = pb.CreateSessionRequest(image=image or "", allow=strings(allow, "allow"),
                                      allow_preset=strings(presets, "presets"),
                                      secrets=secrets(secret_map), workspace=workspace or "",
                                      volumes=volume_mounts(volumes), host=host or "")
    lim = limits(**limits_kwargs)
    if lim is not None:
        request.limits.CopyFrom(lim)
    return request


def exec_start(argv: Argv, *, session_id="", stdin=False, env=None, cwd=None, user=None,
               timeout=None, image=None, limits_kwargs=None, allow=None, presets=None,
               secret_map=None, volumes=None) -> pb.ExecStart:
    if isinstance(argv, (str, bytes)):
        raise InvalidArgument("argv is a list (like [\"python3\", \"-c\", \"pass\"]), not one "
                              "string; for a shell line use [\"sh\", \"-c\", LINE]")
    start = pb.ExecStart(session_id=session_id, argv=[to_bytes(a, "argv") for a in argv],
                         stdin=bool(stdin), timeout_seconds=parse_seconds(timeout, "timeout"))
    if env:
        if not isinstance(env, Mapping):
            raise InvalidArgument("env is a mapping of names to values")
        start.env.extend(to_bytes(k, "env") + b"=" + to_bytes(v, "env") for k, v in env.items())
    if cwd is not None:
        start.cwd = to_bytes(cwd, "cwd")
    if user is not None:
        start.user = str(user)
    if not session_id:
        start.image = image or ""
        lim = limits(**(limits_kwargs or {}))
        if lim is not None:
            start.limits.CopyFrom(lim)
        start.allow.extend(strings(allow, "allow"))
        start.allow_preset.extend(strings(presets, "presets"))
        start.secrets.extend(secrets(secret_map))
        start.volumes.extend(volume_mounts(volumes))
    return start


def stdin_pieces(data: Union[bytes, str, Iterable[bytes], None]):
    """stdin as pieces: bytes (or str) whole, or any iterable of bytes."""
    if data is None:
        return
    if isinstance(data, str):
        data = data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        for at in range(0, len(data), STDIN_PIECE):
            yield data[at:at + STDIN_PIECE]
        return
    for piece in data:
        yield to_bytes(piece, "a piece of stdin")


FILE_PIECE = 1 << 20  # airlockd takes a file in messages of at most 1 MiB
FileData = Union[bytes, str, Iterable[bytes], "typing.BinaryIO"]


def file_mode(mode) -> int:
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise InvalidArgument(f"a file's mode is its permission bits, like 0o644, not {mode!r}")
    return mode


def _split(piece) -> Iterator[bytes]:
    if isinstance(piece, str):
        piece = piece.encode()
    if not isinstance(piece, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"a piece of content must be bytes, not {type(piece).__name__}")
    piece = bytes(piece)
    for at in range(0, len(piece), FILE_PIECE):
        yield piece[at:at + FILE_PIECE]


class Upload:
    """The messages of one upload stream (WriteFileStream, Images.Import): ``first`` names
    what is sent, later messages are ``kind`` with data, and the last says ``last``. The
    content is bytes or str (UTF-8), a binary file (anything with ``read``), or an iterable of
    bytes (in the asyncio client, also an async iterable). Content that fails part-way (an
    iterator that raises) ends the stream without ``last``, so airlockd keeps nothing of it;
    ``error`` keeps why."""

    def __init__(self, first, data):
        self.first = first
        self.kind = type(first)
        if isinstance(data, (bytes, bytearray, memoryview, str)):
            self.source = iter([data])
        elif hasattr(data, "read"):
            self.source = iter(lambda: data.read(FILE_PIECE), b"")
        elif hasattr(data, "__aiter__") or (isinstance(data, Iterable)
                                            and not isinstance(data, Mapping)):
            self.source = data
        else:
            raise InvalidArgument("content to send is bytes, str, a binary file or an "
                                  f"iterable of bytes, not {type(data).__name__}")
        self.error: Optional[BaseException] = None
        self.bytes = 0

    def _message(self, data: bytes = b"", last: bool = False):
        if self.first is not None:
            m, self.first = self.first, None
            m.data, m.last = data, last
            return m
        return self.kind(data=data, last=last)

    def messages(self) -> Iterator:
        try:
            for piece in self.source:
                for part in _split(piece):
                    self.bytes += len(part)
                    yield self._message(part)
        except Exception as e:  # noqa: BLE001 - raised again by the caller, after the call
            self.error = e
            return
        yield self._message(last=True)

    async def async_messages(self):
        if not hasattr(self.source, "__aiter__"):
            for m in self.messages():
                yield m
            return
        try:
            async for piece in self.source:
                for part in _split(piece):
                    self.bytes += len(part)
                    yield self._message(part)
        except Exception as e:  # noqa: BLE001
            self.error = e
            return
        yield self._message(last=True)


def file_upload(session_id: str, path, data, mode) -> Upload:
    return Upload(pb.WriteFileChunk(session_id=session_id, path=guest_path(path),
                                    mode=file_mode(mode)), data)


def image_upload(data, name: str, rootfs: bool) -> Upload:
    if not isinstance(name, str) or (rootfs and not name):
        raise InvalidArgument("name the image (like team/tool:1); a root filesystem tar has "
                              "no name of its own")
    return Upload(pb.ImportImageChunk(name=name, rootfs=bool(rootfs)), data)


def read_file_request(session_id: str, path, max_bytes) -> pb.ReadFileStreamRequest:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise InvalidArgument(f"max_bytes is a number of bytes (0: no limit), not {max_bytes!r}")
    return pb.ReadFileStreamRequest(session_id=session_id, path=guest_path(path),
                                    max_bytes=max_bytes)


_STATES = {
    pb.SESSION_STATE_CREATING: "creating",
    pb.SESSION_STATE_RUNNING: "running",
    pb.SESSION_STATE_STOPPED: "stopped",
    pb.SESSION_STATE_FAILED: "failed",
    pb.SESSION_STATE_PAUSED: "paused",
}


@dataclass(frozen=True)
class Limits:
    vcpus: int
    memory: int
    pids: int
    disk: int
    ttl: int
    idle_timeout: int
    net_rate: int


@dataclass(frozen=True)
class SessionInfo:
    """A session as airlockd last described it."""
    id: str
    image: str
    image_digest: str
    state: str          # "creating", "running", "paused", "stopped" or "failed"
    reason: str         # why it paused, stopped or failed
    hostname: str
    created: datetime.datetime
    last_used: datetime.datetime
    limits: Limits


class SessionBase:
    """What a session is in both clients: its last known state (``info``), ``files``,
    ``network``, ``ports``, ``workspace`` and ``secrets``; each client's Session adds the calls,
    sync or async. Sessions come from the client (create_session, get_session, sessions, fork),
    not from this constructor."""
    _files_class: type
    _network_class: type
    _ports_class: type
    _workspace_class: type
    _secrets_class: type

    def __init__(self, client, info: SessionInfo):
        self._client = client
        self.info = info
        self.files = self._files_class(self)
        self.network = self._network_class(self)
        self.ports = self._ports_class(self)
        self.workspace = self._workspace_class(self)
        self.secrets = self._secrets_class(self)

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def state(self) -> str:
        return self.info.state

    def __repr__(self) -> str:
        module = type(self).__module__.replace(".client", "")
        return f"<{module}.Session {self.id} {self.info.state} {self.info.image}>"


def _time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


def session_info(s: pb.Session) -> SessionInfo:
    lim = s.limits
    return SessionInfo(
        id=s.id, image=s.image, image_digest=s.image_digest,
        state=_STATES.get(s.state, "unknown"), reason=s.reason, hostname=s.hostname,
        created=_time(s.created_unix_ms), last_used=_time(s.last_used_unix_ms),
        limits=Limits(vcpus=lim.vcpus, memory=lim.memory_bytes, pids=lim.pids,
                      disk=lim.disk_bytes, ttl=lim.ttl_seconds,
                      idle_timeout=lim.idle_timeout_seconds, net_rate=lim.net_bytes_per_second))


@dataclass(frozen=True)
class Output:
    """A piece of a command's output as it came: ``stream`` is "stdout" or "stderr"."""
    stream: str
    data: bytes


@dataclass(frozen=True)
class Exit:
    """How a command ended: its exit code (128+N after signal N), and why, when Airlock ended it."""
    exit_code: int
    signal: int = 0
    timed_out: bool = False
    message: str = ""


@dataclass
class ExecResult:
    """A finished command: its exit and all its output, stdout and stderr apart."""
    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    signal: int = 0
    timed_out: bool = False
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def exec_event(response: pb.ExecResponse):
    kind = response.WhichOneof("kind")
    if kind == "stdout":
        return Output("stdout", response.stdout)
    if kind == "stderr":
        return Output("stderr", response.stderr)
    if kind == "exit":
        e = response.exit
        return Exit(exit_code=e.code, signal=e.signal, timed_out=e.timed_out, message=e.message)
    return None


class Collector:
    """Gathers a command's events into an ExecResult."""

    def __init__(self):
        self.stdout: List[bytes] = []
        self.stderr: List[bytes] = []

    def add(self, event) -> None:
        if isinstance(event, Output):
            (self.stdout if event.stream == "stdout" else self.stderr).append(event.data)

    def result(self, exit_: Exit) -> ExecResult:
        return ExecResult(exit_code=exit_.exit_code, stdout=b"".join(self.stdout),
                          stderr=b"".join(self.stderr), signal=exit_.signal,
                          timed_out=exit_.timed_out, message=exit_.message)


def timed_out(result: ExecResult, argv: Argv) -> Timeout:
    return Timeout(f"{_name(argv)} ran past its timeout and was killed", result=result)


def _name(argv: Argv) -> str:
    if not argv:
        return "the image's command"
    a = argv[0]
    return a.decode(errors="replace") if isinstance(a, bytes) else str(a)


def failed_message(result: ExecResult, argv: Argv) -> str:
    why = f": {result.message}" if result.message else ""
    return f"{_name(argv)} exited with {result.exit_code}{why}"


def may_have_failed(result: ExecResult) -> bool:
    """Whether Airlock ended the command (exit 125 with a reason): then the session's state
    says whether its VM died, which conclude() reports as SessionFailed."""
    return result.exit_code == EXIT_AIRLOCK_ERROR and bool(result.message)


def conclude(result: ExecResult, argv: Argv, check: bool,
             session: Optional["SessionInfo"] = None) -> ExecResult:
    """The result of exec(), or the error it raises: Timeout, SessionFailed (given the
    session's state when may_have_failed), CommandFailed with check."""
    if result.timed_out:
        raise timed_out(result, argv)
    if session is not None and session.state == "failed":
        raise SessionFailed(result.message, reason=session.reason)
    if check and result.exit_code != 0:
        raise CommandFailed(failed_message(result, argv), result=result)
    return result


def wants_state(error) -> bool:
    """Whether a session's state could explain this error (see explained())."""
    return isinstance(error, FailedPrecondition) and not isinstance(error, SessionFailed)


def explained(error, session: Optional["SessionInfo"]):
    """A FAILED_PRECONDITION on a session whose VM failed becomes SessionFailed."""
    if session is not None and session.state == "failed":
        return SessionFailed(error.message, reason=session.reason, code=error.code)
    return error


@dataclass(frozen=True)
class LogEntry:
    time: datetime.datetime
    exec_id: int
    stream: str   # "stdout", "stderr" or "event"
    data: bytes


_LOG_STREAMS = {1: "stdout", 2: "stderr", 3: "event"}


def log_entry(e: pb.LogEntry) -> LogEntry:
    return LogEntry(_time(e.unix_ms), e.exec_id, _LOG_STREAMS.get(e.stream, "unknown"), e.data)


@dataclass(frozen=True)
class Metrics:
    """A sample of a guest's metrics."""
    time: datetime.datetime
    cpu_percent: float         # of all vCPUs together, over the last interval
    memory_used: int
    memory_total: int
    processes: int
    disk_used: int
    disk_total: int
    # Egress since the VM started (or was last resumed): bytes of connections that ended, those
    # connections, and the DNS answers and connections refused.
    net_bytes_out: int = 0
    net_bytes_in: int = 0
    net_connections: int = 0
    net_denied: int = 0


def metrics(m: pb.MetricsSample) -> Metrics:
    return Metrics(_time(m.unix_ms), m.cpu_percent, m.memory_used_bytes, m.memory_total_bytes,
                   m.processes, m.disk_used_bytes, m.disk_total_bytes, m.net_bytes_out,
                   m.net_bytes_in, m.net_connections, m.net_denied)


@dataclass(frozen=True)
class TimelineEvent:
    """One thing that happened in a session (Session.timeline()). Every string from the guest
    (output, transcripts, file names) is hostile: show it as text."""
    seq: int                   # 1, 2, ... in time order
    time: datetime.datetime
    kind: str                  # session.create, session.pause, exec, file.write, net.connect, ...
    summary: str               # one line for a person
    actor: str                 # who asked (uid:0, cert:NAME, airlockd), or the agent's name
    failed: bool               # a denial, a failure, a non-zero exit
    # kind "exec" (and agent.*): the command, where and as whom, how long (None: still
    # running, or airlockd lost it), how it ended, and its output (stdout and stderr
    # interleaved as they came, from its start, cut short; output_total: all it stored).
    exec_id: int = 0
    argv: Tuple[bytes, ...] = ()
    user: str = ""
    cwd: str = ""
    tty: bool = False
    duration: Optional[datetime.timedelta] = None
    exit_code: int = 0
    output: bytes = b""
    output_total: int = 0
    # agent.*: the tool call's id, the tool, and the text (a message, input as JSON, a result).
    tool_id: str = ""
    tool: str = ""
    text: bytes = b""


def timeline_event(e: pb.TimelineEvent) -> TimelineEvent:
    return TimelineEvent(
        seq=e.seq, time=_time(e.unix_ms), kind=e.kind, summary=e.summary, actor=e.actor,
        failed=e.failed, exec_id=e.exec_id, argv=tuple(e.argv), user=e.user, cwd=e.cwd,
        tty=e.tty,
        duration=None if e.duration_ms < 0 else datetime.timedelta(milliseconds=e.duration_ms),
        exit_code=e.exit_code, output=e.output, output_total=e.output_total, tool_id=e.tool_id,
        tool=e.tool, text=e.text)


@dataclass(frozen=True)
class NetworkRule:
    rule: str
    source: str
    deny: bool
    expires: Optional[datetime.datetime]


def network_rules(policy: pb.NetworkPolicy) -> List[NetworkRule]:
    return [NetworkRule(r.rule, r.source, r.deny,
                        _time(r.expires_unix_ms) if r.expires_unix_ms else None)
            for r in policy.rules]


@dataclass(frozen=True)
class Exposure:
    """A guest port reached as a URL through airlockd's HTTP gateway."""
    port: int
    url: str            # to open: carries ?airlock_token=TOKEN unless public
    token: str          # send as the header X-Airlock-Token; "" when public
    public: bool
    host: str           # PORT-ID.DOMAIN, the Host a request names
    created: datetime.datetime


def exposure(e: pb.Exposure) -> Exposure:
    return Exposure(e.port, e.url, e.token, getattr(e, "public"), e.host, _time(e.created_unix_ms))


def check_port(port) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidArgument(f"{port!r} is not a TCP port; give one from 1 to 65535")
    return port


@dataclass(frozen=True)
class Image:
    name: str
    digest: str
    size: int
    created: datetime.datetime
    source: str = ""    # what it came from: a registry reference, an archive, a build


def image(i: pb.Image) -> Image:
    return Image(i.name, i.digest, i.size_bytes,
                 datetime.datetime.fromtimestamp(i.created_unix, tz=datetime.timezone.utc),
                 i.source)


def images(reply: pb.ListImagesResponse) -> List[Image]:
    return [image(i) for i in reply.images]


@dataclass(frozen=True)
class Volume:
    """A named disk of yours that outlives sessions (airlock volume --help)."""
    name: str
    size: int                  # its filesystem's size in bytes
    snapshot: bool             # a read-only copy (NAME@TAG)
    origin: str                # "", "snapshot of NAME", "fork of NAME for session ID"
    generation: int            # grows with every import
    created: datetime.datetime
    holders: List[str]         # sessions (running or paused) that attach it now
    held_read_write: bool      # one of them writes it


def volume(v: pb.Volume) -> Volume:
    return Volume(v.name, v.size_bytes, v.read_only, v.origin, v.generation,
                  _time(v.created_unix_ms), list(v.holders), v.held_read_write)


def volume_upload(data, name: str) -> Upload:
    if not isinstance(name, str) or not name:
        raise InvalidArgument("name the volume to import into")
    return Upload(pb.ImportVolumeChunk(name=name), data)


def create_volume_request(name, size) -> pb.CreateVolumeRequest:
    if not isinstance(name, str) or not name:
        raise InvalidArgument("name the volume, like \"data\"")
    return pb.CreateVolumeRequest(name=name, size_bytes=parse_size(size, "size"))


def check_reference(reference) -> str:
    if not isinstance(reference, str) or not reference:
        raise InvalidArgument("name an image to pull, like python:3.11-slim")
    return reference


def build_request(tag, suite, packages, npm, env) -> pb.BuildImageRequest:
    """An Images.Build request; airlockd checks what the strings say."""
    def strings(value, what):
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise InvalidArgument(f"{what} is a list of strings")
        return list(value)
    if not isinstance(tag, str) or not tag:
        raise InvalidArgument("give the image a name (tag), like team/devbox:1")
    if not isinstance(suite, str):
        raise InvalidArgument("suite is a Debian suite name, like bookworm")
    request = pb.BuildImageRequest(suite=suite, tag=tag,
                                   packages=strings(packages, "packages"),
                                   npm=strings(npm, "npm"))
    if env:
        if not isinstance(env, Mapping):
            raise InvalidArgument("env is a mapping of names to values")
        for k, v in env.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidArgument("env maps strings to strings")
            request.env.append(f"{k}={v}")
    return request


@dataclass(frozen=True)
class Event:
    """Something that happened to a session (Client.watch): ``kind`` is "state" (the session is
    now in ``state``, for ``reason``), "exec_start" (``exec_id``, ``argv``), "exec_exit"
    (``exec_id``, ``exit_code``, ``reason``), "denied" (egress refused ``destination``, for
    ``reason``) or "removed". ``lost``: events this watcher missed just before (it fell behind).
    ``host``: in a fleet, the other host that has the session ("": airlockd's own host)."""
    kind: str
    time: datetime.datetime
    session_id: str
    state: str = ""
    reason: str = ""
    exec_id: int = 0
    argv: Tuple[bytes, ...] = ()
    exit_code: int = 0
    destination: str = ""
    lost: int = 0
    host: str = ""


_EVENT_KINDS = {1: "state", 2: "exec_start", 3: "exec_exit", 4: "denied", 5: "removed"}


def event(e: pb.SessionEvent) -> Event:
    kind = _EVENT_KINDS.get(e.kind, "unknown")
    return Event(kind=kind, time=_time(e.unix_ms), session_id=e.session_id,
                 state=_STATES.get(e.state, "") if kind == "state" else "", reason=e.reason,
                 exec_id=e.exec_id, argv=tuple(e.argv), exit_code=e.exit_code,
                 destination=e.destination, lost=e.lost, host=e.host)


@dataclass(frozen=True)
class Vm:
    """A live VM process on airlockd's host (the caller's own)."""
    session_id: str
    pid: int
    accelerator: str   # "kvm" or "tcg"
    vcpus: int
    host_cpu_percent: float
    host_rss: int


def vms(reply: pb.ListVmsResponse) -> List[Vm]:
    return [Vm(v.session_id, v.pid, v.accelerator, v.vcpus, v.host_cpu_percent,
               v.host_rss_bytes) for v in reply.vms]


def guest_path(path: Union[str, bytes]) -> bytes:
    p = to_bytes(path, "path")
    if not p.startswith(b"/"):
        raise InvalidArgument("give an absolute path in the guest, like /root/data.txt")
    return p


def check_session_id(session_id) -> str:
    if not isinstance(session_id, str) or not session_id:
        raise InvalidArgument("a session id is a non-empty string (as create_session returned)")
    return session_id


@dataclass(frozen=True)
class TLS:
    """Mutual TLS for airlockd's TCP listener: the CA that signed airlockd's certificate, and
    this client's certificate and key (PEM files). ``server_name`` overrides the name checked in
    airlockd's certificate (when it is not the host you dial)."""
    ca: str
    cert: str
    key: str
    server_name: Optional[str] = None

    def credentials(self):
        import grpc

        def read(path):
            with open(path, "rb") as f:
                return f.read()
        return grpc.ssl_channel_credentials(root_certificates=read(self.ca),
                                            private_key=read(self.key),
                                            certificate_chain=read(self.cert))

    def options(self):
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


def target(address: Optional[str], tls: Optional[TLS]) -> Tuple[str, bool]:
    """The gRPC target for an address, and whether it is TCP (which needs TLS)."""
    if address is None:
        address = os.environ.get("AIRLOCK_SOCKET") or DEFAULT_SOCKET
    if address.startswith("unix:"):
        return address, False
    if address.startswith("/"):
        return "unix:" + address, False
    if tls is None:
        raise InvalidArgument(f"{address}: airlockd listens on TCP only with mutual TLS; give "
                              "tls=airlock.TLS(ca=..., cert=..., key=...), or a socket path")
    return address, True


@dataclass(frozen=True)
class VersionInfo:
    """What airlockd speaks (Client.version())."""
    level: int                 # its API level
    oldest_client_level: int   # the oldest client level it still serves
    daemon_version: str        # airlockd's release, like "0.1.0"


def version_request() -> pb.VersionRequest:
    return pb.VersionRequest(client_level=API_LEVEL, client=f"python-sdk {VERSION}")


def version_info(reply: pb.VersionReply) -> VersionInfo:
    return VersionInfo(reply.level, reply.oldest_client_level, reply.daemon_version)


def checked_version(reply: pb.VersionReply) -> VersionInfo:
    """airlockd's answer to Api.Version, or VersionMismatch when it and this SDK cannot work
    together: a call the SDK makes could otherwise fail later, far from the reason."""
    v = version_info(reply)
    if v.level < API_LEVEL:
        raise VersionMismatch(f"airlockd {v.daemon_version} speaks API level {v.level}; this SDK "
                              f"needs {API_LEVEL}: upgrade airlockd", v.level, API_LEVEL)
    if API_LEVEL < v.oldest_client_level:
        raise VersionMismatch(f"airlockd {v.daemon_version} speaks API levels "
                              f"{v.oldest_client_level} to {v.level}; this SDK speaks "
                              f"{API_LEVEL}: upgrade the SDK", v.level, API_LEVEL)
    return v


def version_error(error: AirlockError) -> AirlockError:
    """Api.Version's failure as the SDK says it: an airlockd that does not know the call is
    older than API levels; a refusal (FAILED_PRECONDITION) says the SDK is too old."""
    if error.code == grpc.StatusCode.UNIMPLEMENTED:
        return VersionMismatch(f"airlockd predates API levels (it does not answer Api.Version); "
                               f"this SDK needs level {API_LEVEL}: upgrade airlockd", 0,
                               API_LEVEL, code=error.code)
    if error.code == grpc.StatusCode.FAILED_PRECONDITION:
        return VersionMismatch(error.message, 0, API_LEVEL, code=error.code)
    return error


@dataclass(frozen=True)
class WorkspaceBase:
    """Where a session's workspace came from: the project on the client's host when the session
    was created (``airlock session create --workspace DIR``)."""
    path: str                  # the project directory on that host
    head: str                  # its HEAD commit (git projects), else ""
    branch: str                # its branch then ("main"); "" when detached
    tree_digest: str           # "sha256:..." of its manifest
    files: int
    bytes: int                 # of file content


@dataclass(frozen=True)
class WorkspaceEntry:
    """A file or symlink of a workspace's base."""
    path: bytes                # relative: b"src/main.c"
    mode: int                  # st_mode: its type (regular file or symlink) and permissions
    size: int
    sha256: str                # regular files: hex
    target: bytes              # symlinks


@dataclass(frozen=True)
class WorkspaceInfo:
    """A session's workspace (Session.workspace.info())."""
    session_id: str
    base: WorkspaceBase
    entries: List[WorkspaceEntry]  # the base's manifest, with info(entries=True)
    synced: Optional[datetime.datetime]  # when `airlock sync` last advanced the base
    synced_paths: List[bytes]      # paths that sync wrote into the session


@dataclass(frozen=True)
class WorkspaceChange:
    """What a session changed at one path of /workspace against its base. Modes are st_mode
    (0: absent on that side); contents are None where not shown (binary, too_large, omitted)."""
    kind: str                  # "added", "modified" or "deleted"
    path: bytes
    old_mode: int
    new_mode: int
    old_size: int
    new_size: int
    old_target: bytes          # symlinks
    new_target: bytes
    binary: bool               # a side holds a NUL byte
    too_large: bool            # a side is over 1 MiB
    omitted: bool              # the diff's content budget ran out
    old_content: Optional[bytes]
    new_content: Optional[bytes]


@dataclass(frozen=True)
class WorkspaceBundleInfo:
    """A session's new commits since its base. ``log``, ``uncommitted_stat`` and
    ``uncommitted_diff`` come from the guest: untrusted text."""
    base_commit: str           # the commit the session started from
    head_commit: str           # the bundle's tip
    branch: str                # the session's branch ("main"; "HEAD" when detached)
    ref: str                   # the one ref the bundle holds
    commits: int               # new commits since the base, uncommitted work included
    log: str                   # `git log --stat` of them
    uncommitted_stat: str      # `git diff --stat` of the work not committed
    uncommitted_diff: str      # with dry_run: that work as a diff


@dataclass(frozen=True)
class WorkspaceBundle:
    """Session.workspace.bundle(): the commits' info and the git bundle (``git fetch`` takes
    it); ``data`` is b"" for a dry run or when the bundle went to a file."""
    info: WorkspaceBundleInfo
    data: bytes


def workspace_base(b: pb.WorkspaceBase) -> WorkspaceBase:
    return WorkspaceBase(b.path, b.head, b.branch, b.tree_digest, b.files, getattr(b, "bytes"))


def workspace_info(w: pb.WorkspaceInfo) -> WorkspaceInfo:
    return WorkspaceInfo(
        session_id=w.session_id, base=workspace_base(w.base),
        entries=[WorkspaceEntry(e.path, e.mode, e.size, e.sha256, e.target) for e in w.entries],
        synced=_time(w.synced_unix_ms) if w.synced_unix_ms else None,
        synced_paths=list(w.synced))


_CHANGE_KINDS = {0: "added", 1: "modified", 2: "deleted"}


def workspace_change(w: pb.WorkspaceChange) -> WorkspaceChange:
    return WorkspaceChange(
        kind=_CHANGE_KINDS.get(w.kind, "unknown"), path=w.path, old_mode=w.old_mode,
        new_mode=w.new_mode, old_size=w.old_size, new_size=w.new_size, old_target=w.old_target,
        new_target=w.new_target, binary=w.binary, too_large=w.too_large, omitted=w.omitted,
        old_content=w.old_content if w.has_old_content else None,
        new_content=w.new_content if w.has_new_content else None)


def bundle_request(session_id: str, include_uncommitted, dry_run,
                   branch) -> pb.WorkspaceBundleRequest:
    if not isinstance(branch, str):
        raise InvalidArgument("branch is the name of the branch you will make of the bundle")
    return pb.WorkspaceBundleRequest(session_id=session_id,
                                     include_uncommitted=bool(include_uncommitted),
                                     dry_run=bool(dry_run), branch=branch)


def bundle_info(i: pb.WorkspaceBundleInfo) -> WorkspaceBundleInfo:
    return WorkspaceBundleInfo(i.base_commit, i.head_commit, i.branch, i.ref, i.commits, i.log,
                               i.uncommitted_stat, i.uncommitted_diff)


class BundleReader:
    """Takes Workspaces.Bundle's messages: the info first, then the bundle's pieces, kept or
    written to ``to`` (a binary file) as they come."""

    def __init__(self, to=None):
        if to is not None and not hasattr(to, "write"):
            raise InvalidArgument("to is a binary file open for writing (or None to keep the "
                                  "bundle in memory)")
        self._to = to
        self._pieces: List[bytes] = []
        self.info: Optional[WorkspaceBundleInfo] = None

    def add(self, chunk: pb.WorkspaceBundleChunk) -> None:
        if chunk.HasField("info"):
            self.info = bundle_info(chunk.info)
        if chunk.data:
            if self._to is not None:
                self._to.write(chunk.data)
            else:
                self._pieces.append(chunk.data)

    def result(self) -> WorkspaceBundle:
        if self.info is None:
            raise AirlockError("airlockd ended the bundle without its info")
        return WorkspaceBundle(self.info, b"".join(self._pieces))


@dataclass(frozen=True)
class SecretInfo:
    """A secret bound to a session: its name, source, hosts and placeholder, never its value."""
    name: str
    source: str                # "env:OPENAI_API_KEY", "op://vault/item/field"
    hosts: List[str]
    body: bool                 # swapped in request bodies too
    placeholder: str           # what the guest holds in its environment instead of the value
    available: bool            # the value is in airlockd's memory (false after a restart for
                               # env: and file: sources, until set again)
    last_used: Optional[datetime.datetime]


def secret_infos(reply: pb.ListSecretsResponse) -> List[SecretInfo]:
    return [SecretInfo(s.name, s.source, list(s.hosts), s.body, s.placeholder, s.available,
                       _time(s.last_used_unix_ms) if s.last_used_unix_ms else None)
            for s in reply.secrets]


@dataclass(frozen=True)
class AuditRecord:
    """A record of the host's audit log."""
    seq: int                   # 1, 2, ... in the order written
    time: datetime.datetime
    principal: str             # who asked: uid:N, cert:NAME
    tenant: str                # whose sessions or images it concerned
    action: str                # session.create, file.read, network.allow, quota.refuse, ...
    target: str                # a session id, image name, path, ...
    outcome: str               # "ok..." or what went wrong
    hash: str                  # SHA-256 hex of the previous hash and this record's fields


@dataclass(frozen=True)
class AuditVerification:
    """Whether the audit log's hash chain is whole (Client.audit.verify())."""
    ok: bool
    records: int
    last_seq: int
    problem: str               # the first break in the chain; "" when ok
    first_bad_seq: int


def audit_request(since, limit) -> pb.ListAuditRequest:
    if since is None:
        since_ms = 0
    elif isinstance(since, datetime.datetime):
        if since.tzinfo is None:
            raise InvalidArgument("since is an aware datetime (with its timezone), like "
                                  "datetime.now(timezone.utc) - timedelta(hours=1)")
        since_ms = int(since.timestamp() * 1000)
    else:
        raise InvalidArgument(f"since is a datetime or None, not {type(since).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidArgument("limit is a number of records (0: airlockd's default, 1000)")
    return pb.ListAuditRequest(since_unix_ms=since_ms, limit=limit)


def audit_record(r: pb.AuditRecord) -> AuditRecord:
    return AuditRecord(r.seq, _time(r.unix_ms), r.principal, r.tenant, r.action, r.target,
                       r.outcome, r.hash)


def audit_verification(v: pb.AuditVerification) -> AuditVerification:
    return AuditVerification(v.ok, v.records, v.last_seq, v.problem, v.first_bad_seq)
