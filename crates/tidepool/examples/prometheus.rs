//! Serve a pool's statistics to Prometheus (feature `metrics`).
//!
//! ```sh
//! cargo run -p tidepool-rs --features metrics --example prometheus -- [PORT] [SECONDS]
//! curl http://127.0.0.1:9187/metrics      # while it runs (30 s by default)
//! ```
//!
//! A pool runs a changing load of short tasks while a plain `std` HTTP loop
//! answers every request with the `metrics-exporter-prometheus` text
//! format, publishing a fresh `Pool::stats()` first. It listens on loopback
//! only and stops by itself.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tidepool::export::MetricsExporter;
use tidepool::Pool;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let port: u16 = match args.next() {
        Some(p) => p
            .parse()
            .with_context(|| format!("PORT {p:?}: 0 to 65535"))?,
        None => 9187,
    };
    let seconds: u64 = match args.next() {
        Some(s) => s
            .parse()
            .ok()
            .filter(|s| (1..=3600).contains(s))
            .ok_or_else(|| anyhow!("SECONDS {s:?}: 1 to 3600"))?,
        None => 30,
    };

    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| anyhow!("{e}"))?;
    MetricsExporter::describe();

    let pool = Pool::builder()
        .name("demo")
        .min_threads(1)
        .max_threads(8)
        .build()?;
    let mut exporter = MetricsExporter::new("demo");

    let listener = TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("listening on 127.0.0.1:{port}"))?;
    listener.set_nonblocking(true)?;
    println!(
        "serving http://127.0.0.1:{}/metrics for {seconds} s",
        listener.local_addr()?.port()
    );

    let end = Instant::now() + Duration::from_secs(seconds);
    let mut round = 0u64;
    while Instant::now() < end {
        // The load: a burst every other second, a trickle in between.
        let burst = (round / 10).is_multiple_of(2);
        for i in 0..if burst { 200 } else { 5 } {
            pool.execute(move || std::thread::sleep(Duration::from_micros(200 + i % 800)))?;
        }
        while let Ok((stream, _)) = listener.accept() {
            exporter.publish(&pool.stats());
            if let Err(e) = answer(stream, &handle) {
                eprintln!("request failed: {e}");
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        round += 1;
    }
    pool.shutdown();
    Ok(())
}

/// Read one request's head and answer it with the metrics.
fn answer(stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    // The request line and headers, up to the blank line (bounded).
    for _ in 0..100 {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
    }
    let body = handle.render();
    let mut out = &stream;
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}
