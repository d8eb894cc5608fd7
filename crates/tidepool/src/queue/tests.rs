use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn flavors() -> Vec<QueueFlavor> {
    vec![
        QueueFlavor::Mutex,
        QueueFlavor::Spin,
        QueueFlavor::Hybrid {
            attempts: 3,
            sleep: Duration::from_micros(50),
        },
        QueueFlavor::LockFree,
    ]
}

fn tagged(tag: usize, out: &Arc<std::sync::Mutex<Vec<usize>>>) -> Task {
    let out = out.clone();
    Task::new(move || {
        out.lock().unwrap().push(tag);
        false
    })
}

#[test]
fn every_flavor_is_fifo_and_counts_length() {
    for flavor in flavors() {
        let q = flavor.build(None);
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        assert!(q.is_empty(), "{flavor}");
        for i in 0..100 {
            q.push(tagged(i, &out)).unwrap();
        }
        assert_eq!(q.len(), 100, "{flavor}");
        while let Some(t) = q.pop() {
            t.run();
        }
        assert!(q.is_empty(), "{flavor}");
        assert_eq!(
            *out.lock().unwrap(),
            (0..100).collect::<Vec<_>>(),
            "{flavor}"
        );
    }
}

#[test]
fn every_flavor_rejects_when_full() {
    for flavor in flavors() {
        let q = flavor.build(Some(2));
        let out = Arc::new(std::sync::Mutex::new(Vec::new()));
        q.push(tagged(1, &out)).unwrap();
        q.push(tagged(2, &out)).unwrap();
        let back = q.push(tagged(3, &out)).unwrap_err();
        back.run();
        assert_eq!(
            *out.lock().unwrap(),
            vec![3],
            "{flavor}: rejected task comes back intact"
        );
        assert!(q.pop().is_some());
        q.push(tagged(4, &out)).unwrap();
    }
}

#[test]
fn every_flavor_loses_nothing_under_contention() {
    const PER: usize = 5_000;
    for flavor in flavors() {
        let q: Arc<dyn TaskQueue> = Arc::from(flavor.build(None));
        let ran = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = (0..2)
            .map(|_| {
                let (q, ran) = (q.clone(), ran.clone());
                std::thread::spawn(move || {
                    for _ in 0..PER {
                        let ran = ran.clone();
                        let t = Task::new(move || {
                            ran.fetch_add(1, Ordering::Relaxed);
                            false
                        });
                        q.push(t).unwrap();
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                let ran = ran.clone();
                std::thread::spawn(move || {
                    while ran.load(Ordering::Relaxed) < 2 * PER {
                        match q.pop() {
                            Some(t) => t.run(),
                            None => std::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();
        for t in producers.into_iter().chain(consumers) {
            t.join().unwrap();
        }
        assert_eq!(ran.load(Ordering::Relaxed), 2 * PER, "{flavor}");
        assert!(q.is_empty());
    }
}

#[test]
fn flavor_names_round_trip() {
    for flavor in flavors() {
        let parsed: QueueFlavor = flavor.name().parse().unwrap();
        assert_eq!(parsed.name(), flavor.name());
    }
    let err = "fifo".parse::<QueueFlavor>().unwrap_err();
    assert!(err.to_string().contains("mutex, spin, hybrid, lock-free"));
}
