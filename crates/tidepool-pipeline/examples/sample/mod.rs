//! The examples' sample input: temperature readings in a temp dir.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A fresh directory of this process's own under the temp dir.
pub fn dir() -> std::io::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("tidepool-example-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// Write 100,000 readings `station-N,celsius` into `dir`; return the path.
pub fn write(dir: &Path) -> std::io::Result<String> {
    let path = dir.join("readings.csv");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for i in 0..100_000u32 {
        let celsius = f64::from(i % 700) / 10.0 - 30.0;
        writeln!(w, "station-{},{celsius:.1}", i % 97)?;
    }
    w.flush()?;
    Ok(path.display().to_string())
}

/// Print the output's first lines and its line count, then remove `dir`.
pub fn show_and_remove(dir: &Path, output: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(output)?;
    for line in text.lines().take(3) {
        println!("  {line}");
    }
    println!("  … {} lines", text.lines().count());
    std::fs::remove_dir_all(dir)?;
    Ok(())
}
