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
    BundleOptions, ChangeKind, Client, DockerfileBuild, Error, EventKind, ExecEvent, ExecOptions, ImageBuild,
    NetworkChange, Session, SessionOptions, SessionState, Tls,
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

/// A string as JSON writes it (the transcript's quoting, as the other SDKs' JSON encoders do
/// for what the scenario prints).
fn json_string(data: &[u8]) -> String {
    let mut out = String::from("\"");
    for c in String::from_utf8_lossy(data).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The steps of sdk/scenario.txt with this SDK's API, a line of the transcript for each.
async fn run_the_scenario(c: &Client, transcript: &mut Vec<String>) -> airlock::Result<()> {
    // 1. create
    let mut s = c.create_session(&SessionOptions { memory: "1g".into(), ..Default::default() }).await?;
    transcript.push(format!("create state={} memory={}", s.info().state, s.info().limits.memory));

    // 2. exec, collected
    let r = s.exec(["sh", "-c", "echo out; echo to-err >&2; exit 3"], &ExecOptions::default()).await?;
    transcript.push(format!(
        "exec exit={} stdout={} stderr={}",
        r.exit_code,
        json_string(&r.stdout),
        json_string(&r.stderr)
    ));

    // 3. exec, streamed
    let mut stream = s.exec_stream(["head", "-c", "67108864", "/dev/zero"], &ExecOptions::default()).await?;
    let (mut stdout_bytes, mut all_zero, mut stderr_bytes, mut exit) = (0usize, true, 0usize, None);
    while let Some(event) = stream.recv().await? {
        match event {
            ExecEvent::Stdout(data) => {
                stdout_bytes += data.len();
                all_zero &= data.iter().all(|&b| b == 0);
            }
            ExecEvent::Stderr(data) => stderr_bytes += data.len(),
            ExecEvent::Exit(e) => exit = Some(e.exit_code),
        }
    }
    transcript.push(format!(
        "stream stdout_bytes={} all_zero={} stderr_bytes={} exit={}",
        stdout_bytes,
        all_zero,
        stderr_bytes,
        exit.map_or("none".to_string(), |e| e.to_string())
    ));

    // 4. a file: write, read back, stat
    let content: Vec<u8> = (0..3145745usize).map(|i| (i * 7 % 251) as u8).collect();
    transcript
        .push(format!("write bytes={}", s.files().write("/root/data.bin", content.clone(), 0o600).await?));
    transcript.push(format!("read same={}", s.files().read("/root/data.bin", 0).await? == content));
    let stat = s.exec(["stat", "-c", "%a %s", "/root/data.bin"], &ExecOptions::default()).await?;
    transcript.push(format!("stat stdout={}", json_string(&stat.stdout)));

    // 5. pause, resume, read again
    transcript.push(format!("pause state={}", s.pause().await?.state));
    transcript.push(format!("resume state={}", s.resume().await?.state));
    transcript.push(format!("read same={}", s.files().read("/root/data.bin", 0).await? == content));

    // 6. fork 2
    let kids = s.fork(2).await?;
    let mut ids: Vec<&str> = kids.iter().map(|k| k.id()).chain([s.id()]).collect();
    ids.sort_unstable();
    ids.dedup();
    transcript.push(format!("fork children={} distinct_ids={}", kids.len(), ids.len()));
    for k in &kids {
        let same = k.files().read("/root/data.bin", 0).await? == content;
        transcript.push(format!(
            "child same={} own_hostname={}",
            same,
            k.info().hostname != s.info().hostname
        ));
        k.remove().await?;
    }

    // 7. remove; the record stays
    s.remove().await?;
    transcript.push(format!("remove state={}", c.get_session(s.id()).await?.info().state));
    Ok(())
}

/// The scenario all four SDKs run (sdk/scenario.txt), and the transcript each must print.
#[tokio::test]
async fn the_shared_scenario() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenario.txt");
    let expected: Vec<String> = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {}", file, e))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect();
    let c = connect().await;
    let mut transcript = Vec::new();
    if let Err(e) = run_the_scenario(&c, &mut transcript).await {
        transcript.push(format!("error: {}", e));
    }
    assert!(
        transcript == expected,
        "the transcript differs from {}:\n--- expected\n{}\n--- this SDK's\n{}",
        file,
        expected.join("\n"),
        transcript.join("\n")
    );
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
    let records = c.audit().list(None, 0).await.unwrap();
    assert!(
        records.iter().any(|r| r.action == "session.create" && r.target == s.id()),
        "{:?}",
        records.last()
    );
    let verified = c.audit().verify().await.unwrap();
    assert!(verified.ok && verified.records > 0, "{:?}", verified);
}

#[tokio::test]
async fn the_sdk_and_airlockd_agree_on_an_api_level_or_fail_to_connect() {
    let c = connect().await;
    let v = c.version().await.unwrap();
    assert!(v.level >= airlock::API_LEVEL && v.oldest_client_level <= airlock::API_LEVEL, "{:?}", v);
    assert!(!v.daemon_version.is_empty(), "{:?}", v);

    // This SDK, were it built for a level above airlockd's, is refused at connect.
    let socket = daemon().socket.to_str().unwrap().to_string();
    let newer = v.level + 1;
    match Client::connect_claiming_level_for_tests_only(&socket, newer).await {
        Err(e @ Error::VersionMismatch { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains(&format!("API level {}", v.level))
                    && message.contains(&format!("needs {}", newer))
                    && message.ends_with("upgrade airlockd"),
                "{}",
                message
            );
            if let Error::VersionMismatch { daemon_level, client_level, .. } = e {
                assert_eq!((daemon_level, client_level), (v.level, newer));
            }
        }
        other => panic!("{:?}", other.err()),
    }
}

/// The CLI next to the daemon (`airlock`), run against the test's airlockd.
fn airlock_cli(args: &[&str]) -> String {
    let d = daemon();
    let binary = std::env::var("AIRLOCK").unwrap_or_else(|_| {
        let airlockd = std::env::var("AIRLOCKD")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../build/airlockd").to_string());
        Path::new(&airlockd).with_file_name("airlock").to_str().unwrap().to_string()
    });
    let out = Command::new(&binary)
        .args(args)
        .env("AIRLOCK_SOCKET", &d.socket)
        .env("AIRLOCK_HOME", d.dir.join("home"))
        .output()
        .unwrap_or_else(|e| panic!("{}: {} (set AIRLOCK to the CLI)", binary, e));
    assert!(out.status.success(), "airlock {:?}: {}", args, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Host git in `repo`, with an identity of the test's.
fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=Host User", "-c", "user.email=host@example.com"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {:?}: {}", args, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim_end().to_string()
}

#[tokio::test]
async fn a_workspace_session_shows_its_changes_and_bundles_its_commits() {
    let c = connect().await;
    let project = daemon().dir.join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("README"), "hello\n").unwrap();
    std::fs::write(project.join("src/app.py"), "print(1)\n").unwrap();
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-qm", "first"]);
    let head = git(&project, &["rev-parse", "HEAD"]);

    // Made by the CLI, which captures the project; the SDK works on it by id.
    let id = airlock_cli(&["session", "create", "--workspace", project.to_str().unwrap()]).trim().to_string();
    let s = c.get_session(&id).await.unwrap();
    let base = s.info().workspace.clone().expect("the session's workspace");
    assert_eq!(
        (base.path.as_str(), base.head.as_str(), base.branch.as_str()),
        (project.to_str().unwrap(), head.as_str(), "main")
    );
    assert!(base.files >= 2 && base.tree_digest.starts_with("sha256:"), "{:?}", base); // .git's files count too

    let info = s.workspace().info(true).await.unwrap();
    assert_eq!((info.session_id.as_str(), &info.base, info.synced), (id.as_str(), &base, None));
    let readme = info.entries.iter().find(|e| &e.path[..] == b"README").expect("README in the manifest");
    assert_eq!((readme.size, readme.sha256.len()), (6, 64), "{:?}", readme);
    assert!(s.workspace().info(false).await.unwrap().entries.is_empty());

    let commit = "git -c user.name=Agent -c user.email=agent@example.com commit -q";
    let script =
        format!("cd /workspace && echo changed > README && {} -am 'agent change' && echo new > NEW", commit);
    assert_eq!(exec(&s, &["sh", "-c", &script]).await.exit_code, 0);
    let guest_head = exec(&s, &["git", "-C", "/workspace", "rev-parse", "HEAD"]).await;

    let diff = s.workspace().diff().await.unwrap();
    let paths: Vec<&[u8]> = diff.iter().map(|d| &d.path[..]).collect();
    assert_eq!(paths, [&b"NEW"[..], &b"README"[..]], "{:?}", diff);
    let (added, changed) = (&diff[0], &diff[1]);
    assert!(
        added.kind == ChangeKind::Added && added.old_mode.is_none() && added.new_size == 4,
        "{:?}",
        added
    );
    assert_eq!(added.new_content.as_deref(), Some(&b"new\n"[..]));
    assert_eq!(changed.kind, ChangeKind::Modified);
    assert_eq!(changed.old_content.as_deref(), Some(&b"hello\n"[..]));
    assert_eq!(changed.new_content.as_deref(), Some(&b"changed\n"[..]));
    assert_eq!(changed.new_mode.map(|m| m & 0o170777), Some(0o100644));

    let dry = BundleOptions { dry_run: true, ..Default::default() };
    let planned = s.workspace().bundle(&dry).await.unwrap();
    assert!(planned.data.is_empty() && planned.info.commits == 1, "{:?}", planned);
    assert!(
        planned.info.log.contains("agent change") && planned.info.uncommitted_stat.contains("NEW"),
        "{:?}",
        planned
    );

    let bundle =
        s.workspace().bundle(&BundleOptions { branch: "review".into(), ..Default::default() }).await.unwrap();
    let info = &bundle.info;
    assert_eq!((info.commits, info.base_commit.as_str()), (1, head.as_str()), "{:?}", info);
    assert_eq!(info.head_commit, text(&guest_head.stdout).trim());
    assert!(
        bundle.data.starts_with(b"# v2 git bundle\n") || bundle.data.starts_with(b"# v3 git bundle\n"),
        "{:?}",
        String::from_utf8_lossy(&bundle.data[..bundle.data.len().min(40)])
    );
    // What it holds is the session's commit, for host git to take.
    let file = daemon().dir.join("session.bundle");
    std::fs::write(&file, &bundle.data).unwrap();
    let fetch = format!("{}:refs/heads/from-session", info.ref_name);
    git(&project, &["fetch", "-q", file.to_str().unwrap(), &fetch]);
    assert_eq!(git(&project, &["log", "-1", "--format=%s", "from-session"]), "agent change");
    let mut streamed = Vec::new();
    assert_eq!(&s.workspace().bundle_to(&BundleOptions::default(), &mut streamed).await.unwrap(), info);
    assert_eq!(streamed.len(), bundle.data.len());
    s.remove().await.unwrap();

    let plain = c.create_session(&SessionOptions::default()).await.unwrap();
    match plain.workspace().diff().await {
        Err(Error::FailedPrecondition { message }) => {
            assert!(message.contains("has no workspace"), "{}", message)
        }
        other => panic!("{:?}", other),
    }
    assert!(plain.info().workspace.is_none());
    plain.remove().await.unwrap();
}

/// A tar of `files` (name, content), made by the host's tar.
fn tar_of(name: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let dir = daemon().dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for (path, content) in files {
        std::fs::write(dir.join(path), content).unwrap();
    }
    let names: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
    let out =
        Command::new("tar").arg("-cf").arg("-").arg("-C").arg(&dir).args(&names).output().expect("tar runs");
    assert!(out.status.success());
    out.stdout
}

#[tokio::test]
async fn images_come_in_through_airlockd_imported_or_built() {
    let c = connect().await;
    let listed = |images: Vec<airlock::Image>, name: &str| images.iter().any(|i| i.name == name);
    let archive = tar_of("rootfs", &[("hello", "hello from an imported image\n")]);
    let name = format!("sdk-test/tiny-rust-{}:1", std::process::id());
    let image = c.import_image(&archive[..], &name, true).await.unwrap();
    assert!(image.name == name && image.digest.starts_with("sha256:"), "{:?}", image);
    assert!(listed(c.images().await.unwrap(), &name));
    let removed = c.remove_images(&[&name]).await.unwrap();
    assert!(removed.len() == 1 && removed[0].name == name, "{:?}", removed);
    assert!(!listed(c.images().await.unwrap(), &name));

    // A reader that fails part-way imports nothing.
    match c.import_image(Failing { data: archive[..1024].to_vec() }, &name, true).await {
        Err(Error::Io(e)) => assert_eq!(e.to_string(), "the source went away"),
        other => panic!("{:?}", other),
    }
    assert!(!listed(c.images().await.unwrap(), &name));
    assert!(matches!(c.import_image(&archive[..], "", true).await, Err(Error::InvalidArgument { .. })));
    assert!(matches!(
        c.import_image(&archive[..], "Not A Name", true).await,
        Err(Error::InvalidArgument { .. })
    ));

    // A build from Debian packages: bad input is refused before anything runs (a real one
    // takes minutes).
    let mut lines = Vec::new();
    let bad = ImageBuild {
        tag: name.clone(),
        suite: "Bookworm!".into(),
        packages: vec!["git".into()],
        ..Default::default()
    };
    match c.build_image(&bad, |line| lines.push(line.to_string())).await {
        Err(Error::InvalidArgument { message, .. }) => {
            assert!(message.contains("is not a Debian suite name"), "{}", message)
        }
        other => panic!("{:?}", other),
    }
    assert!(lines.is_empty(), "{:?}", lines);

    // A Dockerfile with its context: COPY and ENV need no build VM; a session runs the image.
    let tag = format!("sdk-test/dockerfile-rust-{}:1", std::process::id());
    let context = tar_of("context", &[("hello.txt", "copied from the context\n")]);
    let build = DockerfileBuild {
        dockerfile: "FROM airlock/bookworm-python\nENV GREETING=hi\nCOPY hello.txt /srv/hello.txt\n".into(),
        tag: tag.clone(),
        ..Default::default()
    };
    let mut steps = Vec::new();
    let built = c.build_dockerfile(&build, &context[..], |line| steps.push(line.to_string())).await.unwrap();
    assert_eq!(built.name, tag);
    assert!(steps.iter().any(|l| l.starts_with("Step 3/3 : COPY hello.txt")), "{:?}", steps);
    let s = c.create_session(&SessionOptions { image: tag.clone(), ..Default::default() }).await.unwrap();
    let r = exec(&s, &["sh", "-c", "cat /srv/hello.txt; echo $GREETING"]).await;
    assert_eq!(text(&r.stdout), "copied from the context\nhi\n");
    s.remove().await.unwrap();
    let broken = DockerfileBuild { dockerfile: "FROM airlock/bookworm-python\nFROB x\n".into(), ..build };
    match c.build_dockerfile(&broken, tokio::io::empty(), |_| {}).await {
        Err(Error::InvalidArgument { message, .. }) => assert!(message.contains("FROB"), "{}", message),
        other => panic!("{:?}", other),
    }
    c.remove_images(&[&tag]).await.unwrap();
}

#[tokio::test]
async fn volumes_take_a_tar_and_the_quota_counts_what_is_used() {
    let c = connect().await;
    let name = format!("sdk-rust-{}", std::process::id());
    let made = c.create_volume(&name, "32m").await.unwrap();
    assert!(made.name == name && made.size == 32 << 20 && !made.snapshot, "{:?}", made);
    let archive = tar_of("volume", &[("greeting", "hello from a volume\n")]);
    let imported = c.import_volume(&name, &archive[..]).await.unwrap();
    assert_eq!(imported.generation, 1, "{:?}", imported);
    match c.import_volume(&name, Failing { data: archive[..512].to_vec() }).await {
        Err(Error::Io(_)) => {}
        other => panic!("{:?}", other),
    }
    let s = c
        .create_session(&SessionOptions { volumes: vec![format!("{}:/data", name)], ..Default::default() })
        .await
        .unwrap();
    assert_eq!(text(&exec(&s, &["cat", "/data/greeting"]).await.stdout), "hello from a volume\n");
    match c.import_volume(&name, &archive[..]).await {
        Err(e) => assert!(e.is_failed_precondition(), "{:?}", e),
        Ok(v) => panic!("imported into a volume a session attaches: {:?}", v),
    }
    // A host to make it on is a fleet's to honour: this airlockd alone refuses it.
    let elsewhere = SessionOptions { host: "host-b".to_string(), ..Default::default() };
    match c.create_session(&elsewhere).await {
        Err(e) => assert!(
            e.is_failed_precondition() && e.to_string().contains("makes sessions only on itself: --host host-b"),
            "{:?}",
            e
        ),
        Ok(s) => panic!("made on this host though host-b was asked: {}", s.id()),
    }
    match c.run(["true"], &elsewhere, &ExecOptions::default()).await {
        Err(Error::InvalidArgument { .. }) => {}
        other => panic!("{:?}", other),
    }

    let quota = c.quota().await.unwrap();
    assert_eq!(quota.tenant, "uid:0");
    let sessions = quota.items.iter().find(|q| q.name == "sessions").expect("a sessions quota");
    assert!(sessions.used >= 1 && !sessions.bytes && !sessions.per_request, "{:?}", sessions);
    let memory = quota.items.iter().find(|q| q.name == "memory").expect("a memory quota");
    assert!(memory.bytes && memory.used >= 512 << 20, "{:?}", memory);
    s.remove().await.unwrap();
    c.remove_volume(&name).await.unwrap();
}

#[tokio::test]
async fn connections_here_reach_a_server_in_the_guest() {
    let c = connect().await;
    let s = c.create_session(&SessionOptions::default()).await.unwrap();
    // An echo server that answers once its client half-closed (a lost end would hang it).
    let server = "cat > /root/echo.py <<'EOF'\n\
        import socket\n\
        s = socket.socket(socket.AF_INET6)\n\
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
        s.bind(('::1', 9000)); s.listen()\n\
        while True:\n\
        \x20   c, _ = s.accept(); data = b''\n\
        \x20   while chunk := c.recv(65536): data += chunk\n\
        \x20   c.sendall(b'echo:' + data); c.close()\n\
        EOF\n\
        (setsid python3 /root/echo.py </dev/null >/dev/null 2>&1 &) && \
        until python3 -c \"import socket; socket.create_connection(('::1', 9000))\" 2>/dev/null; do sleep 0.2; done";
    assert_eq!(exec(&s, &["sh", "-c", server]).await.exit_code, 0);

    let exchange = |address: std::net::SocketAddr, data: Vec<u8>| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut connection = tokio::net::TcpStream::connect(address).await.unwrap();
        connection.write_all(&data).await.unwrap();
        connection.shutdown().await.unwrap();
        let mut got = Vec::new();
        connection.read_to_end(&mut got).await.unwrap();
        got
    };
    let forward = s.ports().forward(9000, "127.0.0.1:0").await.unwrap();
    assert_eq!(forward.port(), 9000);
    // More than a window each way, its end carried through.
    let upload = vec![b'u'; 3 << 20];
    let mut expected = b"echo:".to_vec();
    expected.extend_from_slice(&upload);
    assert!(exchange(forward.local_addr(), upload).await == expected, "the echo came back different");
    assert_eq!(exchange(forward.local_addr(), b"again".to_vec()).await, b"echo:again");

    // Nothing listens on 9999: the connection here ends with nothing.
    let nobody = s.ports().forward(9999, "127.0.0.1:0").await.unwrap();
    assert!(exchange(nobody.local_addr(), b"hello".to_vec()).await.is_empty());

    // Dropped, it listens no more.
    let address = forward.local_addr();
    drop(forward);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(tokio::net::TcpStream::connect(address).await.is_err());
    assert!(matches!(s.ports().forward(0, "127.0.0.1:0").await, Err(Error::InvalidArgument { .. })));
    s.remove().await.unwrap();
}

/// Runs an example (built by `cargo test` with the tests) against the test's airlockd: its
/// stdout and stderr.
fn run_example(name: &str) -> (String, String) {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/sdk-HASH -> target/debug/examples/NAME
    let example = exe.parent().unwrap().parent().unwrap().join("examples").join(name);
    let out = Command::new(&example)
        .env("AIRLOCK_SOCKET", &daemon().socket)
        .output()
        .unwrap_or_else(|e| panic!("{}: {} (cargo test builds the examples)", example.display(), e));
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert!(out.status.success(), "example {}: {}\n{}{}", name, out.status, stdout, stderr);
    (stdout, stderr)
}

#[test]
fn the_examples_run_and_print_what_they_say() {
    let (out, _) = run_example("quickstart");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out);
    let id = lines[0].strip_prefix("session ").and_then(|l| l.strip_suffix(" is running")).expect(&out);
    assert!(id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{}", out);
    assert!(lines[1].starts_with("hello from ") && lines[1].len() > "hello from ".len(), "{}", out);
    assert_eq!(lines[2], "exit code 0");

    let (out, err) = run_example("stream");
    assert_eq!(out, "step 1\nstep 2\nstep 3\nstep 4\nstep 5\nexit code 0\n");
    assert_eq!(err, "done\n");

    let (out, _) = run_example("fork");
    // Each copy has its own id and hostname, its own line added; the original is as it was.
    assert_eq!(out.matches("before the fork\n").count(), 3, "{}", out);
    assert!(
        out.contains("before the fork\ncopy 0\n") && out.contains("before the fork\ncopy 1\n"),
        "{}",
        out
    );
    assert!(out.ends_with("(the original):\nbefore the fork\n"), "{}", out);
    let headers: Vec<&str> = out.lines().filter(|l| l.ends_with("):")).collect();
    assert_eq!(headers.len(), 3, "{}", out);
    let mut hostnames: Vec<&str> = headers[..2].iter().map(|h| h.split(" (").nth(1).unwrap()).collect();
    hostnames.dedup();
    assert_eq!(hostnames.len(), 2, "{}", out);
}
