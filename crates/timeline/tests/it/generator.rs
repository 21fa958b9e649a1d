//! `InstantTimeGenerator`: property tests of monotonicity under clock steps, observations and
//! threads.

use std::sync::{Arc, Barrier};

use arbor_timeline::generator::{Clock, ManualClock};
use arbor_timeline::{InstantTime, InstantTimeGenerator};
use chrono::{DateTime, Utc};
use proptest::prelude::*;

const START_MS: i64 = 1_752_368_735_797; // 2025-07-13T01:05:35.797Z

fn instant_at_ms(ms: i64) -> InstantTime {
    InstantTime::from_datetime(DateTime::<Utc>::from_timestamp_millis(ms).unwrap())
}

#[derive(Debug, Clone)]
enum Op {
    Next,
    /// Move the clock by this many ms (negative: back).
    Step(i64),
    /// Observe an instant this many ms away from the clock's current time.
    Observe(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Next),
        2 => (-5_000i64..5_000).prop_map(Op::Step),
        1 => (-3_000i64..3_000).prop_map(Op::Observe),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Single thread: the result is exactly max(now, last + 1, observed + 1).
    #[test]
    fn test_next_single_thread_matches_model(ops in proptest::collection::vec(op(), 1..200)) {
        let clock = Arc::new(ManualClock::new(DateTime::from_timestamp_millis(START_MS).unwrap()));
        let generator = InstantTimeGenerator::with_clock(clock.clone());
        let mut floor = 0i64;
        for op in ops {
            match op {
                Op::Next => {
                    let now = clock.now().timestamp_millis();
                    let expected = now.max(floor);
                    let t = generator.next().unwrap();
                    prop_assert_eq!(t, instant_at_ms(expected));
                    floor = expected + 1;
                }
                Op::Step(d) => clock.advance_ms(d),
                Op::Observe(d) => {
                    let ms = clock.now().timestamp_millis() + d;
                    generator.observe(&instant_at_ms(ms));
                    floor = floor.max(ms + 1);
                }
            }
        }
    }

    /// Several threads share one generator and one clock, stepping it back and forth and
    /// observing instants ahead of and behind it: no duplicate, each thread's results strictly
    /// increase, and no result equals or precedes an instant its thread observed before.
    #[test]
    fn test_next_concurrent_never_duplicate_or_decreasing(
        per_thread in proptest::collection::vec(proptest::collection::vec(op(), 1..80), 2..5)
    ) {
        let clock = Arc::new(ManualClock::new(DateTime::from_timestamp_millis(START_MS).unwrap()));
        let generator = Arc::new(InstantTimeGenerator::with_clock(clock.clone()));
        let barrier = Arc::new(Barrier::new(per_thread.len()));
        let handles: Vec<_> = per_thread
            .into_iter()
            .map(|ops| {
                let (clock, generator, barrier) = (clock.clone(), generator.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut issued: Vec<InstantTime> = Vec::new();
                    let mut max_observed: Option<InstantTime> = None;
                    for op in ops {
                        match op {
                            Op::Next => {
                                let t = generator.next().unwrap();
                                if let Some(last) = issued.last() {
                                    assert!(t > *last, "{t} after {last}");
                                }
                                if let Some(o) = &max_observed {
                                    assert!(t > *o, "{t} not after observed {o}");
                                }
                                issued.push(t);
                            }
                            Op::Step(d) => clock.advance_ms(d),
                            Op::Observe(d) => {
                                let o = instant_at_ms(clock.now().timestamp_millis() + d);
                                generator.observe(&o);
                                if max_observed.as_ref().is_none_or(|m| o > *m) {
                                    max_observed = Some(o);
                                }
                            }
                        }
                    }
                    issued
                })
            })
            .collect();
        let mut all: Vec<InstantTime> = Vec::new();
        for h in handles {
            all.extend(h.join().unwrap());
        }
        let n = all.len();
        all.sort();
        all.dedup();
        prop_assert_eq!(all.len(), n, "duplicate instant times");
        for t in &all {
            prop_assert_eq!(t.as_str().len(), 17);
            prop_assert!(InstantTime::parse(t.as_str()).is_ok());
        }
    }
}

#[test]
fn test_next_many_threads_tight_loop_all_unique() {
    let generator = Arc::new(InstantTimeGenerator::new());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let g = generator.clone();
            std::thread::spawn(move || (0..2000).map(|_| g.next().unwrap()).collect::<Vec<_>>())
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        let mine = h.join().unwrap();
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
        all.extend(mine);
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n);
}
