//! Conformance races: concurrent `put_if_absent` on one key and concurrent `put_if_match` from
//! one version, each with exactly one winner.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Barrier;

use crate::error::StorageError;

use super::ctx::{b, check, ok, Ctx};

/// Concurrent `put_if_absent` calls per round of the create race.
const CREATE_RACERS: usize = 32;
/// Rounds of the create race (a fresh key each).
const CREATE_ROUNDS: usize = 20;
/// Concurrent `put_if_match` calls per round of the compare-and-swap race.
const CAS_RACERS: usize = 16;
/// Rounds of the compare-and-swap race.
const CAS_ROUNDS: usize = 5;

pub(super) async fn race_put_if_absent(ctx: &Ctx) {
    for round in 0..CREATE_ROUNDS {
        let key = ctx.key(&format!("race/create-{round}"));
        let barrier = Arc::new(Barrier::new(CREATE_RACERS));
        let mut tasks = Vec::new();
        for i in 0..CREATE_RACERS {
            let (s, key, barrier) = (ctx.s.clone(), key.clone(), barrier.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                s.put_if_absent(&key, Bytes::from(format!("writer-{i:03}")))
                    .await
            }));
        }
        let mut winners = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.expect("racer panicked") {
                Ok(v) => winners.push((i, v)),
                Err(StorageError::AlreadyExists { .. }) => {}
                Err(e) => panic!("[{}] racing put_if_absent failed: {e}", ctx.name),
            }
        }
        check!(
            ctx,
            winners.len() == 1,
            "round {round}: {} of {CREATE_RACERS} concurrent put_if_absent calls won: {:?}",
            winners.len(),
            winners.iter().map(|w| w.0).collect::<Vec<_>>()
        );
        let (winner, version) = &winners[0];
        let (data, meta) = ok(ctx, "get", ctx.s.get(&key).await);
        check!(
            ctx,
            data == b(&format!("writer-{winner:03}")),
            "round {round}: stored {data:?} but writer {winner} won"
        );
        check!(
            ctx,
            meta.version == *version,
            "round {round}: winner's version is not stored"
        );
    }
}

pub(super) async fn race_put_if_match(ctx: &Ctx) {
    for round in 0..CAS_ROUNDS {
        let key = ctx.key(&format!("race/cas-{round}"));
        let v0 = ok(ctx, "put", ctx.s.put(&key, b("start-000")).await);
        let barrier = Arc::new(Barrier::new(CAS_RACERS));
        let mut tasks = Vec::new();
        for i in 0..CAS_RACERS {
            let (s, key, barrier, v0) = (ctx.s.clone(), key.clone(), barrier.clone(), v0.clone());
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                s.put_if_match(&key, Bytes::from(format!("cas-{i:05}")), &v0)
                    .await
            }));
        }
        let mut winners = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            match t.await.expect("racer panicked") {
                Ok(v) => winners.push((i, v)),
                Err(StorageError::PreconditionFailed { .. }) => {}
                Err(e) => panic!("[{}] racing put_if_match failed: {e}", ctx.name),
            }
        }
        check!(
            ctx,
            winners.len() == 1,
            "round {round}: {} of {CAS_RACERS} concurrent put_if_match calls won: {:?}",
            winners.len(),
            winners.iter().map(|w| w.0).collect::<Vec<_>>()
        );
        let (winner, version) = &winners[0];
        let (data, meta) = ok(ctx, "get", ctx.s.get(&key).await);
        check!(
            ctx,
            data == b(&format!("cas-{winner:05}")) && meta.version == *version,
            "round {round}: stored {data:?} but writer {winner} won"
        );
    }
}
