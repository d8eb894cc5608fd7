//! The load: Debian's `wrk`, closed loop (each connection sends its next
//! request when the previous answer arrives; `wrk` has no open-loop mode),
//! driven by a generated Lua script that picks each request's endpoint by
//! the mix's weights and its account at random, and whose `done` hook prints
//! the latency distribution and error counts as one JSON line.

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use super::cleanup;
use super::handlers::Endpoint;

/// Weights of the endpoints in the load, e.g. `lookup=70,range=10,write=10,external=10`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    /// Weight per endpoint, in [`Endpoint::ALL`]'s order.
    pub weights: [u32; 4],
}

impl Mix {
    /// Only `endpoint`.
    pub fn only(endpoint: Endpoint) -> Mix {
        let mut weights = [0; 4];
        weights[Endpoint::ALL
            .iter()
            .position(|e| *e == endpoint)
            .unwrap_or(0)] = 1;
        Mix { weights }
    }
}

impl FromStr for Mix {
    type Err = String;

    fn from_str(s: &str) -> Result<Mix, String> {
        let mut weights = [0u32; 4];
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, w) = part.split_once('=').ok_or_else(|| {
                format!(
                    "--mix: `{part}` is not NAME=WEIGHT (names: lookup, range, write, external)"
                )
            })?;
            let at = Endpoint::ALL
                .iter()
                .position(|e| e.name() == name.trim())
                .ok_or_else(|| {
                    format!(
                        "--mix: unknown endpoint `{name}` (names: lookup, range, write, external)"
                    )
                })?;
            weights[at] = w
                .trim()
                .parse()
                .ok()
                .filter(|w| *w <= 1_000_000)
                .ok_or_else(|| {
                    format!("--mix: weight of {name} must be an integer in 0..=1000000")
                })?;
        }
        if weights.iter().all(|w| *w == 0) {
            return Err("--mix: at least one weight must be above 0".into());
        }
        Ok(Mix { weights })
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = Endpoint::ALL
            .iter()
            .zip(self.weights)
            .filter(|(_, w)| *w > 0)
            .map(|(e, w)| format!("{}={w}", e.name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// What one `wrk` run measured.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Load {
    /// Responses received (any status).
    pub requests: u64,
    /// Length of the run, in microseconds.
    pub duration_us: u64,
    /// Latency percentiles and mean, in microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest latency.
    pub max_us: f64,
    /// Failed connects.
    pub connect: u64,
    /// Read errors (e.g. connections reset).
    pub read: u64,
    /// Write errors.
    pub write: u64,
    /// Responses with a status other than 2xx/3xx.
    pub status: u64,
    /// Requests without an answer within wrk's timeout.
    pub timeout: u64,
}

impl Load {
    /// Successful responses per second.
    pub fn ok_per_sec(&self) -> f64 {
        let ok = self.requests.saturating_sub(self.status) as f64;
        ok / (self.duration_us.max(1) as f64 / 1e6)
    }

    /// Every error except timeouts: connect, read, write and bad statuses.
    pub fn errors(&self) -> u64 {
        self.connect + self.read + self.write + self.status
    }
}

/// One closed-loop `wrk` run against `addr`.
pub fn run(
    addr: SocketAddr,
    mix: &Mix,
    accounts: i64,
    connections: usize,
    length: Duration,
    timeout: Duration,
    scratch: &Path,
) -> Result<Load, String> {
    let script = scratch.join(format!("mix-{}.lua", std::process::id()));
    std::fs::write(&script, lua(mix, accounts))
        .map_err(|e| format!("cannot write the wrk script: {e}"))?;
    let threads = connections.clamp(1, 2);
    let child = cleanup::detached(Command::new("wrk"))
        .args(["-t", &threads.to_string(), "-c", &connections.to_string()])
        // wrk takes whole seconds.
        .arg(format!("-d{}s", length.as_secs().max(1)))
        .arg(format!("--timeout={}s", timeout.as_secs().max(1)))
        .arg("-s")
        .arg(&script)
        .arg(format!("http://{addr}/"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run wrk (Debian package `wrk`, see scripts/setup.sh): {e}"))?;
    let pid = child.id() as i32;
    let stop = cleanup::register(move || {
        cleanup::stop_process(pid, libc::SIGKILL, Duration::from_secs(5));
    });
    let out = child.wait_with_output();
    drop(stop);
    let _ = std::fs::remove_file(&script);
    let out = out.map_err(|e| format!("wrk: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("TIDEPOOL-WRK "))
        .ok_or_else(|| {
            format!(
                "wrk gave no result ({}): {}{}",
                out.status,
                stdout,
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    serde_json::from_str(line).map_err(|e| format!("wrk's result `{line}`: {e}"))
}

/// The Lua script: a weighted pick of the endpoint, a random account.
fn lua(mix: &Mix, accounts: i64) -> String {
    let total: u32 = mix.weights.iter().sum();
    let mut cumulative = 0;
    let mut table = String::new();
    for (endpoint, w) in Endpoint::ALL.iter().zip(mix.weights) {
        if w > 0 {
            cumulative += w;
            table.push_str(&format!(
                "  {{ {cumulative}, \"/{}?aid=\" }},\n",
                endpoint.name()
            ));
        }
    }
    format!(
        r#"-- generated by tidepool-bench server
local picks = {{
{table}}}
local total = {total}
local accounts = {accounts}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("seed", counter)
end

function init(args)
  math.randomseed(os.time() * 1000 + (seed or 0))
end

function request()
  local r = math.random(total)
  for i = 1, #picks do
    if r <= picks[i][1] then
      return wrk.format("GET", picks[i][2] .. math.random(accounts))
    end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'TIDEPOOL-WRK {{"requests":%d,"duration_us":%d,"p50_us":%.1f,"p99_us":%.1f,"p999_us":%.1f,"max_us":%.1f,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_print_and_refuse_bad_input() {
        let m: Mix = "lookup=70, write=30".parse().unwrap();
        assert_eq!(m.weights, [70, 0, 30, 0]);
        assert_eq!(m.to_string(), "lookup=70,write=30");
        assert_eq!(Mix::only(Endpoint::External).to_string(), "external=1");
        for (bad, says) in [
            ("lookup", "NAME=WEIGHT"),
            ("reads=3", "unknown endpoint `reads`"),
            ("lookup=-1", "0..=1000000"),
            ("lookup=0", "at least one"),
        ] {
            let err = bad.parse::<Mix>().unwrap_err();
            assert!(
                err.starts_with("--mix:") && err.contains(says),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_script_lists_only_weighted_endpoints_cumulatively() {
        let s = lua(&"lookup=3,external=1".parse().unwrap(), 500);
        assert!(s.contains("{ 3, \"/lookup?aid=\" }"), "{s}");
        assert!(s.contains("{ 4, \"/external?aid=\" }"), "{s}");
        assert!(!s.contains("/write"));
        assert!(s.contains("local accounts = 500"));
    }
}
