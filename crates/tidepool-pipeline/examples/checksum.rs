//! Checksum a file with a three-stage pipeline: read blocks → hash them on
//! two threads (in order) → combine. Prints the digest and the timing report.
//!
//! `cargo run --release -p tidepool-pipeline --example checksum -- FILE`

use std::io::Read;

use tidepool_pipeline::{BoxError, Context, Flow, Pipeline};

/// A block of the file and what the stages compute from it.
struct Block {
    data: Vec<u8>,
    len: usize,
    hash: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| file!().to_string());
    let mut file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    let (mut digest, mut blocks) = (0u64, 0u64);
    let report = Pipeline::builder("checksum")
        // Four 64 KiB buffers, made once and recycled.
        .buffers(4, || Block {
            data: vec![0; 64 << 10],
            len: 0,
            hash: 0,
        })
        .source(
            "read",
            move |b: &mut Block, _: &Context| -> Result<Flow, BoxError> {
                b.len = file.read(&mut b.data)?;
                Ok(if b.len == 0 { Flow::End } else { Flow::More })
            },
        )
        .replicated("hash", 2, || {
            |b: &mut Block, _: &Context| -> Result<(), BoxError> {
                // FNV-1a over the block.
                b.hash = b.data[..b.len].iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
                    (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
                });
                Ok(())
            }
        })
        .stage(
            "combine",
            move |b: &mut Block, cx: &Context| -> Result<(), BoxError> {
                // Blocks arrive in file order (the replicas are ordered); the
                // last buffer is empty (the source's `Flow::End`).
                if !cx.is_empty() {
                    digest = digest.rotate_left(5) ^ b.hash;
                    blocks += 1;
                }
                if cx.is_last() {
                    println!("{path}: digest {digest:016x} over {blocks} blocks");
                }
                Ok(())
            },
        )
        .build()?
        .run()?;
    print!("{}", report.to_table());
    Ok(())
}
