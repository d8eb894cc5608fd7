//! A web-style server loop on a self-sizing pool: a listener accepts
//! connections on loopback and hands each to the pool; `auto` grows the pool
//! while handlers block on (simulated) I/O and lets it shrink again after.
//! A client thread in the same process sends the requests, so the example
//! needs no network and stops by itself.
//!
//! Run with `cargo run --release -p tidepool-rs --example server`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use tidepool::Pool;

fn handle(stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    // A database call, say: the handler's thread blocks, not the CPU.
    std::thread::sleep(Duration::from_millis(20));
    writeln!(&stream, "hello, {}", line.trim())
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let pool = Pool::builder()
        .name("web")
        .min_threads(2)
        .max_threads(64)
        .policy_spec("auto")?
        .record_live_threads_series(true)
        .build()?;

    const REQUESTS: usize = 400;
    let client = std::thread::spawn(move || -> std::io::Result<usize> {
        let mut answered = 0;
        let mut waiting = Vec::new();
        for i in 0..REQUESTS {
            let mut conn = TcpStream::connect(addr)?;
            writeln!(conn, "client {i}")?;
            waiting.push(conn);
            std::thread::sleep(Duration::from_micros(500)); // ~2,000 requests/s
        }
        for conn in waiting {
            let mut reply = String::new();
            BufReader::new(conn).read_line(&mut reply)?;
            answered += usize::from(reply.starts_with("hello"));
        }
        Ok(answered)
    });

    // The accept loop: one task per connection.
    for stream in listener.incoming().take(REQUESTS) {
        let stream = stream?;
        pool.execute(move || {
            if let Err(e) = handle(stream) {
                eprintln!("request failed: {e}");
            }
        })?;
    }
    let answered = client.join().expect("client thread")?;
    pool.wait_idle();

    let stats = pool.stats();
    let most = pool
        .live_threads_series()
        .iter()
        .map(|s| s.live_threads)
        .max()
        .unwrap_or(0);
    println!(
        "{answered}/{REQUESTS} answered; up to {most} threads ({} created); mean wait {:?}, p99 wait {:?}",
        stats.threads_created,
        stats.mean_wait().unwrap_or_default(),
        stats.wait.quantile(0.99).unwrap_or_default(),
    );
    assert_eq!(answered, REQUESTS);
    Ok(())
}
