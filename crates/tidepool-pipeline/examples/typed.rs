//! Convert a CSV file of temperature readings (`station,celsius`) to
//! Fahrenheit with a typed pipeline: read lines → parse records → convert
//! on two threads, in order → write. `examples/records.rs` is the same
//! program with the buffer API.
//!
//! `cargo run --release -p tidepool-pipeline --example typed -- [FILE]`
//! (without FILE it writes a sample of 100,000 readings to a temp dir).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};

use tidepool_pipeline::Pipeline;

struct Reading {
    station: String,
    celsius: f64,
}

fn parse(line: io::Result<String>) -> Result<Reading, tidepool_pipeline::BoxError> {
    let line = line?;
    let (station, t) = line
        .split_once(',')
        .ok_or(format!("no comma in {line:?}"))?;
    Ok(Reading {
        station: station.to_string(),
        celsius: t.trim().parse()?,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = sample::dir()?;
    let input = std::env::args()
        .nth(1)
        .map_or_else(|| sample::write(&dir), Ok)?;
    let output = dir.join("fahrenheit.csv");
    let (mut out, report) = Pipeline::typed("convert")
        .source_iter("read", BufReader::new(File::open(&input)?).lines())
        .stage("parse", parse)
        .replicated("convert", 2, || {
            |r: Reading| Ok(format!("{},{:.1}\n", r.station, r.celsius * 1.8 + 32.0))
        })
        .fold(
            "write",
            BufWriter::new(File::create(&output)?),
            |mut w, line| {
                w.write_all(line.as_bytes())?;
                Ok(w)
            },
        )?
        .run()?;
    out.flush()?;
    println!("{input} -> {}", output.display());
    print!("{}", report.to_table());
    sample::show_and_remove(&dir, &output)
}

#[path = "sample/mod.rs"]
mod sample;
