//! Plain-text and Markdown tables, and the number formats they use.

/// A table of strings: the first column is left-aligned (names), the others
/// right-aligned (numbers).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    headers: Vec<String>,
    left: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        let mut left = vec![false; headers.len()];
        if let Some(first) = left.first_mut() {
            *first = true;
        }
        Table {
            headers,
            left,
            rows: Vec::new(),
        }
    }

    /// Left-align column `col` too (for text columns).
    pub fn left_align(mut self, col: usize) -> Table {
        if let Some(l) = self.left.get_mut(col) {
            *l = true;
        }
        self
    }

    /// Append a row (missing cells are blank, extra cells dropped).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        let mut r: Vec<String> = cells.into_iter().map(Into::into).collect();
        r.resize(self.headers.len(), String::new());
        self.rows.push(r);
        self
    }

    fn widths(&self) -> Vec<usize> {
        (0..self.headers.len())
            .map(|c| {
                std::iter::once(&self.headers[c])
                    .chain(self.rows.iter().map(|r| &r[c]))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Aligned plain text, a rule under the header, no trailing spaces.
    pub fn render(&self) -> String {
        let w = self.widths();
        let line = |cells: &[String]| -> String {
            let mut s = String::new();
            for (c, cell) in cells.iter().enumerate() {
                let pad = w[c].saturating_sub(cell.chars().count());
                if c > 0 {
                    s.push_str("  ");
                }
                if self.left[c] {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            s.trim_end().to_string()
        };
        let mut out = line(&self.headers);
        out.push('\n');
        let total = w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// For a terminal `width` columns wide: the aligned text of
    /// [`Table::render`] when it fits, otherwise a comfy-table whose cells
    /// wrap so that the table does.
    pub fn render_to_width(&self, width: usize) -> String {
        let plain = self.render();
        if plain.lines().all(|l| l.chars().count() <= width) {
            return plain;
        }
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::UTF8_HORIZONTAL_ONLY)
            .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
            .set_width(u16::try_from(width).unwrap_or(u16::MAX))
            .set_header(self.headers.clone());
        for r in &self.rows {
            t.add_row(r.clone());
        }
        for (i, left) in self.left.iter().enumerate() {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(if *left {
                    comfy_table::CellAlignment::Left
                } else {
                    comfy_table::CellAlignment::Right
                });
            }
        }
        format!("{t}\n")
    }

    /// [`Table::render`], or [`Table::render_to_width`] of the terminal when
    /// stdout is one (the width comes from the terminal, or `COLUMNS`).
    pub fn render_for_stdout(&self) -> String {
        use std::io::IsTerminal;
        if !std::io::stdout().is_terminal() {
            return self.render();
        }
        let width = comfy_table::Table::new()
            .width()
            .map(usize::from)
            .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
            .unwrap_or(100);
        self.render_to_width(width)
    }

    /// A GitHub-flavored Markdown table (`|` in cells escaped).
    pub fn markdown(&self) -> String {
        let esc = |s: &String| s.replace('|', "\\|");
        let mut out = format!(
            "| {} |\n",
            self.headers.iter().map(esc).collect::<Vec<_>>().join(" | ")
        );
        out.push('|');
        for left in &self.left {
            out.push_str(if *left { "---|" } else { "---:|" });
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(esc).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }
}

/// A duration given in µs, with a readable unit: `850 µs`, `12.3 ms`, `2.50 s`.
pub fn fmt_us(us: f64) -> String {
    if !us.is_finite() {
        return "-".into();
    }
    let a = us.abs();
    if a < 10.0 {
        format!("{us:.1} µs")
    } else if a < 1_000.0 {
        format!("{us:.0} µs")
    } else if a < 10_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else if a < 1_000_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A rate in tasks per second: `1234/s`, `12.5/s`.
pub fn fmt_rate(per_s: f64) -> String {
    if !per_s.is_finite() {
        "-".into()
    } else if per_s < 100.0 {
        format!("{per_s:.1}/s")
    } else {
        format!("{per_s:.0}/s")
    }
}

/// A ratio: two decimals below 10 (single runs on a shared machine vary by
/// a few percent: a third decimal would be noise), fewer above; `-` when
/// absent.
pub fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() && r.abs() < 10.0 => format!("{r:.2}"),
        Some(r) if r.is_finite() && r.abs() < 100.0 => format!("{r:.1}"),
        Some(r) if r.is_finite() => format!("{r:.0}"),
        _ => "-".into(),
    }
}

/// A fraction as a percentage: `0.125` → `12.5%`.
pub fn fmt_pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_tables_wrap_to_the_width() {
        let mut t = Table::new(["policy", "claim", "verdict"]);
        t.row([
            "auto",
            "a long sentence that cannot fit in a narrow terminal without wrapping its words",
            "reproduced",
        ]);
        assert_eq!(t.render_to_width(200), t.render());
        let narrow = t.render_to_width(50);
        assert!(narrow.lines().all(|l| l.chars().count() <= 50), "{narrow}");
        assert!(
            narrow.contains("reproduced") && narrow.contains("wrapping"),
            "{narrow}"
        );
    }

    #[test]
    fn render_aligns_columns() {
        let mut t = Table::new(["policy", "throughput", "p99 wait"]);
        t.row(["auto", "1000/s", "12 µs"]);
        t.row(["hill-climb", "99.5/s", "1.20 ms"]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "policy      throughput  p99 wait");
        assert!(lines[1].chars().all(|c| c == '-'));
        assert_eq!(lines[1].chars().count(), lines[0].chars().count());
        assert_eq!(lines[2], "auto            1000/s     12 µs");
        assert_eq!(lines[3], "hill-climb      99.5/s   1.20 ms");
        // every line of the body has the same width (µs counts as one char)
        assert_eq!(lines[2].chars().count(), lines[3].chars().count());
    }

    #[test]
    fn short_rows_are_padded_and_markdown_escapes() {
        let mut t = Table::new(["a", "b", "c"]).left_align(2);
        t.row(["x|y"]);
        assert_eq!(
            t.markdown(),
            "| a | b | c |\n|---|---:|---|\n| x\\|y |  |  |\n"
        );
        t.row(["1", "2", "left"]);
        assert!(t.render().ends_with("\n1    2  left\n"), "{}", t.render());
    }

    #[test]
    fn number_formats() {
        assert_eq!(fmt_us(3.21), "3.2 µs");
        assert_eq!(fmt_us(850.4), "850 µs");
        assert_eq!(fmt_us(1_234.0), "1.23 ms");
        assert_eq!(fmt_us(12_345.0), "12.3 ms");
        assert_eq!(fmt_us(2_500_000.0), "2.50 s");
        assert_eq!(fmt_us(f64::NAN), "-");
        assert_eq!(fmt_rate(1234.4), "1234/s");
        assert_eq!(fmt_rate(12.46), "12.5/s");
        assert_eq!(fmt_ratio(Some(0.98765)), "0.99");
        assert_eq!(fmt_ratio(None), "-");
        assert_eq!(fmt_ratio(Some(1403.6)), "1404");
        assert_eq!(fmt_ratio(Some(12.345)), "12.3");
        assert_eq!(fmt_pct(0.125), "12.5%");
    }
}
