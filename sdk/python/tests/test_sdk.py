"""The Python SDK against a real airlockd (its own, on a private AIRLOCK_HOME that shares the
host's images and kernel), as a program would use it: the shared scenario of the four SDKs
(sdk/scenario.txt), sessions, commands, streams, files, pause/resume/fork, the errors, the API
level check, workspaces (made by the CLI), secrets, the audit log, asyncio, the examples, and
airlockd's TCP listener with mutual TLS.

    python3 -m unittest discover -s sdk/python/tests   # as root, after scripts/setup.sh;
                                                      # AIRLOCKD names the daemon binary, and
                                                      # AIRLOCK_CLI the CLI (default: beside it)
"""
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import hashlib
import inspect
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
import urllib.parse
import urllib.request
from unittest import mock

import grpc

SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
ROOT = os.path.join(SDK, "..", "..")
sys.path.insert(0, SDK)
import airlock  # noqa: E402
import airlock._common  # noqa: E402
import airlock.aio  # noqa: E402
from airlock.v1 import airlock_pb2 as pb  # noqa: E402

AIRLOCKD = os.environ.get("AIRLOCKD") or os.path.join(ROOT, "build", "airlockd")
AIRLOCK_CLI = os.environ.get("AIRLOCK_CLI") or os.path.join(os.path.dirname(AIRLOCKD), "airlock")
HOST_HOME = os.environ.get("AIRLOCK_HOME", "/var/lib/airlock")
SERVER_NAME = "airlock-sdk-test-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def issue(d: str, name: str, cn: str) -> None:
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{d}/{name}.key", "-out",
            f"{d}/{name}.csr", "-subj", f"/CN={cn}")
    with open(f"{d}/{name}.ext", "w") as f:
        f.write(f"subjectAltName=DNS:{cn}\n")
    openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem", "-CAkey",
            f"{d}/ca.key", "-CAcreateserial", "-out", f"{d}/{name}.pem", "-days", "1",
            "-extfile", f"{d}/{name}.ext")


class Daemon:
    """airlockd on a private home, a socket and a TCP listener with mutual TLS."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="airlock-sdktest-")
        os.chmod(self.dir, 0o755)  # the VMM (uid 65534) reads the image through here
        self.home = home = os.path.join(self.dir, "home")
        os.mkdir(home)
        os.symlink(os.path.join(HOST_HOME, "images"), os.path.join(home, "images"))
        os.mkdir(os.path.join(home, "kernel"))
        os.symlink(os.path.realpath(os.path.join(HOST_HOME, "kernel", "vmlinux")),
                   os.path.join(home, "kernel", "vmlinux"))
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{self.dir}/ca.key",
                "-out", f"{self.dir}/ca.pem", "-days", "1", "-subj", "/CN=airlock-sdk-test-ca")
        issue(self.dir, "server", SERVER_NAME)
        issue(self.dir, "client", "sdk-client")
        self.socket = os.path.join(self.dir, "sock")
        self.address = f"127.0.0.1:{free_port()}"
        env = dict(os.environ, AIRLOCK_HOME=home, AIRLOCK_HTTP_LISTEN="127.0.0.1:0")
        self.log = open(os.path.join(self.dir, "airlockd.log"), "wb")
        self.process = subprocess.Popen(
            [AIRLOCKD, "--socket", self.socket, "--listen-tcp", self.address, "--tls-cert",
             f"{self.dir}/server.pem", "--tls-key", f"{self.dir}/server.key", "--tls-client-ca",
             f"{self.dir}/ca.pem"], env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("airlockd did not start: " + self.logs())
            time.sleep(0.05)

    def tls(self, name: str = "client") -> airlock.TLS:
        return airlock.TLS(ca=f"{self.dir}/ca.pem", cert=f"{self.dir}/{name}.pem",
                           key=f"{self.dir}/{name}.key", server_name=SERVER_NAME)

    def env(self) -> dict:
        """The environment of a program (the CLI, an example) that uses this daemon."""
        return dict(os.environ, AIRLOCK_SOCKET=self.socket, AIRLOCK_HOME=self.home)

    def logs(self) -> str:
        with open(os.path.join(self.dir, "airlockd.log"), "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


daemon = None  # the Daemon, from setUpModule


def setUpModule():
    global daemon
    daemon = Daemon()


def tearDownModule():
    daemon.stop()


def remove_quietly(session) -> None:
    with contextlib.suppress(airlock.AirlockError):
        session.remove()


def scenario() -> list:
    """The transcript sdk/scenario.txt wants: its lines that are not comments."""
    with open(os.path.join(ROOT, "sdk", "scenario.txt")) as f:
        return [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]


def text(data: bytes) -> str:
    return json.dumps(data.decode())


def yes(value: bool) -> str:
    return "true" if value else "false"


class ScenarioTest(unittest.TestCase):
    def test_the_shared_scenario(self):
        """The steps of sdk/scenario.txt with the public API, and the transcript it wants."""
        size = 3145745
        content = (bytes(i * 7 % 251 for i in range(251)) * (size // 251 + 1))[:size]
        got = []
        client = airlock.Client(daemon.socket)
        self.addCleanup(client.close)  # after the session's removal (cleanups run last first)
        s = client.create_session(memory="1g")
        self.addCleanup(remove_quietly, s)
        try:
            got.append(f"create state={s.state} memory={s.info.limits.memory}")

            r = s.exec(["sh", "-c", "echo out; echo to-err >&2; exit 3"])
            got.append(f"exec exit={r.exit_code} stdout={text(r.stdout)} "
                       f"stderr={text(r.stderr)}")

            out = err = 0
            zero = True
            exit_code = None
            for event in s.exec_stream(["head", "-c", "67108864", "/dev/zero"]):
                if isinstance(event, airlock.Exit):
                    exit_code = event.exit_code
                elif event.stream == "stdout":
                    out += len(event.data)
                    zero = zero and event.data.count(0) == len(event.data)
                else:
                    err += len(event.data)
            got.append(f"stream stdout_bytes={out} all_zero={yes(zero)} stderr_bytes={err} "
                       f"exit={exit_code}")

            got.append(f"write bytes={s.files.write('/root/data.bin', content, mode=0o600)}")
            got.append(f"read same={yes(s.files.read('/root/data.bin') == content)}")
            r = s.exec(["stat", "-c", "%a %s", "/root/data.bin"])
            got.append(f"stat stdout={text(r.stdout)}")

            got.append(f"pause state={s.pause().state}")
            got.append(f"resume state={s.resume().state}")
            got.append(f"read same={yes(s.files.read('/root/data.bin') == content)}")

            kids = s.fork(2)
            for k in kids:
                self.addCleanup(remove_quietly, k)
            got.append(f"fork children={len(kids)} "
                       f"distinct_ids={len({k.id for k in kids} | {s.id})}")
            for k in kids:
                same = k.files.read("/root/data.bin") == content
                got.append(f"child same={yes(same)} "
                           f"own_hostname={yes(k.info.hostname != s.info.hostname)}")
                k.remove()

            s.remove()
            got.append(f"remove state={client.get_session(s.id).state}")
        except Exception as e:
            raise AssertionError("the scenario failed after:\n" + "\n".join(got)) from e
        want = scenario()
        self.assertEqual(got, want, "\nthis SDK's transcript:\n" + "\n".join(got) +
                         "\n\nsdk/scenario.txt's:\n" + "\n".join(want))


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.client = airlock.Client(daemon.socket)
        self.addCleanup(self.client.close)

    def test_exec_splits_output_takes_stdin_and_reports_how_it_ended(self):
        with self.client.session() as s:
            r = s.exec(["sh", "-c", "cat; echo to-err >&2; exit 3"], stdin=b"in\x00put")
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, b"in\x00put", b"to-err\n"))
            self.assertFalse(r.ok)
            big = os.urandom(3 << 20)  # many stdin pieces, each ordered
            r = s.exec(["sha256sum"], stdin=big)
            self.assertEqual(r.stdout.split()[0].decode(), hashlib.sha256(big).hexdigest())
            r = s.exec(["sh", "-c", "echo $GREETING in $(pwd) as $(id -un)"],
                       env={"GREETING": "hello"}, cwd="/tmp", user="nobody")
            self.assertEqual(r.stdout, b"hello in /tmp as nobody\n")
            r = s.exec(["no-such-command"])
            self.assertEqual(r.exit_code, 127)
            self.assertIn("not found", r.message)
            r = s.exec(["sh", "-c", "kill -TERM $$"])
            self.assertEqual((r.exit_code, r.signal), (128 + 15, 15))
            with self.assertRaises(airlock.Timeout) as caught:
                s.exec(["sh", "-c", "echo started; sleep 30"], timeout=1)
            self.assertTrue(caught.exception.result.timed_out)
            self.assertEqual(caught.exception.result.stdout, b"started\n")
            with self.assertRaises(airlock.CommandFailed) as failed:
                s.exec(["false"], check=True)
            self.assertEqual(failed.exception.result.exit_code, 1)
            self.assertEqual(s.exec(["true"], check=True).exit_code, 0)

    def test_a_stream_takes_stdin_and_signals_while_it_runs(self):
        with self.client.session() as s:
            with s.exec_stream(["sh", "-c", "read line; echo got $line; sleep 300"],
                               stdin=True) as stream:
                stream.write("hello\n")
                seen = []
                for event in stream:
                    seen.append(event)
                    if event == airlock.Output("stdout", b"got hello\n"):
                        stream.signal(signal.SIGTERM)
            self.assertEqual(stream.exit, airlock.Exit(exit_code=128 + 15, signal=15))
            # A stream left early cancels its command: the session is free for the next one.
            with s.exec_stream(["sh", "-c", "echo go; sleep 300"]) as stream:
                self.assertEqual(next(iter(stream)), airlock.Output("stdout", b"go\n"))
            deadline = time.monotonic() + 120  # a hang, not a speed: other suites run beside
            while True:
                ps = s.exec(["ps", "-eo", "pid,pgid,stat,args"]).stdout.decode()
                if "sleep 300" not in ps:
                    break
                self.assertLess(time.monotonic(), deadline, "the abandoned command runs:\n" + ps)
                time.sleep(0.2)

    def test_files_sessions_and_one_shot_runs(self):
        with self.client.session() as s:
            data = bytes(range(256)) * 4096
            self.assertEqual(s.files.write("/root/blob", data, mode=0o600), len(data))
            self.assertEqual(s.files.read("/root/blob"), data)
            self.assertEqual(s.exec(["stat", "-c", "%a", "/root/blob"]).stdout, b"600\n")
            with self.assertRaises(airlock.AirlockError):
                s.files.read("/root/blob", max_bytes=10)
            with self.assertRaises(airlock.InvalidArgument):
                s.files.write("relative/path", b"x")
            with self.assertRaises(airlock.InvalidArgument):
                s.files.write("/root/x", 42)  # before the wire: no session call is made
            with self.assertRaises(airlock.InvalidArgument):
                s.files.write("/root/x", b"", mode="0644")

            # Any size, from a generator or a file, and back in pieces.
            piece = bytes(range(256)) * 2048  # 512 KiB
            self.assertEqual(s.files.write("/root/big", (piece for _ in range(12))), 6 << 20)
            total = 0
            for got in s.files.read_stream("/root/big"):
                self.assertEqual(got, piece[total % len(piece):][:len(got)])
                total += len(got)
            self.assertEqual(total, 6 << 20)
            with tempfile.TemporaryFile() as f:
                f.write(piece * 3)
                f.seek(0)
                self.assertEqual(s.files.write("/root/from-file", f), 3 * len(piece))
            self.assertEqual(s.exec(["sha256sum", "/root/from-file"]).stdout[:64],
                             hashlib.sha256(piece * 3).hexdigest().encode())

            # Content that fails part-way leaves the old file, and its error is what is raised.
            def broken():
                yield piece
                raise OSError("the source went away")
            with self.assertRaisesRegex(OSError, "the source went away"):
                s.files.write("/root/big", broken())
            self.assertEqual(s.exec(["stat", "-c", "%s", "/root/big"]).stdout, b"6291456\n")
            self.assertEqual(s.exec(["sh", "-c", "ls -A /root | grep -c airlock || true"]).stdout,
                             b"0\n")
            self.assertIn(s.id, [x.id for x in self.client.sessions()])
            self.assertEqual(self.client.get_session(s.id).info.hostname, s.info.hostname)
            self.assertTrue(any(e.stream == "event" for e in s.logs()))
            self.assertGreater(s.metrics().memory_total, 0)
            self.assertIn("exec", [e.kind for e in s.timeline()])
        r = self.client.run(["sh", "-c", "echo $((6*7))"], memory="256m")
        self.assertEqual((r.exit_code, r.stdout), (0, b"42\n"))
        self.assertTrue(any(i.name for i in self.client.images()))

    def test_a_server_in_a_session_is_a_url(self):
        with self.client.session() as s:
            s.files.write("/srv/hello.txt", b"hello\n")
            s.exec(["sh", "-c", "cd /srv && (setsid python3 -m http.server 8000 </dev/null "
                    ">/dev/null 2>&1 &) && until python3 -c \"import socket; "
                    "socket.create_connection(('127.0.0.1', 8000))\" 2>/dev/null; do sleep 0.2; "
                    "done"], check=True)
            e = s.ports.expose(8000)
            self.assertEqual((e.port, e.public, e.host),
                             (8000, False, f"8000-{s.id}.airlock.localhost"))
            self.assertTrue(e.url.startswith(f"http://{e.host}:"), e.url)
            self.assertTrue(e.url.endswith("/?airlock_token=" + e.token), e.url)
            url = urllib.parse.urlsplit(e.url)
            request = urllib.request.Request(f"http://127.0.0.1:{url.port}/hello.txt",
                                             headers={"Host": url.netloc,
                                                      "X-Airlock-Token": e.token})
            with urllib.request.urlopen(request, timeout=60) as reply:
                self.assertEqual(reply.read(), b"hello\n")
            self.assertEqual([x.port for x in s.ports.list()], [8000])
            s.ports.unexpose(8000)
            self.assertEqual(s.ports.list(), [])
            # The same server through a listener here, as `airlock port-forward` does.
            with s.ports.forward(8000) as f:
                for _ in range(2):
                    with urllib.request.urlopen(f"http://127.0.0.1:{f.port}/hello.txt",
                                                timeout=60) as reply:
                        self.assertEqual(reply.read(), b"hello\n")
            with self.assertRaises(airlock.InvalidArgument):
                s.ports.expose(0)
            with self.assertRaises(airlock.NotFound):
                s.ports.unexpose(8000)

    def test_images_come_in_through_airlockd(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("srv/hello")
            body = b"hello from an imported image\n"
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        archive = buf.getvalue()
        name = f"sdk-test/tiny-{os.getpid()}:1"

        def pieces():
            for at in range(0, len(archive), 4096):
                yield archive[at:at + 4096]
        try:
            image = self.client.import_image(pieces(), name=name, rootfs=True)
            self.assertEqual(image.name, name)
            self.assertTrue(image.digest.startswith("sha256:"))
            self.assertIn(name, [i.name for i in self.client.images()])
        finally:
            self.client._images.Remove(pb.RemoveImagesRequest(names=[name]))

        def broken():
            yield archive[:1024]
            raise OSError("the archive went away")
        with self.assertRaisesRegex(OSError, "the archive went away"):
            self.client.import_image(broken(), name=name, rootfs=True)
        self.assertNotIn(name, [i.name for i in self.client.images()])
        with self.assertRaises(airlock.InvalidArgument):
            self.client.import_image(archive, rootfs=True)  # no name: before the wire
        with self.assertRaises(airlock.InvalidArgument):
            self.client.import_image(archive, name="Not A Name", rootfs=True)
        with self.assertRaises(airlock.InvalidArgument):
            self.client.pull_image(42)
        # A build: bad input is refused by airlockd before anything runs (a real one takes
        # minutes of mmdebstrap; scripts/setup.sh and test.sh build through the same call).
        lines = []
        with self.assertRaisesRegex(airlock.InvalidArgument, "is not a Debian suite name"):
            self.client.build_image(name, suite="Bookworm!", packages=["git"],
                                    progress=lines.append)
        with self.assertRaisesRegex(airlock.InvalidArgument, "is not KEY=VALUE"):
            self.client.build_image(name, suite="bookworm", env={"A B": "1"})
        with self.assertRaises(airlock.InvalidArgument):
            self.client.build_image(name, suite="bookworm", packages="git")  # before the wire
        self.assertEqual(lines, [])
        self.assertNotIn(name, [i.name for i in self.client.images()])

    def test_volumes_outlive_sessions(self):
        name = f"sdk-{os.getpid()}"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("greeting")
            body = b"hello from a volume\n"
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        made = self.client.create_volume(name, "32m")
        self.assertEqual((made.name, made.size, made.snapshot), (name, 32 << 20, False))
        try:
            self.assertEqual(self.client.import_volume(name, buf.getvalue()).generation, 1)
            with self.client.session(volumes=[f"{name}:/data"]) as s:
                self.assertEqual(s.exec(["cat", "/data/greeting"]).stdout,
                                 b"hello from a volume\n")
                s.exec(["sh", "-c", "echo more > /data/more"], check=True)
                held = [v for v in self.client.volumes() if v.name == name][0]
                self.assertEqual((held.holders, held.held_read_write), ([s.id], True))
                with self.assertRaisesRegex(airlock.FailedPrecondition, "is attached to session"):
                    self.client.create_session(volumes=[f"{name}:/data:ro"])
            r = self.client.run(["cat", "/v/more"], volumes=[f"{name}:/v:ro"])
            self.assertEqual(r.stdout, b"more\n")
            snap = self.client.snapshot_volume(name, f"{name}@v1")
            self.assertTrue(snap.snapshot)
            self.assertEqual(snap.origin, f"snapshot of {name}")
            self.client.remove_volume(snap.name)
            with self.assertRaises(airlock.InvalidArgument):
                self.client.create_session(volumes=["no-path"])  # before the wire
            # A host to make it on is a fleet's to honour: this airlockd alone refuses it.
            with self.assertRaisesRegex(airlock.FailedPrecondition,
                                        "makes sessions only on itself: --host host-b"):
                self.client.create_session(host="host-b")
            with self.assertRaisesRegex(airlock.InvalidArgument, "not a tar archive"):
                self.client.import_volume(name, b"\0" * 4096)
        finally:
            self.client.remove_volume(name)
        with self.assertRaisesRegex(airlock.NotFound, "airlock volume ls"):
            self.client.remove_volume(name)

    def test_errors_are_typed_and_say_what_to_do(self):
        with self.assertRaises(airlock.NotFound):
            self.client.get_session("0123456789ab")
        with self.assertRaises(airlock.AirlockError) as no_image:
            self.client.create_session("localhost:1/no/such-image")
        self.assertIn("is not in the store", str(no_image.exception))
        with self.assertRaises(airlock.InvalidArgument) as bad:
            self.client.create_session(memory="lots")
        self.assertIn("not a size", str(bad.exception))
        with self.assertRaises(airlock.InvalidArgument):
            self.client.create_session(allow="pypi.org")  # a string where a list belongs
        with self.assertRaises(airlock.InvalidArgument):
            self.client.create_session(allow=["not a rule!"])
        with self.assertRaises(airlock.InvalidArgument) as too_big:
            self.client.create_session(memory="64t")
        self.assertIn("between", str(too_big.exception))
        with self.client.session() as s:
            with self.assertRaises(airlock.LimitExceeded) as quota:
                s.fork(17)  # the default quota: 16 forks per request
            self.assertIn("forks", str(quota.exception))
            with self.assertRaises(airlock.InvalidArgument):
                s.exec("echo not a list")
            with self.assertRaises(airlock.InvalidArgument):
                s.exec(["true"], env={"A": 1})
            with self.assertRaises(airlock.InvalidArgument):
                s.fork(0)
            with s.exec_stream(["sh", "-c", "echo started; exec sleep 300"]) as busy:
                # The call is under way once its first output is here (the stream is opened
                # asynchronously: a pause before that has nothing to refuse for).
                next(iter(busy))
                with self.assertRaises(airlock.FailedPrecondition) as pausing:
                    s.pause()
                self.assertNotIsInstance(pausing.exception, airlock.SessionFailed)
                busy.close()
            # The VM dies under the session: the SDK says so, with airlockd's reason.
            vm = next(v for v in self.client.vms() if v.session_id == s.id)
            self.assertGreater(vm.host_rss, 0)
            os.kill(vm.pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while s.refresh().state != "failed":
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.1)
            with self.assertRaises(airlock.SessionFailed) as died:
                s.exec(["true"])
            self.assertTrue(died.exception.reason)
        with self.assertRaises(airlock.Unavailable):
            airlock.Client(os.path.join(daemon.dir, "no-such.sock"), connect_timeout=1)
        with self.assertRaises(airlock.InvalidArgument):
            airlock.Client(daemon.address)  # TCP without TLS


class VersionTest(unittest.TestCase):
    def test_connecting_checks_that_airlockd_speaks_the_sdks_level(self):
        with airlock.Client(daemon.socket) as c:
            v = c.version()
        self.assertGreaterEqual(v.level, airlock.API_LEVEL)
        self.assertLessEqual(v.oldest_client_level, airlock.API_LEVEL)
        self.assertRegex(v.daemon_version, r"^\d+\.\d+")

        # An SDK built for a level this airlockd does not speak yet fails as it connects.
        with mock.patch.object(airlock._common, "API_LEVEL", v.level + 1):
            with self.assertRaises(airlock.VersionMismatch) as newer:
                airlock.Client(daemon.socket)
        self.assertEqual((newer.exception.daemon_level, newer.exception.client_level),
                         (v.level, v.level + 1))
        self.assertEqual(str(newer.exception),
                         f"airlockd {v.daemon_version} speaks API level {v.level}; this SDK "
                         f"needs {v.level + 1}: upgrade airlockd")
        # One older than the oldest level airlockd serves (0, a client that does not say its
        # level, is answered: the SDK's own check refuses it).
        with mock.patch.object(airlock._common, "API_LEVEL", 0):
            with self.assertRaisesRegex(airlock.VersionMismatch, "this SDK speaks 0: upgrade "
                                        "the SDK"):
                airlock.Client(daemon.socket)

    def test_an_airlockd_older_than_api_levels_is_named(self):
        # A gRPC server that serves nothing answers Api.Version as an airlockd from before API
        # levels does: UNIMPLEMENTED.
        path = os.path.join(daemon.dir, "no-api.sock")
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        server.add_insecure_port("unix:" + path)
        server.start()
        self.addCleanup(server.stop, None)
        with self.assertRaisesRegex(airlock.VersionMismatch, "predates API levels.*upgrade "
                                    "airlockd") as old:
            airlock.Client(path)
        self.assertEqual((old.exception.daemon_level, old.exception.client_level),
                         (0, airlock.API_LEVEL))

        async def connect_async():
            with self.assertRaisesRegex(airlock.VersionMismatch, "upgrade airlockd"):
                async with airlock.aio.Client(path):
                    pass
        asyncio.run(connect_async())

    def test_the_same_check_for_asyncio(self):
        async def check():
            async with airlock.aio.Client(daemon.socket) as c:
                v = await c.version()
            self.assertGreaterEqual(v.level, 1)
            with mock.patch.object(airlock._common, "API_LEVEL", v.level + 1):
                with self.assertRaisesRegex(airlock.VersionMismatch,
                                            f"speaks API level {v.level}; this SDK needs "
                                            f"{v.level + 1}: upgrade airlockd"):
                    await airlock.aio.Client.connect(daemon.socket)
        asyncio.run(check())


def git(repo: str, *args: str) -> str:
    """Host git on the test's project, with the test's own identity."""
    r = subprocess.run(["git", "-C", repo, "-c", "user.name=Host User", "-c",
                        "user.email=host@example.com", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {r.stderr}")
    return r.stdout.strip()


AGENT_COMMIT = "git -c user.name=Agent -c user.email=agent@example.com commit -q"


class WorkspaceTest(unittest.TestCase):
    def test_what_a_session_did_to_its_workspace_comes_back(self):
        project = tempfile.mkdtemp(prefix="project-", dir=daemon.dir)
        git(project, "init", "-q", "-b", "main")
        os.mkdir(os.path.join(project, "src"))
        with open(os.path.join(project, "README"), "w") as f:
            f.write("hello\n")
        with open(os.path.join(project, "src", "app.py"), "w") as f:
            f.write("print('v1')\n")
        git(project, "add", "-A")
        git(project, "commit", "-qm", "first")
        head = git(project, "rev-parse", "HEAD")

        # The SDK does not upload projects: the CLI makes the session, the SDK works on it.
        made = subprocess.run([AIRLOCK_CLI, "session", "create", "--workspace", project],
                              env=daemon.env(), capture_output=True, text=True, timeout=300)
        self.assertEqual(made.returncode, 0, made.stderr)
        client = airlock.Client(daemon.socket)
        self.addCleanup(client.close)  # after the session's removal (cleanups run last first)
        s = client.get_session(made.stdout.strip())
        self.addCleanup(remove_quietly, s)

        info = s.workspace.info(entries=True)
        self.assertEqual((info.session_id, info.base.path, info.base.head, info.base.branch),
                         (s.id, project, head, "main"))
        self.assertTrue(info.base.tree_digest.startswith("sha256:"), info.base)
        self.assertEqual(info.base.files, len(info.entries))  # .git's files are in it too
        files = [e for e in info.entries if not e.path.startswith(b".git/")]
        self.assertEqual([e.path for e in files], [b"README", b"src/app.py"])
        self.assertEqual((files[0].sha256, files[0].size),
                         (hashlib.sha256(b"hello\n").hexdigest(), 6))
        self.assertIsNone(info.synced)
        self.assertEqual(s.workspace.info().entries, [])

        s.exec(["sh", "-c", "cd /workspace && echo changed > README && " + AGENT_COMMIT +
                " -am 'agent change' && echo new > NEW"], check=True)
        changes = s.workspace.diff()
        self.assertEqual([(c.kind, c.path) for c in changes],
                         [("added", b"NEW"), ("modified", b"README")])
        readme = changes[1]
        self.assertEqual((readme.old_content, readme.new_content, readme.old_size,
                          readme.new_size), (b"hello\n", b"changed\n", 6, 8))
        self.assertEqual((readme.old_mode & 0o777, readme.binary, readme.too_large),
                         (0o644, False, False))
        self.assertEqual((changes[0].old_mode, changes[0].old_content), (0, None))

        dry = s.workspace.bundle(dry_run=True)
        self.assertEqual((dry.info.commits, dry.info.base_commit, dry.data),
                         (1, head, b""))
        self.assertIn("agent change", dry.info.log)
        self.assertIn("NEW", dry.info.uncommitted_stat)

        bundle = s.workspace.bundle(branch="review")
        self.assertEqual((bundle.info.commits, bundle.info.branch), (1, "main"))
        self.assertRegex(bundle.data[:20], rb"^# v[23] git bundle\n")
        # Streamed to a file instead, with the uncommitted work on top: host git takes it.
        path = os.path.join(daemon.dir, "work.bundle")
        with open(path, "wb") as f:
            both = s.workspace.bundle(include_uncommitted=True, to=f)
        self.assertEqual((both.info.commits, both.data), (2, b""))
        git(project, "bundle", "verify", path)
        git(project, "fetch", "-q", path, f"{both.info.ref}:refs/heads/from-session")
        self.assertEqual(git(project, "log", "--format=%s", "main..from-session").splitlines()[-1],
                         "agent change")
        self.assertEqual(git(project, "show", "from-session:README"), "changed")

        async def the_same_for_asyncio():
            async with airlock.aio.Client(daemon.socket) as c:
                a = await c.get_session(s.id)
                self.assertEqual((await a.workspace.info()).base.head, head)
                self.assertEqual([x.path for x in await a.workspace.diff()], [b"NEW", b"README"])
                self.assertEqual((await a.workspace.bundle(dry_run=True)).info.commits, 1)
        asyncio.run(the_same_for_asyncio())

    def test_a_session_without_a_workspace_says_how_to_make_one(self):
        with airlock.Client(daemon.socket) as client:
            with client.session() as s:
                with self.assertRaisesRegex(airlock.FailedPrecondition,
                                            "airlock session create --workspace"):
                    s.workspace.info()
                with self.assertRaises(airlock.FailedPrecondition):
                    s.workspace.bundle()
                with self.assertRaises(airlock.InvalidArgument):
                    s.workspace.bundle(to="not a file")  # before the wire


class AccessTest(unittest.TestCase):
    def test_secrets_of_a_session(self):
        with airlock.Client(daemon.socket) as client:
            with client.session() as s:
                self.assertEqual(s.secrets.list(), [])
                [token] = s.secrets.set(
                    {"API_TOKEN=env:SDK_TEST_TOKEN@api.example.com,example.org": "s3cret-value"})
                self.assertEqual((token.name, token.source, token.hosts, token.body,
                                  token.available, token.last_used),
                                 ("API_TOKEN", "env:SDK_TEST_TOKEN",
                                  ["api.example.com", "example.org"], False, True, None))
                self.assertTrue(token.placeholder)
                self.assertNotIn("s3cret-value", token.placeholder)
                self.assertEqual(s.secrets.list(), [token])
                # The guest holds the placeholder, never the value.
                r = s.exec(["sh", "-c", "echo $API_TOKEN"])
                self.assertEqual(r.stdout.decode(), token.placeholder + "\n")
                # A new value and source for the same name keeps its placeholder.
                [again] = s.secrets.set({"API_TOKEN=env:OTHER@api.example.com?body": b"new"})
                self.assertEqual((again.source, again.hosts, again.body, again.placeholder),
                                 ("env:OTHER", ["api.example.com"], True, token.placeholder))
                self.assertEqual(s.secrets.remove(["API_TOKEN"]), [])
                with self.assertRaises(airlock.NotFound):
                    s.secrets.remove(["API_TOKEN"])
                with self.assertRaises(airlock.InvalidArgument):
                    s.secrets.set({"not a spec": "x"})
                with self.assertRaises(airlock.InvalidArgument):
                    s.secrets.set(["API_TOKEN=env:X@example.org"])  # before the wire

                async def the_same_for_asyncio():
                    async with airlock.aio.Client(daemon.socket) as c:
                        a = await c.get_session(s.id)
                        [t] = await a.secrets.set({"K=env:K@example.org": "v"})
                        self.assertEqual([x.name for x in await a.secrets.list()], ["K"])
                        self.assertEqual(await a.secrets.remove(["K"]), [])
                        return t
                self.assertEqual((asyncio.run(the_same_for_asyncio())).hosts, ["example.org"])

    def test_the_audit_log_says_who_did_what(self):
        since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
        name = f"sdk-audit-{os.getpid()}"
        with airlock.Client(daemon.socket) as client:
            client.create_volume(name, "16m")
            client.remove_volume(name)
            records = client.audit.list(since=since)
            mine = [r for r in records if name in r.target]
            self.assertEqual([r.action for r in mine], ["volume.create", "volume.remove"],
                             records)
            self.assertTrue(all(r.principal.startswith("uid:0") for r in mine), mine)
            self.assertEqual(mine[1].outcome, "ok")
            self.assertTrue(all(re.fullmatch("[0-9a-f]{64}", r.hash) for r in records))
            self.assertEqual([r.seq for r in records], sorted(r.seq for r in records))
            self.assertGreaterEqual(mine[0].time, since)
            [last] = client.audit.list(limit=1)
            self.assertEqual(last.seq, records[-1].seq)
            later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
            self.assertEqual(client.audit.list(since=later), [])
            v = client.audit.verify()
            self.assertEqual((v.ok, v.problem, v.first_bad_seq), (True, "", 0))
            self.assertGreaterEqual(v.last_seq, last.seq)
            self.assertGreaterEqual(v.records, len(records))
            with self.assertRaises(airlock.InvalidArgument):
                client.audit.list(since=datetime.datetime.now())  # no timezone: ambiguous

        async def the_same_for_asyncio():
            async with airlock.aio.Client(daemon.socket) as c:
                self.assertTrue((await c.audit.verify()).ok)
                return await c.audit.list(since=since)
        self.assertEqual([r.seq for r in asyncio.run(the_same_for_asyncio())][:len(records)],
                         [r.seq for r in records])

    def test_the_audit_log_is_not_for_tenants(self):
        with airlock.Client(daemon.address, tls=daemon.tls()) as remote:
            with self.assertRaises(airlock.PermissionDenied):
                remote.audit.list()
            with self.assertRaises(airlock.PermissionDenied):
                remote.audit.verify()


class ApiTest(unittest.TestCase):
    def test_no_generated_type_in_the_public_api(self):
        """Every public class, method and field speaks the SDK's own types, never protobuf's."""
        seen = set()
        leaks = []
        modules = (airlock.client, airlock.aio, airlock.errors)
        public = [o for m in modules for n, o in vars(m).items()
                  if not n.startswith("_") and inspect.isclass(o)
                  and o.__module__.startswith("airlock")]
        public += [getattr(airlock, n) for n in airlock.__all__]
        for cls in public:
            if not inspect.isclass(cls) or cls in seen:
                continue
            seen.add(cls)
            for name, member in inspect.getmembers(cls):
                if inspect.isfunction(member) and (not name.startswith("_") or name == "__init__"):
                    for what, annotation in member.__annotations__.items():
                        if re.search(r"\bpb\b|_pb2|protobuf", str(annotation)):
                            leaks.append(f"{cls.__name__}.{name} {what}: {annotation}")
            if dataclasses.is_dataclass(cls):
                for f in dataclasses.fields(cls):
                    if re.search(r"\bpb\b|_pb2|protobuf", str(f.type)):
                        leaks.append(f"{cls.__name__}.{f.name}: {f.type}")
        self.assertGreater(len(seen), 40)
        self.assertEqual(leaks, [])


def example(name: str) -> subprocess.CompletedProcess:
    """Runs sdk/python/examples/NAME.py as a user would, against the test's daemon."""
    env = dict(daemon.env(), PYTHONPATH=SDK)
    return subprocess.run(["/usr/bin/python3", os.path.join(SDK, "examples", name + ".py")],
                          env=env, capture_output=True, text=True, timeout=300)


class ExamplesTest(unittest.TestCase):
    def test_quickstart(self):
        r = example("quickstart")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^session [0-9a-f]+ is running\nhello from \S+\nexit code 0\n$")

    def test_stream(self):
        r = example("stream")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "".join(f"step {i}\n" for i in range(1, 6)) + "exit code 0\n")
        self.assertEqual(r.stderr, "done\n")

    def test_fork(self):
        r = example("fork")
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.fullmatch(r"(\S+) \((\S+)\):\nbefore the fork\ncopy 0\n"
                         r"(\S+) \((\S+)\):\nbefore the fork\ncopy 1\n"
                         r"(\S+) \(the original\):\nbefore the fork\n", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(len({m[1], m[3], m[5]}), 3, r.stdout)  # three sessions
        self.assertNotEqual(m[2], m[4], r.stdout)               # each copy its own hostname


class WatchTest(unittest.TestCase):
    def test_watch_sees_states_commands_and_denials_as_they_happen(self):
        import threading
        with airlock.Client(daemon.socket) as c:
            seen = []
            watch = c.watch()
            ready = threading.Event()

            def follow():
                ready.set()
                for event in watch:
                    seen.append(event)
            follower = threading.Thread(target=follow)
            follower.start()
            ready.wait()
            time.sleep(0.5)  # the call is under way before anything happens
            s = c.create_session()
            s.exec(["sh", "-c", "exit 3"])
            s.exec(["python3", "-c", "import socket\ntry: socket.getaddrinfo('denied.test', 80)\n"
                                    "except OSError: pass"])
            s.pause()
            s.exec(["true"])  # resumes it
            s.remove()
            deadline = time.monotonic() + 30
            while not any(e.state == "stopped" for e in seen if e.session_id == s.id):
                self.assertLess(time.monotonic(), deadline, seen)
                time.sleep(0.1)
            watch.close()
            follower.join(10)
            mine = [e for e in seen if e.session_id == s.id]
            states = [e.state for e in mine if e.kind == "state"]
            self.assertEqual(states[:2], ["creating", "running"])
            self.assertIn("paused", states)
            self.assertEqual(states[-1], "stopped")
            starts = [e for e in mine if e.kind == "exec_start"]
            self.assertEqual(starts[0].argv, (b"sh", b"-c", b"exit 3"))
            exits = [e for e in mine if e.kind == "exec_exit"]
            self.assertEqual(exits[0].exit_code, 3)
            self.assertEqual(exits[0].exec_id, starts[0].exec_id)
            denied = [e for e in mine if e.kind == "denied"]
            self.assertTrue(any(e.destination.startswith("denied.test") for e in denied), mine)
            self.assertTrue(all(e.lost == 0 for e in mine))
            with self.assertRaises(airlock.NotFound):
                list(c.watch("0123456789ab"))


class TlsTest(unittest.TestCase):
    def test_mutual_tls_is_its_own_tenant(self):
        with airlock.Client(daemon.address, tls=daemon.tls()) as remote:
            with remote.session() as s:
                self.assertEqual(s.exec(["echo", "over tls"]).stdout, b"over tls\n")
                with airlock.Client(daemon.socket) as local:
                    with self.assertRaises(airlock.NotFound):
                        local.get_session(s.id)  # another tenant's session is not found
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                f"{daemon.dir}/stranger.key", "-out", f"{daemon.dir}/stranger.pem", "-days", "1",
                "-subj", "/CN=stranger")
        with self.assertRaises(airlock.Unavailable):
            airlock.Client(daemon.address, tls=daemon.tls("stranger"), connect_timeout=3)


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    async def test_the_same_api_for_asyncio(self):
        async with airlock.aio.Client(daemon.socket) as c:
            async with c.session() as s:
                r = await s.exec(["sh", "-c", "cat; echo e >&2; exit 4"], stdin=b"async in")
                self.assertEqual((r.exit_code, r.stdout, r.stderr), (4, b"async in", b"e\n"))
                events = [e async for e in s.exec_stream(["sh", "-c", "echo a; echo b >&2"])]
                self.assertEqual(events, [airlock.Output("stdout", b"a\n"),
                                          airlock.Output("stderr", b"b\n"),
                                          airlock.Exit(exit_code=0)])
                async with s.exec_stream(["sh", "-c", "read x; echo $x; sleep 300"],
                                         stdin=True) as stream:
                    await stream.write("typed\n")
                    async for event in stream:
                        if isinstance(event, airlock.Output):
                            await stream.signal(signal.SIGKILL)
                self.assertEqual(stream.exit.signal, signal.SIGKILL)
                await s.files.write("/tmp/f", "text")
                self.assertEqual(await s.files.read("/tmp/f"), b"text")
                volume = await c.create_volume(f"sdk-async-{os.getpid()}", 16 << 20)
                self.assertIn(volume.name, [v.name for v in await c.volumes()])
                r = await c.run(["ls", "/v"], volumes=[f"{volume.name}:/v:ro"])
                self.assertEqual(r.stdout, b"lost+found\n")
                await c.remove_volume(volume.name)

                async def pieces():
                    for i in range(3):
                        yield bytes([i]) * (700 << 10)
                self.assertEqual(await s.files.write("/tmp/g", pieces()), 2100 << 10)
                got = [p async for p in s.files.read_stream("/tmp/g")]
                self.assertEqual(b"".join(got), b"".join([bytes([i]) * (700 << 10)
                                                          for i in range(3)]))
                exposed = await s.ports.expose(8000, public=True)
                self.assertEqual((exposed.token, [x.port for x in await s.ports.list()]),
                                 ("", [8000]))
                self.assertEqual((await s.pause()).state, "paused")
                kids = await s.fork(2)
                names = await asyncio.gather(*(k.exec(["hostname"]) for k in kids))
                self.assertNotEqual(names[0].stdout, names[1].stdout)
                for k in kids:
                    await k.remove()
                with self.assertRaises(airlock.Timeout):
                    await s.exec(["sleep", "30"], timeout=0.5)
                await s.exec(["sh", "-c", "cd /tmp && (setsid python3 -m http.server 8001 "
                              "</dev/null >/dev/null 2>&1 &) && until python3 -c \"import socket; "
                              "socket.create_connection(('127.0.0.1', 8001))\" 2>/dev/null; do "
                              "sleep 0.2; done"], check=True)
                # Last: the forwarded connection may still be ending in airlockd (a pause now
                # would be refused as in use); removal does not wait for it.
                async with await s.ports.forward(8001) as f:
                    reader, writer = await asyncio.open_connection("127.0.0.1", f.port)
                    writer.write(b"GET /f HTTP/1.0\r\n\r\n")
                    await writer.drain()
                    reply = await reader.read()
                    writer.close()
                    self.assertTrue(reply.endswith(b"\r\n\r\ntext"), reply)
            self.assertEqual((await c.get_session(s.id)).state, "stopped")
            r = await c.run(["echo", "one shot"])
            self.assertEqual(r.stdout, b"one shot\n")


if __name__ == "__main__":
    unittest.main()
