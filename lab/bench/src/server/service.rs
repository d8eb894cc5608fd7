//! The HTTP/1.1 service: one front-end thread running a single-threaded
//! tokio runtime accepts connections on `127.0.0.1`, reads requests with
//! keep-alive, and hands each request's handler to the contender under test
//! ([`Dispatch`]); the handler's answer comes back over a oneshot channel and
//! the front end writes it.
//!
//! The front end is the same for every contender, so what differs between
//! them is only where handlers run and how many threads do so. It serves
//! `GET` requests without bodies (all the load generator sends), parsing the
//! request line and headers with `httparse`; a request with a body, an
//! oversized head or a bad request line gets a 4xx and the connection is
//! closed. The front end is single-threaded so that tokio's blocking pool is
//! the only source of extra threads in the tokio contender; its one thread
//! is not counted as a handler thread for anyone.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tidepool_workload::{Executor, ExecutorCounts};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::handlers::{release_connection, Endpoint, Handlers};
use super::spans::Spans;
use super::stalls::Stalls;

/// Largest request head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// Where request handlers run.
pub enum Dispatch {
    /// An [`Executor`]: a tidepool pool or thread-per-request.
    Executor(Arc<dyn Executor>),
    /// tokio's `spawn_blocking` on the front end's runtime (its default blocking pool).
    SpawnBlocking(Arc<ThreadGauge>),
}

/// Live and created threads, kept by thread start/stop hooks.
#[derive(Debug, Default)]
pub struct ThreadGauge {
    live: AtomicUsize,
    created: AtomicU64,
}

impl ThreadGauge {
    fn started(&self) {
        self.created.fetch_add(1, Ordering::Relaxed);
        self.live.fetch_add(1, Ordering::Relaxed);
    }
    fn stopped(&self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Dispatch {
    /// Handler threads alive and created so far.
    pub fn counts(&self) -> ExecutorCounts {
        match self {
            Dispatch::Executor(e) => e.counts(),
            Dispatch::SpawnBlocking(g) => ExecutorCounts::new(
                g.live.load(Ordering::Relaxed),
                g.created.load(Ordering::Relaxed),
                0,
            ),
        }
    }
}

/// A running service; stopped on drop.
pub struct Service {
    addr: SocketAddr,
    dispatch: Arc<Dispatch>,
    handlers: Arc<Handlers>,
    stalls: Arc<Stalls>,
    spans: Arc<Spans>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Service {
    /// Start serving on a free port of `127.0.0.1`.
    pub fn start(dispatch: Dispatch, handlers: Arc<Handlers>) -> Result<Service, String> {
        let dispatch = Arc::new(dispatch);
        let mut rt = tokio::runtime::Builder::new_current_thread();
        rt.enable_all();
        if let Dispatch::SpawnBlocking(gauge) = &*dispatch {
            let (start, stop) = (gauge.clone(), gauge.clone());
            rt.on_thread_start(move || start.started())
                .on_thread_stop(move || {
                    release_connection();
                    stop.stopped();
                });
        }
        let rt = rt
            .build()
            .map_err(|e| format!("cannot build the front end's runtime: {e}"))?;
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (d, h) = (dispatch.clone(), handlers.clone());
        let stalls = Arc::new(Stalls::default());
        let timer = stalls.clone();
        let spans = Arc::new(Spans::default());
        let (marks, answered) = (spans.clone(), spans.clone());
        let thread = std::thread::Builder::new()
            .name("server-front".into())
            .spawn(move || {
                rt.spawn(timer.watch());
                rt.spawn(marks.watch());
                rt.block_on(accept(listener, d, h, answered, stopped));
                // Handlers still running finish on their own; don't wait long.
                rt.shutdown_timeout(Duration::from_secs(5));
            })
            .map_err(|e| format!("cannot start the front end: {e}"))?;
        Ok(Service {
            addr,
            dispatch,
            handlers,
            stalls,
            spans,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address to send requests to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Handler threads alive and created so far.
    pub fn counts(&self) -> ExecutorCounts {
        self.dispatch.counts()
    }

    /// The tidepool pool running the handlers, if it is one.
    pub fn pool(&self) -> Option<&tidepool::Pool> {
        match &*self.dispatch {
            Dispatch::Executor(e) => e.pool(),
            Dispatch::SpawnBlocking(_) => None,
        }
    }

    /// The front end's stalls since the last call ([`Stalls::take`]).
    pub fn take_stalls(&self) -> super::stalls::StallCount {
        self.stalls.take()
    }

    /// The median change of requests/s from one 200 ms span to the next
    /// since the last call ([`Spans::take`]).
    pub fn take_span_change(&self) -> Option<f64> {
        self.spans.take()
    }

    /// Database connections opened so far.
    pub fn db_connections(&self) -> u64 {
        self.handlers.opened()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Dispatch::Executor(e) = &*self.dispatch {
            e.wait_idle();
        }
    }
}

async fn accept(
    listener: TcpListener,
    dispatch: Arc<Dispatch>,
    handlers: Arc<Handlers>,
    spans: Arc<Spans>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            conn = listener.accept() => {
                if let Ok((stream, _)) = conn {
                    tokio::spawn(serve(stream, dispatch.clone(), handlers.clone(), spans.clone()));
                }
            }
        }
    }
}

/// Serve one connection: requests one after another until it closes.
async fn serve(
    mut stream: TcpStream,
    dispatch: Arc<Dispatch>,
    handlers: Arc<Handlers>,
    spans: Arc<Spans>,
) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    loop {
        let (target, keep_alive) = loop {
            match parse(&buf) {
                Head::Complete {
                    len,
                    target,
                    keep_alive,
                } => {
                    buf.drain(..len);
                    break (target, keep_alive);
                }
                Head::Bad(status, why) => {
                    let _ = respond(&mut stream, status, why, false).await;
                    return;
                }
                Head::Partial if buf.len() > MAX_HEAD => {
                    let _ = respond(&mut stream, 431, "request head too large\n", false).await;
                    return;
                }
                Head::Partial => match stream.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
            }
        };
        let (status, body) = match Endpoint::route(&target) {
            Some((endpoint, aid)) => run(&dispatch, &handlers, endpoint, aid).await,
            None => (
                404,
                "endpoints: /lookup /range /write /external\n".to_string(),
            ),
        };
        let sent = respond(&mut stream, status, &body, keep_alive).await;
        if sent.is_ok() && status == 200 {
            spans.answered();
        }
        if sent.is_err() || !keep_alive {
            return;
        }
    }
}

/// Run the handler where the contender runs handlers; wait for its answer.
async fn run(
    dispatch: &Dispatch,
    handlers: &Arc<Handlers>,
    endpoint: Endpoint,
    aid: i64,
) -> (u16, String) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let h = handlers.clone();
    let job = move || {
        let _ = tx.send(h.handle(endpoint, aid));
    };
    match dispatch {
        Dispatch::Executor(e) => {
            if let Err(err) = e.execute_job(Box::new(job)) {
                return (503, format!("executor refused the request: {err}\n"));
            }
        }
        Dispatch::SpawnBlocking(_) => {
            tokio::task::spawn_blocking(job);
        }
    }
    match rx.await {
        Ok(Ok(body)) => (200, body),
        Ok(Err((status, message))) => (status, message),
        Err(_) => (500, "the handler panicked\n".to_string()),
    }
}

enum Head {
    Complete {
        len: usize,
        target: String,
        keep_alive: bool,
    },
    Partial,
    Bad(u16, &'static str),
}

fn parse(buf: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Head::Partial,
        Err(_) => return Head::Bad(400, "bad request\n"),
    };
    if req.method != Some("GET") {
        return Head::Bad(405, "only GET is served\n");
    }
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
    };
    let has_body = header("content-length").is_some_and(|v| v.trim() != "0")
        || header("transfer-encoding").is_some();
    if has_body {
        return Head::Bad(413, "requests with a body are not served\n");
    }
    let connection = header("connection").unwrap_or_default();
    // HTTP/1.1 keeps the connection unless told to close; 1.0 only when asked.
    let keep_alive = match req.version {
        Some(1) => !connection.contains("close"),
        _ => connection.contains("keep-alive"),
    };
    Head::Complete {
        len,
        target: req.path.unwrap_or("/").to_string(),
        keep_alive,
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    body: &str,
    keep_alive: bool,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(out.as_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(raw: &str) -> (String, bool) {
        match parse(raw.as_bytes()) {
            Head::Complete {
                len,
                target,
                keep_alive,
            } => {
                assert_eq!(len, raw.len());
                (target, keep_alive)
            }
            _ => panic!("not complete: {raw:?}"),
        }
    }

    #[test]
    fn keep_alive_follows_the_version_and_connection_header() {
        assert_eq!(
            complete("GET /lookup?aid=3 HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("/lookup?aid=3".to_string(), true)
        );
        assert!(!complete("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").1);
        assert!(!complete("GET / HTTP/1.0\r\n\r\n").1);
        assert!(complete("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").1);
    }

    #[test]
    fn partial_heads_wait_and_bad_ones_are_refused() {
        assert!(matches!(
            parse(b"GET /lookup HTTP/1.1\r\nHo"),
            Head::Partial
        ));
        assert!(matches!(
            parse(b"\x01\x02 nonsense\r\n\r\n"),
            Head::Bad(400, _)
        ));
        assert!(matches!(
            parse(b"POST /write HTTP/1.1\r\n\r\n"),
            Head::Bad(405, _)
        ));
        assert!(matches!(
            parse(b"GET /write HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
            Head::Bad(413, _)
        ));
    }
}
