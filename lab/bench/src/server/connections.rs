//! The handlers' connection pool: requests take a connection for one query
//! and hand it back; when none is idle, a background thread opens one, and
//! the waiting request takes the first connection that comes free, new or
//! handed back.
//!
//! Opens in flight never outnumber the requests waiting, nor two at once:
//! a pool that grows at a change of load does not make each new thread wait
//! for its own connection, and the database is not asked for connections
//! nobody waits for. (r2d2 asks for one each time a waiting request wakes
//! to find the connection it was woken for taken: 390 connections for 64
//! threads.)

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Opens at once, at most: PostgreSQL forks a process for each, on the
/// cores that serve the queries.
const OPENERS: usize = 2;

/// After a failed open, how long its opener waits before another may start.
const RETRY: Duration = Duration::from_millis(100);

type Open<C> = Box<dyn Fn() -> Result<C, String> + Send + Sync>;
type Broken<C> = Box<dyn Fn(&mut C) -> bool + Send + Sync>;

/// A pool of at most `max` connections of type `C`, opened on demand.
pub struct Connections<C> {
    shared: Arc<Shared<C>>,
}

struct Shared<C> {
    open: Open<C>,
    broken: Broken<C>,
    max: usize,
    wait: Duration,
    state: Mutex<State<C>>,
    freed: Condvar,
}

struct State<C> {
    idle: Vec<C>,
    /// Connections that exist: idle or lent.
    live: usize,
    opening: usize,
    waiting: usize,
    last_error: Option<String>,
}

impl<C: Send + 'static> Connections<C> {
    /// A pool of at most `max` connections (at least one) that `open` opens;
    /// a request that finds none within `wait` is refused; a connection
    /// `broken` says is broken is closed when it is handed back.
    pub fn new(
        max: usize,
        wait: Duration,
        open: impl Fn() -> Result<C, String> + Send + Sync + 'static,
        broken: impl Fn(&mut C) -> bool + Send + Sync + 'static,
    ) -> Self {
        Connections {
            shared: Arc::new(Shared {
                open: Box::new(open),
                broken: Box::new(broken),
                max: max.max(1),
                wait,
                state: Mutex::new(State {
                    idle: Vec::new(),
                    live: 0,
                    opening: 0,
                    waiting: 0,
                    last_error: None,
                }),
                freed: Condvar::new(),
            }),
        }
    }

    /// A connection, idle or the first to come free, within the pool's wait.
    pub fn get(&self) -> Result<Lease<'_, C>, String> {
        let shared = &*self.shared;
        let deadline = Instant::now() + shared.wait;
        let mut s = shared.lock();
        s.waiting += 1;
        let got = loop {
            if let Some(conn) = s.idle.pop() {
                break Ok(conn);
            }
            if s.opening < s.waiting.min(OPENERS) && s.live + s.opening < shared.max {
                s.opening += 1;
                if let Err(e) = self.start_opener() {
                    s.opening -= 1;
                    break Err(format!("cannot start a thread to connect: {e}"));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                let why = s.last_error.as_deref().unwrap_or("all in use");
                break Err(format!("no connection within {:?}: {why}", shared.wait));
            }
            s = shared
                .freed
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        s.waiting -= 1;
        got.map(|conn| Lease {
            pool: self,
            conn: Some(conn),
        })
    }

    fn start_opener(&self) -> std::io::Result<()> {
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("connect".into())
            .spawn(move || {
                let conn = (shared.open)();
                if conn.is_err() {
                    std::thread::sleep(RETRY);
                }
                let mut s = shared.lock();
                s.opening -= 1;
                match conn {
                    Ok(conn) => {
                        s.live += 1;
                        s.idle.push(conn);
                    }
                    Err(e) => s.last_error = Some(e),
                }
                drop(s);
                shared.freed.notify_one();
            })
            .map(drop)
    }
}

impl<C> Shared<C> {
    fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<C> std::fmt::Debug for Connections<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.shared.lock();
        f.debug_struct("Connections")
            .field("max", &self.shared.max)
            .field("live", &s.live)
            .field("idle", &s.idle.len())
            .finish()
    }
}

/// A connection lent to one request; handed back when dropped.
pub struct Lease<'a, C> {
    pool: &'a Connections<C>,
    conn: Option<C>,
}

impl<C> Deref for Lease<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        self.conn.as_ref().expect("held until dropped")
    }
}

impl<C> DerefMut for Lease<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        self.conn.as_mut().expect("held until dropped")
    }
}

impl<C> Drop for Lease<'_, C> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let shared = &*self.pool.shared;
        let broken = (shared.broken)(&mut conn);
        let mut s = shared.lock();
        if broken {
            s.live -= 1;
            drop(s);
            drop(conn); // closed outside the lock
        } else {
            s.idle.push(conn);
            drop(s);
        }
        // A waiter takes it, or opens one in place of the broken one.
        shared.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A pool whose connections are numbers, each open taking `delay`.
    fn numbers(max: usize, delay: Duration) -> (Connections<usize>, Arc<AtomicUsize>) {
        let opens = Arc::new(AtomicUsize::new(0));
        let n = opens.clone();
        let pool = Connections::new(
            max,
            Duration::from_secs(5),
            move || {
                std::thread::sleep(delay);
                Ok(n.fetch_add(1, Ordering::SeqCst))
            },
            |c: &mut usize| *c == usize::MAX,
        );
        (pool, opens)
    }

    #[test]
    fn a_connection_handed_back_is_taken_again_not_reopened() {
        let (pool, opens) = numbers(4, Duration::ZERO);
        for _ in 0..10 {
            assert_eq!(*pool.get().unwrap(), 0);
        }
        assert_eq!(opens.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_waiting_request_takes_the_first_connection_handed_back() {
        // The first open is at once, the next take 2 s: a connection handed
        // back after 50 ms serves the waiting request long before.
        let opens = AtomicUsize::new(0);
        let pool = Arc::new(Connections::new(
            4,
            Duration::from_secs(5),
            move || {
                if opens.fetch_add(1, Ordering::SeqCst) > 0 {
                    std::thread::sleep(Duration::from_secs(2));
                }
                Ok(7usize)
            },
            |_: &mut usize| false,
        ));
        let first = pool.get().unwrap();
        let start = Instant::now();
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || *pool.get().unwrap())
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(first);
        assert_eq!(waiter.join().unwrap(), 7);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
    }

    /// `threads` threads each take a connection, hold it `hold` and come
    /// straight back for another, `rounds` times.
    fn churn(pool: &Arc<Connections<usize>>, threads: usize, rounds: usize, hold: Duration) {
        let threads: Vec<_> = (0..threads)
            .map(|_| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    for _ in 0..rounds {
                        let c = pool.get().unwrap();
                        std::thread::sleep(hold);
                        drop(c);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn opens_never_outnumber_the_requests_that_waited() {
        // A thread that hands a connection back and comes straight back for
        // another often takes it before the waiter woken for it: that waiter
        // must not open another for each such miss.
        let (pool, opens) = numbers(64, Duration::from_millis(30));
        let pool = Arc::new(pool);
        churn(&pool, 8, 300, Duration::from_micros(100));
        assert!(opens.load(Ordering::SeqCst) <= 8, "{pool:?}");
    }

    #[test]
    fn opens_stop_at_the_limit() {
        let (pool, opens) = numbers(3, Duration::from_millis(5));
        let pool = Arc::new(pool);
        churn(&pool, 16, 20, Duration::from_micros(200));
        assert_eq!(opens.load(Ordering::SeqCst), 3, "{pool:?}");
    }

    #[test]
    fn a_broken_connection_is_closed_and_another_opened() {
        let (pool, opens) = numbers(1, Duration::ZERO);
        *pool.get().unwrap() = usize::MAX; // broken: closed when handed back
        assert_eq!(*pool.get().unwrap(), 1);
        assert_eq!(opens.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_database_that_refuses_gives_its_error_after_the_wait() {
        let pool = Connections::new(
            2,
            Duration::from_millis(300),
            || Err::<usize, _>("connection refused".into()),
            |_: &mut usize| false,
        );
        let start = Instant::now();
        let err = pool.get().map(|c| *c).unwrap_err();
        assert!(err.contains("connection refused"), "{err}");
        assert!(err.contains("300ms"), "{err}");
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(format!("{pool:?}").contains("live: 0"), "{pool:?}");
    }

    #[test]
    fn at_the_limit_a_request_waits_for_one_handed_back() {
        let (pool, opens) = numbers(1, Duration::ZERO);
        let pool = Arc::new(pool);
        let held = pool.get().unwrap();
        let waiter = {
            let pool = pool.clone();
            std::thread::spawn(move || *pool.get().unwrap())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished());
        drop(held);
        assert_eq!(waiter.join().unwrap(), 0);
        assert_eq!(opens.load(Ordering::SeqCst), 1);
    }
}
