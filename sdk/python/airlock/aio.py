"""The asyncio client: the same API as airlock.Client, with coroutines and async iterators.

    import airlock.aio
    async with airlock.aio.Client() as c:
        async with c.session(memory="1g") as s:
            r = await s.exec(["python3", "-c", "print(6*7)"])
            async for event in s.exec_stream(["pytest", "-q"]):
                ...
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
from typing import (AsyncIterator, BinaryIO, Callable, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Union)

import grpc
import grpc.aio

from airlock import _common as c
from airlock.errors import AirlockError, InvalidArgument, Unavailable, from_rpc_error
from airlock.v1 import airlock_pb2 as pb
from airlock.v1 import airlock_pb2_grpc as rpc


TLS = c.TLS  # airlock.aio.TLS, the same as airlock.TLS


class Client:
    """A connection to airlockd for asyncio; see airlock.Client for the addresses it takes.
    Use ``async with``, or ``await Client.connect(...)`` and ``await close()``: either connects
    and checks that airlockd speaks this SDK's API level (VersionMismatch otherwise), as
    airlock.Client does. ``audit`` is the host's audit log."""

    def __init__(self, address: Optional[str] = None, *, tls: Optional[c.TLS] = None,
                 connect_timeout: float = 10.0):
        self._target, tcp = c.target(address, tls)
        options = list(c.CHANNEL_OPTIONS)
        if tcp:
            self._channel = grpc.aio.secure_channel(self._target, tls.credentials(),
                                                    options=options + tls.options())
        else:
            self._channel = grpc.aio.insecure_channel(self._target, options=options)
        self._connect_timeout = connect_timeout
        self._api = rpc.ApiStub(self._channel)
        self._sessions = rpc.SessionsStub(self._channel)
        self._network = rpc.NetworkStub(self._channel)
        self._images = rpc.ImagesStub(self._channel)
        self._volumes = rpc.VolumesStub(self._channel)
        self._vms = rpc.VmsStub(self._channel)
        self._workspaces = rpc.WorkspacesStub(self._channel)
        self._secrets = rpc.SecretsStub(self._channel)
        self._audit = rpc.AuditStub(self._channel)
        self.audit = Audit(self)

    @classmethod
    async def connect(cls, address: Optional[str] = None, **kwargs) -> "Client":
        client = cls(address, **kwargs)
        await client._ready()
        return client

    async def _ready(self) -> None:
        try:
            await asyncio.wait_for(self._channel.channel_ready(), self._connect_timeout)
        except asyncio.TimeoutError:
            await self._channel.close()
            where = self._target[5:] if self._target.startswith("unix:") else self._target
            raise Unavailable(f"airlockd does not answer at {where} (is it running, and may you "
                              "use it? members of the airlock group may use its socket)") from None
        try:
            await self._check_version()
        except BaseException:
            await self._channel.close()
            raise

    async def _check_version(self) -> c.VersionInfo:
        try:
            reply = await self._api.Version(c.version_request(), timeout=self._connect_timeout)
        except grpc.RpcError as e:
            raise c.version_error(from_rpc_error(e)) from None
        return c.checked_version(reply)

    async def version(self) -> c.VersionInfo:
        """As airlock.Client.version: airlockd's API level, the oldest client level it serves,
        and its release."""
        try:
            return c.version_info(await self._api.Version(c.version_request()))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "Client":
        await self._ready()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def create_session(self, image: Optional[str] = None, *, allow: Iterable[str] = (),
                             presets: Iterable[str] = (), secrets=None,
                             volumes: Iterable[str] = (), host: Optional[str] = None,
                             **limits) -> "Session":
        """As airlock.Client.create_session (limits: vcpus, memory, disk, pids, ttl,
        idle_timeout, net_rate)."""
        request = c.create_request(image, limits, allow, presets, secrets, volumes=volumes,
                                   host=host)
        try:
            return Session(self, c.session_info(await self._sessions.Create(request)))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    @contextlib.asynccontextmanager
    async def session(self, image: Optional[str] = None, **kwargs) -> AsyncIterator["Session"]:
        """create_session() as an async context manager: the session is removed at the end."""
        s = await self.create_session(image, **kwargs)
        try:
            yield s
        finally:
            with contextlib.suppress(AirlockError):
                await s.remove()

    async def get_session(self, session_id: str) -> "Session":
        try:
            return Session(self, c.session_info(await self._sessions.Get(
                pb.GetSessionRequest(id=c.check_session_id(session_id)))))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def sessions(self) -> List["Session"]:
        try:
            reply = await self._sessions.List(pb.ListSessionsRequest())
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return [Session(self, c.session_info(s)) for s in reply.sessions]

    async def run(self, argv: c.Argv, *, image: Optional[str] = None, stdin=None,
                  env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                  user: Optional[str] = None, timeout: Optional[c.Seconds] = None,
                  check: bool = False, allow: Iterable[str] = (), presets: Iterable[str] = (),
                  secrets=None, volumes: Iterable[str] = (), **limits) -> c.ExecResult:
        """One command in a fresh session that is removed when it ends."""
        start = c.exec_start(argv, stdin=stdin is not None, env=env, cwd=cwd, user=user,
                             timeout=timeout, image=image, limits_kwargs=limits, allow=allow,
                             presets=presets, secret_map=secrets, volumes=volumes)
        return await _finish(ExecStream._open(self, start, stdin), argv, check, None)

    def watch(self, session_id: Optional[str] = None) -> "Watch":
        """As airlock.Client.watch, for ``async for`` (and ``async with`` to stop)."""
        request = pb.WatchRequest(session_id="" if session_id is None
                                  else c.check_session_id(session_id))
        return Watch(self._sessions.Watch(request))

    async def images(self) -> List[c.Image]:
        try:
            return c.images(await self._images.List(pb.ListImagesRequest()))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def pull_image(self, reference: str,
                         progress: Optional[Callable[[int, int], None]] = None) -> c.Image:
        request = pb.PullImageRequest(reference=c.check_reference(reference))
        result = None
        try:
            async for p in self._images.Pull(request):
                if p.HasField("image"):
                    result = c.image(p.image)
                elif progress is not None:
                    progress(p.done_bytes, p.total_bytes)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        if result is None:
            raise AirlockError("airlockd ended the pull without the image")
        return result

    async def build_image(self, tag: str, *, suite: str, packages: Sequence[str] = (),
                          npm: Sequence[str] = (), env: Optional[Mapping[str, str]] = None,
                          progress: Optional[Callable[[str], None]] = None) -> c.Image:
        """As Client.build_image."""
        request = c.build_request(tag, suite, packages, npm, env)
        result = None
        try:
            async for p in self._images.Build(request):
                if p.HasField("image"):
                    result = c.image(p.image)
                elif progress is not None:
                    progress(p.line)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        if result is None:
            raise AirlockError("airlockd ended the build without the image")
        return result

    async def import_image(self, data, name: str = "", rootfs: bool = False) -> c.Image:
        upload = c.image_upload(data, name, rootfs)
        try:
            return c.image(await self._images.Import(upload.async_messages()))
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise from_rpc_error(e) from None

    async def vms(self) -> List[c.Vm]:
        try:
            return c.vms(await self._vms.List(pb.ListVmsRequest()))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def create_volume(self, name: str, size: c.Size) -> c.Volume:
        """As airlock.Client.create_volume."""
        try:
            return c.volume(await self._volumes.Create(c.create_volume_request(name, size)))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def volumes(self) -> List[c.Volume]:
        try:
            reply = await self._volumes.List(pb.ListVolumesRequest())
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        return [c.volume(v) for v in reply.volumes]

    async def remove_volume(self, name: str) -> None:
        try:
            await self._volumes.Remove(pb.RemoveVolumeRequest(name=name))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def snapshot_volume(self, name: str, snapshot: str) -> c.Volume:
        try:
            return c.volume(await self._volumes.Snapshot(
                pb.SnapshotVolumeRequest(name=name, snapshot=snapshot)))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def import_volume(self, name: str, data) -> c.Volume:
        """As airlock.Client.import_volume (data may also be an async iterable of bytes)."""
        upload = c.volume_upload(data, name)
        try:
            return c.volume(await self._volumes.Import(upload.async_messages()))
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise from_rpc_error(e) from None


class Watch:
    """A stream of Event values from Client.watch(); ends when closed."""

    def __init__(self, call):
        self._call = call

    def __aiter__(self):
        return self._events()

    async def _events(self):
        try:
            async for e in self._call:
                yield c.event(e)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                raise from_rpc_error(e) from None

    def close(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> "Watch":
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()


class Files:
    """As airlock.Files; ``write`` also takes an async iterable of bytes, and ``read_stream``
    is an async iterator."""

    def __init__(self, session: "Session"):
        self._session = session

    async def write(self, path, data, mode: int = 0o644) -> int:
        upload = c.file_upload(self._session.id, path, data, mode)
        try:
            return (await self._session._client._sessions.WriteFileStream(
                upload.async_messages())).bytes
        except grpc.RpcError as e:
            if upload.error is not None:
                raise upload.error from None
            raise await self._session._explained(from_rpc_error(e)) from None

    async def read(self, path, max_bytes: int = 0) -> bytes:
        return b"".join([piece async for piece in self.read_stream(path, max_bytes)])

    async def read_stream(self, path, max_bytes: int = 0) -> AsyncIterator[bytes]:
        request = c.read_file_request(self._session.id, path, max_bytes)
        call = self._session._client._sessions.ReadFileStream(request)
        try:
            async for chunk in call:
                yield chunk.data
        except grpc.RpcError as e:
            raise await self._session._explained(from_rpc_error(e)) from None
        finally:
            call.cancel()


class Network:
    def __init__(self, session: "Session"):
        self._session = session

    async def rules(self) -> List[c.NetworkRule]:
        return c.network_rules(await self._session._call(
            self._session._client._network.Get, pb.GetNetworkRequest(session_id=self._session.id)))

    async def change(self, *, allow: Iterable[str] = (), presets: Iterable[str] = (),
                     deny: Iterable[str] = (), remove: Iterable[str] = (),
                     ttl: Optional[c.Seconds] = None) -> List[c.NetworkRule]:
        request = pb.ChangeNetworkRequest(
            session_id=self._session.id, allow=c.strings(allow, "allow"),
            allow_preset=c.strings(presets, "presets"), deny=c.strings(deny, "deny"),
            remove=c.strings(remove, "remove"), ttl_seconds=c.parse_seconds(ttl, "ttl"))
        return c.network_rules(await self._session._call(self._session._client._network.Change,
                                                         request))


class Forward:
    """As airlock.client.Forward, on the event loop: ``port`` is where it listens; ``close()``
    stops listening."""

    def __init__(self, session: "Session", remote: int):
        self._session = session
        self.remote = remote
        self._server: Optional[asyncio.base_events.Server] = None
        self.address = ""
        self.port = 0

    async def _start(self, local: int, address: str) -> "Forward":
        self._server = await asyncio.start_server(self._relay, address, local)
        self.address, self.port = self._server.sockets[0].getsockname()[:2]
        return self

    async def __aenter__(self) -> "Forward":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        call = self._session._client._sessions.ForwardPort()

        async def up() -> None:
            await call.write(pb.PortForwardRequest(start=pb.PortForwardStart(
                session_id=self._session.id, port=self.remote)))
            while data := await reader.read(65536):
                await call.write(pb.PortForwardRequest(data=data))
            await call.write(pb.PortForwardRequest(eof=True))
            await call.done_writing()

        sending = asyncio.ensure_future(up())
        try:
            async for r in call:
                kind = r.WhichOneof("kind")
                if kind == "data":
                    writer.write(r.data)
                    await writer.drain()
                elif kind == "eof":
                    writer.write_eof()
                elif kind == "reset":
                    break
        except (grpc.RpcError, OSError):
            pass  # the guest's server or this connection's client went away
        finally:
            sending.cancel()
            call.cancel()
            writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await writer.wait_closed()


class Ports:
    """As airlock.client.Ports, with coroutines."""

    def __init__(self, session: "Session"):
        self._session = session

    async def expose(self, port: int, *, public: bool = False) -> c.Exposure:
        request = pb.ExposeRequest(session_id=self._session.id, port=c.check_port(port),
                                   public=bool(public))
        return c.exposure(await self._session._call(self._session._client._sessions.Expose,
                                                    request))

    async def list(self) -> List[c.Exposure]:
        reply = await self._session._call(self._session._client._sessions.ListExposures,
                                          pb.ListExposuresRequest(session_id=self._session.id))
        return [c.exposure(e) for e in reply.exposures]

    async def unexpose(self, port: int) -> None:
        await self._session._call(self._session._client._sessions.Unexpose,
                                  pb.UnexposeRequest(session_id=self._session.id,
                                                     port=c.check_port(port)))

    async def forward(self, port: int, *, local_port: int = 0,
                      address: str = "127.0.0.1") -> Forward:
        c.check_port(port)
        if local_port != 0:
            c.check_port(local_port)
        await self._session.refresh()
        return await Forward(self._session, port)._start(local_port, address)


class Workspace:
    """As airlock.client.Workspace, with coroutines: the project a session was created with
    (by the CLI: ``airlock session create --workspace DIR``) and what the session did to it."""

    def __init__(self, session: "Session"):
        self._session = session

    async def info(self, *, entries: bool = False) -> c.WorkspaceInfo:
        return c.workspace_info(await self._session._call(
            self._session._client._workspaces.Get,
            pb.GetWorkspaceRequest(session_id=self._session.id, entries=bool(entries))))

    async def diff(self) -> List[c.WorkspaceChange]:
        request = pb.WorkspaceDiffRequest(session_id=self._session.id)
        try:
            return [c.workspace_change(w)
                    async for w in self._session._client._workspaces.Diff(request)]
        except grpc.RpcError as e:
            raise await self._session._explained(from_rpc_error(e)) from None

    async def bundle(self, *, include_uncommitted: bool = False, dry_run: bool = False,
                     branch: str = "", to: Optional[BinaryIO] = None) -> c.WorkspaceBundle:
        """As airlock.client.Workspace.bundle (``to`` is written with plain ``write`` calls)."""
        request = c.bundle_request(self._session.id, include_uncommitted, dry_run, branch)
        reader = c.BundleReader(to)
        try:
            async for chunk in self._session._client._workspaces.Bundle(request):
                reader.add(chunk)
        except grpc.RpcError as e:
            raise await self._session._explained(from_rpc_error(e)) from None
        return reader.result()


class Secrets:
    """As airlock.client.Secrets, with coroutines."""

    def __init__(self, session: "Session"):
        self._session = session

    async def list(self) -> List[c.SecretInfo]:
        return c.secret_infos(await self._session._call(
            self._session._client._secrets.List,
            pb.ListSecretsRequest(session_id=self._session.id)))

    async def set(self, secrets: Mapping[str, Union[str, bytes, None]]) -> List[c.SecretInfo]:
        request = pb.SetSecretsRequest(session_id=self._session.id, secrets=c.secrets(secrets))
        return c.secret_infos(await self._session._call(self._session._client._secrets.Set,
                                                        request))

    async def remove(self, names: Iterable[str]) -> List[c.SecretInfo]:
        request = pb.RemoveSecretsRequest(session_id=self._session.id,
                                          names=c.strings(names, "names"))
        return c.secret_infos(await self._session._call(self._session._client._secrets.Remove,
                                                        request))


class Audit:
    """As airlock.client.Audit, with coroutines."""

    def __init__(self, client: Client):
        self._client = client

    async def list(self, since: Optional[datetime.datetime] = None,
                   limit: int = 0) -> List[c.AuditRecord]:
        request = c.audit_request(since, limit)
        try:
            return [c.audit_record(r) async for r in self._client._audit.List(request)]
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def verify(self) -> c.AuditVerification:
        try:
            return c.audit_verification(await self._client._audit.Verify(
                pb.VerifyAuditRequest()))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None


class Session(c.SessionBase):
    """As airlock.Session, with coroutines."""
    _files_class = Files
    _network_class = Network
    _ports_class = Ports
    _workspace_class = Workspace
    _secrets_class = Secrets

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc) -> None:
        with contextlib.suppress(AirlockError):
            await self.remove()

    async def _call(self, method, request):
        try:
            return await method(request)
        except grpc.RpcError as e:
            raise await self._explained(from_rpc_error(e)) from None

    async def _explained(self, error: AirlockError) -> AirlockError:
        return c.explained(error, await self._state()) if c.wants_state(error) else error

    async def _state(self) -> Optional[c.SessionInfo]:
        with contextlib.suppress(AirlockError, grpc.RpcError):
            return await self.refresh()
        return None

    async def refresh(self) -> c.SessionInfo:
        self.info = c.session_info(await self._call(self._client._sessions.Get,
                                                    pb.GetSessionRequest(id=self.id)))
        return self.info

    async def exec(self, argv: c.Argv, *, stdin=None, env: Optional[Dict[str, str]] = None,
                   cwd: Optional[str] = None, user: Optional[str] = None,
                   timeout: Optional[c.Seconds] = None, check: bool = False) -> c.ExecResult:
        stream = self.exec_stream(argv, stdin=stdin, env=env, cwd=cwd, user=user,
                                  timeout=timeout)
        return await _finish(stream, argv, check, self)

    def exec_stream(self, argv: c.Argv, *, stdin=None, env: Optional[Dict[str, str]] = None,
                    cwd: Optional[str] = None, user: Optional[str] = None,
                    timeout: Optional[c.Seconds] = None) -> "ExecStream":
        """Starts a command; ``async for`` the result for Output pieces, then one Exit.
        ``stdin=True`` keeps stdin open for ``await write()`` / ``await close_stdin()``."""
        start = c.exec_start(argv, session_id=self.id, stdin=stdin is not None and stdin is not
                             False, env=env, cwd=cwd, user=user, timeout=timeout)
        return ExecStream._open(self._client, start, None if stdin is True else stdin,
                                session=self)

    async def pause(self) -> c.SessionInfo:
        self.info = c.session_info(await self._call(self._client._sessions.Pause,
                                                    pb.PauseSessionRequest(id=self.id)))
        return self.info

    async def resume(self) -> c.SessionInfo:
        self.info = c.session_info(await self._call(self._client._sessions.Resume,
                                                    pb.ResumeSessionRequest(id=self.id)))
        return self.info

    async def fork(self, count: int = 1) -> List["Session"]:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidArgument("fork count is a whole number, 1 or more")
        reply = await self._call(self._client._sessions.Fork,
                                 pb.ForkSessionRequest(id=self.id, count=count))
        return [Session(self._client, c.session_info(s)) for s in reply.sessions]

    async def remove(self) -> None:
        await self._call(self._client._sessions.Remove, pb.RemoveSessionRequest(id=self.id))

    async def logs(self, tail: int = 0) -> List[c.LogEntry]:
        try:
            return [c.log_entry(e) async for e in self._client._sessions.Logs(
                pb.LogsRequest(session_id=self.id, tail=tail))]
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def metrics(self) -> c.Metrics:
        try:
            async for m in self._client._sessions.Metrics(
                    pb.MetricsRequest(session_id=self.id, once=True)):
                return c.metrics(m)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        raise AirlockError("airlockd sent no metrics")

    async def timeline(self) -> List[c.TimelineEvent]:
        try:
            return [c.timeline_event(e) async for e in self._client._sessions.Timeline(
                pb.TimelineRequest(session_id=self.id))]
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None


class ExecStream:
    """A running command, from Session.exec_stream(), for ``async for``: Output pieces, then one
    Exit. With stdin open, ``await write()`` / ``await close_stdin()`` feed it and
    ``await signal(N)`` signals it. Leaving early (``await close()``, or ``async with``) cancels
    the command."""

    @classmethod
    def _open(cls, client: Client, start: pb.ExecStart, stdin=None,
              session: Optional[Session] = None) -> "ExecStream":
        self = cls.__new__(cls)
        self._session = session
        self._call = client._sessions.Exec()
        self._started = False
        self._start = start
        self._stdin = stdin
        self._feeder: Optional[asyncio.Task] = None
        self._lock = asyncio.Lock()
        self._write_closed = False
        self.exit: Optional[c.Exit] = None
        return self

    async def _send(self, request: pb.ExecRequest) -> None:
        async with self._lock:
            if self._write_closed:
                return
            await self._write_start()
            await self._call.write(request)

    async def _write_start(self) -> None:
        """The ExecStart, once, before anything else (called under the lock)."""
        if not self._started:
            self._started = True
            await self._call.write(pb.ExecRequest(start=self._start))

    async def _begin(self) -> None:
        async with self._lock:
            await self._write_start()
        if self._stdin is not None and self._feeder is None:
            self._feeder = asyncio.ensure_future(self._feed(self._stdin))

    async def _feed(self, data) -> None:
        try:
            if hasattr(data, "__aiter__"):
                async for piece in data:
                    await self.write(piece)
            else:
                for piece in c.stdin_pieces(data):
                    await self.write(piece)
        finally:
            await self.close_stdin()

    async def write(self, data: Union[bytes, str]) -> None:
        data = c.to_bytes(data, "stdin")
        for at in range(0, len(data), c.STDIN_PIECE):
            await self._send(pb.ExecRequest(stdin=data[at:at + c.STDIN_PIECE]))

    async def close_stdin(self) -> None:
        await self._send(pb.ExecRequest(stdin_eof=True))

    async def signal(self, signum: int) -> None:
        await self._send(pb.ExecRequest(signal=int(signum)))

    async def _half_close(self) -> None:
        async with self._lock:
            if not self._write_closed:
                self._write_closed = True
                with contextlib.suppress(Exception):
                    await self._call.done_writing()

    def __aiter__(self):
        return self._events()

    async def _events(self):
        await self._begin()
        try:
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    return
                event = c.exec_event(response)
                if isinstance(event, c.Exit):
                    self.exit = event
                    await self._half_close()
                if event is not None:
                    yield event
        except grpc.RpcError as e:
            error = from_rpc_error(e)
            raise (await self._session._explained(error) if self._session else error) from None

    async def close(self) -> None:
        if self._feeder is not None and not self._feeder.done():
            self._feeder.cancel()
        if self.exit is None:
            self._call.cancel()

    async def __aenter__(self) -> "ExecStream":
        await self._begin()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


async def _finish(stream: ExecStream, argv, check: bool,
                  session: Optional[Session]) -> c.ExecResult:
    collector = c.Collector()
    exit_ = None
    async with stream:
        async for event in stream:
            collector.add(event)
            if isinstance(event, c.Exit):
                exit_ = event
    if exit_ is None:
        raise AirlockError("airlockd ended the command without an exit status")
    result = collector.result(exit_)
    state = await session._state() if session is not None and c.may_have_failed(result) else None
    return c.conclude(result, argv, check, state)
