//! Size-classed slabs for the memory tier's entries, apart from the process's heap.
//!
//! Why: the memory tier's entries live long; everything else a fill allocates (request and
//! response heads, buffers, the object the tier copies from) lives for one request. Under
//! glibc's allocator both come from the same heap, so each fill leaves short-lived chunks
//! freed between long-lived entries, and the heap keeps those holes: ~110 bytes per cached
//! object on workload 8 (bench/RESULTS.md, "slabs of its own"). Entries allocated here share
//! slabs only with other entries, in 16-byte size classes, with no per-allocation header.
//!
//! Layout: memory is reserved from the kernel in [`REGION`]s and used in [`CHUNK`]s aligned to
//! their size, so the chunk of any slot is found by masking its address. Each chunk serves one
//! size class: a small header, then slots handed out in address order and, once freed, from
//! the chunk's free list. A class keeps a list of its chunks that have a free slot. A chunk
//! whose last slot is freed goes back to the region pool and its pages to the kernel
//! (`MADV_DONTNEED`), unless it is its class's only chunk. Blocks larger than [`MAX_SLOT`] come
//! from the global allocator.
//!
//! Bounds: resident slab memory is at most the live slots, plus the free slots of partly used
//! chunks, plus one empty chunk per class ([`SlabStats`]).
//!
//! Checking: every block handed out and given back is reported to valgrind's memcheck
//! ([`memcheck`]), which `.ci/run` runs this module's tests (random sequences across threads
//! included) and the memory tier's under.

use std::alloc::{Layout, handle_alloc_error};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use parking_lot::Mutex;

mod memcheck;

/// Slot sizes are multiples of this, which is also every slot's alignment.
pub const GRAIN: usize = 16;
/// Largest block kept in a slab.
pub const MAX_SLOT: usize = 4096;
/// A slab: one size class's slots, and its header.
const CHUNK: usize = 64 * 1024;
/// Reserved from the kernel at once (one mapping), then used chunk by chunk.
const REGION: usize = 32 * 1024 * 1024;
const CLASSES: usize = MAX_SLOT / GRAIN;
/// Bytes at the start of a chunk taken by its header (a multiple of [`GRAIN`]).
const HEADER: usize = 64;
/// Bytes of a free slot holding the link to the next free one.
const LINK: usize = std::mem::size_of::<*mut u8>();

const _: () = assert!(LINK <= GRAIN);

/// The header at the start of every chunk.
#[repr(C)]
struct Chunk {
    /// Freed slots, linked through their first word.
    free: *mut u8,
    /// Offset of the first slot never handed out.
    bump: usize,
    /// Slots handed out and not freed.
    used: usize,
    /// Neighbours in the class's list of chunks with a free slot.
    prev: *mut Chunk,
    next: *mut Chunk,
    /// Whether the chunk is in that list.
    listed: bool,
}

const _: () = assert!(std::mem::size_of::<Chunk>() <= HEADER && HEADER.is_multiple_of(GRAIN));

struct Class {
    /// Chunks with a free slot; allocation takes from the first.
    partial: *mut Chunk,
    /// Chunks this class holds.
    chunks: usize,
}

// SAFETY: the raw pointers are only followed with the class's lock held.
unsafe impl Send for Class {}

/// Chunks given back, ready for reuse (their pages returned to the kernel), and the unused
/// tail of the last region.
struct Pool {
    spare: Vec<NonNull<u8>>,
    next: *mut u8,
    end: *mut u8,
}

// SAFETY: the pointers are addresses in regions that are never unmapped.
unsafe impl Send for Pool {}

static SLABS: [Mutex<Class>; CLASSES] = [const {
    parking_lot::const_mutex(Class {
        partial: ptr::null_mut(),
        chunks: 0,
    })
}; CLASSES];

static POOL: Mutex<Pool> = parking_lot::const_mutex(Pool {
    spare: Vec::new(),
    next: ptr::null_mut(),
    end: ptr::null_mut(),
});

static CHUNKS_IN_USE: AtomicU64 = AtomicU64::new(0);
static SLOT_BYTES: AtomicU64 = AtomicU64::new(0);
static RESERVED: AtomicU64 = AtomicU64::new(0);

/// What the slabs hold, process-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlabStats {
    /// Bytes in chunks that some class holds (at most this much is resident).
    pub chunk_bytes: u64,
    /// Bytes in slots handed out and not freed.
    pub slot_bytes: u64,
    /// Address space reserved (not resident until used).
    pub reserved_bytes: u64,
}

pub fn stats() -> SlabStats {
    SlabStats {
        chunk_bytes: CHUNKS_IN_USE.load(Ordering::Relaxed) * CHUNK as u64,
        slot_bytes: SLOT_BYTES.load(Ordering::Relaxed),
        reserved_bytes: RESERVED.load(Ordering::Relaxed),
    }
}

/// The bytes a block of `size` takes: its slot, or `size` itself beyond [`MAX_SLOT`].
pub fn footprint(size: usize) -> usize {
    if size <= MAX_SLOT {
        size.max(1).div_ceil(GRAIN) * GRAIN
    } else {
        size
    }
}

fn class_of(size: usize) -> usize {
    size.max(1).div_ceil(GRAIN) - 1
}

/// A block of `size` bytes aligned to [`GRAIN`]; give it back with [`free`] and the same size.
pub fn alloc(size: usize) -> NonNull<u8> {
    if size > MAX_SLOT {
        let layout = big_layout(size);
        // SAFETY: the layout's size is not zero.
        let block = unsafe { std::alloc::alloc(layout) };
        return NonNull::new(block).unwrap_or_else(|| handle_alloc_error(layout));
    }
    let class = class_of(size);
    let slot = (class + 1) * GRAIN;
    let mut slab = SLABS[class].lock();
    if slab.partial.is_null() {
        let chunk = new_chunk().cast::<Chunk>().as_ptr();
        memcheck::undefined(chunk.cast(), HEADER);
        // SAFETY: a fresh chunk, ours alone, at least HEADER bytes long, aligned to CHUNK
        // (more than `Chunk` needs).
        unsafe {
            chunk.write(Chunk {
                free: ptr::null_mut(),
                bump: HEADER,
                used: 0,
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
                listed: false,
            });
        }
        slab.chunks += 1;
        // SAFETY: the chunk is live (just written), of this class, not listed; the class's
        // lock is held.
        unsafe { link(&mut slab, chunk) };
    }
    let chunk = slab.partial;
    // SAFETY: chunks in the list are live and only touched with the class's lock held; a
    // listed chunk has a freed slot or room at `bump`.
    let block = unsafe {
        let c = &mut *chunk;
        let block = if c.free.is_null() {
            let block = chunk.cast::<u8>().add(c.bump);
            c.bump += slot;
            block
        } else {
            // A freed slot holds the next free one in its first word (see `free`), written
            // aligned: slots are GRAIN-aligned.
            let block = c.free;
            memcheck::defined(block, LINK);
            c.free = block.cast::<*mut u8>().read();
            memcheck::noaccess(block, LINK);
            block
        };
        c.used += 1;
        if c.free.is_null() && c.bump + slot > CHUNK {
            unlink(&mut slab, chunk);
        }
        block
    };
    SLOT_BYTES.fetch_add(slot as u64, Ordering::Relaxed);
    // Only the `size` bytes asked for: memcheck reports a touch of the slot's slack too.
    memcheck::malloclike(block, size);
    // SAFETY: inside a chunk, so not null.
    unsafe { NonNull::new_unchecked(block) }
}

/// Gives back a block from [`alloc`].
///
/// # Safety
/// `block` came from `alloc(size)` with this `size` and is not used after this call.
pub unsafe fn free(block: NonNull<u8>, size: usize) {
    if size > MAX_SLOT {
        // SAFETY: allocated with this layout (the caller's contract).
        unsafe { std::alloc::dealloc(block.as_ptr(), big_layout(size)) };
        return;
    }
    let class = class_of(size);
    let slot = (class + 1) * GRAIN;
    let chunk = (block.as_ptr() as usize & !(CHUNK - 1)) as *mut Chunk;
    let mut slab = SLABS[class].lock();
    // SAFETY: the block is in a chunk of this class (the caller's contract), which is live
    // while it has a slot in use; its header is touched only with the class's lock held.
    let empty = unsafe {
        let c = &mut *chunk;
        memcheck::freelike(block.as_ptr());
        memcheck::undefined(block.as_ptr(), LINK);
        block.as_ptr().cast::<*mut u8>().write(c.free);
        memcheck::noaccess(block.as_ptr(), LINK);
        c.free = block.as_ptr();
        c.used -= 1;
        if !c.listed {
            link(&mut slab, chunk);
        }
        c.used == 0 && slab.chunks > 1
    };
    if empty {
        // SAFETY: lock held; the chunk is of this class, live, and listed (just above); it has
        // no slot in use, so nothing points into it.
        unsafe { unlink(&mut slab, chunk) };
        slab.chunks -= 1;
        drop(slab);
        // SAFETY: no slot in use, unlinked and no longer counted by the class: no class holds
        // it. A chunk's address is not null.
        unsafe { give_back(NonNull::new_unchecked(chunk.cast())) };
    }
    SLOT_BYTES.fetch_sub(slot as u64, Ordering::Relaxed);
}

fn big_layout(size: usize) -> Layout {
    Layout::from_size_align(size, GRAIN).expect("a block's size fits a layout")
}

/// Puts `chunk` first in its class's list of chunks with a free slot.
///
/// # Safety
/// `chunk` is live, of this class, not listed; the class's lock is held (`slab`).
unsafe fn link(slab: &mut Class, chunk: *mut Chunk) {
    // SAFETY: the caller's contract; listed chunks are live.
    unsafe {
        (*chunk).prev = ptr::null_mut();
        (*chunk).next = slab.partial;
        if let Some(first) = slab.partial.as_mut() {
            first.prev = chunk;
        }
        (*chunk).listed = true;
    }
    slab.partial = chunk;
}

/// Takes `chunk` out of its class's list.
///
/// # Safety
/// `chunk` is live, of this class, listed; the class's lock is held (`slab`).
unsafe fn unlink(slab: &mut Class, chunk: *mut Chunk) {
    // SAFETY: the caller's contract; listed chunks are live.
    unsafe {
        let c = &mut *chunk;
        match c.prev.as_mut() {
            Some(prev) => prev.next = c.next,
            None => slab.partial = c.next,
        }
        if let Some(next) = c.next.as_mut() {
            next.prev = c.prev;
        }
        c.prev = ptr::null_mut();
        c.next = ptr::null_mut();
        c.listed = false;
    }
}

/// A chunk for a class: a spare one, the next of the current region, or a new region's first.
fn new_chunk() -> NonNull<u8> {
    let mut pool = POOL.lock();
    let chunk = if let Some(chunk) = pool.spare.pop() {
        chunk
    } else {
        if pool.next == pool.end {
            let region = reserve();
            pool.next = region;
            // SAFETY: `region` is less than CHUNK past the mapping's start (see `reserve`), so
            // this is inside the REGION-byte mapping.
            pool.end = unsafe { region.add(REGION - CHUNK) };
        }
        let chunk = pool.next;
        // SAFETY: `chunk` < `end`, both CHUNK-aligned, so `chunk + CHUNK` ≤ `end`, inside the
        // mapping.
        pool.next = unsafe { chunk.add(CHUNK) };
        // SAFETY: inside a mapping, so not null.
        unsafe { NonNull::new_unchecked(chunk) }
    };
    CHUNKS_IN_USE.fetch_add(1, Ordering::Relaxed);
    // No slot is handed out yet; `alloc` opens the header.
    memcheck::noaccess(chunk.as_ptr(), CHUNK);
    chunk
}

/// Returns a chunk's pages to the kernel and the chunk to the pool.
///
/// # Safety
/// No slot of `chunk` is in use and no class holds it.
unsafe fn give_back(chunk: NonNull<u8>) {
    // SAFETY: the chunk is ours alone (the caller's contract); dropping its pages only makes
    // them read as zero when next touched.
    unsafe { libc::madvise(chunk.as_ptr().cast(), CHUNK, libc::MADV_DONTNEED) };
    memcheck::noaccess(chunk.as_ptr(), CHUNK);
    CHUNKS_IN_USE.fetch_sub(1, Ordering::Relaxed);
    let mut pool = POOL.lock();
    pool.spare.push(chunk);
}

/// A new region: `REGION` bytes of address space, its usable part aligned to [`CHUNK`] (the
/// first chunk-sized piece is given up to alignment). Pages become resident when touched.
fn reserve() -> *mut u8 {
    // SAFETY: an anonymous private mapping; no existing memory is affected.
    let region = unsafe {
        libc::mmap(
            ptr::null_mut(),
            REGION,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if region == libc::MAP_FAILED {
        handle_alloc_error(Layout::from_size_align(REGION, CHUNK).expect("a region's layout"));
    }
    RESERVED.fetch_add(REGION as u64, Ordering::Relaxed);
    let aligned = (region as usize).next_multiple_of(CHUNK);
    aligned as *mut u8
}

/// A reference-counted block in a slab: a header `H`, then bytes (the memory tier's entry).
/// Like `Arc<(H, [u8])>` behind a thin pointer, with a 4-byte count and a 4-byte length.
pub struct Block<H> {
    ptr: NonNull<Inner<H>>,
    _owns: PhantomData<Inner<H>>,
}

#[repr(C)]
struct Inner<H> {
    refs: AtomicU32,
    len: u32,
    head: H,
}

// SAFETY: like `Arc<H>`: a handle sent to another thread may drop `H` there as the last owner
// (`H: Send`) and read it while others do (`H: Sync`); the count is atomic, the bytes immutable.
unsafe impl<H: Send + Sync> Send for Block<H> {}
// SAFETY: as for `Send`: shared handles only read `H` and the bytes, and clone or drop through
// the atomic count.
unsafe impl<H: Send + Sync> Sync for Block<H> {}

impl<H> Block<H> {
    /// A block holding `head` and the concatenation of `parts` (at most `u32::MAX` bytes).
    pub fn new(head: H, parts: &[&[u8]]) -> Block<H> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let len32 = u32::try_from(len).expect("a block holds at most 4 GiB");
        const { assert!(std::mem::align_of::<Inner<H>>() <= GRAIN) };
        let size = Self::size_for(len);
        let ptr = alloc(size).cast::<Inner<H>>();
        // SAFETY: `size` bytes aligned to GRAIN: room for `Inner<H>` and `len` bytes after it.
        unsafe {
            ptr.as_ptr().write(Inner {
                refs: AtomicU32::new(1),
                len: len32,
                head,
            });
            let mut at = ptr
                .as_ptr()
                .cast::<u8>()
                .add(std::mem::size_of::<Inner<H>>());
            for part in parts {
                ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
                at = at.add(part.len());
            }
        }
        Block {
            ptr,
            _owns: PhantomData,
        }
    }

    fn size_for(len: usize) -> usize {
        std::mem::size_of::<Inner<H>>() + len
    }

    /// Bytes this block takes in memory (its slot).
    pub fn footprint(&self) -> usize {
        footprint(Self::size_for(self.inner().len as usize))
    }

    fn inner(&self) -> &Inner<H> {
        // SAFETY: live while this handle is.
        unsafe { self.ptr.as_ref() }
    }

    pub fn head(&self) -> &H {
        &self.inner().head
    }

    pub fn bytes(&self) -> &[u8] {
        let inner = self.inner();
        // SAFETY: `len` initialised bytes follow `Inner` (see `new`).
        unsafe {
            std::slice::from_raw_parts(
                self.ptr
                    .as_ptr()
                    .cast::<u8>()
                    .add(std::mem::size_of::<Inner<H>>()),
                inner.len as usize,
            )
        }
    }

    /// Whether `a` and `b` are the same block.
    pub fn same(a: &Block<H>, b: &Block<H>) -> bool {
        a.ptr == b.ptr
    }
}

impl<H> Clone for Block<H> {
    fn clone(&self) -> Block<H> {
        // Relaxed as in `Arc::clone`: a new reference is made from an existing one.
        let old = self.inner().refs.fetch_add(1, Ordering::Relaxed);
        if old > u32::MAX / 2 {
            // As `Arc` does on overflow: a count this high is a leak of handles.
            std::process::abort();
        }
        Block {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<H> Drop for Block<H> {
    fn drop(&mut self) {
        if self.inner().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Synchronises with the other owners' releases before the block is torn down.
        fence(Ordering::Acquire);
        let size = Self::size_for(self.inner().len as usize);
        // SAFETY: this was the last handle: the head is dropped once and the block given back
        // with the size it was allocated with.
        unsafe {
            ptr::drop_in_place(&mut (*self.ptr.as_ptr()).head);
            free(self.ptr.cast(), size);
        }
    }
}

#[cfg(test)]
mod tests;
