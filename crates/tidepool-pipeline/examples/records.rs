//! Convert a CSV file of temperature readings (`station,celsius`) to
//! Fahrenheit with the buffer API: read lines → parse records → convert on
//! two threads, in order → write. `examples/typed.rs` is the same program
//! with typed stages.
//!
//! `cargo run --release -p tidepool-pipeline --example records -- [FILE]`
//! (without FILE it writes a sample of 100,000 readings to a temp dir).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};

use tidepool_pipeline::{BoxError, Context, Flow, Pipeline};

/// Every stage's fields: the line read, the record parsed, the line out.
#[derive(Default)]
struct Buf {
    line: String,
    station: String,
    celsius: f64,
    out: String,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = sample::dir()?;
    let input = std::env::args()
        .nth(1)
        .map_or_else(|| sample::write(&dir), Ok)?;
    let output = dir.join("fahrenheit.csv");
    let mut reader = BufReader::new(File::open(&input)?);
    let mut writer = BufWriter::new(File::create(&output)?);
    let report = Pipeline::builder("convert")
        .buffers(16, Buf::default)
        .source(
            "read",
            move |b: &mut Buf, _: &Context| -> Result<Flow, BoxError> {
                b.line.clear();
                Ok(if reader.read_line(&mut b.line)? == 0 {
                    Flow::End
                } else {
                    Flow::More
                })
            },
        )
        .stage(
            "parse",
            |b: &mut Buf, cx: &Context| -> Result<(), BoxError> {
                if cx.is_empty() {
                    return Ok(());
                }
                let line = b.line.trim_end();
                let (station, t) = line
                    .split_once(',')
                    .ok_or(format!("no comma in {line:?}"))?;
                b.station.clear();
                b.station.push_str(station);
                b.celsius = t.trim().parse()?;
                Ok(())
            },
        )
        .replicated("convert", 2, || {
            |b: &mut Buf, cx: &Context| -> Result<(), BoxError> {
                if !cx.is_empty() {
                    b.out = format!("{},{:.1}\n", b.station, b.celsius * 1.8 + 32.0);
                }
                Ok(())
            }
        })
        .stage(
            "write",
            move |b: &mut Buf, cx: &Context| -> Result<(), BoxError> {
                if !cx.is_empty() {
                    writer.write_all(b.out.as_bytes())?;
                }
                if cx.is_last() {
                    writer.flush()?;
                }
                Ok(())
            },
        )
        .build()?
        .run()?;
    println!("{input} -> {}", output.display());
    print!("{}", report.to_table());
    sample::show_and_remove(&dir, &output)
}

#[path = "sample/mod.rs"]
mod sample;
