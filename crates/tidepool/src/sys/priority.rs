//! A thread's own scheduling: its nice value and scheduling class (on Linux
//! they belong to one kernel thread, not to the process, which is what lets
//! each pipeline stage run at its own priority), reading them back, and
//! giving up `CAP_SYS_NICE`.

use std::io;

/// The calling thread's kernel id as `setpriority` takes it (0, "the
/// calling thread", where the OS cannot tell).
#[cfg(all(target_os = "linux", not(tidepool_no_os)))]
fn kernel_tid() -> libc::id_t {
    super::thread_id().map_or(0, |t| t as libc::id_t)
}

/// A scheduling class for a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum SchedClass {
    /// The default time-sharing class (`SCHED_OTHER`), weighted by nice.
    Other,
    /// `SCHED_BATCH`: like `Other`, but the scheduler assumes the thread is
    /// CPU-bound and lets it preempt less.
    Batch,
    /// `SCHED_IDLE`: runs only when nothing else wants the CPU.
    Idle,
}

/// Set the calling thread's nice value (-20 = highest priority … 19).
/// Lowering it below where it is needs `CAP_SYS_NICE` (or `RLIMIT_NICE`):
/// the error is then `PermissionDenied`.
pub fn set_nice(nice: i32) -> io::Result<()> {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    {
        // SAFETY: setpriority reads its three integer arguments only.
        let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, kernel_tid(), nice) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
    {
        let _ = nice;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// The calling thread's nice value.
pub fn nice() -> io::Result<i32> {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    {
        // getpriority may return -1 legitimately: clear errno to tell.
        // SAFETY: __errno_location points at this thread's errno.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: getpriority reads its two integer arguments only.
        let v = unsafe { libc::getpriority(libc::PRIO_PROCESS, kernel_tid()) };
        let err = io::Error::last_os_error();
        if v == -1 && err.raw_os_error() != Some(0) {
            Err(err)
        } else {
            Ok(v)
        }
    }
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
    {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Put the calling thread in a scheduling class (static priority 0).
pub fn set_sched_class(class: SchedClass) -> io::Result<()> {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
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
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
    {
        let _ = class;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// The calling thread's scheduling class (`None` for a real-time class).
pub fn sched_class() -> io::Result<Option<SchedClass>> {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
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
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
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
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
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
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
    {
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[cfg(all(test, target_os = "linux", not(tidepool_no_os)))]
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
