// Session 11 (pipe15): the cost of getrusage(RUSAGE_THREAD) and of Instant::now + elapsed on this machine.
// rustc -O -o /tmp/pipe15-mb docs/records/bench-pipeline-s11-pipe15-syscall-cost.rs && /tmp/pipe15-mb
// (20:01 UTC, three runs: 417-460 ns per getrusage, 61-70 ns per now+elapsed; docs/notebook/pipelines.md, session 11.)
use std::time::Instant;
fn main(){
  let n=200000;
  let t=Instant::now(); let mut x=0u128; for _ in 0..n { x+=Instant::now().elapsed().as_nanos(); } println!("Instant::now+elapsed {:.1} ns (x{})", t.elapsed().as_nanos() as f64/n as f64, x%2);
  let t=Instant::now(); for _ in 0..n { let mut ru: libc_rusage = unsafe{std::mem::zeroed()}; unsafe{ getrusage(1, &mut ru) }; std::hint::black_box(&ru); } println!("getrusage(THREAD) {:.1} ns", t.elapsed().as_nanos() as f64/n as f64);
}
#[repr(C)] struct libc_rusage { a:[i64;4], b:[i64;14] }
extern "C" { fn getrusage(who: i32, r: *mut libc_rusage) -> i32; }
