//! The service's request handlers: four endpoints of different cost, each a
//! real PostgreSQL round trip, on a connection of the calling thread's own or
//! one lent by a pool shared by all threads ([`ConnectionPool`]).
//!
//! Per thread, connections outlive their threads: a thread takes one the
//! first time it handles a request (lazily) and keeps it until it exits; an
//! exiting thread hands it back ([`release_connection`]) to an idle stack
//! that the next new thread takes from before it opens one. So `K` threads
//! at once hold at most `K` connections, and a thread that replaces a
//! retired one finds its connection ready. Shared, a request borrows one for
//! its query from [`Connections`]. Every connection opened is counted in
//! [`Handlers::opened`]. Statements are prepared once per connection.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use postgres::{Client, NoTls, Statement};

use super::connections::Connections;

/// An endpoint of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /lookup?aid=N`: one account by primary key.
    Lookup,
    /// `GET /range?aid=N`: count and sum of 1,000 accounts from `N`, computed in the database.
    Range,
    /// `GET /write?aid=N`: in one transaction, add to an account's balance
    /// and insert a `pgbench_history` row (WAL and `fsync` at commit).
    Write,
    /// `GET /external?aid=N`: `pg_sleep(0.005)`, standing for a call to another service.
    External,
}

impl Endpoint {
    /// Every endpoint, in the mix's order.
    pub const ALL: [Endpoint; 4] = [
        Endpoint::Lookup,
        Endpoint::Range,
        Endpoint::Write,
        Endpoint::External,
    ];

    /// The endpoint's name: its path without the slash, and its key in a mix.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Lookup => "lookup",
            Endpoint::Range => "range",
            Endpoint::Write => "write",
            Endpoint::External => "external",
        }
    }

    /// The endpoint and account id of a request target such as `/lookup?aid=7`.
    pub fn route(target: &str) -> Option<(Endpoint, i64)> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let endpoint = Self::ALL
            .into_iter()
            .find(|e| path.strip_prefix('/') == Some(e.name()))?;
        let aid = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("aid="))
            .map_or(Some(1), |v| v.parse().ok())?;
        Some((endpoint, aid))
    }
}

/// Where a request's database connection comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionPool {
    /// Each handler thread opens its own on its first request and keeps it.
    PerThread,
    /// A request borrows one for its query from a pool of at most one per
    /// thread, opened as requests find none idle ([`Connections`]).
    Shared,
}

/// What the handlers share: where the database is, the connections no
/// thread holds, and a counter of connections opened.
pub struct Handlers {
    id: u64,
    conninfo: String,
    accounts: i64,
    opened: Arc<AtomicU64>,
    idle: Arc<Idle>,
    shared: Option<Connections<Conn>>,
}

/// Connections handed back by exiting threads, for the next new thread.
type Idle = Mutex<Vec<Conn>>;

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handlers")
            .field("conninfo", &self.conninfo)
            .field("accounts", &self.accounts)
            .field("opened", &self.opened())
            .field("idle", &lock(&self.idle).len())
            .field("shared", &self.shared)
            .finish()
    }
}

/// A handler thread's own connection, and whose it is.
struct Held {
    owner: u64,
    /// Where the connection goes when its thread exits (gone once the
    /// handlers are: then it closes).
    home: Weak<Idle>,
    conn: Conn,
}

thread_local! {
    static CONN: RefCell<Option<Held>> = const { RefCell::new(None) };
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Hand this thread's connection, if it has one, back to its handlers' idle
/// stack (or close it if the handlers are gone). Every handler thread calls
/// it before it exits (a pool's or runtime's thread-stop hook, or after the
/// job for thread-per-request): a closing client's `Drop` needs tokio's
/// thread-locals, which may already be gone when thread-locals are destroyed.
pub fn release_connection() {
    let Ok(Some(held)) = CONN.try_with(|cell| cell.borrow_mut().take()) else {
        return;
    };
    if let Some(idle) = held.home.upgrade() {
        if !held.conn.client.is_closed() {
            lock(&idle).push(held.conn);
        }
    }
}

fn lock(idle: &Idle) -> std::sync::MutexGuard<'_, Vec<Conn>> {
    idle.lock().unwrap_or_else(|e| e.into_inner())
}

/// A connection and its prepared statements.
struct Conn {
    client: Client,
    lookup: Statement,
    range: Statement,
    update: Statement,
    history: Statement,
    external: Statement,
}

impl Conn {
    /// Connect and prepare, counting the connection in `opened`.
    fn open(conninfo: &str, opened: &AtomicU64) -> Result<Conn, postgres::Error> {
        let mut client = Client::connect(conninfo, NoTls)?;
        opened.fetch_add(1, Ordering::Relaxed);
        Ok(Conn {
            lookup: client.prepare("SELECT abalance FROM pgbench_accounts WHERE aid = $1")?,
            range: client.prepare(
                "SELECT count(*), coalesce(sum(abalance), 0)::bigint \
                 FROM pgbench_accounts WHERE aid BETWEEN $1 AND $1 + 999",
            )?,
            update: client
                .prepare("UPDATE pgbench_accounts SET abalance = abalance + $2 WHERE aid = $1")?,
            history: client.prepare(
                "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) \
                 VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)",
            )?,
            external: client.prepare("SELECT pg_sleep(0.005)")?,
            client,
        })
    }
}

impl Handlers {
    /// Handlers over the database at `conninfo` with accounts `1..=accounts`,
    /// their connections per thread or from a shared pool of at most
    /// `max_connections`, where a request that finds none for `wait` is
    /// answered 503.
    pub fn new(
        conninfo: String,
        accounts: i64,
        pool: ConnectionPool,
        max_connections: usize,
        wait: Duration,
    ) -> Self {
        let opened = Arc::new(AtomicU64::new(0));
        let shared = (pool == ConnectionPool::Shared).then(|| {
            let (conninfo, opened) = (conninfo.clone(), opened.clone());
            Connections::new(
                max_connections,
                wait,
                move || Conn::open(&conninfo, &opened).map_err(|e| e.to_string()),
                |c: &mut Conn| c.client.is_closed(),
            )
        });
        Handlers {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            conninfo,
            accounts,
            opened,
            idle: Arc::new(Mutex::new(Vec::new())),
            shared,
        }
    }

    /// Open `n` connections now and keep them idle for the requests to take.
    pub fn open_ahead(&self, n: usize) -> Result<(), String> {
        match &self.shared {
            Some(pool) => {
                let held = (0..n).map(|_| pool.get()).collect::<Result<Vec<_>, _>>()?;
                drop(held);
            }
            None => {
                for _ in 0..n {
                    let conn =
                        Conn::open(&self.conninfo, &self.opened).map_err(|e| e.to_string())?;
                    lock(&self.idle).push(conn);
                }
            }
        }
        Ok(())
    }

    /// Database connections opened so far.
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Handle one request on this thread: `Ok(body)` or `Err((status, message))`.
    pub fn handle(&self, endpoint: Endpoint, aid: i64) -> Result<String, (u16, String)> {
        if !(1..=self.accounts).contains(&aid) {
            return Err((400, format!("aid must be in 1..={}\n", self.accounts)));
        }
        if let Some(pool) = &self.shared {
            let mut conn = pool.get().map_err(|e| (503, format!("database: {e}\n")))?;
            return self
                .run(&mut conn, endpoint, aid)
                .map_err(|e| (500, format!("database: {e}\n")));
        }
        CONN.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|h| h.owner != self.id) {
                *slot = None;
                let handed_back = lock(&self.idle).pop();
                let conn = match handed_back {
                    Some(conn) => conn,
                    None => Conn::open(&self.conninfo, &self.opened)
                        .map_err(|e| (503, format!("database: {e}\n")))?,
                };
                *slot = Some(Held {
                    owner: self.id,
                    home: Arc::downgrade(&self.idle),
                    conn,
                });
            }
            let held = slot.as_mut().expect("opened above");
            let result = self.run(&mut held.conn, endpoint, aid);
            if result.is_err() && held.conn.client.is_closed() {
                *slot = None; // reconnect on the next request
            }
            result.map_err(|e| (500, format!("database: {e}\n")))
        })
    }

    fn run(&self, c: &mut Conn, endpoint: Endpoint, aid: i64) -> Result<String, postgres::Error> {
        // pgbench's ids are int4; `aid` was checked against the table's size.
        let aid = aid as i32;
        match endpoint {
            Endpoint::Lookup => {
                let row = c.client.query_one(&c.lookup, &[&aid])?;
                Ok(format!("abalance={}\n", row.get::<_, i32>(0)))
            }
            Endpoint::Range => {
                let row = c.client.query_one(&c.range, &[&aid])?;
                let (n, sum): (i64, i64) = (row.get(0), row.get(1));
                Ok(format!("count={n} sum={sum}\n"))
            }
            Endpoint::Write => {
                // pgbench's layout: 100,000 accounts and 10 tellers per branch.
                let bid = (aid - 1) / 100_000 + 1;
                let tid = (bid - 1) * 10 + aid % 10 + 1;
                let delta = aid % 1000 - 500;
                let mut tx = c.client.transaction()?;
                tx.execute(&c.update, &[&aid, &delta])?;
                tx.execute(&c.history, &[&tid, &bid, &aid, &delta])?;
                tx.commit()?;
                Ok(format!("written aid={aid} delta={delta}\n"))
            }
            Endpoint::External => {
                c.client.execute(&c.external, &[])?;
                Ok("waited 5 ms\n".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_path_and_account() {
        assert_eq!(
            Endpoint::route("/lookup?aid=42"),
            Some((Endpoint::Lookup, 42))
        );
        assert_eq!(Endpoint::route("/external"), Some((Endpoint::External, 1)));
        assert_eq!(
            Endpoint::route("/write?x=1&aid=9"),
            Some((Endpoint::Write, 9))
        );
        assert_eq!(Endpoint::route("/range?aid=oops"), None);
        assert_eq!(Endpoint::route("/nope"), None);
        assert_eq!(Endpoint::route("/lookupx"), None);
    }

    #[test]
    fn an_account_out_of_range_is_a_400_without_touching_the_database() {
        for pool in [ConnectionPool::PerThread, ConnectionPool::Shared] {
            let h = Handlers::new(
                "host=127.0.0.1 port=1".into(),
                10,
                pool,
                4,
                Duration::from_secs(1),
            );
            let err = h.handle(Endpoint::Lookup, 11).unwrap_err();
            assert_eq!(err.0, 400);
            assert!(err.1.contains("1..=10"), "{}", err.1);
            assert_eq!(h.opened(), 0);
        }
    }
}
