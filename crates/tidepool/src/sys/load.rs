//! The system's load average.

/// The 1, 5 and 15 minute load averages (`getloadavg`), if the OS tells
/// (Linux, macOS and the BSDs; `None` elsewhere).
pub fn load_average() -> Option<[f64; 3]> {
    imp::load_average()
}

posix! {
    {
        mod imp {
            pub(super) fn load_average() -> Option<[f64; 3]> {
                let mut avg = [0.0f64; 3];
                // SAFETY: getloadavg writes at most 3 doubles into the buffer we pass.
                let n = unsafe { libc::getloadavg(avg.as_mut_ptr(), 3) };
                (n == 3).then_some(avg)
            }
        }
    } else {
        mod imp {
            pub(super) fn load_average() -> Option<[f64; 3]> {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn load_average_is_sane() {
        if let Some(avg) = super::load_average() {
            assert!(avg.iter().all(|v| v.is_finite() && *v >= 0.0));
        }
    }
}
