//! File I/O that bypasses the page cache, so that a read measures the
//! device: `O_DIRECT`, or a flush and eviction where it is missing.

use std::io;

/// Open a file for I/O that bypasses the page cache (`O_DIRECT`): reads and
/// writes must then use aligned buffers, offsets and lengths
/// ([`DIRECT_ALIGN`]). Falls back to an ordinary open where `O_DIRECT` is
/// missing or refused by the file system; the returned flag says which.
pub fn open_direct(path: &std::path::Path, write: bool) -> io::Result<(std::fs::File, bool)> {
    let mut opts = std::fs::OpenOptions::new();
    if write {
        opts.write(true).create(true).truncate(true);
    } else {
        opts.read(true);
    }
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut direct = opts.clone();
        direct.custom_flags(libc::O_DIRECT);
        if let Ok(f) = direct.open(path) {
            return Ok((f, true));
        }
    }
    opts.open(path).map(|f| (f, false))
}

/// Alignment that `O_DIRECT` buffers, offsets and lengths must respect.
pub const DIRECT_ALIGN: usize = 4096;

/// Write the file's data to the disk and drop its pages from the page cache
/// (`fdatasync` + `posix_fadvise(DONTNEED)`), so the next read comes from the
/// device: the fallback where `O_DIRECT` is not available.
pub fn flush_and_evict(file: &std::fs::File) -> io::Result<()> {
    file.sync_data()?;
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the call's duration.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}
