//! Comma-separated lists on the command line: policies, workloads, sizes.
//!
//! Policy and generator specs contain commas themselves
//! (`hisdyn:max=100,p=0.01`), so a list is split on commas and a piece that is
//! a bare `key=value` (no `:` before its `=`) is glued back onto the previous
//! item.

use tidepool::policy::PolicySpec;
use tidepool_workload::limits::shown;

/// Split a comma-separated list of specs, keeping `key=value` continuations
/// with their spec.
///
/// ```text
/// "auto,hisdyn:max=100,p=0.01,tpr" → ["auto", "hisdyn:max=100,p=0.01", "tpr"]
/// ```
pub fn split_specs(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in list.split(',') {
        let piece = piece.trim();
        let continuation = match piece.split_once('=') {
            Some((key, _)) => !key.contains(':') && !key.is_empty(),
            None => false,
        };
        match out.last_mut() {
            Some(last) if continuation => {
                last.push(',');
                last.push_str(piece);
            }
            _ if piece.is_empty() => {}
            _ => out.push(piece.to_string()),
        }
    }
    out
}

/// A list of policy specs given to one `--policies` flag.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyList(pub Vec<PolicySpec>);

/// Parse `--policies auto,xu-bode:initial=16,tpr`. The error is the policy
/// parser's message (which lists every valid form).
pub fn parse_policy_list(list: &str) -> Result<PolicyList, String> {
    let specs = split_specs(list);
    if specs.is_empty() {
        return Err("no policy given".into());
    }
    specs
        .iter()
        .map(|s| PolicySpec::parse(s).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map(PolicyList)
}

/// Parse one `--policy SPEC`.
pub fn parse_policy(spec: &str) -> Result<PolicySpec, String> {
    PolicySpec::parse(spec).map_err(|e| e.to_string())
}

/// A list of static pool sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizes(pub Vec<usize>);

/// The largest size a sweep accepts.
pub const MAX_SIZE: usize = 4096;

/// Parse `--sizes`: comma-separated items, each `N`, `A..B` (every size from
/// A to B), `A..B:S` (step S) or `A..B:xF` (multiply by F: `1..64:x2` is
/// 1,2,4,…,64). The result is sorted and without duplicates.
pub fn parse_sizes(list: &str) -> Result<Sizes, String> {
    let num = |s: &str| -> Result<usize, String> {
        let n: usize = s.trim().parse().map_err(|_| {
            format!(
                "`{}` is not a pool size (a whole number in 1..={MAX_SIZE})",
                shown(s)
            )
        })?;
        if n == 0 || n > MAX_SIZE {
            return Err(format!("pool size {n} is out of range 1..={MAX_SIZE}"));
        }
        Ok(n)
    };
    let mut sizes = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((a, rest)) = item.split_once("..") else {
            sizes.push(num(item)?);
            continue;
        };
        let (b, step) = match rest.split_once(':') {
            Some((b, step)) => (b, Some(step.trim())),
            None => (rest, None),
        };
        let (a, b) = (num(a)?, num(b.trim_start_matches('='))?);
        if a > b {
            return Err(format!("range `{}` is empty ({a} > {b})", shown(item)));
        }
        match step {
            None => sizes.extend(a..=b),
            Some(s) if s.starts_with('x') => {
                let f: usize = s[1..]
                    .parse()
                    .ok()
                    .filter(|f| (2..=MAX_SIZE).contains(f))
                    .ok_or_else(|| {
                        format!(
                            "`{}` in `{}`: the factor must be x2 to x{MAX_SIZE}",
                            shown(s),
                            shown(item)
                        )
                    })?;
                let mut v = a;
                while v <= b {
                    sizes.push(v);
                    // b <= MAX_SIZE, so an overflow is past b too
                    v = v.saturating_mul(f);
                }
            }
            Some(s) => {
                let step: usize = s.parse().ok().filter(|s| *s >= 1).ok_or_else(|| {
                    format!(
                        "`{}` in `{}`: the step must be a whole number, 1 or more",
                        shown(s),
                        shown(item)
                    )
                })?;
                sizes.extend((a..=b).step_by(step));
            }
        }
    }
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.is_empty() {
        return Err("no pool size given (e.g. 1,2,4,8 or 1..16 or 1..64:x2)".into());
    }
    Ok(Sizes(sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_keep_their_commas() {
        assert_eq!(
            split_specs("auto,hisdyn:max=100,p=0.01,tpr"),
            vec!["auto", "hisdyn:max=100,p=0.01", "tpr"]
        );
        assert_eq!(
            split_specs("xu-bode:initial=4,stride=2, watermark:3..100"),
            vec!["xu-bode:initial=4,stride=2", "watermark:3..100"]
        );
        assert_eq!(
            split_specs("poisson:rate=2000,service=exp:200us,n=50,cpu,io"),
            vec!["poisson:rate=2000,service=exp:200us,n=50", "cpu", "io"]
        );
        assert_eq!(split_specs(",,"), Vec::<String>::new());
    }

    #[test]
    fn policy_lists() {
        let l = parse_policy_list("auto,hisdyn:max=50,p=0.02,fixed:8").unwrap();
        assert_eq!(l.0.len(), 3);
        assert_eq!(l.0[1].to_string(), "hisdyn:max=50,p=0.02");
        let e = parse_policy_list("auto,bogus").unwrap_err();
        assert!(e.contains("bogus") && e.contains("valid forms"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_sizes("8,1,2,2").unwrap().0, vec![1, 2, 8]);
        assert_eq!(parse_sizes("1..4").unwrap().0, vec![1, 2, 3, 4]);
        assert_eq!(parse_sizes("2..10:4").unwrap().0, vec![2, 6, 10]);
        assert_eq!(
            parse_sizes("1..64:x2").unwrap().0,
            vec![1, 2, 4, 8, 16, 32, 64]
        );
        assert_eq!(parse_sizes("1..3,16").unwrap().0, vec![1, 2, 3, 16]);
        for bad in ["", "0", "a", "4..2", "1..8:x1", "1..8:0", "99999"] {
            assert!(parse_sizes(bad).is_err(), "{bad}");
        }
        // The factor used to overflow to 0 and loop forever.
        let e = parse_sizes("2..4096:x9223372036854775808").unwrap_err();
        assert!(e.contains("x2 to x4096"), "{e}");
        assert_eq!(parse_sizes("2..4096:x4096").unwrap().0, vec![2]);
        assert_eq!(parse_sizes("4095..4096:x2").unwrap().0, vec![4095]);
        let e = parse_sizes(&"9".repeat(100_000)).unwrap_err();
        assert!(e.len() < 200, "{e}");
    }

    proptest::proptest! {
        /// Fuzzing: any list parses or is refused quickly (no overflow, no
        /// endless loop), and what parses is sorted, unique and in range.
        #[test]
        fn sizes_never_panic_or_hang(s in "[0-9x:.,= -]{0,40}") {
            if let Ok(Sizes(v)) = parse_sizes(&s) {
                proptest::prop_assert!(v.windows(2).all(|w| w[0] < w[1]));
                proptest::prop_assert!(v.iter().all(|n| (1..=MAX_SIZE).contains(n)));
            }
        }

        #[test]
        fn range_factors_never_overflow(a in 1usize..5000, b in 1usize..5000, f in proptest::prelude::any::<u64>()) {
            let _ = parse_sizes(&format!("{a}..{b}:x{f}"));
        }

        #[test]
        fn spec_lists_never_panic(s in proptest::prelude::any::<String>()) {
            let _ = split_specs(&s);
            let _ = parse_policy_list(&s);
        }
    }
}
