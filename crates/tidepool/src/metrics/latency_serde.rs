//! `Latency` as data (feature `serde`): its buckets and exact sum, which
//! rebuild the same distribution, plus a summary for readers that only want
//! the numbers (ignored when read back).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::latency::Latency;

/// The serialised form: nanoseconds throughout.
#[derive(Serialize, Deserialize)]
struct Repr {
    count: u64,
    sum_ns: u128,
    #[serde(default, skip_deserializing)]
    mean_ns: Option<u64>,
    #[serde(default, skip_deserializing)]
    p50_ns: Option<u64>,
    #[serde(default, skip_deserializing)]
    p90_ns: Option<u64>,
    #[serde(default, skip_deserializing)]
    p99_ns: Option<u64>,
    #[serde(default, skip_deserializing)]
    max_ns: Option<u64>,
    /// `[upper bound ns, count]`, smallest first.
    buckets: Vec<(u64, u64)>,
}

fn ns(d: Option<std::time::Duration>) -> Option<u64> {
    d.map(|d| d.as_nanos().min(u64::MAX as u128) as u64)
}

impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Repr {
            count: self.count(),
            sum_ns: self.total().as_nanos(),
            mean_ns: ns(self.mean()),
            p50_ns: ns(self.quantile(0.5)),
            p90_ns: ns(self.quantile(0.9)),
            p99_ns: ns(self.quantile(0.99)),
            max_ns: ns(self.max()),
            buckets: self
                .buckets()
                .map(|b| (ns(Some(b.upper)).unwrap_or(u64::MAX), b.count))
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let repr = Repr::deserialize(d)?;
        let recorded: u64 = repr.buckets.iter().map(|&(_, n)| n).sum();
        if recorded != repr.count {
            return Err(serde::de::Error::custom(format!(
                "latency `count` is {} but its buckets hold {recorded} samples",
                repr.count
            )));
        }
        let mut out = Latency::default();
        for (upper, n) in repr.buckets {
            out.record_n(upper, n);
        }
        out.add_sum(repr.sum_ns);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let mut l = Latency::default();
        for ns in [1_000u64, 2_000, 2_000, 5_000_000] {
            l.record(ns);
        }
        let json = serde_json::to_string(&l).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["count"], 4);
        assert_eq!(v["mean_ns"], 1_251_250);
        let back: Latency = serde_json::from_str(&json).unwrap();
        assert_eq!(back.count(), 4);
        assert_eq!(back.mean(), l.mean());
        assert_eq!(back.quantile(0.5), l.quantile(0.5));
        assert_eq!(back.max(), l.max());
        assert!(back.buckets().eq(l.buckets()));
    }

    #[test]
    fn inconsistent_counts_are_refused() {
        let bad = r#"{"count": 3, "sum_ns": 10, "buckets": [[10, 1]]}"#;
        let err = serde_json::from_str::<Latency>(bad).unwrap_err();
        assert!(err.to_string().contains("buckets hold 1"), "{err}");
    }
}
