//! Ctrl-C: the first press raises the replay's cancel flag (the current run
//! stops, what was measured is kept and written); a second press exits at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The process-wide cancel flag, with the Ctrl-C handler installed on first
/// use. If the handler cannot be installed the flag simply never rises.
pub fn flag() -> Arc<AtomicBool> {
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let presses = AtomicUsize::new(0);
        let f = Arc::clone(&flag);
        let _ = ctrlc::set_handler(move || {
            if presses.fetch_add(1, Ordering::SeqCst) == 0 {
                f.store(true, Ordering::SeqCst);
                eprintln!("\nstopping: finishing the current run and writing what was measured (Ctrl-C again to quit at once)");
            } else {
                std::process::exit(130);
            }
        });
        flag
    })
    .clone()
}

/// True once Ctrl-C was pressed.
pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
}
