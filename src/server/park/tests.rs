//! Tests of the parking lot: slots, tokens, deadlines.

use super::*;
use crate::proxy::{Process, Proxy};
use crate::stats::Counters;

fn shared() -> Arc<Process> {
    let config = Arc::new(crate::config::Config::embedded_default());
    Proxy::new(
        config,
        crate::vcl::attach::Programs::default(),
        Arc::new(Counters::default()),
    )
    .expect("embedded default config")
    .shared
    .clone()
}

/// `n` accepted loopback connections (server side) and their clients.
async fn connections(n: usize) -> Vec<(tokio::net::TcpStream, tokio::net::TcpStream)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        out.push((server, client));
    }
    out
}

/// What a parked connection costs besides its socket (docs: ARCHITECTURE.md invariant).
#[test]
fn a_parked_connection_is_one_small_slot() {
    assert!(
        std::mem::size_of::<Slot>() <= 72,
        "{}",
        std::mem::size_of::<Slot>()
    );
}

#[test]
fn tokens_carry_slot_and_generation() {
    for (slot, generation) in [(0, 0), (7, 1), (u32::MAX, 0x7fff_ffff)] {
        assert_eq!(untoken(token(slot, generation)), (slot, generation));
    }
    assert_ne!(token(u32::MAX, u32::MAX).0, usize::MAX);
}

#[tokio::test]
async fn deadlines_expire_in_order_and_resumed_ones_are_skipped() {
    let parking = Parking::new().unwrap();
    let shared = shared();
    let mut clients = Vec::new();
    for (i, (server, client)) in connections(4).await.into_iter().enumerate() {
        let peer = client.local_addr().unwrap();
        let open = Arc::new(OpenConn(shared.clone()));
        shared.open_conns.fetch_add(1, Ordering::Relaxed);
        assert!(parking.park(server, peer, open, 1_000 + i as u64 * 10, None, None, false));
        clients.push(client);
    }
    assert_eq!(parking.parked(), 4);
    assert_eq!(shared.released_conns.load(Ordering::Relaxed), 4);
    assert_eq!(parking.next_deadline(), Some(1_000));
    // The first one is resumed (as if it became readable): its deadline is stale.
    let resumed = {
        let mut lot = parking.lot();
        let generation = lot.slots[0].generation;
        parking.take(&mut lot, 0, generation)
    };
    assert!(resumed.is_some());
    // A second take of the same generation finds nothing.
    assert!(parking.take(&mut parking.lot(), 0, 0).is_none());
    assert_eq!(parking.next_deadline(), Some(1_010));
    drop(resumed);
    assert_eq!(shared.open_conns.load(Ordering::Relaxed), 3);
    let expired = parking.expired(1_015);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].deadline, 1_010);
    drop(expired);
    assert_eq!(parking.parked(), 2);
    assert_eq!(shared.released_conns.load(Ordering::Relaxed), 2);
    assert_eq!(shared.open_conns.load(Ordering::Relaxed), 2);
    // Shutdown closes the rest and refuses newcomers.
    assert_eq!(parking.close_all(), 2);
    assert_eq!(parking.parked(), 0);
    assert_eq!(shared.open_conns.load(Ordering::Relaxed), 0);
    assert_eq!(shared.released_conns.load(Ordering::Relaxed), 0);
    let (server, client) = connections(1).await.pop().unwrap();
    let open = Arc::new(OpenConn(shared.clone()));
    shared.open_conns.fetch_add(1, Ordering::Relaxed);
    assert!(!parking.park(
        server,
        client.local_addr().unwrap(),
        open,
        5,
        None,
        None,
        false
    ));
    assert_eq!(shared.open_conns.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn stale_deadlines_do_not_pile_up() {
    // Many connections parked and resumed while a few stay parked: the heap holds about
    // the parked ones, not one entry per park ever made.
    let parking = Parking::new().unwrap();
    let shared = shared();
    let mut conns = connections(40).await;
    let (keep, client) = conns.pop().unwrap();
    let peer = client.local_addr().unwrap();
    assert!(parking.park(
        keep,
        peer,
        Arc::new(OpenConn(shared.clone())),
        u64::MAX,
        None,
        None,
        false
    ));
    shared.open_conns.fetch_add(1, Ordering::Relaxed);
    let mut pairs: Vec<_> = conns.into_iter().map(|(s, c)| (Some(s), c)).collect();
    for round in 0..100 {
        for (server, client) in pairs.iter_mut() {
            let stream = server.take().unwrap();
            shared.open_conns.fetch_add(1, Ordering::Relaxed);
            let open = Arc::new(OpenConn(shared.clone()));
            assert!(parking.park(
                stream,
                client.local_addr().unwrap(),
                open,
                round,
                None,
                None,
                false
            ));
        }
        // Resume them all again, the way `run` does.
        let mut lot = parking.lot();
        let parked: Vec<(u32, u32)> = lot
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.conn.as_ref().is_some_and(|c| c.deadline != u64::MAX))
            .map(|(i, s)| (i as u32, s.generation))
            .collect();
        for (slot, generation) in parked {
            let p = parking.take(&mut lot, slot, generation).unwrap();
            let stream = tokio::net::TcpStream::from_std(p.stream).unwrap();
            let i = pairs
                .iter()
                .position(|(s, c)| s.is_none() && c.local_addr().unwrap() == p.peer)
                .unwrap();
            pairs[i].0 = Some(stream);
        }
        assert!(lot.deadlines.len() <= 2 * lot.parked + 1024);
    }
    assert_eq!(parking.parked(), 1);
    assert_eq!(shared.released_conns.load(Ordering::Relaxed), 1);
    assert_eq!(parking.next_deadline(), Some(u64::MAX));
}

/// Shutdown closes the released connections and hands back the new ones that have not sent
/// their first request (a request may be on its way: the session answers it).
#[tokio::test]
async fn shutdown_closes_released_connections_and_hands_back_new_ones() {
    let parking = Parking::new().unwrap();
    let shared = shared();
    let mut clients = Vec::new();
    for (i, (server, client)) in connections(3).await.into_iter().enumerate() {
        let peer = client.local_addr().unwrap();
        shared.open_conns.fetch_add(1, Ordering::Relaxed);
        let open = Arc::new(OpenConn(shared.clone()));
        // The last one is new: accepted, nothing sent yet.
        let new_since = (i == 2).then_some(1_000);
        assert!(parking.park(server, peer, open, 10_000, new_since, None, false));
        clients.push(client);
    }
    assert_eq!(shared.released_conns.load(Ordering::Relaxed), 2);
    assert_eq!(shared.waiting_conns.load(Ordering::Relaxed), 1);
    let new = parking.shut();
    assert_eq!(new.len(), 1);
    assert!(new[0].new);
    assert_eq!(parking.parked(), 0);
    assert_eq!(shared.released_conns.load(Ordering::Relaxed), 0);
    assert_eq!(shared.waiting_conns.load(Ordering::Relaxed), 0);
    // The new one still counts as open until its session ends.
    assert_eq!(shared.open_conns.load(Ordering::Relaxed), 1);
    drop(new);
    assert_eq!(shared.open_conns.load(Ordering::Relaxed), 0);
}
