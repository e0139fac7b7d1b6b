//! Streams a long command's output as it comes, and says how it ended.
//! `cargo run --offline --example stream [-- SOCKET]`.

use std::io::Write;

use airlock::{Client, ExecEvent, ExecOptions, SessionOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), airlock::Error> {
    let address = std::env::args().nth(1).unwrap_or_default();
    let client = Client::connect(&address).await?;
    let session = client.session(&SessionOptions::default()).await?;
    let script = "for i in 1 2 3 4 5; do echo step $i; sleep 0.5; done; echo done >&2";
    let mut stream = session.exec_stream(["sh", "-c", script], &ExecOptions::default()).await?;
    while let Some(event) = stream.recv().await? {
        match event {
            ExecEvent::Stdout(data) => std::io::stdout().write_all(&data).map_err(airlock::Error::Io)?,
            ExecEvent::Stderr(data) => std::io::stderr().write_all(&data).map_err(airlock::Error::Io)?,
            ExecEvent::Exit(exit) => println!("exit code {}", exit.exit_code),
        }
    }
    session.remove().await
}
