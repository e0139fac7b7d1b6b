"""The Python SDK against a real airlockd (its own, on a private AIRLOCK_HOME that shares the
host's images and kernel), as a program would use it: sessions, commands, streams, files,
pause/resume/fork, the errors, asyncio, and airlockd's TCP listener with mutual TLS.

    python3 -m unittest discover -s sdk/python/tests   # as root, after scripts/setup.sh;
                                                      # AIRLOCKD names the daemon binary
"""
import asyncio
import hashlib
import io
import os
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import airlock  # noqa: E402
import airlock.aio  # noqa: E402
from airlock.v1 import airlock_pb2 as pb  # noqa: E402

AIRLOCKD = os.environ.get("AIRLOCKD") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "build", "airlockd")
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
        home = os.path.join(self.dir, "home")
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


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.client = airlock.Client(daemon.socket)
        self.addCleanup(self.client.close)

    def test_the_readme_example(self):
        with self.client.session(memory="1g") as s:
            self.assertEqual(s.state, "running")
            self.assertEqual(s.info.limits.memory, 1 << 30)
            r = s.exec(["python3", "-c", "print(6*7)"])
            self.assertEqual((r.stdout, r.exit_code), (b"42\n", 0))
            events = list(s.exec_stream(["sh", "-c", "echo one; sleep 0.3; echo two >&2; exit 5"]))
            self.assertEqual(events[0], airlock.Output("stdout", b"one\n"))
            self.assertEqual(events[1], airlock.Output("stderr", b"two\n"))
            self.assertEqual(events[-1], airlock.Exit(exit_code=5))
            s.files.write("/tmp/x.py", b"print('from a file')")
            self.assertEqual(s.exec(["python3", "/tmp/x.py"]).stdout, b"from a file\n")
            self.assertEqual(s.pause().state, "paused")
            kids = s.fork(3)
            try:
                self.assertEqual(len({k.id for k in kids} | {s.id}), 4)
                for k in kids:
                    self.assertEqual(k.exec(["cat", "/tmp/x.py"]).stdout,
                                     b"print('from a file')")
            finally:
                for k in kids:
                    k.remove()
            sid = s.id
        self.assertEqual(self.client.get_session(sid).state, "stopped")  # its record stays

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
            deadline = time.monotonic() + 30
            while "sleep 300" in s.exec(["ps", "-eo", "args"]).stdout.decode():
                self.assertLess(time.monotonic(), deadline, "the abandoned command still runs")
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
