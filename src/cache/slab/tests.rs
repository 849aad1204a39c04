//! The slab allocator and its blocks: unit tests, and property tests of random
//! allocation, free and grow sequences across threads (run under valgrind's memcheck by
//! `.ci/run`).

use super::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

#[test]
fn a_block_keeps_its_head_and_bytes() {
    let b = Block::new((7u64, String::from("head")), &[b"key", b"", b"body"]);
    let c = b.clone();
    assert!(Block::same(&b, &c));
    drop(b);
    assert_eq!(c.head().0, 7);
    assert_eq!(c.head().1, "head");
    assert_eq!(c.bytes(), b"keybody");
    // 8 bytes of count and length, the head, the bytes, rounded up to a slot.
    assert_eq!(std::mem::size_of::<Inner<(u64, String)>>(), 40);
    assert_eq!(c.footprint(), 48);
    assert_eq!(std::mem::size_of::<Block<u64>>(), 8);
}

#[test]
fn the_head_is_dropped_once_with_the_last_handle() {
    let counted = Arc::new(());
    let b = Block::new(counted.clone(), &[b"x"]);
    let clones: Vec<_> = (0..10).map(|_| b.clone()).collect();
    assert_eq!(Arc::strong_count(&counted), 2);
    drop(b);
    drop(clones);
    assert_eq!(Arc::strong_count(&counted), 1);
}

#[test]
fn sizes_round_to_slots_and_big_blocks_use_the_heap() {
    assert_eq!(footprint(1), 16);
    assert_eq!(footprint(16), 16);
    assert_eq!(footprint(17), 32);
    assert_eq!(footprint(MAX_SLOT), MAX_SLOT);
    assert_eq!(footprint(MAX_SLOT + 1), MAX_SLOT + 1);
    let big = vec![9u8; 10_000];
    let b = Block::new(1u8, &[&big]);
    assert_eq!(b.bytes(), &big[..]);
}

/// The size whose class only [`slots_are_reused_and_empty_chunks_given_back`] uses (it counts
/// the class's chunks while other tests run).
const RESERVED_SIZE: usize = 4000;

/// Blocks of one size class (only this test uses 4000-byte slots): chunks fill, a freed
/// slot is reused, and emptied chunks go back until the class holds one.
#[test]
fn slots_are_reused_and_empty_chunks_given_back() {
    const SIZE: usize = RESERVED_SIZE;
    let slot = footprint(SIZE);
    let per_chunk = (CHUNK - HEADER) / slot;
    let class = class_of(SIZE);
    let blocks: Vec<NonNull<u8>> = (0..per_chunk * 5).map(|_| alloc(SIZE)).collect();
    assert_eq!(SLABS[class].lock().chunks, 5);
    for (i, b) in blocks.iter().enumerate() {
        // SAFETY: a fresh block of SIZE bytes.
        unsafe { b.as_ptr().write_bytes(i as u8, SIZE) };
    }
    for (i, b) in blocks.iter().enumerate() {
        // SAFETY: written above, still ours.
        let first = unsafe { b.as_ptr().add(8).read() };
        assert_eq!(first, i as u8, "block {i} overwritten");
        assert!((b.as_ptr() as usize).is_multiple_of(GRAIN));
    }
    // A freed slot is the next one handed out.
    // SAFETY: ours, not used again.
    unsafe { free(blocks[3], SIZE) };
    let again = alloc(SIZE);
    assert_eq!(again, blocks[3]);
    for b in blocks {
        // SAFETY: ours, not used again (`again` is `blocks[3]`).
        unsafe { free(b, SIZE) };
    }
    assert_eq!(SLABS[class].lock().chunks, 1);
    let c = SLABS[class].lock();
    // SAFETY: lock held; the class's one chunk is listed.
    assert_eq!(unsafe { (*c.partial).used }, 0);
}

#[test]
fn blocks_from_many_threads() {
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                for i in 0..20_000usize {
                    let tag = [t as u8; 40];
                    let b = Block::new(i, &[&tag[..(i % 40)]]);
                    if i % 3 == 0 {
                        kept.push(b);
                    }
                }
                for (n, b) in kept.iter().enumerate() {
                    assert_eq!(*b.head(), n * 3);
                    assert!(b.bytes().iter().all(|&x| x == t as u8));
                }
                // Handed to another thread and dropped there.
                kept
            })
        })
        .collect();
    let all: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(all.len(), 4 * 6667);
    drop(all);
}

/// xorshift64*: the same sequence from a seed on every machine, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A size for the random tests: mostly small slots, some up to [`MAX_SLOT`], some from the
/// heap beyond it; never [`RESERVED_SIZE`]'s class.
fn random_size(rng: &mut Rng) -> usize {
    let size = match rng.below(100) {
        0..80 => 1 + rng.below(256),
        80..95 => 257 + rng.below(MAX_SLOT - 256),
        _ => MAX_SLOT + 1 + rng.below(2 * MAX_SLOT),
    };
    if class_of(size) == class_of(RESERVED_SIZE) && size <= MAX_SLOT {
        RESERVED_SIZE + GRAIN
    } else {
        size
    }
}

/// A block the random tests hold: where, its size, the seed of its contents.
struct Held {
    at: NonNull<u8>,
    size: usize,
    seed: u8,
}

// SAFETY: a `Held` is the only handle to its block; the allocator lets any thread free a block
// (its state is behind the class locks), so moving one to another thread is sound.
unsafe impl Send for Held {}

/// Every block the random tests hold, by address: no two may overlap.
static LIVE: std::sync::Mutex<BTreeMap<usize, usize>> = std::sync::Mutex::new(BTreeMap::new());

impl Held {
    /// A new block of `size` bytes filled from `seed`, checked not to overlap a held one.
    fn new(size: usize, seed: u8) -> Held {
        let h = Held {
            at: alloc(size),
            size,
            seed,
        };
        assert!((h.at.as_ptr() as usize).is_multiple_of(GRAIN), "aligned");
        h.track();
        h.fill(0);
        h
    }

    fn byte(&self, i: usize) -> u8 {
        self.seed.wrapping_add((i % 251) as u8)
    }

    /// Writes the pattern from byte `from` on.
    fn fill(&self, from: usize) {
        for i in from..self.size {
            // SAFETY: inside the block, which this handle owns.
            unsafe { self.at.as_ptr().add(i).write(self.byte(i)) };
        }
    }

    /// Panics unless the first `len` bytes hold the pattern.
    fn check(&self, len: usize) {
        // SAFETY: the block is live and owned by this handle; `len` ≤ its size.
        let bytes = unsafe { std::slice::from_raw_parts(self.at.as_ptr(), len) };
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(*b, self.byte(i), "byte {i} of a {}-byte block", self.size);
        }
    }

    fn track(&self) {
        let at = self.at.as_ptr() as usize;
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((&before, &len)) = live.range(..=at).next_back() {
            assert!(before + len <= at, "overlaps the block at {before:#x}");
        }
        if let Some((&after, _)) = live.range(at..).next() {
            assert!(at + self.size <= after, "overlaps the block at {after:#x}");
        }
        live.insert(at, self.size);
    }

    /// Checks the contents and gives the block back.
    fn free(self) {
        self.check(self.size);
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(live.remove(&(self.at.as_ptr() as usize)), Some(self.size));
        drop(live);
        // SAFETY: allocated with this size, not used after this.
        unsafe { free(self.at, self.size) };
    }

    /// What `realloc` does: a larger block with the same contents, the old one given back.
    fn grow(self, size: usize) -> Held {
        let new = Held {
            at: alloc(size),
            size,
            seed: self.seed,
        };
        // SAFETY: both live and distinct; `self.size` ≤ `size` bytes copied.
        unsafe { ptr::copy_nonoverlapping(self.at.as_ptr(), new.at.as_ptr(), self.size) };
        new.check(self.size);
        new.fill(self.size);
        self.free();
        new.track();
        new
    }
}

/// Random allocation, free, grow and cross-thread free sequences on four threads (seeded,
/// bounded: 4 × 6,000 operations). Properties: a block is aligned, never overlaps another
/// live one, keeps what was written to it until freed (whichever thread frees it), and the
/// classes' bookkeeping stays consistent throughout ([`check_classes`]). Under memcheck
/// (`.ci/run`) every touch outside a live block is an error too.
#[test]
fn random_alloc_free_and_grow_across_threads() {
    const THREADS: u64 = 4;
    const OPS: usize = 6_000;
    let shared: Arc<std::sync::Mutex<Vec<Held>>> = Arc::default();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(0x5eed + t);
                let mut held: Vec<Held> = Vec::new();
                for op in 0..OPS {
                    match rng.below(100) {
                        0..45 => {
                            let size = random_size(&mut rng);
                            held.push(Held::new(size, rng.next() as u8));
                        }
                        45..72 if !held.is_empty() => {
                            let i = rng.below(held.len());
                            held.swap_remove(i).free();
                        }
                        72..84 if !held.is_empty() => {
                            let i = rng.below(held.len());
                            let h = held.swap_remove(i);
                            let size = (h.size + 1 + rng.below(h.size * 2)).min(3 * MAX_SLOT);
                            let size = if class_of(size) == class_of(RESERVED_SIZE) {
                                RESERVED_SIZE + GRAIN
                            } else {
                                size
                            };
                            let size = size.max(h.size);
                            held.push(h.grow(size));
                        }
                        84..92 if !held.is_empty() => {
                            let i = rng.below(held.len());
                            let h = held.swap_remove(i);
                            shared.lock().unwrap_or_else(|e| e.into_inner()).push(h);
                        }
                        92..100 => {
                            let other = shared.lock().unwrap_or_else(|e| e.into_inner()).pop();
                            if let Some(h) = other {
                                h.free();
                            }
                        }
                        _ => {}
                    }
                    if op % 1000 == 999 {
                        check_classes();
                    }
                }
                for h in held {
                    h.free();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread's properties held");
    }
    let left: Vec<Held> = std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner()));
    for h in left {
        h.free();
    }
    check_classes();
}

/// A head that counts its drops.
struct Counted(Arc<AtomicUsize>, usize);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Blocks cloned a random number of times, the handles spread over four threads and dropped
/// there in random order (seeded): every handle reads its block's head and bytes intact until
/// it is dropped, and each head is dropped exactly once, with the last handle.
#[test]
fn block_handles_cloned_and_dropped_across_threads() {
    const BLOCKS: usize = 2_000;
    let drops = Arc::new(AtomicUsize::new(0));
    let mut rng = Rng::new(0xb10c);
    let mut hands: Vec<Vec<Block<Counted>>> = (0..4).map(|_| Vec::new()).collect();
    for i in 0..BLOCKS {
        let len = rng.below(300);
        let bytes: Vec<u8> = (0..len).map(|j| (i + j) as u8).collect();
        let b = Block::new(Counted(drops.clone(), i), &[&bytes]);
        for _ in 0..rng.below(5) {
            hands[rng.below(4)].push(b.clone());
        }
        hands[rng.below(4)].push(b);
    }
    for hand in &mut hands {
        for i in (1..hand.len()).rev() {
            hand.swap(i, rng.below(i + 1));
        }
    }
    let threads: Vec<_> = hands
        .into_iter()
        .map(|hand| {
            std::thread::spawn(move || {
                for b in hand {
                    let i = b.head().1;
                    assert!(
                        b.bytes()
                            .iter()
                            .enumerate()
                            .all(|(j, x)| *x == (i + j) as u8)
                    );
                    drop(b);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("every handle read its block intact");
    }
    assert_eq!(drops.load(Ordering::SeqCst), BLOCKS);
}

/// Checks the bookkeeping of every class (under its lock, so while other threads allocate):
/// the list of chunks with a free slot is doubly linked and holds only chunks marked listed;
/// each listed chunk has a free slot or room at `bump`; its free slots lie inside it on slot
/// boundaries, and free + used slots are all it handed out. Panics with what is wrong.
fn check_classes() {
    for (class, lock) in SLABS.iter().enumerate() {
        let slot = (class + 1) * GRAIN;
        let slab = lock.lock();
        let mut prev: *mut Chunk = ptr::null_mut();
        let mut chunk = slab.partial;
        let mut listed = 0;
        while !chunk.is_null() {
            listed += 1;
            assert!(
                listed <= slab.chunks,
                "class {class}: list longer than its chunks"
            );
            // SAFETY: the lock is held; listed chunks are live and their free slots are
            // theirs (their first word is a link, told to memcheck around the read).
            unsafe {
                let c = &*chunk;
                assert!(c.listed && c.prev == prev, "class {class}: list links");
                assert!(c.bump >= HEADER && c.bump <= CHUNK, "class {class}: bump");
                assert!(
                    (c.bump - HEADER).is_multiple_of(slot),
                    "class {class}: bump"
                );
                assert!(
                    !c.free.is_null() || c.bump + slot <= CHUNK,
                    "class {class}: full"
                );
                let mut free = 0;
                let mut at = c.free;
                while !at.is_null() {
                    let off = at as usize - chunk as usize;
                    assert!(
                        off >= HEADER && off < c.bump,
                        "class {class}: free slot outside"
                    );
                    assert!(
                        (off - HEADER).is_multiple_of(slot),
                        "class {class}: slot edge"
                    );
                    free += 1;
                    assert!(free <= CHUNK / slot, "class {class}: free list loops");
                    memcheck::defined(at, LINK);
                    let next = at.cast::<*mut u8>().read();
                    memcheck::noaccess(at, LINK);
                    at = next;
                }
                assert_eq!(free + c.used, (c.bump - HEADER) / slot, "class {class}");
                prev = chunk;
                chunk = c.next;
            }
        }
    }
}
