//! What bench/sdk_bench.sh measures through this SDK: the median exec round trip of `true` in a
//! session, and the MB/s of 256 MiB of stdout streamed out of it. Prints "RTT_MS MB_PER_S".
//! `cargo run --offline --release --example bench -- SESSION_ID ROUNDS`.

use std::time::Instant;

use airlock::{Client, ExecEvent, ExecOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), airlock::Error> {
    let mut args = std::env::args().skip(1);
    let id = args.next().expect("usage: bench SESSION_ID ROUNDS");
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(20);
    let client = Client::connect("").await?;
    let session = client.get_session(&id).await?;
    let options = ExecOptions::default();
    session.exec(["true"], &options).await?; // the first warms the path
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        session.exec(["true"], &options).await?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let size = 256usize << 20;
    let start = Instant::now();
    let mut stream = session.exec_stream(["head", "-c", &size.to_string(), "/dev/zero"], &options).await?;
    let mut bytes = 0;
    while let Some(event) = stream.recv().await? {
        if let ExecEvent::Stdout(data) = event {
            bytes += data.len();
        }
    }
    assert_eq!(bytes, size);
    let seconds = start.elapsed().as_secs_f64();
    println!("{:.1} {:.0}", times[times.len() / 2], size as f64 / 1e6 / seconds);
    Ok(())
}
