//! Every OS call of this crate, in one place, with fallbacks where the OS
//! lacks them: per-thread nice values and scheduling classes, reading them
//! back, giving up `CAP_SYS_NICE`, and I/O that bypasses the page cache.
//!
//! On Linux a nice value and a scheduling class belong to one thread (its
//! kernel thread id), not to the process: that is what lets each stage run
//! at its own priority.

use std::io;

/// A scheduling class for a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedClass {
    /// The default time-sharing class (`SCHED_OTHER`), weighted by nice.
    Other,
    /// `SCHED_BATCH`: like `Other`, but the scheduler assumes the thread is
    /// CPU-bound and lets it preempt less.
    Batch,
    /// `SCHED_IDLE`: runs only when nothing else wants the CPU.
    Idle,
}

/// The calling thread's kernel thread id ([`tidepool::sys::thread_id`]);
/// 0 (the calling thread, to `setpriority`) where the OS cannot tell.
pub fn thread_id() -> i32 {
    tidepool::sys::thread_id().map_or(0, |t| t as i32)
}

/// Set the calling thread's nice value (-20 = highest priority … 19).
/// Lowering it below where it is needs `CAP_SYS_NICE` (or `RLIMIT_NICE`):
/// the error is then `PermissionDenied`.
pub fn set_nice(nice: i32) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: setpriority reads its three integer arguments only.
        let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, thread_id() as libc::id_t, nice) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// The calling thread's nice value.
pub fn nice() -> io::Result<i32> {
    #[cfg(target_os = "linux")]
    {
        // getpriority may return -1 legitimately: clear errno to tell.
        // SAFETY: __errno_location points at this thread's errno.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: getpriority reads its two integer arguments only.
        let v = unsafe { libc::getpriority(libc::PRIO_PROCESS, thread_id() as libc::id_t) };
        let err = io::Error::last_os_error();
        if v == -1 && err.raw_os_error() != Some(0) {
            Err(err)
        } else {
            Ok(v)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Put the calling thread in a scheduling class (static priority 0).
pub fn set_sched_class(class: SchedClass) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let policy = match class {
            SchedClass::Other => libc::SCHED_OTHER,
            SchedClass::Batch => libc::SCHED_BATCH,
            SchedClass::Idle => libc::SCHED_IDLE,
        };
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` outlives the call.
        let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = class;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// The calling thread's scheduling class (`None` for a real-time class).
pub fn sched_class() -> io::Result<Option<SchedClass>> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: pid 0 is the calling thread.
        let p = unsafe { libc::sched_getscheduler(0) };
        match p {
            -1 => Err(io::Error::last_os_error()),
            libc::SCHED_OTHER => Ok(Some(SchedClass::Other)),
            libc::SCHED_BATCH => Ok(Some(SchedClass::Batch)),
            libc::SCHED_IDLE => Ok(Some(SchedClass::Idle)),
            _ => Ok(None),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Nice value and scheduling policy of the calling thread as the kernel
/// reports them in `/proc/thread-self/stat` (fields 19 and 41), an
/// independent reading of what [`set_nice`] and [`set_sched_class`] did.
pub fn proc_thread_stat() -> io::Result<(i32, u32)> {
    let text = std::fs::read_to_string("/proc/thread-self/stat")?;
    // The command name (field 2) may hold spaces: count fields after ')'.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no ')' in stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3.
    let field = |n: usize| {
        fields
            .get(n - 3)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short stat line"))
    };
    let bad = |_| io::Error::new(io::ErrorKind::InvalidData, "bad stat field");
    Ok((
        field(19)?.parse().map_err(bad)?,
        field(41)?.parse().map_err(bad)?,
    ))
}

/// Remove `CAP_SYS_NICE` from the calling thread's effective capabilities
/// (threads it spawns afterwards inherit that). Lets a root process see what
/// an ordinary user sees when it asks for a lower nice value.
pub fn drop_cap_sys_nice() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const VERSION_3: u32 = 0x2008_0522;
        const CAP_SYS_NICE: u32 = 23;
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data::default(); 2];
        // SAFETY: capget writes two Data records for version 3.
        let rc = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        data[0].effective &= !(1 << CAP_SYS_NICE);
        // SAFETY: capset reads the header and two Data records.
        let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::ErrorKind::Unsupported.into())
    }
}

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
    #[cfg(target_os = "linux")]
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
    #[cfg(target_os = "linux")]
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

/// Voluntary context switches of the calling thread so far (it blocked
/// and gave up its core); `None` where the OS does not count them.
pub fn voluntary_switches() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage writes into the zeroed struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a rusage for the call's duration.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        (rc == 0).then(|| u64::try_from(ru.ru_nvcsw).unwrap_or(0))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu_time() -> Option<std::time::Duration> {
    tidepool::sys::thread_cpu_time()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn nice_and_class_read_back_through_proc() {
        std::thread::spawn(|| {
            set_nice(7).unwrap();
            assert_eq!(nice().unwrap(), 7);
            set_sched_class(SchedClass::Batch).unwrap();
            assert_eq!(sched_class().unwrap(), Some(SchedClass::Batch));
            let (n, policy) = proc_thread_stat().unwrap();
            assert_eq!((n, policy), (7, libc::SCHED_BATCH as u32));
        })
        .join()
        .unwrap();
        // Another thread of the process was not touched.
        let (n, _) = proc_thread_stat().unwrap();
        assert_ne!(n, 7);
    }
}
