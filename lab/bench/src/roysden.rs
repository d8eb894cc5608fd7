//! The `roysden` benchmark: Roysden (2004)'s fixed and adjusting priority
//! scheduling on a columnsort-like pipeline (read → sort → permute → sort →
//! write) over real files with direct I/O, compute-bound and I/O-bound.
//!
//! Every arm runs the same pipeline with different per-stage priorities;
//! runs are interleaved (each repeat visits the arms in a Williams-design
//! order, so drifting machine load spreads over all arms and no arm always
//! follows the same one), and each arm is compared with the default by
//! Welch's t-test.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use tidepool_pipeline::sys::{flush_and_evict, open_direct, DIRECT_ALIGN};
use tidepool_pipeline::{Context, Flow, Pipeline, PrioritySpec};

use crate::harness::balanced_order;
use crate::welch::{mean_var, welch, Welch};

/// A 4 KiB page of records: blocks are vectors of pages, so their memory is
/// aligned as `O_DIRECT` requires.
#[derive(Clone, Copy)]
#[repr(C, align(4096))]
pub struct Page([u64; 512]);

/// One block of records (a column of the columnsort matrix).
pub type Block = Vec<Page>;

fn words(b: &mut Block) -> &mut [u64] {
    // SAFETY: `Page` is `repr(C)` over `[u64; 512]` with no padding (its size
    // is exactly 4096 = its alignment), so `len` pages are `len * 512`
    // contiguous, initialized u64s.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<u64>(), b.len() * 512) }
}

fn bytes(b: &mut Block) -> &mut [u8] {
    // SAFETY: as in `words`; any byte pattern is a valid u64.
    unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<u8>(), b.len() * 4096) }
}

const _: () = assert!(std::mem::size_of::<Page>() == DIRECT_ALIGN);

/// A compute stage of the columnsort pipeline.
type StageFn =
    Box<dyn FnMut(&mut Block, &Context) -> Result<(), tidepool_pipeline::BoxError> + Send>;

/// Which of the paper's two programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Record processing and full sorts of every block: the CPUs limit.
    Compute,
    /// Twice the data, cheap compute, every written block synced: the disk
    /// limits.
    Io,
}

/// The sizes of a run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Size {
    /// Blocks (rounds).
    pub blocks: usize,
    /// Pages (4 KiB) per block.
    pub pages: usize,
}

impl Variant {
    /// Sizes: full runs, or `--quick` ones (a few milliseconds each).
    pub fn size(self, quick: bool) -> Size {
        match (self, quick) {
            (Variant::Compute, false) => Size {
                blocks: 48,
                pages: 256,
            },
            (Variant::Io, false) => Size {
                blocks: 96,
                pages: 256,
            },
            (Variant::Compute, true) => Size {
                blocks: 8,
                pages: 16,
            },
            (Variant::Io, true) => Size {
                blocks: 16,
                pages: 16,
            },
        }
    }

    /// Fraction of each block the sort stages sort (the I/O-bound program's
    /// compute is "optimized").
    fn sorted_share(self) -> usize {
        match self {
            Variant::Compute => 1,
            Variant::Io => 16,
        }
    }

    /// Passes of record processing (a multiply-rotate of every key) each
    /// sort stage makes before sorting: on this machine's disk a bare sort
    /// of 1 MiB takes about as long as its I/O, and the compute-bound
    /// program must be limited by the CPUs, as the paper's was (194% CPU).
    fn mix_passes(self) -> usize {
        match self {
            Variant::Compute => 48,
            Variant::Io => 0,
        }
    }
}

/// A scheduling arm: a priority for the I/O stages and one for the compute
/// stages.
#[derive(Debug, Clone, Serialize)]
pub struct Arm {
    /// Its name in tables.
    pub name: &'static str,
    /// Priority of read and write.
    pub io: Option<String>,
    /// Priority of sort, permute, sort.
    pub compute: Option<String>,
}

/// The arms: the paper's fixed and adjusting methods, the rule it proposes,
/// and the two Linux classes the paper did not have.
pub fn arms() -> Vec<Arm> {
    let a = |name, io: Option<&str>, compute: Option<&str>| Arm {
        name,
        io: io.map(String::from),
        compute: compute.map(String::from),
    };
    vec![
        a("default", None, None),
        a("io-nice-up-19", Some("nice:19"), None),
        a("io-nice-up-5", Some("nice:5"), None),
        a("io-nice-down-5", Some("nice:-5"), None),
        a("dynamic-up", Some("dynamic-up:5"), Some("dynamic-up:5")),
        a(
            "dynamic-up-down",
            Some("dynamic-up-down:5"),
            Some("dynamic-up-down:5"),
        ),
        a(
            "backpressure",
            Some("backpressure:5"),
            Some("backpressure:5"),
        ),
        a("compute-batch", None, Some("batch")),
        a("io-idle", Some("idle"), None),
    ]
}

/// Write the input file: `size` of pseudo-random records, on the disk.
pub fn make_input(path: &Path, size: Size, seed: u64) -> io::Result<bool> {
    let (f, direct) = open_direct(path, true)?;
    let mut block: Block = vec![Page([0; 512]); size.pages];
    let mut x = seed | 1;
    for i in 0..size.blocks {
        for w in words(&mut block) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *w = x;
        }
        f.write_all_at(bytes(&mut block), (i * size.pages * 4096) as u64)?;
    }
    flush_and_evict(&f)?;
    Ok(direct)
}

/// The priority spec, parsed (the arms' strings are valid).
fn spec(s: &Option<String>) -> Option<PrioritySpec> {
    s.as_deref()
        .map(|s| PrioritySpec::parse(s).expect("valid arm"))
}

/// Wall time, user and system CPU time of one run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunTime {
    /// Seconds of wall-clock time.
    pub wall: f64,
    /// Seconds of user CPU time (the whole process).
    pub user: f64,
    /// Seconds of system CPU time.
    pub sys: f64,
}

fn rusage() -> (f64, f64) {
    // SAFETY: getrusage writes one rusage record.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (s(u.ru_utime), s(u.ru_stime))
}

/// One run of the columnsort pipeline under `arm`.
pub fn run_once(
    variant: Variant,
    size: Size,
    input: &Path,
    output: &Path,
    arm: &Arm,
) -> Result<RunTime, String> {
    let (inf, _) = open_direct(input, false).map_err(|e| format!("{}: {e}", input.display()))?;
    let (outf, out_direct) =
        open_direct(output, true).map_err(|e| format!("{}: {e}", output.display()))?;
    let (share, passes) = (variant.sorted_share(), variant.mix_passes());
    let block_bytes = (size.pages * 4096) as u64;
    let blocks = size.blocks as u64;
    let (io, cpu) = (spec(&arm.io), spec(&arm.compute));
    let sort = move |b: &mut Block, _: &Context| -> Result<(), tidepool_pipeline::BoxError> {
        let w = words(b);
        for _ in 0..passes {
            for x in w.iter_mut() {
                *x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17);
            }
        }
        let n = w.len() / share;
        w[..n].sort_unstable();
        Ok(())
    };
    let mut scratch: Vec<u64> = vec![0; size.pages * 512];
    let permute = move |b: &mut Block, _: &Context| -> Result<(), tidepool_pipeline::BoxError> {
        // Columnsort's transpose within a column: record i goes to
        // (i mod s) * (n / s) + i / s, with s = 8 "columns".
        let w = words(b);
        let (n, s) = (w.len(), 8);
        for (i, &v) in w.iter().enumerate() {
            scratch[(i % s) * (n / s) + i / s] = v;
        }
        w.copy_from_slice(&scratch[..n]);
        Ok(())
    };
    let mut p = Pipeline::builder(match variant {
        Variant::Compute => "columnsort-compute",
        Variant::Io => "columnsort-io",
    })
    .buffers(4, move || vec![Page([0; 512]); size.pages])
    .source(
        "read",
        move |b: &mut Block, cx: &Context| -> Result<Flow, tidepool_pipeline::BoxError> {
            inf.read_exact_at(bytes(b), cx.round() * block_bytes)?;
            Ok(if cx.round() + 1 >= blocks {
                Flow::Last
            } else {
                Flow::More
            })
        },
    );
    if let Some(s) = io {
        p = p.priority(s);
    }
    let stages: [(&str, StageFn); 3] = [
        ("sort-1", Box::new(sort)),
        ("permute", Box::new(permute)),
        ("sort-2", Box::new(sort)),
    ];
    for (name, f) in stages {
        p = p.stage(name, f);
        if let Some(s) = cpu {
            p = p.priority(s);
        }
    }
    let sync_each = variant == Variant::Io;
    p = p.stage(
        "write",
        move |b: &mut Block, cx: &Context| -> Result<(), tidepool_pipeline::BoxError> {
            outf.write_all_at(bytes(b), cx.round() * block_bytes)?;
            if sync_each || cx.is_last() {
                outf.sync_data()?;
            }
            if !out_direct && cx.is_last() {
                flush_and_evict(&outf)?;
            }
            Ok(())
        },
    );
    if let Some(s) = io {
        p = p.priority(s);
    }
    let pipeline = p.build().map_err(|e| e.to_string())?;
    let (u0, s0) = rusage();
    let t = Instant::now();
    pipeline.run().map_err(|e| e.to_string())?;
    let wall = t.elapsed().as_secs_f64();
    let (u1, s1) = rusage();
    Ok(RunTime {
        wall,
        user: u1 - u0,
        sys: s1 - s0,
    })
}

/// One arm's results in one variant.
#[derive(Debug, Clone, Serialize)]
pub struct ArmResult {
    /// The arm.
    pub arm: Arm,
    /// Every run.
    pub runs: Vec<RunTime>,
    /// Mean wall time, seconds.
    pub wall: f64,
    /// Standard error of the mean wall time.
    pub wall_se: f64,
    /// Mean user time.
    pub user: f64,
    /// Mean system time.
    pub sys: f64,
    /// Mean CPU use, percent of one CPU ((user + sys) / wall).
    pub cpu_pct: f64,
    /// Against the default arm (wall time).
    pub vs_default: Option<Welch>,
}

/// One variant's results.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// The program.
    pub variant: Variant,
    /// Its size.
    pub size: Size,
    /// Whether the files were opened with `O_DIRECT`.
    pub direct_io: bool,
    /// One entry per arm, the default first.
    pub arms: Vec<ArmResult>,
}

/// The whole benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct Roysden {
    /// Runs per arm.
    pub runs: usize,
    /// 1-minute load average before and after.
    pub load: (Option<f64>, Option<f64>),
    /// Kernel release.
    pub kernel: String,
    /// Whether lowering a nice value was permitted.
    pub may_raise_priority: bool,
    /// Per variant.
    pub variants: Vec<VariantResult>,
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The most blocks `--blocks` may ask for: two files of up to 4 GiB each.
pub const MAX_BLOCKS: usize = 4096;

/// Run the `variants`, `runs` interleaved runs per arm, in `dir`; `blocks`,
/// when given, replaces each program's number of blocks (longer runs make
/// the pipeline's fill and drain a smaller share of the clock time).
pub fn run(
    dir: &Path,
    runs: usize,
    quick: bool,
    blocks: Option<usize>,
    variants: &[Variant],
    quiet: bool,
) -> Result<Roysden, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let load0 = tidepool::sys::load_average().map(|l| l[0]);
    let may_raise = std::thread::spawn(|| {
        tidepool_pipeline::sys::set_nice(1).is_ok() && tidepool_pipeline::sys::set_nice(0).is_ok()
    })
    .join()
    .unwrap_or(false);
    let arms = arms();
    let mut out = Vec::new();
    for &variant in variants {
        let mut size = variant.size(quick);
        size.blocks = blocks.unwrap_or(size.blocks);
        let input: PathBuf = dir.join(format!("{variant:?}-input.dat").to_lowercase());
        let output: PathBuf = dir.join(format!("{variant:?}-output.dat").to_lowercase());
        let direct =
            make_input(&input, size, 42).map_err(|e| format!("{}: {e}", input.display()))?;
        // One warm-up run (not counted).
        run_once(variant, size, &input, &output, &arms[0])?;
        let mut times: Vec<Vec<RunTime>> = vec![Vec::new(); arms.len()];
        for rep in 0..runs {
            for i in balanced_order(arms.len(), rep) {
                let t = run_once(variant, size, &input, &output, &arms[i])?;
                if !quiet {
                    eprintln!(
                        "  {variant:?} run {}/{runs} {:<16} {:.3} s",
                        rep + 1,
                        arms[i].name,
                        t.wall
                    );
                }
                times[i].push(t);
            }
        }
        let walls: Vec<Vec<f64>> = times
            .iter()
            .map(|v| v.iter().map(|t| t.wall).collect())
            .collect();
        let results = arms
            .iter()
            .zip(&times)
            .enumerate()
            .map(|(i, (arm, runs))| {
                let n = runs.len().max(1) as f64;
                let (wall, var) =
                    mean_var(&walls[i]).unwrap_or((walls[i].first().copied().unwrap_or(0.0), 0.0));
                let user = runs.iter().map(|t| t.user).sum::<f64>() / n;
                let sys = runs.iter().map(|t| t.sys).sum::<f64>() / n;
                ArmResult {
                    arm: arm.clone(),
                    wall,
                    wall_se: (var / n).sqrt(),
                    user,
                    sys,
                    cpu_pct: 100.0 * (user + sys) / wall.max(1e-12),
                    vs_default: (i > 0).then(|| welch(&walls[i], &walls[0])).flatten(),
                    runs: runs.clone(),
                }
            })
            .collect();
        let _ = std::fs::remove_file(&output);
        let _ = std::fs::remove_file(&input);
        out.push(VariantResult {
            variant,
            size,
            direct_io: direct,
            arms: results,
        });
    }
    Ok(Roysden {
        runs,
        load: (load0, tidepool::sys::load_average().map(|l| l[0])),
        kernel: kernel(),
        may_raise_priority: may_raise,
        variants: out,
    })
}

/// The results as Markdown tables, one per variant, laid out like the
/// paper's Tables 3 and 4 (plus the comparison with the default).
pub fn markdown(r: &Roysden) -> String {
    let mut s = format!(
        "Linux {}, {} interleaved runs per arm, load average {:.1} before / {:.1} after; \
         lowering nice {}.\n",
        r.kernel,
        r.runs,
        r.load.0.unwrap_or(f64::NAN),
        r.load.1.unwrap_or(f64::NAN),
        if r.may_raise_priority {
            "permitted"
        } else {
            "refused"
        }
    );
    for v in &r.variants {
        s += &format!(
            "\n{:?}-bound: {} blocks of {} KiB{}\n\n\
             | Scheduling | Obs. | User s | System s | Clock s (± s.e.) | CPU % | vs default (95% CI) | p |\n\
             |---|---|---|---|---|---|---|---|\n",
            v.variant,
            v.size.blocks,
            v.size.pages * 4,
            if v.direct_io { ", O_DIRECT" } else { ", fdatasync + fadvise(DONTNEED)" }
        );
        for a in &v.arms {
            let (cmp, p) = match &a.vs_default {
                Some(w) => (
                    format!(
                        "{:+.2}% ({:+.2} … {:+.2})",
                        w.diff_pct, w.ci95_pct.0, w.ci95_pct.1
                    ),
                    format!("{:.3}", w.p),
                ),
                None => ("—".into(), "—".into()),
            };
            s += &format!(
                "| {} | {} | {:.3} | {:.3} | {:.4} ± {:.4} | {:.1} | {cmp} | {p} |\n",
                a.arm.name,
                a.runs.len(),
                a.user,
                a.sys,
                a.wall,
                a.wall_se,
                a.cpu_pct
            );
        }
    }
    s
}

/// A scratch directory for the files.
pub fn default_dir() -> PathBuf {
    std::env::temp_dir().join(format!("tidepool-roysden-{}", std::process::id()))
}

/// The time budget of `--quick`: what CI may spend.
pub const QUICK_BUDGET: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_mode_runs_every_arm_and_compares_it() {
        let dir = default_dir().join("test");
        let r = run(&dir, 2, true, None, &[Variant::Compute, Variant::Io], true).unwrap();
        assert_eq!(r.variants.len(), 2);
        for v in &r.variants {
            assert_eq!(v.size.blocks, v.variant.size(true).blocks);
            assert_eq!(v.arms.len(), arms().len());
            assert!(v.arms.iter().all(|a| a.runs.len() == 2 && a.wall > 0.0));
            assert!(v.arms[1..].iter().all(|a| a.vs_default.is_some()));
        }
        assert!(markdown(&r).contains("io-nice-up-19"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn blocks_replaces_the_programs_length() {
        let dir = default_dir().join("blocks");
        let r = run(&dir, 2, true, Some(3), &[Variant::Io], true).unwrap();
        assert_eq!(r.variants[0].size.blocks, 3);
        assert!(markdown(&r).contains("3 blocks of 64 KiB"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn permute_is_a_permutation() {
        let size = Size {
            blocks: 1,
            pages: 2,
        };
        let dir = default_dir().join("perm");
        std::fs::create_dir_all(&dir).unwrap();
        let (i, o) = (dir.join("in"), dir.join("out"));
        make_input(&i, size, 7).unwrap();
        run_once(Variant::Io, size, &i, &o, &arms()[0]).unwrap();
        let read = |p: &Path| {
            let mut v: Vec<u64> = std::fs::read(p)
                .unwrap()
                .chunks(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(read(&i), read(&o), "the output holds the input's records");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
