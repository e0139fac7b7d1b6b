//! Creates a session, runs a command in it, prints its output and exit code, and removes the
//! session. `cargo run --offline --example quickstart [-- SOCKET]` (default: $AIRLOCK_SOCKET,
//! else /run/airlock/airlockd.sock).

use airlock::{Client, ExecOptions, SessionOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), airlock::Error> {
    let address = std::env::args().nth(1).unwrap_or_default();
    let client = Client::connect(&address).await?;
    let session = client.create_session(&SessionOptions::default()).await?;
    println!("session {} is {}", session.id(), session.info().state);
    let result = session.exec(["sh", "-c", "echo hello from $(hostname)"], &ExecOptions::default()).await;
    // Removed whatever the command did.
    session.remove().await?;
    let result = result?;
    print!("{}", String::from_utf8_lossy(&result.stdout));
    println!("exit code {}", result.exit_code);
    Ok(())
}
