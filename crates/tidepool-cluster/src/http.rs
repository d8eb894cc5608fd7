//! A small HTTP/1.1 server for `GET` only: the node's `/metrics` and the
//! dashboard. Each connection gets one answer and is closed; a request head
//! over 16 KiB or slower than 5 s is dropped. (Enough for a Prometheus
//! scraper and a browser; a full server framework would add much more code
//! than it saves here.)

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code (200, 404, ...).
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// 200 with `body` of `content_type`.
    pub fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status: 200,
            content_type,
            body: body.into(),
        }
    }

    /// 404 naming what exists.
    pub fn not_found(path: &str, known: &str) -> Response {
        Response {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: format!("no {path} here; try {known}\n").into_bytes(),
        }
    }
}

const MAX_HEAD: usize = 16 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Bind `addr` (an error names `option`, the flag that gave it).
pub async fn bind(addr: SocketAddr, option: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("{option} {addr}: cannot listen there: {e}"))
}

/// Answer every connection on `listener` with `answer(path)`, forever.
pub async fn serve<F, Fut>(listener: TcpListener, answer: F)
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send,
{
    let answer = Arc::new(answer);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            let _ = one(stream, &*answer).await;
        });
    }
}

async fn one<F, Fut>(mut stream: TcpStream, answer: &F) -> std::io::Result<()>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Response>,
{
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Ok(());
        }
        let n = match tokio::time::timeout(READ_TIMEOUT, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => return Ok(()),
            Ok(r) => r?,
        };
        head.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut parts = line.split_whitespace();
    let response = match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => {
            let path = target.split('?').next().unwrap_or("/").to_string();
            answer(path).await
        }
        _ => Response {
            status: 405,
            content_type: "text/plain; charset=utf-8",
            body: b"only GET\n".to_vec(),
        },
    };
    let reason = match response.status {
        200 => "OK",
        404 => "Not Found",
        _ => "Method Not Allowed",
    };
    let header = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    stream.write_all(&response.body).await?;
    stream.shutdown().await
}
