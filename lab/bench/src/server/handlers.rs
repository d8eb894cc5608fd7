//! The service's request handlers: four endpoints of different cost, each a
//! real PostgreSQL round trip on a connection lent by the handlers'
//! [`Connections`] for that request. Statements are prepared once per
//! connection.

use std::time::Duration;

use super::connections::Connections;

use postgres::{Client, NoTls, Statement};

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

/// What the handlers share: the accounts' range and the connection pool.
#[derive(Debug)]
pub struct Handlers {
    accounts: i64,
    connections: Connections<Conn>,
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
    fn open(conninfo: &str) -> Result<Conn, postgres::Error> {
        let mut client = Client::connect(conninfo, NoTls)?;
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
    /// holding at most `max_connections` connections; a request that finds
    /// none for `wait` is answered 503.
    pub fn new(conninfo: String, accounts: i64, max_connections: usize, wait: Duration) -> Self {
        Handlers {
            accounts,
            connections: Connections::new(
                max_connections,
                wait,
                move || Conn::open(&conninfo).map_err(|e| e.to_string()),
                |c: &mut Conn| c.client.is_closed(),
            ),
        }
    }

    /// Open `n` connections now and keep them idle for the requests to take.
    pub fn open_ahead(&self, n: usize) -> Result<(), String> {
        let held = (0..n)
            .map(|_| self.connections.get())
            .collect::<Result<Vec<_>, _>>()?;
        drop(held);
        Ok(())
    }

    /// Database connections opened so far.
    pub fn opened(&self) -> u64 {
        self.connections.opened()
    }

    /// Handle one request: `Ok(body)` or `Err((status, message))`.
    pub fn handle(&self, endpoint: Endpoint, aid: i64) -> Result<String, (u16, String)> {
        if !(1..=self.accounts).contains(&aid) {
            return Err((400, format!("aid must be in 1..={}\n", self.accounts)));
        }
        let mut conn = self
            .connections
            .get()
            .map_err(|e| (503, format!("database: {e}\n")))?;
        self.run(&mut conn, endpoint, aid)
            .map_err(|e| (500, format!("database: {e}\n")))
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
        let h = Handlers::new(
            "host=127.0.0.1 port=1".into(),
            10,
            4,
            Duration::from_secs(1),
        );
        let err = h.handle(Endpoint::Lookup, 11).unwrap_err();
        assert_eq!(err.0, 400);
        assert!(err.1.contains("1..=10"), "{}", err.1);
        assert_eq!(h.opened(), 0);
    }
}
