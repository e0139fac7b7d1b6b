//! The Rust SDK against a real airlockd (its own, on a private AIRLOCK_HOME that shares the
//! host's images and kernel), as a program would use it: sessions, commands, streams, files,
//! pause/resume/fork, the errors, and airlockd's TCP listener with mutual TLS. As
//! sdk/go/sdk_test.go does it.
//!
//! Run as root after scripts/setup.sh; AIRLOCKD names the daemon binary (default
//! ../../build/airlockd from this folder).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use airlock::{
    Client, Error, EventKind, ExecEvent, ExecOptions, NetworkChange, Session, SessionOptions, SessionState,
    Tls,
};

const SERVER_NAME: &str = "airlock-sdk-test-server";

struct Daemon {
    dir: PathBuf,
    socket: PathBuf,
    address: String,
}

static DAEMON: Mutex<Option<Arc<Daemon>>> = Mutex::new(None);
static CHILD: Mutex<Option<(std::process::Child, PathBuf)>> = Mutex::new(None);

fn openssl(args: &[&str]) {
    let out = Command::new("openssl").args(args).output().expect("openssl runs");
    assert!(out.status.success(), "openssl {:?}: {}", args, String::from_utf8_lossy(&out.stderr));
}

fn issue(dir: &Path, name: &str, cn: &str) {
    let p = |ext: &str| dir.join(format!("{}.{}", name, ext)).to_str().unwrap().to_string();
    let (ca, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        &p("key"),
        "-out",
        &p("csr"),
        "-subj",
        &format!("/CN={}", cn),
    ]);
    std::fs::write(p("ext"), format!("subjectAltName=DNS:{}\n", cn)).unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p("csr"),
        "-CA",
        ca.to_str().unwrap(),
        "-CAkey",
        ca_key.to_str().unwrap(),
        "-CAcreateserial",
        "-out",
        &p("pem"),
        "-days",
        "1",
        "-extfile",
        &p("ext"),
    ]);
}

/// Ends airlockd and removes its directory when the test binary exits (the harness exits
/// through `exit`, which runs this).
extern "C" fn stop_daemon() {
    if let Ok(mut child) = CHILD.lock() {
        if let Some((mut airlockd, dir)) = child.take() {
            unsafe { libc::kill(airlockd.id() as i32, libc::SIGTERM) };
            let _ = airlockd.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The test binary's own airlockd, started on first use.
fn daemon() -> Arc<Daemon> {
    let mut slot = DAEMON.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = slot.as_ref() {
        return d.clone();
    }
    let dir = std::env::temp_dir().join(format!("airlock-rustsdk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The VMM (uid 65534) reads the image through here.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let host_home =
        PathBuf::from(std::env::var("AIRLOCK_HOME").unwrap_or_else(|_| "/var/lib/airlock".into()));
    let home = dir.join("home");
    let kernel = std::fs::canonicalize(host_home.join("kernel/vmlinux"))
        .expect("the host's guest kernel (run scripts/setup.sh)");
    std::fs::create_dir_all(home.join("kernel")).unwrap();
    std::os::unix::fs::symlink(host_home.join("images"), home.join("images")).unwrap();
    std::os::unix::fs::symlink(kernel, home.join("kernel/vmlinux")).unwrap();
    let (ca, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        ca_key.to_str().unwrap(),
        "-out",
        ca.to_str().unwrap(),
        "-days",
        "1",
        "-subj",
        "/CN=airlock-sdk-test-ca",
    ]);
    issue(&dir, "server", SERVER_NAME);
    issue(&dir, "client", "rust-sdk-client");
    let address = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let socket = dir.join("sock");
    let binary = std::env::var("AIRLOCKD")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../build/airlockd").to_string());
    let log = std::fs::File::create(dir.join("airlockd.log")).unwrap();
    let child = Command::new(&binary)
        .args(["--socket", socket.to_str().unwrap(), "--listen-tcp", &address])
        .args(["--tls-cert", dir.join("server.pem").to_str().unwrap()])
        .args(["--tls-key", dir.join("server.key").to_str().unwrap()])
        .args(["--tls-client-ca", ca.to_str().unwrap()])
        .env("AIRLOCK_HOME", &home)
        .env("AIRLOCK_HTTP_LISTEN", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {} (set AIRLOCKD to the daemon binary)", binary, e));
    *CHILD.lock().unwrap() = Some((child, dir.clone()));
    unsafe { libc::atexit(stop_daemon) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        if Instant::now() > deadline {
            panic!(
                "airlockd did not start: {}",
                std::fs::read_to_string(dir.join("airlockd.log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let d = Arc::new(Daemon { dir, socket, address });
    *slot = Some(d.clone());
    d
}

async fn connect() -> Client {
    Client::connect(daemon().socket.to_str().unwrap()).await.expect("connect to the test's airlockd")
}

async fn exec(s: &Session, argv: &[&str]) -> airlock::ExecResult {
    s.exec(argv, &ExecOptions::default()).await.unwrap_or_else(|e| panic!("{:?}: {}", argv, e))
}

fn text(data: &[u8]) -> &str {
    std::str::from_utf8(data).unwrap()
}

/// The shared scenario of the four SDKs: create, exec with exit code 3 and stderr, stream 64
/// MiB, write and read a file, pause, resume, fork 2, remove.
#[tokio::test]
async fn the_shared_scenario() {
    let c = connect().await;
    let mut s =
        c.create_session(&SessionOptions { memory: "1g".into(), ..Default::default() }).await.unwrap();
    assert_eq!(s.info().state, SessionState::Running);
    assert_eq!(s.info().limits.memory, 1 << 30);

    let r = exec(&s, &["sh", "-c", "echo out; echo to-err >&2; exit 3"]).await;
    assert_eq!((r.exit_code, text(&r.stdout), text(&r.stderr)), (3, "out\n", "to-err\n"));
    assert!(!r.ok());

    let mut stream =
        s.exec_stream(["head", "-c", "67108864", "/dev/zero"], &ExecOptions::default()).await.unwrap();
    let (mut bytes, mut zeros, mut exit) = (0usize, true, None);
    while let Some(event) = stream.recv().await.unwrap() {
        match event {
            ExecEvent::Stdout(data) => {
                bytes += data.len();
                zeros &= data.iter().all(|&b| b == 0);
            }
            ExecEvent::Stderr(data) => panic!("stderr: {:?}", data),
            ExecEvent::Exit(e) => exit = Some(e),
        }
    }
    assert_eq!((bytes, zeros, exit.unwrap().exit_code), (64 << 20, true, 0));

    let content: Vec<u8> = (0..(3 << 20) + 17).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(
        s.files().write("/root/data.bin", content.clone(), 0o600).await.unwrap(),
        content.len() as u64
    );
    assert_eq!(s.files().read("/root/data.bin", 0).await.unwrap(), content);
    assert_eq!(
        text(&exec(&s, &["stat", "-c", "%a %s", "/root/data.bin"]).await.stdout),
        format!("600 {}\n", content.len())
    );

    assert_eq!(s.pause().await.unwrap().state, SessionState::Paused);
    assert_eq!(s.resume().await.unwrap().state, SessionState::Running);
    assert_eq!(s.files().read("/root/data.bin", 0).await.unwrap(), content);

    let kids = s.fork(2).await.unwrap();
    assert_eq!(kids.len(), 2);
    let mut ids: Vec<&str> = kids.iter().map(|k| k.id()).chain([s.id()]).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    for k in &kids {
        assert_eq!(k.files().read("/root/data.bin", 0).await.unwrap(), content);
        assert_ne!(k.info().hostname, s.info().hostname);
        k.remove().await.unwrap();
    }
    s.remove().await.unwrap();
    assert_eq!(c.get_session(s.id()).await.unwrap().info().state, SessionState::Stopped);
    // its record stays
}

#[tokio::test]
async fn exec_takes_stdin_env_cwd_user_and_says_how_it_ended() {
    let c = connect().await;
    let s = c.create_session(&SessionOptions::default()).await.unwrap();
    let with_stdin = ExecOptions { stdin: Some(b"in\0put".to_vec()), ..Default::default() };
    let r = s.exec(["sh", "-c", "cat; echo to-err >&2; exit 3"], &with_stdin).await.unwrap();
    assert_eq!((r.exit_code, &r.stdout[..], text(&r.stderr)), (3, &b"in\0put"[..], "to-err\n"));

    // stdin larger than the HTTP/2 windows, read while it is sent.
    let big: Vec<u8> = (0..3 << 20).map(|i| (i % 253) as u8).collect();
    let r = s.exec(["wc", "-c"], &ExecOptions { stdin: Some(big), ..Default::default() }).await.unwrap();
    assert_eq!(text(&r.stdout).trim(), (3 << 20).to_string());

    let options = ExecOptions {
        env: [("GREETING".to_string(), "hello".to_string())].into_iter().collect(),
        cwd: "/tmp".into(),
        user: "nobody".into(),
        ..Default::default()
    };
    let r = s.exec(["sh", "-c", "echo $GREETING in $(pwd) as $(id -un)"], &options).await.unwrap();
    assert_eq!(text(&r.stdout), "hello in /tmp as nobody\n");

    let r = exec(&s, &["no-such-command"]).await;
    assert!(r.exit_code == 127 && r.message.contains("not found"), "{:?}", r);
    let r = exec(&s, &["sh", "-c", "kill -TERM $$"]).await;
    assert_eq!((r.exit_code, r.signal), (143, 15));

    let timeout = ExecOptions { timeout: Some(Duration::from_secs(1)), ..Default::default() };
    match s.exec(["sh", "-c", "echo started; sleep 30"], &timeout).await {
        Err(Error::Timeout { result: Some(r), .. }) => {
            assert!(r.timed_out && text(&r.stdout) == "started\n", "{:?}", r)
        }
        other => panic!("{:?}", other),
    }
    match s.exec(["false"], &ExecOptions { check: true, ..Default::default() }).await {
        Err(Error::CommandFailed { result, message }) => {
            assert_eq!(result.exit_code, 1);
            assert!(message.contains("false exited with 1"), "{}", message);
        }
        other => panic!("{:?}", other),
    }
    s.remove().await.unwrap();
}

#[tokio::test]
async fn a_stream_takes_stdin_and_signals_and_dropping_it_ends_the_command() {
    let c = connect().await;
    let s = c.create_session(&SessionOptions::default()).await.unwrap();
    let open = ExecOptions { open_stdin: true, ..Default::default() };
    let mut stream =
        s.exec_stream(["sh", "-c", "read line; echo got $line; sleep 300"], &open).await.unwrap();
    let input = stream.input();
    input.write(b"hello\n").await.unwrap();
    let mut exit = None;
    while let Some(event) = stream.recv().await.unwrap() {
        match event {
            ExecEvent::Stdout(data) if &data[..] == b"got hello\n" => input.signal(15).await.unwrap(),
            ExecEvent::Exit(e) => exit = Some(e),
            other => panic!("{:?}", other),
        }
    }
    let exit = exit.unwrap();
    assert_eq!((exit.exit_code, exit.signal), (143, 15));

    let mut stream =
        s.exec_stream(["sh", "-c", "echo go; sleep 300"], &ExecOptions::default()).await.unwrap();
    assert_eq!(stream.recv().await.unwrap(), Some(ExecEvent::Stdout("go\n".into())));
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(30);
    while text(&exec(&s, &["ps", "-eo", "args"]).await.stdout).contains("sleep 300") {
        assert!(Instant::now() < deadline, "the dropped command still runs");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    s.remove().await.unwrap();
}

/// A reader that gives `data`, then fails.
struct Failing {
    data: Vec<u8>,
}

impl tokio::io::AsyncRead for Failing {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.data.is_empty() {
            return std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::Other,
                "the source went away",
            )));
        }
        let n = self.data.len().min(buf.remaining());
        buf.put_slice(&self.data[..n]);
        self.data.drain(..n);
        std::task::Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn files_of_any_size_go_both_ways_and_a_failed_upload_changes_nothing() {
    let c = connect().await;
    let s = c.create_session(&SessionOptions::default()).await.unwrap();
    let big: Vec<u8> = (0..(6 << 20) + 3).map(|i| (i % 241) as u8).collect();
    let written = s.files().write_from("/root/big", &big[..], 0).await.unwrap();
    assert_eq!(written, big.len() as u64);
    let mut back = Vec::new();
    assert_eq!(s.files().read_to("/root/big", &mut back, 0).await.unwrap(), big.len() as u64);
    assert!(back == big, "the file came back different");
    assert_eq!(text(&exec(&s, &["stat", "-c", "%a", "/root/big"]).await.stdout), "644\n");

    let mut pieces = s.files().read_stream("/root/big", 0).await.unwrap();
    let mut count = 0;
    while let Some(piece) = pieces.next().await.unwrap() {
        count += piece.len();
    }
    assert_eq!(count, big.len());

    // A reader that fails part-way: the old file stays.
    let failing = Failing { data: vec![9u8; 3 << 20] };
    match s.files().write_from("/root/big", failing, 0).await {
        Err(Error::Io(e)) => assert_eq!(e.to_string(), "the source went away"),
        other => panic!("{:?}", other),
    }
    assert!(s.files().read("/root/big", 0).await.unwrap() == big, "a failed upload changed the file");

    assert!(matches!(s.files().read("/root/big", 10).await, Err(Error::InvalidArgument { .. })));
    assert!(matches!(s.files().write("relative", Vec::new(), 0).await, Err(Error::InvalidArgument { .. })));
    assert!(matches!(
        s.files().write("/root/x", Vec::new(), 0o10000).await,
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(s.files().write("/root/empty", Vec::new(), 0).await.unwrap(), 0);
    assert!(s.files().read("/root/empty", 0).await.unwrap().is_empty());
    assert!(matches!(s.files().read("/root/none", 0).await, Err(Error::NotFound { .. })));
    s.remove().await.unwrap();
}

#[tokio::test]
async fn errors_are_typed() {
    let c = connect().await;
    assert!(matches!(c.get_session("0123456789ab").await, Err(Error::NotFound { .. })));
    match c.create_session(&SessionOptions { memory: "lots".into(), ..Default::default() }).await {
        Err(Error::InvalidArgument { message, .. }) => assert!(message.contains("not a size"), "{}", message),
        other => panic!("{:?}", other),
    }
    let bad_rule = SessionOptions { allow: vec!["not a rule!".into()], ..Default::default() };
    assert!(matches!(c.create_session(&bad_rule).await, Err(Error::InvalidArgument { .. })));

    let mut s = c.create_session(&SessionOptions::default()).await.unwrap();
    match s.fork(17).await {
        Err(Error::LimitExceeded { message }) => assert!(message.contains("forks"), "{}", message),
        other => panic!("{:?}", other),
    }
    let busy = s.exec_stream(["sleep", "300"], &ExecOptions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    match s.pause().await {
        Err(e @ Error::FailedPrecondition { .. }) => assert!(e.is_failed_precondition()),
        other => panic!("{:?}", other),
    }
    drop(busy);
    for vm in c.vms().await.unwrap() {
        if vm.session_id == s.id() {
            unsafe { libc::kill(vm.pid, libc::SIGKILL) };
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.refresh().await.unwrap().state != SessionState::Failed {
        assert!(Instant::now() < deadline, "the session never failed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match s.exec(["true"], &ExecOptions::default()).await {
        Err(e @ Error::SessionFailed { .. }) => {
            assert!(e.is_failed_precondition());
            if let Error::SessionFailed { reason, .. } = e {
                assert!(!reason.is_empty());
            }
        }
        other => panic!("{:?}", other),
    }
    let _ = s.remove().await;

    let d = daemon();
    let missing = d.dir.join("no-such.sock");
    assert!(matches!(Client::connect(missing.to_str().unwrap()).await, Err(Error::Unavailable { .. })));
    assert!(matches!(Client::connect(&d.address).await, Err(Error::InvalidArgument { .. })));
    // TCP without TLS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_removes_its_session_when_dropped() {
    let c = connect().await;
    let guard = c.session(&SessionOptions::default()).await.unwrap();
    let id = guard.id().to_string();
    assert_eq!(text(&exec(&guard, &["echo", "guarded"]).await.stdout), "guarded\n");
    drop(guard);
    // The removal is done when drop returns.
    assert_eq!(c.get_session(&id).await.unwrap().info().state, SessionState::Stopped);

    let kept = c.session(&SessionOptions::default()).await.unwrap().keep();
    assert_eq!(c.get_session(kept.id()).await.unwrap().info().state, SessionState::Running);
    kept.remove().await.unwrap();
}

#[test]
fn a_guard_dropped_on_a_current_thread_runtime_or_outside_one_removes_too() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (c, guard) = runtime.block_on(async {
        let c = connect().await;
        let guard = c.session(&SessionOptions::default()).await.unwrap();
        let id = guard.id().to_string();
        drop(guard); // on the runtime's own thread: a connection of its own
        assert_eq!(c.get_session(&id).await.unwrap().info().state, SessionState::Stopped);
        (c.clone(), c.session(&SessionOptions::default()).await.unwrap())
    });
    let id = guard.id().to_string();
    drop(guard); // outside any runtime
    let state = runtime.block_on(async { c.get_session(&id).await.unwrap().info().state });
    assert_eq!(state, SessionState::Stopped);
}

#[tokio::test]
async fn network_rules_logs_timeline_metrics_and_listings() {
    let c = connect().await;
    let s = c
        .create_session(&SessionOptions { allow: vec!["pypi.org".into()], ..Default::default() })
        .await
        .unwrap();
    let rules = s.network().rules().await.unwrap();
    assert!(rules.iter().any(|r| r.rule == "pypi.org" && !r.deny), "{:?}", rules);
    let change = NetworkChange {
        allow: vec!["example.com".into()],
        remove: vec!["pypi.org".into()],
        ..Default::default()
    };
    let rules = s.network().change(&change).await.unwrap();
    let names: Vec<&str> = rules.iter().map(|r| r.rule.as_str()).collect();
    assert!(names.contains(&"example.com") && !names.contains(&"pypi.org"), "{:?}", names);

    exec(&s, &["sh", "-c", "echo logged; exit 4"]).await;
    let logs = s.logs(0).await.unwrap();
    assert!(
        logs.iter().any(|e| e.stream == airlock::LogStream::Stdout && &e.data[..] == b"logged\n"),
        "{:?}",
        logs
    );
    let timeline = s.timeline().await.unwrap();
    assert_eq!(timeline.first().map(|e| e.kind.as_str()), Some("session.create"));
    let run =
        timeline.iter().find(|e| e.kind == "exec" && e.exit_code == 4).expect("the command in the timeline");
    assert!(run.failed && run.argv.len() == 3 && &run.output[..] == b"logged\n", "{:?}", run);
    let m = s.metrics().await.unwrap();
    assert!(m.memory_total > 0 && m.processes > 0, "{:?}", m);

    assert!(c.list_sessions().await.unwrap().iter().any(|x| x.id() == s.id()));
    assert!(!c.images().await.unwrap().is_empty());
    assert!(c.vms().await.unwrap().iter().any(|v| v.session_id == s.id()));
    s.remove().await.unwrap();
}

#[tokio::test]
async fn watch_sees_states_and_commands() {
    let c = connect().await;
    let mut watcher = c.watch(None).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(e)) = watcher.recv().await {
            if tx.send(e).is_err() {
                break;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await; // the call is under way first
    let s = c.create_session(&SessionOptions::default()).await.unwrap();
    exec(&s, &["sh", "-c", "exit 3"]).await;
    s.remove().await.unwrap();
    let (mut states, mut start, mut exit) = (Vec::new(), None, None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while states.last() != Some(&SessionState::Stopped) {
        let e = tokio::time::timeout_at(deadline, rx.recv()).await.expect("no stop seen").unwrap();
        if e.session_id != s.id() {
            continue;
        }
        match e.kind {
            EventKind::State => states.push(e.state.unwrap()),
            EventKind::ExecStart if start.is_none() => start = Some(e),
            EventKind::ExecExit if exit.is_none() => exit = Some(e),
            _ => {}
        }
    }
    assert_eq!(&states[..2], &[SessionState::Creating, SessionState::Running], "{:?}", states);
    let (start, exit) = (start.unwrap(), exit.unwrap());
    assert_eq!(start.argv.join(&b' '), b"sh -c exit 3");
    assert_eq!((exit.exit_code, exit.exec_id), (3, start.exec_id));
    let mut none = c.watch(Some("0123456789ab")).await.unwrap();
    assert!(matches!(none.recv().await, Err(Error::NotFound { .. })));
}

#[tokio::test]
async fn mutual_tls_is_its_own_tenant() {
    let d = daemon();
    let tls = Tls {
        ca: d.dir.join("ca.pem"),
        cert: d.dir.join("client.pem"),
        key: d.dir.join("client.key"),
        server_name: Some(SERVER_NAME.into()),
    };
    let remote = Client::connect_tls(&d.address, tls.clone()).await.unwrap();
    let s = remote.create_session(&SessionOptions::default()).await.unwrap();
    assert_eq!(text(&exec(&s, &["echo", "over tls"]).await.stdout), "over tls\n");
    assert!(matches!(connect().await.get_session(s.id()).await, Err(Error::NotFound { .. })));
    s.remove().await.unwrap();

    let (key, pem) = (d.dir.join("stranger.key"), d.dir.join("stranger.pem"));
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        pem.to_str().unwrap(),
        "-days",
        "1",
        "-subj",
        "/CN=stranger",
    ]);
    let stranger = Tls { cert: pem, key, ..tls };
    match Client::connect_tls(&d.address, stranger).await {
        Err(Error::Unavailable { .. }) => {}
        other => panic!("a stranger's certificate: {:?}", other.err()),
    }
}

#[tokio::test]
async fn secrets_ports_and_the_audit_log() {
    let c = connect().await;
    let secrets = [("TOKEN=env:AIRLOCK_UNUSED@api.example.com".to_string(), Some(b"s3cret-value".to_vec()))];
    let s = c
        .create_session(&SessionOptions { secrets: secrets.into_iter().collect(), ..Default::default() })
        .await
        .unwrap();
    let listed = s.secrets().list().await.unwrap();
    assert_eq!(listed.len(), 1, "{:?}", listed);
    let token = &listed[0];
    assert!(token.name == "TOKEN" && token.hosts == ["api.example.com"] && token.available, "{:?}", token);
    let seen = exec(&s, &["sh", "-c", "echo $TOKEN"]).await;
    assert_eq!(text(&seen.stdout).trim(), token.placeholder);
    assert!(!text(&seen.stdout).contains("s3cret-value"));
    let more = [("OTHER=env:AIRLOCK_UNUSED@other.example.com".to_string(), Some(b"v".to_vec()))];
    assert_eq!(s.secrets().set(&more.into_iter().collect()).await.unwrap().len(), 2);
    let left = s.secrets().remove(&["TOKEN"]).await.unwrap();
    assert_eq!(left.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(), ["OTHER"]);

    let exposed = s.ports().expose(8000, false).await.unwrap();
    assert!(
        exposed.port == 8000 && !exposed.token.is_empty() && exposed.url.contains(&exposed.token),
        "{:?}",
        exposed
    );
    assert_eq!(s.ports().list().await.unwrap(), [exposed]);
    s.ports().unexpose(8000).await.unwrap();
    assert!(s.ports().list().await.unwrap().is_empty());
    assert!(matches!(s.ports().expose(0, false).await, Err(Error::InvalidArgument { .. })));
    s.remove().await.unwrap();

    // Root over the socket reads the audit log, which holds what was just done.
    let records = c.audit(None, 0).await.unwrap();
    assert!(
        records.iter().any(|r| r.action == "session.create" && r.target == s.id()),
        "{:?}",
        records.last()
    );
    let verified = c.verify_audit().await.unwrap();
    assert!(verified.ok && verified.records > 0, "{:?}", verified);
}
