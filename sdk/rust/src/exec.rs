//! Commands in a session: collected ([`Session::exec`]) or streamed ([`Session::exec_stream`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::Either;
use futures_util::stream::Stream;
use tokio::sync::{watch, Mutex};

use crate::client::Client;
use crate::error::{Code, Error, Result};
use crate::grpc::{Requests, Responses};
use crate::pb;
use crate::pb::exec_request::Kind as RequestKind;
use crate::pb::exec_response::Kind as ResponseKind;
use crate::session::{Session, SessionOptions, SessionState};

/// The exit code airlockd gives a command it could not run or that it ended itself.
const EXIT_AIRLOCK_ERROR: i32 = 125;
/// stdin goes to airlockd in pieces of at most this.
const STDIN_PIECE: usize = 256 << 10;

/// A command's settings; `ExecOptions::default()` is all defaults.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    /// Sent to the command as its stdin, then its end (`None`: /dev/null).
    pub stdin: Option<Vec<u8>>,
    /// For [`Session::exec_stream`]: keep stdin open for [`ExecStream::write`] and
    /// [`ExecStream::close_stdin`] (after `stdin`, if given).
    pub open_stdin: bool,
    pub env: BTreeMap<String, String>,
    /// The working directory ("": /).
    pub cwd: String,
    /// NAME or UID, optionally :GROUP ("": the image's user, else root).
    pub user: String,
    /// The command is killed after this; `None`: no limit.
    pub timeout: Option<Duration>,
    /// [`Session::exec`] returns [`Error::CommandFailed`] on a non-zero exit.
    pub check: bool,
}

/// How a command ended: its exit code (128+N after signal N), and why, when Airlock ended it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exit {
    pub exit_code: i32,
    pub signal: i32,
    pub timed_out: bool,
    pub message: String,
}

/// One event of a running command: a piece of its output as it came, or its exit (the last).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecEvent {
    Stdout(Bytes),
    Stderr(Bytes),
    Exit(Exit),
}

/// A finished command: its exit and all its output, stdout and stderr apart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub signal: i32,
    pub timed_out: bool,
    pub message: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl ExecResult {
    /// Whether the command exited 0.
    pub fn ok(&self) -> bool {
        self.exit_code == 0
    }
}

/// The command's name for messages: argv[0], or the image's command.
fn command_name(argv: &[Bytes]) -> String {
    argv.first()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .unwrap_or_else(|| "the image's command".to_string())
}

pub(crate) fn exec_start<A>(argv: A, options: &ExecOptions, session_id: &str) -> Result<pb::ExecStart>
where
    A: IntoIterator,
    A::Item: AsRef<[u8]>,
{
    let timeout = options.timeout.map_or(0.0, |t| t.as_secs_f64());
    Ok(pb::ExecStart {
        session_id: session_id.to_string(),
        argv: argv.into_iter().map(|a| Bytes::copy_from_slice(a.as_ref())).collect(),
        env: options.env.iter().map(|(k, v)| Bytes::from(format!("{}={}", k, v))).collect(),
        cwd: Bytes::copy_from_slice(options.cwd.as_bytes()),
        stdin: options.stdin.is_some() || options.open_stdin,
        timeout_seconds: timeout,
        user: options.user.clone(),
        ..Default::default()
    })
}

/// Sends to a running command: stdin, its end, signals. Cheap to clone and usable from another
/// task while [`ExecStream::recv`] runs; it holds the command only while the stream lives (a
/// send under way when the stream is dropped is abandoned, and the command cancelled).
#[derive(Clone)]
pub struct ExecInput {
    requests: Weak<Mutex<Requests<pb::ExecRequest>>>,
    state: watch::Receiver<InputState>,
}

/// Whether a command still takes input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InputState {
    Open,
    /// It exited: nothing more is sent, and the request stream is half-closed.
    Exited,
    /// The stream was dropped before the exit: the call is reset.
    Cancelled,
}

impl ExecInput {
    async fn send(&self, kind: RequestKind) -> Result<()> {
        let requests = match self.requests.upgrade() {
            Some(r) => r,
            None => return Ok(()), // the stream is gone, and the command with it
        };
        let mut requests = requests.lock().await;
        let mut state = self.state.clone();
        if *state.borrow() != InputState::Open {
            return Ok(()); // the command ended: what it did not read is dropped
        }
        let message = pb::ExecRequest { kind: Some(kind) };
        let abandoned = {
            let send = requests.send(&message);
            futures_util::pin_mut!(send);
            // A send under way when the command exits goes on (airlockd reads until the
            // half-close that follows); one under way when the stream is dropped stops.
            let cancelled = async {
                loop {
                    let closed = state.changed().await.is_err();
                    if *state.borrow() == InputState::Cancelled {
                        return;
                    }
                    if closed {
                        std::future::pending::<()>().await;
                    }
                }
            };
            futures_util::pin_mut!(cancelled);
            // A send that fails means the call ended: the command's exit (or the call's
            // status, from recv) says why, as in the other SDKs.
            matches!(futures_util::future::select(send, cancelled).await, Either::Right(_))
        };
        if abandoned {
            requests.cancel();
        }
        Ok(())
    }

    /// Sends bytes to the command's stdin (the command was started with `open_stdin`).
    pub async fn write(&self, data: &[u8]) -> Result<()> {
        for piece in data.chunks(STDIN_PIECE) {
            self.send(RequestKind::Stdin(Bytes::copy_from_slice(piece))).await?;
        }
        Ok(())
    }

    /// Ends the command's stdin.
    pub async fn close_stdin(&self) -> Result<()> {
        self.send(RequestKind::StdinEof(true)).await
    }

    /// Sends a signal (like 15) to the command's process group.
    pub async fn signal(&self, signal: i32) -> Result<()> {
        if signal <= 0 {
            return Err(Error::invalid("a signal is a positive number, like 15"));
        }
        self.send(RequestKind::Signal(signal)).await
    }
}

/// A running command. [`recv`](ExecStream::recv) its events (output pieces as they come, then
/// one [`ExecEvent::Exit`], then `None`); [`write`](ExecStream::write),
/// [`close_stdin`](ExecStream::close_stdin) and [`signal`](ExecStream::signal) feed it, from
/// another task through [`input`](ExecStream::input). Dropping the stream before the exit
/// cancels the command.
pub struct ExecStream {
    requests: Arc<Mutex<Requests<pb::ExecRequest>>>,
    responses: Responses<pb::ExecResponse>,
    session: Option<(Client, String)>,
    exit: Option<Exit>,
    done: bool,
    state: watch::Sender<InputState>,
    state_seen: watch::Receiver<InputState>,
}

impl ExecStream {
    pub(crate) async fn start(
        client: &Client,
        start: pb::ExecStart,
        session: Option<(Client, String)>,
    ) -> Result<ExecStream> {
        let (mut requests, mut responses) = client
            .channel
            .streaming::<pb::ExecRequest, pb::ExecResponse>("/airlock.v1.Sessions/Exec")
            .await?;
        let first = pb::ExecRequest { kind: Some(RequestKind::Start(start)) };
        if let Err(e) = requests.send(&first).await {
            return Err(responses.failure(e).await.into());
        }
        let (state, state_seen) = watch::channel(InputState::Open);
        Ok(ExecStream {
            requests: Arc::new(Mutex::new(requests)),
            responses,
            session,
            exit: None,
            done: false,
            state,
            state_seen,
        })
    }

    /// A handle that sends stdin and signals, for another task.
    pub fn input(&self) -> ExecInput {
        ExecInput { requests: Arc::downgrade(&self.requests), state: self.state_seen.clone() }
    }

    /// Sends bytes to the command's stdin (started with `open_stdin`).
    pub async fn write(&self, data: &[u8]) -> Result<()> {
        self.input().write(data).await
    }

    /// Ends the command's stdin.
    pub async fn close_stdin(&self) -> Result<()> {
        self.input().close_stdin().await
    }

    /// Sends a signal (like 15) to the command's process group.
    pub async fn signal(&self, signal: i32) -> Result<()> {
        self.input().signal(signal).await
    }

    /// Ends the command unless it has ended (as dropping the stream does).
    pub fn cancel(self) {}

    /// The next event; `None` after the exit, once airlockd has ended the call (the session is
    /// free for its next use, a pause for one, only then). A session whose VM died answers
    /// [`Error::SessionFailed`].
    pub async fn recv(&mut self) -> Result<Option<ExecEvent>> {
        if self.done {
            return Ok(None);
        }
        if self.exit.is_some() {
            // What follows the exit is the call's end.
            while let Ok(Some(_)) = self.responses.message().await {}
            self.done = true;
            return Ok(None);
        }
        loop {
            let response = match self.responses.message().await {
                Ok(Some(r)) => r,
                Ok(None) => {
                    self.done = true;
                    return Err(Error::Other {
                        code: Code::Internal,
                        message: "airlockd ended the command without an exit status".to_string(),
                    });
                }
                Err(status) => {
                    self.done = true;
                    let error = Error::from(status);
                    return Err(match &self.session {
                        Some((client, id)) => explain(client, id, error).await,
                        None => error,
                    });
                }
            };
            match response.kind {
                Some(ResponseKind::Stdout(data)) => return Ok(Some(ExecEvent::Stdout(data))),
                Some(ResponseKind::Stderr(data)) => return Ok(Some(ExecEvent::Stderr(data))),
                Some(ResponseKind::Exit(e)) => {
                    let exit = Exit {
                        exit_code: e.code,
                        signal: e.signal,
                        timed_out: e.timed_out,
                        message: e.message,
                    };
                    self.exit = Some(exit.clone());
                    // airlockd ends the call after the exit once the client half-closes.
                    let _ = self.state.send(InputState::Exited);
                    self.requests.lock().await.close();
                    return Ok(Some(ExecEvent::Exit(exit)));
                }
                None => continue, // a kind of message newer than this SDK
            }
        }
    }

    /// The events as a `futures` stream (it ends after the exit, or after an error).
    pub fn into_stream(self) -> impl Stream<Item = Result<ExecEvent>> {
        futures_util::stream::unfold(self, |mut stream| async move {
            match stream.recv().await {
                Ok(Some(event)) => Some((Ok(event), stream)),
                Ok(None) => None,
                Err(e) => Some((Err(e), stream)),
            }
        })
    }

    /// Reads every event and gathers the result, concluding as `exec` does.
    pub(crate) async fn finish(
        mut self,
        name: &str,
        check: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<ExecResult> {
        let input = self.input();
        let feed = async move {
            if let Some(data) = stdin {
                let _ = input.write(&data).await;
                let _ = input.close_stdin().await;
            }
        };
        let collect = async {
            let mut result = ExecResult::default();
            let mut exit = None;
            while let Some(event) = self.recv().await? {
                match event {
                    ExecEvent::Stdout(data) => result.stdout.extend_from_slice(&data),
                    ExecEvent::Stderr(data) => result.stderr.extend_from_slice(&data),
                    ExecEvent::Exit(e) => exit = Some(e),
                }
            }
            let exit = exit.expect("recv ends only after the exit or with an error");
            result.exit_code = exit.exit_code;
            result.signal = exit.signal;
            result.timed_out = exit.timed_out;
            result.message = exit.message;
            Ok::<ExecResult, Error>(result)
        };
        // Once the command has ended, stdin it did not read is abandoned.
        let result = {
            futures_util::pin_mut!(feed);
            futures_util::pin_mut!(collect);
            match futures_util::future::select(collect, feed).await {
                Either::Left((result, _)) => result,
                Either::Right(((), collect)) => collect.await,
            }
        }?;
        if result.timed_out {
            return Err(Error::Timeout {
                message: format!("{} ran past its timeout and was killed", name),
                result: Some(Box::new(result)),
            });
        }
        if result.exit_code == EXIT_AIRLOCK_ERROR && !result.message.is_empty() {
            if let Some((client, id)) = &self.session {
                if let Ok(info) = crate::session::get_info(client, id).await {
                    if info.state == SessionState::Failed {
                        return Err(Error::SessionFailed { message: result.message, reason: info.reason });
                    }
                }
            }
        }
        if check && result.exit_code != 0 {
            let why = if result.message.is_empty() { String::new() } else { format!(": {}", result.message) };
            return Err(Error::CommandFailed {
                message: format!("{} exited with {}{}", name, result.exit_code, why),
                result: Box::new(result),
            });
        }
        Ok(result)
    }
}

impl Drop for ExecStream {
    fn drop(&mut self) {
        if !self.done {
            // Resetting the call (RST_STREAM CANCEL) ends the command: at once where no send
            // holds the lock, else by that send, which sees the state change.
            let _ = self.state.send(InputState::Cancelled);
            if let Ok(mut requests) = self.requests.try_lock() {
                requests.cancel();
            }
        }
    }
}

/// A FAILED_PRECONDITION on a session whose VM failed becomes [`Error::SessionFailed`].
pub(crate) async fn explain(client: &Client, id: &str, error: Error) -> Error {
    if let Error::FailedPrecondition { message } = &error {
        if let Ok(info) = crate::session::get_info(client, id).await {
            if info.state == SessionState::Failed {
                return Error::SessionFailed { message: message.clone(), reason: info.reason };
            }
        }
    }
    error
}

impl Session {
    /// Runs a command and waits for it: its exit code, stdout and stderr. A timeout returns
    /// [`Error::Timeout`] (its `result` has what the command printed); `check` returns
    /// [`Error::CommandFailed`] on a non-zero exit; a session whose VM died returns
    /// [`Error::SessionFailed`]. A non-zero exit is not an error otherwise.
    pub async fn exec<A>(&self, argv: A, options: &ExecOptions) -> Result<ExecResult>
    where
        A: IntoIterator,
        A::Item: AsRef<[u8]>,
    {
        if options.open_stdin {
            return Err(Error::invalid("open_stdin is for exec_stream; give exec its stdin bytes"));
        }
        let start = exec_start(argv, options, self.id())?;
        let name = command_name(&start.argv);
        let session = Some((self.client.clone(), self.id().to_string()));
        let stream = ExecStream::start(&self.client, start, session).await?;
        stream.finish(&name, options.check, options.stdin.clone()).await
    }

    /// Starts a command and returns its stream of events. `options.stdin`, if given, is sent
    /// first (and closed unless `open_stdin`).
    pub async fn exec_stream<A>(&self, argv: A, options: &ExecOptions) -> Result<ExecStream>
    where
        A: IntoIterator,
        A::Item: AsRef<[u8]>,
    {
        let start = exec_start(argv, options, self.id())?;
        let session = Some((self.client.clone(), self.id().to_string()));
        let stream = ExecStream::start(&self.client, start, session).await?;
        if let Some(data) = &options.stdin {
            // Sent from a task of its own: a command that writes before it reads must not
            // wait on a caller who has not called recv yet.
            let input = stream.input();
            let data = data.clone();
            let close = !options.open_stdin;
            tokio::spawn(async move {
                let _ = input.write(&data).await;
                if close {
                    let _ = input.close_stdin().await;
                }
            });
        }
        Ok(stream)
    }
}

impl Client {
    /// Runs one command in a fresh session that is removed when it ends (`airlock run`).
    pub async fn run<A>(&self, argv: A, session: &SessionOptions, options: &ExecOptions) -> Result<ExecResult>
    where
        A: IntoIterator,
        A::Item: AsRef<[u8]>,
    {
        if options.open_stdin {
            return Err(Error::invalid("open_stdin is for exec_stream; give run its stdin bytes"));
        }
        let mut start = exec_start(argv, options, "")?;
        session.fill_exec(&mut start)?;
        let name = command_name(&start.argv);
        let stream = ExecStream::start(self, start, None).await?;
        stream.finish(&name, options.check, options.stdin.clone()).await
    }
}
