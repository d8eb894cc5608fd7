//! The name the kernel knows a thread by (what `top -H` and `ps -L` show).

/// The longest thread name the kernel keeps, in bytes (Linux: 16 with the
/// terminating NUL); the standard library cuts longer names to this.
pub const THREAD_NAME_MAX: usize = 15;

/// The kernel's name of the calling thread (`prctl(PR_GET_NAME)`): the name
/// given to `std::thread::Builder::name`, cut to [`THREAD_NAME_MAX`] bytes.
/// `None` where the OS does not tell.
pub fn thread_name() -> Option<String> {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    {
        let mut buf = [0u8; THREAD_NAME_MAX + 1];
        // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into
        // the buffer we pass.
        let rc = unsafe {
            libc::prctl(
                libc::PR_GET_NAME,
                buf.as_mut_ptr() as libc::c_ulong,
                0,
                0,
                0,
            )
        };
        if rc != 0 {
            return None;
        }
        let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        Some(String::from_utf8_lossy(&buf[..len]).into_owned())
    }
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_by_the_kernel() {
        let name = std::thread::Builder::new()
            .name("tidepool-a-very-long-name".into())
            .spawn(thread_name)
            .unwrap()
            .join()
            .unwrap();
        if let Some(name) = name {
            assert_eq!(name, "tidepool-a-very");
            assert_eq!(name.len(), THREAD_NAME_MAX);
        }
    }
}
