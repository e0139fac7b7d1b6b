//! Forks a session and shows that each copy goes its own way from the same state.
//! `cargo run --offline --example fork [-- SOCKET]`.

use airlock::{Client, ExecOptions, SessionOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), airlock::Error> {
    let address = std::env::args().nth(1).unwrap_or_default();
    let client = Client::connect(&address).await?;
    let session = client.session(&SessionOptions::default()).await?;
    session.files().write("/root/state", "before the fork\n", 0o644).await?;
    let kids = session.fork(2).await?;
    for (i, kid) in kids.iter().enumerate() {
        let line = format!("echo copy {} >> /root/state; cat /root/state", i);
        let r = kid.exec(["sh", "-c", &line], &ExecOptions::default()).await?;
        print!("{} ({}):\n{}", kid.id(), kid.info().hostname, String::from_utf8_lossy(&r.stdout));
    }
    let r = session.exec(["cat", "/root/state"], &ExecOptions::default()).await?;
    print!("{} (the original):\n{}", session.id(), String::from_utf8_lossy(&r.stdout));
    for kid in kids {
        kid.remove().await?;
    }
    session.remove().await
}
