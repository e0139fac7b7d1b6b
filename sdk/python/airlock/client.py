"""The synchronous client. See the package's documentation for an example."""
from __future__ import annotations

import contextlib
import datetime
import queue
import socket
import threading
from typing import (BinaryIO, Callable, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Union)

import grpc

from airlock import _common as c
from airlock.errors import AirlockError, InvalidArgument, Unavailable, from_rpc_error
from airlock.v1 import airlock_pb2 as pb
from airlock.v1 import airlock_pb2_grpc as rpc


@contextlib.contextmanager
def _translated():
    try:
        yield
    except grpc.RpcError as e:
        raise from_rpc_error(e) from None


class Client:
    """A connection to airlockd.

    ``Client()`` uses the local socket ($AIRLOCK_SOCKET, else /run/airlock/airlockd.sock);
    ``Client("/path/to.sock")`` another socket; ``Client("host:7443", tls=TLS(...))`` airlockd's
    TCP listener with mutual TLS. The caller's tenant is decided by airlockd (the socket's peer
    credentials, or the client certificate). Use it as a context manager, or call close().

    Connecting asks airlockd which API level it speaks and raises VersionMismatch, saying what
    to upgrade, when it and this SDK cannot work together (before any other call fails for it).
    ``audit`` is the host's audit log (root over the socket, and read-only operators).
    """

    def __init__(self, address: Optional[str] = None, *, tls: Optional[c.TLS] = None,
                 connect_timeout: float = 10.0):
        target, tcp = c.target(address, tls)
        options = list(c.CHANNEL_OPTIONS)
        if tcp:
            options += tls.options()
            self._channel = grpc.secure_channel(target, tls.credentials(), options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            where = target[5:] if target.startswith("unix:") else target
            raise Unavailable(f"airlockd does not answer at {where} (is it running, and may you "
                              "use it? members of the airlock group may use its socket)") from None
        self._api = rpc.ApiStub(self._channel)
        self._sessions = rpc.SessionsStub(self._channel)
        self._network = rpc.NetworkStub(self._channel)
        self._images = rpc.ImagesStub(self._channel)
        self._vms = rpc.VmsStub(self._channel)
        self._volumes = rpc.VolumesStub(self._channel)
        self._workspaces = rpc.WorkspacesStub(self._channel)
        self._secrets = rpc.SecretsStub(self._channel)
        self._audit = rpc.AuditStub(self._channel)
        self.audit = Audit(self)
        try:
            self._check_version(connect_timeout)
        except BaseException:
            self._channel.close()
            raise

    def _check_version(self, timeout: float) -> c.VersionInfo:
        try:
            reply = self._api.Version(c.version_request(), timeout=timeout)
        except grpc.RpcError as e:
            raise c.version_error(from_rpc_error(e)) from None
        return c.checked_version(reply)

    def version(self) -> c.VersionInfo:
        """What airlockd speaks: its API level, the oldest client level it serves, and its
        release (connecting already checked that they suit this SDK, ``airlock.API_LEVEL``)."""
        with _translated():
            return c.version_info(self._api.Version(c.version_request()))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create_session(self, image: Optional[str] = None, *, vcpus: Optional[int] = None,
                       memory: Optional[c.Size] = None, disk: Optional[c.Size] = None,
                       pids: Optional[int] = None, ttl: Optional[c.Seconds] = None,
                       idle_timeout: Optional[c.Seconds] = None,
                       net_rate: Optional[c.Size] = None, allow: Iterable[str] = (),
                       presets: Iterable[str] = (),
                       secrets: Optional[Dict[str, Union[str, bytes, None]]] = None,
                       volumes: Iterable[str] = (), host: Optional[str] = None) -> "Session":
        """Boots (or restores) a session and returns once it runs commands. ``image``: a name
        airlockd has (default: its default image). ``memory``/``disk``: bytes or "512m", "1g".
        ``allow``: egress rules ("pypi.org", "*.example.com:8443"); ``presets``: rule sets
        ("pypi", "npm", "github"). ``secrets``: {"NAME=env:VAR@api.host": None} binds protected
        credentials (env: and file: values are read here). ``volumes``: your volumes to attach,
        ["data:/data", "models:/models:ro"] (read-write by one session at a time). ``host``: in
        a fleet, the host to make it on (its airlockd --host-id); default: the one with room."""
        request = c.create_request(
            image, dict(vcpus=vcpus, memory=memory, disk=disk, pids=pids, ttl=ttl,
                        idle_timeout=idle_timeout, net_rate=net_rate), allow, presets, secrets,
            volumes=volumes, host=host)
        with _translated():
            return Session(self, c.session_info(self._sessions.Create(request)))

    @contextlib.contextmanager
    def session(self, image: Optional[str] = None, **kwargs) -> Iterator["Session"]:
        """create_session() as a context manager: the session is removed at the end."""
        s = self.create_session(image, **kwargs)
        try:
            yield s
        finally:
            with contextlib.suppress(AirlockError):
                s.remove()

    def get_session(self, session_id: str) -> "Session":
        with _translated():
            return Session(self, c.session_info(self._sessions.Get(
                pb.GetSessionRequest(id=c.check_session_id(session_id)))))

    def sessions(self) -> List["Session"]:
        """The caller's sessions, newest first (stopped and failed ones too)."""
        with _translated():
            reply = self._sessions.List(pb.ListSessionsRequest())
        return [Session(self, c.session_info(s)) for s in reply.sessions]

    def run(self, argv: c.Argv, *, image: Optional[str] = None,
            stdin: Union[bytes, str, Iterable[bytes], None] = None,
            env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
            user: Optional[str] = None, timeout: Optional[c.Seconds] = None,
            check: bool = False, allow: Iterable[str] = (), presets: Iterable[str] = (),
            secrets=None, volumes: Iterable[str] = (), **limits) -> c.ExecResult:
        """One command in a fresh session that is removed when it ends (``airlock run``)."""
        start = c.exec_start(argv, stdin=stdin is not None, env=env, cwd=cwd, user=user,
                             timeout=timeout, image=image, limits_kwargs=limits, allow=allow,
                             presets=presets, secret_map=secrets, volumes=volumes)
        return _finish(self, ExecStream._open(self, start, stdin), argv, check, None)

    def watch(self, session_id: Optional[str] = None) -> "Watch":
        """What happens to your sessions (or to one) from now on, as it happens: iterate the
        result for Event values; close() it (or leave its with-block) to stop."""
        request = pb.WatchRequest(session_id="" if session_id is None
                                  else c.check_session_id(session_id))
        return Watch(self._sessions.Watch(request))

    def images(self) -> List[c.Image]:
        """The images you see: root's, and those you pulled or imported."""
        with _translated():
            return c.images(self._images.List(pb.ListImagesRequest()))

    def pull_image(self, reference: str,
                   progress: Optional[Callable[[int, int], None]] = None) -> c.Image:
        """Has airlockd fetch an image from its registry into your images (root's are
        everyone's, anyone else's their own); ``progress(done_bytes, total_bytes)`` is called
        as it downloads."""
        request = pb.PullImageRequest(reference=c.check_reference(reference))
        result = None
        with _translated():
            for p in self._images.Pull(request):
                if p.HasField("image"):
                    result = c.image(p.image)
                elif progress is not None:
                    progress(p.done_bytes, p.total_bytes)
        if result is None:
            raise AirlockError("airlockd ended the pull without the image")
        return result

    def build_image(self, tag: str, *, suite: str, packages: Sequence[str] = (),
                    npm: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
                    progress: Optional[Callable[[str], None]] = None) -> c.Image:
        """Has airlockd build an image from Debian packages (mmdebstrap: minbase of ``suite``
        plus ``packages``) and, with ``npm`` (``NAME``, ``@SCOPE/NAME``, optionally
        ``@VERSION``), Node.js and those packages, whose install scripts run in a build VM
        without network; ``env`` is the image's environment. Tagged ``tag`` in your images
        (root's are everyone's, anyone else's their own). ``progress(line)`` is called with
        each step and the build VM's output. Bad input raises InvalidArgument before anything
        runs; a build takes minutes (mmdebstrap's result is cached on the host)."""
        request = c.build_request(tag, suite, packages, npm, env)
        result = None
        with _translated():
            for p in self._images.Build(request):
                if p.HasField("image"):
                    result = c.image(p.image)
                elif progress is not None:
                    progress(p.line)
        if result is None:
            raise AirlockError("airlockd ended the build without the image")
        return result

    def import_image(self, data: c.FileData, name: str = "", rootfs: bool = False) -> c.Image:
        """Imports an image archive (an OCI image layout or ``docker save`` tar, any
        compression) or, with ``rootfs=True``, a root filesystem tar, sent as it is read
        (bytes, a binary file or an iterable of bytes). ``name`` tags it (an archive's own
        name otherwise). Content that fails part-way imports nothing and its error is raised."""
        upload = c.image_upload(data, name, rootfs)
        try:
            return c.image(self._images.Import(upload.messages()))
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise from_rpc_error(e) from None

    def create_volume(self, name: str, size: c.Size) -> c.Volume:
        """A new, empty volume of ``size`` (bytes or "10g"), within your disk quota."""
        with _translated():
            return c.volume(self._volumes.Create(c.create_volume_request(name, size)))

    def volumes(self) -> List[c.Volume]:
        """Your volumes, with who holds each."""
        with _translated():
            return [c.volume(v) for v in self._volumes.List(pb.ListVolumesRequest()).volumes]

    def remove_volume(self, name: str) -> None:
        """Removes a volume no session (running or paused) attaches."""
        with _translated():
            self._volumes.Remove(pb.RemoveVolumeRequest(name=name))

    def snapshot_volume(self, name: str, snapshot: str) -> c.Volume:
        """A read-only copy of the volume as it is now, named ``snapshot`` (NAME@TAG)."""
        with _translated():
            return c.volume(self._volumes.Snapshot(
                pb.SnapshotVolumeRequest(name=name, snapshot=snapshot)))

    def import_volume(self, name: str, data: c.FileData) -> c.Volume:
        """Replaces the volume's content with a tar (any compression), sent as it is read
        (bytes, a binary file or an iterable of bytes), while no session attaches it. Content
        that fails part-way changes nothing and its error is raised."""
        upload = c.volume_upload(data, name)
        try:
            return c.volume(self._volumes.Import(upload.messages()))
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise from_rpc_error(e) from None

    def vms(self) -> List[c.Vm]:
        """The caller's live VM processes, with their host CPU and memory (``airlock ps``)."""
        with _translated():
            return c.vms(self._vms.List(pb.ListVmsRequest()))


class Watch:
    """A stream of Event values from Client.watch(); ends when closed."""

    def __init__(self, call):
        self._call = call

    def __iter__(self) -> Iterator[c.Event]:
        try:
            for e in self._call:
                yield c.event(e)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise from_rpc_error(e) from None

    def close(self) -> None:
        self._call.cancel()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Files:
    """A session's files, through its guest agent, of any size. A paused session is resumed
    first."""

    def __init__(self, session: "Session"):
        self._session = session

    def write(self, path: Union[str, bytes], data: c.FileData, mode: int = 0o644) -> int:
        """Creates or replaces the file (and its missing directories) with ``data``: bytes or
        str, a binary file, or an iterable of bytes, sent as it is read. The file changes only
        once all of it is in the guest: if ``data`` raises part-way, the old file stays and the
        exception is raised here. Returns the bytes written."""
        upload = c.file_upload(self._session.id, path, data, mode)
        try:
            return self._session._client._sessions.WriteFileStream(upload.messages()).bytes
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise self._session._explained(from_rpc_error(e)) from None

    def read(self, path: Union[str, bytes], max_bytes: int = 0) -> bytes:
        """The file's content; fails (OutOfRange) once it is larger than ``max_bytes``
        (0: no limit)."""
        return b"".join(self.read_stream(path, max_bytes))

    def read_stream(self, path: Union[str, bytes], max_bytes: int = 0) -> Iterator[bytes]:
        """The file's content in pieces as the guest reads it (for files too large to hold).
        Stopping early cancels the read."""
        request = c.read_file_request(self._session.id, path, max_bytes)
        call = self._session._client._sessions.ReadFileStream(request)
        try:
            for chunk in call:
                yield chunk.data
        except grpc.RpcError as e:
            raise self._session._explained(from_rpc_error(e)) from None
        finally:
            call.cancel()


class Network:
    """A session's egress policy: nothing is reachable until allowed."""

    def __init__(self, session: "Session"):
        self._session = session

    def rules(self) -> List[c.NetworkRule]:
        return c.network_rules(self._session._call(
            self._session._client._network.Get, pb.GetNetworkRequest(session_id=self._session.id)))

    def change(self, *, allow: Iterable[str] = (), presets: Iterable[str] = (),
               deny: Iterable[str] = (), remove: Iterable[str] = (),
               ttl: Optional[c.Seconds] = None) -> List[c.NetworkRule]:
        """Adds and removes rules in one step; applies at once to the running session."""
        request = pb.ChangeNetworkRequest(
            session_id=self._session.id, allow=c.strings(allow, "allow"),
            allow_preset=c.strings(presets, "presets"), deny=c.strings(deny, "deny"),
            remove=c.strings(remove, "remove"), ttl_seconds=c.parse_seconds(ttl, "ttl"))
        return c.network_rules(self._session._call(self._session._client._network.Change, request))


class Forward:
    """A listener here whose connections reach a port in a session's guest, each through
    airlockd (like ``airlock port-forward``): ``port`` is where it listens. Runs until
    ``close()`` (or the end of a ``with`` block)."""

    def __init__(self, session: "Session", remote: int, local: int, address: str):
        self._session = session
        self.remote = remote
        self._listener = socket.create_server((address, local))
        self.address, self.port = self._listener.getsockname()[:2]
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> "Forward":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stops listening; connections already open run to their end."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        def requests():
            yield pb.PortForwardRequest(start=pb.PortForwardStart(session_id=self._session.id,
                                                                  port=self.remote))
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    break
                yield pb.PortForwardRequest(data=data)
            yield pb.PortForwardRequest(eof=True)
        try:
            for r in self._session._client._sessions.ForwardPort(requests()):
                kind = r.WhichOneof("kind")
                if kind == "data":
                    conn.sendall(r.data)
                elif kind == "eof":
                    conn.shutdown(socket.SHUT_WR)
                elif kind == "reset":
                    break
        except (grpc.RpcError, OSError):
            pass  # the guest's server or this connection's client went away: it ends here too
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


class Ports:
    """A session's ports as URLs through airlockd's HTTP gateway (``airlock expose``), and
    forwarded to this machine (``forward``)."""

    def __init__(self, session: "Session"):
        self._session = session

    def expose(self, port: int, *, public: bool = False) -> c.Exposure:
        """The URL of a server listening on ``port`` in the guest, with a token unless public
        (exposing a port again gives it a new token)."""
        request = pb.ExposeRequest(session_id=self._session.id, port=c.check_port(port),
                                   public=bool(public))
        return c.exposure(self._session._call(self._session._client._sessions.Expose, request))

    def list(self) -> List[c.Exposure]:
        reply = self._session._call(self._session._client._sessions.ListExposures,
                                    pb.ListExposuresRequest(session_id=self._session.id))
        return [c.exposure(e) for e in reply.exposures]

    def unexpose(self, port: int) -> None:
        """Ends the exposure and cuts its open connections."""
        self._session._call(self._session._client._sessions.Unexpose,
                            pb.UnexposeRequest(session_id=self._session.id,
                                               port=c.check_port(port)))

    def forward(self, port: int, *, local_port: int = 0,
                address: str = "127.0.0.1") -> Forward:
        """Listens on ``address:local_port`` here (0: any free port, see ``Forward.port``); each
        connection reaches ``port`` in the guest, as ``airlock port-forward`` does."""
        c.check_port(port)
        if local_port != 0:
            c.check_port(local_port)
        self._session.refresh()  # a session that is not the caller's is said now
        return Forward(self._session, port, local_port, address)


class Workspace:
    """The project a session was created with, at /workspace in the guest, and what the session
    did to it. A session gets its workspace from the CLI (``airlock session create --workspace
    DIR``, or ``airlock agent``), which captures and uploads the project; the SDK works on such
    a session by id (``Client.get_session``). A session without one raises FailedPrecondition."""

    def __init__(self, session: "Session"):
        self._session = session

    def info(self, *, entries: bool = False) -> c.WorkspaceInfo:
        """Where the workspace came from (``base``), and with ``entries=True`` the base's
        manifest: every file and symlink."""
        return c.workspace_info(self._session._call(
            self._session._client._workspaces.Get,
            pb.GetWorkspaceRequest(session_id=self._session.id, entries=bool(entries))))

    def diff(self) -> List[c.WorkspaceChange]:
        """What the session changed in /workspace against its base, path by path (sorted; the
        .git directory left out), with contents where they are text and small."""
        request = pb.WorkspaceDiffRequest(session_id=self._session.id)
        try:
            return [c.workspace_change(w)
                    for w in self._session._client._workspaces.Diff(request)]
        except grpc.RpcError as e:
            raise self._session._explained(from_rpc_error(e)) from None

    def bundle(self, *, include_uncommitted: bool = False, dry_run: bool = False,
               branch: str = "", to: Optional[BinaryIO] = None) -> c.WorkspaceBundle:
        """The session's new commits since its base as a git bundle (``git fetch BUNDLE REF``
        brings them into the project, as ``airlock promote`` does). ``include_uncommitted``:
        what is not committed yet, committed on top in the bundle only; ``dry_run``: only the
        info; ``branch``: the name you will give it (for the audit log); ``to``: a binary file
        the bundle is written to as it comes, instead of ``data``."""
        request = c.bundle_request(self._session.id, include_uncommitted, dry_run, branch)
        reader = c.BundleReader(to)
        try:
            for chunk in self._session._client._workspaces.Bundle(request):
                reader.add(chunk)
        except grpc.RpcError as e:
            raise self._session._explained(from_rpc_error(e)) from None
        return reader.result()


class Secrets:
    """A session's secrets: names, sources, hosts and placeholders, never values (the guest
    holds only placeholders; airlockd swaps in the value on the way to the allowed hosts)."""

    def __init__(self, session: "Session"):
        self._session = session

    def list(self) -> List[c.SecretInfo]:
        return c.secret_infos(self._session._call(
            self._session._client._secrets.List,
            pb.ListSecretsRequest(session_id=self._session.id)))

    def set(self, secrets: Mapping[str, Union[str, bytes, None]]) -> List[c.SecretInfo]:
        """Binds secrets, {"NAME=SOURCE@HOST[,HOST...]": value}, or gives bound ones a new
        value or source (their placeholders stay). A value of None is read here for env: and
        file: sources, as create_session's ``secrets`` are. Returns them all."""
        request = pb.SetSecretsRequest(session_id=self._session.id, secrets=c.secrets(secrets))
        return c.secret_infos(self._session._call(self._session._client._secrets.Set, request))

    def remove(self, names: Iterable[str]) -> List[c.SecretInfo]:
        """Unbinds secrets by name; returns those left."""
        request = pb.RemoveSecretsRequest(session_id=self._session.id,
                                          names=c.strings(names, "names"))
        return c.secret_infos(self._session._call(self._session._client._secrets.Remove,
                                                  request))


class Audit:
    """The host's audit log: who did what, hash-chained (root over the socket, and read-only
    operators; anyone else gets PermissionDenied)."""

    def __init__(self, client: Client):
        self._client = client

    def list(self, since: Optional[datetime.datetime] = None,
             limit: int = 0) -> List[c.AuditRecord]:
        """The records from ``since`` (an aware datetime; None: the start) on: the newest
        ``limit`` (0: 1000), oldest first."""
        request = c.audit_request(since, limit)
        with _translated():
            return [c.audit_record(r) for r in self._client._audit.List(request)]

    def verify(self) -> c.AuditVerification:
        """Walks the whole chain and says whether a record was changed, removed or moved, and
        where."""
        with _translated():
            return c.audit_verification(self._client._audit.Verify(pb.VerifyAuditRequest()))


class Session(c.SessionBase):
    """One session. Its methods act on airlockd's session; ``info`` is its last known state
    (``refresh()`` asks again). As a context manager it is removed at the end."""
    _files_class = Files
    _network_class = Network
    _ports_class = Ports
    _workspace_class = Workspace
    _secrets_class = Secrets

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(AirlockError):
            self.remove()

    def _call(self, method, request):
        try:
            return method(request)
        except grpc.RpcError as e:
            raise self._explained(from_rpc_error(e)) from None

    def _explained(self, error: AirlockError) -> AirlockError:
        return c.explained(error, self._state()) if c.wants_state(error) else error

    def _state(self) -> Optional[c.SessionInfo]:
        """The session's state now, or None if airlockd cannot say."""
        with contextlib.suppress(AirlockError, grpc.RpcError):
            return self.refresh()
        return None

    def refresh(self) -> c.SessionInfo:
        self.info = c.session_info(self._call(self._client._sessions.Get,
                                              pb.GetSessionRequest(id=self.id)))
        return self.info

    def exec(self, argv: c.Argv, *, stdin: Union[bytes, str, Iterable[bytes], None] = None,
             env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
             user: Optional[str] = None, timeout: Optional[c.Seconds] = None,
             check: bool = False) -> c.ExecResult:
        """Runs a command and waits for it: its exit code, stdout and stderr. A timeout raises
        airlock.Timeout (with what it printed); ``check=True`` raises CommandFailed on a
        non-zero exit; a session whose VM died raises SessionFailed."""
        stream = self.exec_stream(argv, stdin=stdin, env=env, cwd=cwd, user=user,
                                  timeout=timeout)
        return _finish(self._client, stream, argv, check, self)

    def exec_stream(self, argv: c.Argv, *,
                    stdin: Union[bytes, str, Iterable[bytes], bool, None] = None,
                    env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                    user: Optional[str] = None,
                    timeout: Optional[c.Seconds] = None) -> "ExecStream":
        """Starts a command; iterate the result for Output pieces as they come, then one Exit.
        ``stdin=True`` keeps stdin open for ExecStream.write() / close_stdin()."""
        start = c.exec_start(argv, session_id=self.id, stdin=stdin is not None and stdin is not
                             False, env=env, cwd=cwd, user=user, timeout=timeout)
        return ExecStream._open(self._client, start, None if stdin is True else stdin,
                                session=self)

    def pause(self) -> c.SessionInfo:
        """Snapshots the session to disk and ends its VM (refused while a command runs)."""
        self.info = c.session_info(self._call(self._client._sessions.Pause,
                                              pb.PauseSessionRequest(id=self.id)))
        return self.info

    def resume(self) -> c.SessionInfo:
        self.info = c.session_info(self._call(self._client._sessions.Resume,
                                              pb.ResumeSessionRequest(id=self.id)))
        return self.info

    def fork(self, count: int = 1) -> List["Session"]:
        """``count`` new sessions from one snapshot of this one, each with its own disk copy."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidArgument("fork count is a whole number, 1 or more")
        reply = self._call(self._client._sessions.Fork, pb.ForkSessionRequest(id=self.id,
                                                                             count=count))
        return [Session(self._client, c.session_info(s)) for s in reply.sessions]

    def remove(self) -> None:
        """Destroys the VM, every file of the session, and its record."""
        self._call(self._client._sessions.Remove, pb.RemoveSessionRequest(id=self.id))

    def logs(self, tail: int = 0) -> List[c.LogEntry]:
        """The stored output of the session's commands, oldest first."""
        with _translated():
            return [c.log_entry(e) for e in self._client._sessions.Logs(
                pb.LogsRequest(session_id=self.id, tail=tail))]

    def metrics(self) -> c.Metrics:
        with _translated():
            for m in self._client._sessions.Metrics(pb.MetricsRequest(session_id=self.id,
                                                                     once=True)):
                return c.metrics(m)
        raise AirlockError("airlockd sent no metrics")

    def timeline(self) -> List[c.TimelineEvent]:
        """Everything the session did, oldest first: its lifecycle, each command with its
        output, file transfers, egress decisions, secret uses, what agents in it did."""
        with _translated():
            return [c.timeline_event(e) for e in self._client._sessions.Timeline(
                pb.TimelineRequest(session_id=self.id))]


class ExecStream:
    """A running command, from Session.exec_stream(). Iterate it for Output pieces, then one
    Exit (the last event). With stdin open, write() and close_stdin() feed it; signal() signals
    its process group. Leaving early (close(), or the with-block) cancels the command."""

    @classmethod
    def _open(cls, client: Client, start: pb.ExecStart, stdin=None,
              session: Optional[Session] = None) -> "ExecStream":
        self = cls.__new__(cls)
        self._session = session
        self.exit: Optional[c.Exit] = None
        self._queue: "queue.Queue[Optional[pb.ExecRequest]]" = queue.Queue()
        self._queue.put(pb.ExecRequest(start=start))
        self._feeder = None
        if stdin is not None:
            pieces = c.stdin_pieces(stdin)
            self._feeder = threading.Thread(target=self._feed, args=(pieces,), daemon=True)
        self._call = client._sessions.Exec(self._requests())
        if self._feeder:
            self._feeder.start()
        return self

    def _requests(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            yield item

    def _feed(self, pieces) -> None:
        try:
            for piece in pieces:
                if self.exit is not None:
                    return
                self.write(piece)
        finally:
            self.close_stdin()

    def write(self, data: Union[bytes, str]) -> None:
        data = c.to_bytes(data, "stdin")
        for at in range(0, len(data), c.STDIN_PIECE):
            self._queue.put(pb.ExecRequest(stdin=data[at:at + c.STDIN_PIECE]))

    def close_stdin(self) -> None:
        self._queue.put(pb.ExecRequest(stdin_eof=True))

    def signal(self, signum: int) -> None:
        self._queue.put(pb.ExecRequest(signal=int(signum)))

    def __iter__(self):
        try:
            for response in self._call:
                event = c.exec_event(response)
                if isinstance(event, c.Exit):
                    self.exit = event
                    self._queue.put(None)  # half-close: airlockd ends the call after the exit
                if event is not None:
                    yield event
        except grpc.RpcError as e:
            error = from_rpc_error(e)
            raise (self._session._explained(error) if self._session else error) from None
        finally:
            self._queue.put(None)

    def close(self) -> None:
        if self.exit is None:
            self._call.cancel()
        self._queue.put(None)

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _finish(client: Client, stream: ExecStream, argv, check: bool,
            session: Optional[Session]) -> c.ExecResult:
    collector = c.Collector()
    exit_ = None
    with stream:
        for event in stream:
            collector.add(event)
            if isinstance(event, c.Exit):
                exit_ = event
    if exit_ is None:
        raise AirlockError("airlockd ended the command without an exit status")
    result = collector.result(exit_)
    state = session._state() if session is not None and c.may_have_failed(result) else None
    return c.conclude(result, argv, check, state)
