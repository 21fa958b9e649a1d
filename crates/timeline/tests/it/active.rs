//! `ActiveTimeline`: loading fixtures (v6, v8, v9), transitions, and refusals.

use std::sync::Arc;

use arbor_storage::{FaultInjectingStorage, FaultMode, ObjectStoreStorage, Storage, StorageExt};
use arbor_testkit::{fixture_zips, fixtures_root_or_skip, unzip_table};
use arbor_timeline::avro::{encode_instant_for, HoodieCommitMetadata, InstantContent};
use arbor_timeline::config::TableType;
use arbor_timeline::naming::LayoutVersion;
use arbor_timeline::{
    Action, ActiveTimeline, Instant, InstantTime, InstantTimeGenerator, State, TableConfig,
    TableLayout, TimelineError,
};
use bytes::Bytes;

fn t(s: &str) -> InstantTime {
    InstantTime::parse(s).unwrap()
}

async fn new_table() -> (Arc<dyn Storage>, ActiveTimeline) {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let config = TableConfig::new_v8("t", TableType::CopyOnWrite).unwrap();
    TableConfig::create(storage.as_ref(), ".hoodie", &config)
        .await
        .unwrap();
    let layout = TableLayout::from_config(".hoodie", &config).unwrap();
    let tl = ActiveTimeline::load(storage.clone(), layout).await.unwrap();
    (storage, tl)
}

fn commit_bytes(instant: &Instant) -> Bytes {
    let mut meta = HoodieCommitMetadata::default();
    meta.insert_extra("schema", "{}");
    Bytes::from(encode_instant_for(instant, &InstantContent::Commit(Box::new(meta))).unwrap())
}

async fn keys(storage: &Arc<dyn Storage>) -> Vec<String> {
    storage
        .list_all("")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect()
}

#[tokio::test]
async fn test_transitions_requested_inflight_completed_write_v8_names() {
    let (storage, mut tl) = new_table().await;
    let req = tl
        .create_requested(t("20250101000000000"), Action::Commit, Bytes::new())
        .await
        .unwrap();
    let infl = tl
        .transition_to_inflight(&req, commit_bytes(&req.with_state(State::Inflight)))
        .await
        .unwrap();
    let mut done = infl.with_state(State::Completed);
    done.completion_time = Some(t("20250101000000005"));
    let done = tl
        .complete(&infl, t("20250101000000005"), commit_bytes(&done))
        .await
        .unwrap();
    assert_eq!(done.state, State::Completed);
    let k = keys(&storage).await;
    for name in [
        ".hoodie/timeline/20250101000000000.commit.requested",
        ".hoodie/timeline/20250101000000000.inflight",
        ".hoodie/timeline/20250101000000000_20250101000000005.commit",
    ] {
        assert!(k.contains(&name.to_string()), "{name} missing in {k:?}");
    }
    // A fresh load sees the same single completed instant.
    let mut again = tl.clone();
    again.reload().await.unwrap();
    assert_eq!(again.completed(), vec![done.clone()]);
    assert!(again.pending().is_empty());
}

#[tokio::test]
async fn test_complete_twice_fails_cleanly_with_already_completed() {
    let (storage, mut tl) = new_table().await;
    let req = tl
        .create_requested(t("20250101000000000"), Action::DeltaCommit, Bytes::new())
        .await
        .unwrap();
    let infl = tl.transition_to_inflight(&req, Bytes::new()).await.unwrap();
    let mut done = infl.with_state(State::Completed);
    done.completion_time = Some(t("20250101000000001"));
    let bytes = commit_bytes(&done);
    tl.complete(&infl, t("20250101000000001"), bytes.clone())
        .await
        .unwrap();
    let before = keys(&storage).await;
    // Same completion time (the create-if-absent loses) and another completion time (the
    // listing check finds the existing completed file): both refuse, nothing changes.
    for c in ["20250101000000001", "20250101000000009"] {
        let err = tl.complete(&infl, t(c), bytes.clone()).await.unwrap_err();
        assert!(
            matches!(err, TimelineError::AlreadyCompleted { .. }),
            "{c}: {err}"
        );
        assert!(err.to_string().contains("20250101000000000"), "{err}");
    }
    // A second handle that loaded before the completion refuses too.
    assert_eq!(keys(&storage).await, before);
}

#[tokio::test]
async fn test_create_requested_refuses_a_reused_instant_time() {
    let (storage, mut tl) = new_table().await;
    // A second handle loaded before the instant exists: its own check cannot see it.
    let mut stale = tl.clone();
    tl.create_requested(t("20250101000000000"), Action::Commit, Bytes::new())
        .await
        .unwrap();
    let before = keys(&storage).await;
    let err = tl
        .create_requested(t("20250101000000000"), Action::Clean, Bytes::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::DuplicateInstant { .. }),
        "{err}"
    );
    // The stale handle loses the create-if-absent on the same file name.
    let err = stale
        .create_requested(t("20250101000000000"), Action::Commit, Bytes::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::DuplicateInstant { .. }),
        "{err}"
    );
    assert_eq!(keys(&storage).await, before);
}

#[tokio::test]
async fn test_invalid_transitions_are_refused() {
    let (storage, mut tl) = new_table().await;
    let req = tl
        .create_requested(t("20250101000000000"), Action::Commit, Bytes::new())
        .await
        .unwrap();
    // Completing a requested (not inflight) instant.
    let err = tl
        .complete(&req, t("20250101000000001"), Bytes::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::InvalidTransition { .. }),
        "{err}"
    );
    let infl = tl.transition_to_inflight(&req, Bytes::new()).await.unwrap();
    // Inflight twice.
    assert!(tl.transition_to_inflight(&req, Bytes::new()).await.is_err());
    // Completion time not after the instant time.
    let err = tl
        .complete(&infl, t("20241231000000000"), Bytes::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::InvalidTransition { .. }),
        "{err}"
    );
    assert_eq!(
        keys(&storage).await.len(),
        3,
        "hoodie.properties, requested and inflight only"
    );
}

#[tokio::test]
async fn test_compaction_completes_as_commit_and_is_one_instant() {
    let (_storage, mut tl) = new_table().await;
    let req = tl
        .create_requested(t("20250101000000000"), Action::Compaction, Bytes::new())
        .await
        .unwrap();
    let infl = tl.transition_to_inflight(&req, Bytes::new()).await.unwrap();
    let mut done = infl.with_state(State::Completed);
    done.action = Action::Commit;
    done.completion_time = Some(t("20250101000000001"));
    let done = tl
        .complete(&infl, t("20250101000000001"), commit_bytes(&done))
        .await
        .unwrap();
    assert_eq!(done.action, Action::Commit);
    tl.reload().await.unwrap();
    assert_eq!(tl.instants().len(), 1);
    let files = tl.get(&t("20250101000000000"), Action::Commit).unwrap();
    assert_eq!(files.pending_action, Action::Compaction);
    assert!(files.requested.is_some() && files.inflight.is_some() && files.completed.is_some());
}

#[tokio::test]
async fn test_layout_v1_timeline_is_read_only() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let mut tl = ActiveTimeline::load(storage, TableLayout::v1(".hoodie"))
        .await
        .unwrap();
    assert!(tl
        .create_requested(t("20250101000000000"), Action::Commit, Bytes::new())
        .await
        .is_err());
}

/// Every fixture's active timeline loads; completed instants of v8/v9 tables carry completion
/// times, v6 ones do not; completion-time order is a permutation of requested-time order.
#[tokio::test]
async fn test_load_every_fixture_timeline() {
    let Some(root) = fixtures_root_or_skip("test_load_every_fixture_timeline") else {
        return;
    };
    let mut loaded = 0;
    for zip in fixture_zips(&root) {
        let (_tmp, base) = unzip_table(&zip);
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let config = TableConfig::load(storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        let layout = TableLayout::from_config(".hoodie", &config).unwrap();
        let tl = ActiveTimeline::load(storage, layout.clone()).await.unwrap();
        for i in tl.completed() {
            assert_eq!(
                i.completion_time.is_some(),
                layout.layout == LayoutVersion::V2,
                "{}: {i}",
                zip.display()
            );
        }
        assert!(
            tl.skipped().is_empty(),
            "{}: {:?}",
            zip.display(),
            tl.skipped()
        );
        assert_eq!(
            tl.completed_by_completion_time().len(),
            tl.completed().len()
        );
        loaded += 1;
    }
    assert_eq!(loaded, 30);
}

fn inflight_for_race() -> (Instant, Instant) {
    let req = Instant::requested(t("20250101000000000"), Action::Commit);
    (req.clone(), req.with_state(State::Inflight))
}

/// Concurrent completions of one instant with different completion times (each creates a
/// different file name): exactly one wins, the losers remove their files, and every later load
/// shows the winner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_complete_concurrent_different_completion_times_exactly_one_wins() {
    for round in 0..10 {
        // Slow listings make every completer pass its pre-check before any creates, so the
        // race resolution after the create is what decides.
        let storage: Arc<dyn Storage> =
            Arc::new(SlowListing(Arc::new(ObjectStoreStorage::memory())));
        let config = TableConfig::new_v8("t", TableType::CopyOnWrite).unwrap();
        TableConfig::create(storage.as_ref(), ".hoodie", &config)
            .await
            .unwrap();
        let layout = TableLayout::from_config(".hoodie", &config).unwrap();
        let mut tl = ActiveTimeline::load(storage.clone(), layout).await.unwrap();
        let (req, _) = inflight_for_race();
        tl.create_requested(req.requested_time.clone(), Action::Commit, Bytes::new())
            .await
            .unwrap();
        let infl = tl.transition_to_inflight(&req, Bytes::new()).await.unwrap();
        let mut tasks = Vec::new();
        for k in 0..8u32 {
            let mut handle = tl.clone();
            let infl = infl.clone();
            tasks.push(tokio::spawn(async move {
                let c = t(&format!("2025010100000{:04}", 100 + k));
                let mut done = infl.with_state(State::Completed);
                done.completion_time = Some(c.clone());
                handle.complete(&infl, c, commit_bytes(&done)).await
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Ok(i) => winners.push(i),
                Err(TimelineError::AlreadyCompleted { .. }) => {}
                Err(e) => panic!("round {round}: unexpected error {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        let completed: Vec<String> = keys(&storage)
            .await
            .into_iter()
            .filter(|k| k.contains('_') && k.ends_with(".commit"))
            .collect();
        assert_eq!(completed.len(), 1, "round {round}: {completed:?}");
        let mut fresh = tl.clone();
        fresh.reload().await.unwrap();
        assert_eq!(fresh.completed(), winners, "round {round}");
    }
}

/// A timeline over in-memory storage behind a fault injector, holding one inflight commit:
/// `(inner storage, injector, timeline, inflight, the inflight completed at 20250101000000009)`.
async fn faulty_inflight() -> (
    Arc<dyn Storage>,
    Arc<FaultInjectingStorage>,
    ActiveTimeline,
    Instant,
    Instant,
) {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let faulty = Arc::new(FaultInjectingStorage::new(inner.clone()));
    let storage: Arc<dyn Storage> = faulty.clone();
    let config = TableConfig::new_v8("t", TableType::CopyOnWrite).unwrap();
    TableConfig::create(storage.as_ref(), ".hoodie", &config)
        .await
        .unwrap();
    let layout = TableLayout::from_config(".hoodie", &config).unwrap();
    let mut tl = ActiveTimeline::load(storage, layout).await.unwrap();
    let (req, _) = inflight_for_race();
    tl.create_requested(req.requested_time.clone(), Action::Commit, Bytes::new())
        .await
        .unwrap();
    let infl = tl.transition_to_inflight(&req, Bytes::new()).await.unwrap();
    let mut done = infl.with_state(State::Completed);
    done.completion_time = Some(t("20250101000000009"));
    (inner, faulty, tl, infl, done)
}

/// A completion whose PUT landed but whose reply was lost is confirmed by reading back, not
/// reported as failed (a caller would otherwise roll back committed data).
#[tokio::test]
async fn test_complete_lost_reply_is_confirmed_by_read_back() {
    let (inner, faulty, mut tl, infl, done) = faulty_inflight().await;
    let c = t("20250101000000009");
    // complete() lists once, then creates the completed file: fail that create after it landed.
    let n = faulty.op_count() + 1;
    faulty.set_mode(FaultMode::FailAfter(n));
    let got = tl.complete(&infl, c, commit_bytes(&done)).await.unwrap();
    assert_eq!(got, done);
    assert!(faulty
        .ops()
        .iter()
        .any(|op| op.index == n && op.key.ends_with("_20250101000000009.commit")));
    faulty.set_mode(FaultMode::None);
    let fresh = ActiveTimeline::load(inner, tl.layout().clone())
        .await
        .unwrap();
    assert_eq!(fresh.completed(), vec![done]);
}

/// An instant time is never reused: a stale handle cannot start another action at a time that
/// already exists, and `next_instant_time` steps past every time on the timeline even when the
/// generator's clock is behind.
#[tokio::test]
async fn test_next_instant_time_steps_past_existing_times_with_clock_behind() {
    use arbor_timeline::generator::ManualClock;
    let (_storage, mut tl) = new_table().await;
    let mut stale = tl.clone();
    tl.create_requested(t("20300101000000000"), Action::Commit, Bytes::new())
        .await
        .unwrap();
    let err = stale
        .create_requested(t("20300101000000000"), Action::Clean, Bytes::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::DuplicateInstant { .. }),
        "{err}"
    );
    let clock = Arc::new(ManualClock::new(
        t("20250101000000000").to_datetime().unwrap(),
    ));
    let generator = InstantTimeGenerator::with_clock(clock);
    // Five years behind the timeline: far beyond the default bound of how far a table's clock
    // may run ahead of a writer's, which this one widens.
    generator.set_max_ahead(std::time::Duration::from_secs(10 * 365 * 24 * 3600));
    let next = stale.next_instant_time(&generator).await.unwrap();
    assert!(next > t("20300101000000000"), "{next}");
    stale
        .create_requested(next, Action::Clean, Bytes::new())
        .await
        .unwrap();
}

/// Delays every `list_dir` by 30 ms; everything else passes through.
#[derive(Debug)]
struct SlowListing(Arc<dyn Storage>);

impl std::fmt::Display for SlowListing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "slow-listing({})", self.0)
    }
}

#[async_trait::async_trait]
impl Storage for SlowListing {
    async fn get(&self, key: &str) -> arbor_storage::Result<(Bytes, arbor_storage::ObjectMeta)> {
        self.0.get(key).await
    }
    async fn get_range(
        &self,
        key: &str,
        range: std::ops::Range<u64>,
    ) -> arbor_storage::Result<Bytes> {
        self.0.get_range(key, range).await
    }
    async fn head(&self, key: &str) -> arbor_storage::Result<arbor_storage::ObjectMeta> {
        self.0.head(key).await
    }
    async fn put(&self, key: &str, data: Bytes) -> arbor_storage::Result<arbor_storage::Version> {
        self.0.put(key, data).await
    }
    async fn put_if_absent(
        &self,
        key: &str,
        data: Bytes,
    ) -> arbor_storage::Result<arbor_storage::Version> {
        self.0.put_if_absent(key, data).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        data: Bytes,
        expected: &arbor_storage::Version,
    ) -> arbor_storage::Result<arbor_storage::Version> {
        self.0.put_if_match(key, data, expected).await
    }
    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> arbor_storage::Result<arbor_storage::ListPage> {
        self.0.list_page(prefix, start_after, max_keys).await
    }
    async fn list_dir(
        &self,
        prefix: &str,
    ) -> arbor_storage::Result<(Vec<arbor_storage::ObjectMeta>, Vec<String>)> {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        self.0.list_dir(prefix).await
    }
    async fn delete_batch(
        &self,
        keys: &[String],
    ) -> arbor_storage::Result<Vec<arbor_storage::Result<()>>> {
        self.0.delete_batch(keys).await
    }
    async fn copy(&self, from: &str, to: &str) -> arbor_storage::Result<()> {
        self.0.copy(from, to).await
    }
}

mod creation_property {
    use super::*;
    use arbor_timeline::generator::ManualClock;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        /// Writer `w` creates an instant (action chosen by `a`).
        Create { w: usize, a: usize },
        /// Writer `w`'s clock jumps by `delta_ms` (negative: it steps back).
        Clock { w: usize, delta_ms: i64 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0..3usize, 0..3usize).prop_map(|(w, a)| Step::Create { w, a }),
            2 => (0..3usize, -5_000i64..5_000).prop_map(|(w, delta_ms)| Step::Clock { w, delta_ms }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Three writers, each with its own (skewed, stepping-back) clock and generator, create
        /// instants on one table in a random interleaving: every created instant time is new and
        /// greater than every time created before it, and the timeline lists each exactly once.
        #[test]
        fn prop_interleaved_creation_under_stepped_back_clocks_is_unique_and_increasing(
            steps in proptest::collection::vec(step(), 1..40),
            skews in proptest::collection::vec(-3_000i64..3_000, 3),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let (_storage, tl) = new_table().await;
                let base = t("20250601120000000").to_datetime().unwrap();
                let clocks: Vec<Arc<ManualClock>> = skews
                    .iter()
                    .map(|s| Arc::new(ManualClock::new(base + chrono::Duration::milliseconds(*s))))
                    .collect();
                let gens: Vec<InstantTimeGenerator> = clocks
                    .iter()
                    .map(|c| InstantTimeGenerator::with_clock(c.clone()))
                    .collect();
                let mut handles: Vec<ActiveTimeline> = (0..3).map(|_| tl.clone()).collect();
                let actions = [Action::Commit, Action::DeltaCommit, Action::Clean];
                let mut created: Vec<InstantTime> = Vec::new();
                for s in &steps {
                    match *s {
                        Step::Clock { w, delta_ms } => clocks[w].advance_ms(delta_ms),
                        Step::Create { w, a } => {
                            let time = handles[w].next_instant_time(&gens[w]).await.unwrap();
                            if let Some(last) = created.last() {
                                prop_assert!(&time > last, "{time} not after {last}");
                            }
                            handles[w]
                                .create_requested(time.clone(), actions[a], Bytes::new())
                                .await
                                .unwrap();
                            created.push(time);
                        }
                    }
                }
                let mut fresh = tl.clone();
                fresh.reload().await.unwrap();
                let listed: Vec<InstantTime> =
                    fresh.instants().into_iter().map(|i| i.requested_time).collect();
                prop_assert_eq!(listed, created);
                Ok(())
            })?;
        }
    }
}

/// Past the commit point a failing re-list does not turn the visible completion into an error.
#[tokio::test]
async fn test_complete_relist_failure_after_commit_point_is_success() {
    let (inner, faulty, mut tl, infl, done) = faulty_inflight().await;
    let c = t("20250101000000009");
    // complete(): list (pre-check), create (commit point), list (race check): fail the last.
    let n = faulty.op_count() + 2;
    faulty.set_mode(FaultMode::FailAt(n));
    let got = tl.complete(&infl, c, commit_bytes(&done)).await.unwrap();
    assert_eq!(got, done);
    assert!(faulty.ops().iter().any(|op| op.index == n));
    let fresh = ActiveTimeline::load(inner, tl.layout().clone())
        .await
        .unwrap();
    assert_eq!(fresh.completed(), vec![done]);
}

/// The timeline listings `ops` made.
fn listings(counter: &FaultInjectingStorage) -> usize {
    counter
        .ops()
        .iter()
        .filter(|o| o.kind == arbor_storage::OpKind::ListDir)
        .count()
}

#[tokio::test]
async fn test_a_step_right_after_next_instant_time_uses_its_listing_and_no_other() {
    use arbor_timeline::generator::ManualClock;
    let (storage, _) = new_table().await;
    let counter = Arc::new(FaultInjectingStorage::new(storage.clone()));
    let counted: Arc<dyn Storage> = counter.clone();
    let config = TableConfig::new_v8("t", TableType::CopyOnWrite).unwrap();
    let layout = TableLayout::from_config(".hoodie", &config).unwrap();
    let generator = InstantTimeGenerator::with_clock(Arc::new(ManualClock::new(
        t("20250101000000000").to_datetime().unwrap(),
    )));
    let mut tl = ActiveTimeline::load(counted.clone(), layout.clone())
        .await
        .unwrap();
    assert_eq!(listings(&counter), 1);
    // A load is not reused: the first step lists again (the load may be old).
    let time = tl.next_instant_time(&generator).await.unwrap();
    assert_eq!(listings(&counter), 2);
    // create_requested right after next_instant_time: its listing serves.
    let req = tl
        .create_requested(time.clone(), Action::Commit, Bytes::new())
        .await
        .unwrap();
    assert_eq!(listings(&counter), 2);
    let infl = tl.transition_to_inflight(&req, Bytes::new()).await.unwrap();
    // complete right after next_instant_time: one listing before (that of next_instant_time)
    // and one after the commit point (the race check).
    let completion = tl.next_instant_time(&generator).await.unwrap();
    assert_eq!(listings(&counter), 3);
    let mut done = infl.with_state(State::Completed);
    done.completion_time = Some(completion.clone());
    tl.complete(&infl, completion, commit_bytes(&done))
        .await
        .unwrap();
    assert_eq!(listings(&counter), 4);
    // Any other step lists afresh: a second create on a stale handle sees the first.
    let mut stale = ActiveTimeline::load(counted.clone(), layout).await.unwrap();
    let next = tl.next_instant_time(&generator).await.unwrap();
    tl.create_requested(next.clone(), Action::Clean, Bytes::new())
        .await
        .unwrap();
    let before = listings(&counter);
    let err = stale
        .create_requested(next, Action::Commit, Bytes::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, TimelineError::DuplicateInstant { .. }),
        "{err}"
    );
    assert_eq!(listings(&counter), before + 1);
    // The listing of next_instant_time serves one step only.
    let n = tl.next_instant_time(&generator).await.unwrap();
    let before = listings(&counter);
    tl.create_requested(n, Action::Commit, Bytes::new())
        .await
        .unwrap();
    assert_eq!(listings(&counter), before);
    tl.create_requested(t("20990101000000000"), Action::Commit, Bytes::new())
        .await
        .unwrap();
    assert_eq!(listings(&counter), before + 1);
    // A load for the next step: next_instant_time and the create after it use its listing.
    generator.set_max_ahead(std::time::Duration::from_secs(100 * 365 * 24 * 3600));
    let mut fresh = ActiveTimeline::load_for_next_step(counted.clone(), layout_of_test())
        .await
        .unwrap();
    let before = listings(&counter);
    let n = fresh.next_instant_time(&generator).await.unwrap();
    fresh
        .create_requested(n, Action::Commit, Bytes::new())
        .await
        .unwrap();
    assert_eq!(listings(&counter), before);
    // ... and not a third step.
    fresh
        .create_requested(t("20990201000000000"), Action::Commit, Bytes::new())
        .await
        .unwrap();
    assert_eq!(listings(&counter), before + 1);
}

fn layout_of_test() -> TableLayout {
    let config = TableConfig::new_v8("t", TableType::CopyOnWrite).unwrap();
    TableLayout::from_config(".hoodie", &config).unwrap()
}
