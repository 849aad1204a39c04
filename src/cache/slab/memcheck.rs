//! Tells valgrind's memcheck which slab memory is a live block, so it checks the slabs' users
//! as it checks `malloc`'s: a read or write past a block's requested size or into a free
//! slot, a use after free, a double free, a leaked block.
//!
//! Without this, memcheck sees the slabs as one `mmap` of defined bytes and none of those
//! errors. Each function is one of valgrind's client requests (`valgrind.h`,
//! `memcheck.h`): a fixed instruction sequence that leaves every register as it was, so it
//! does nothing natively (a few instructions), and that valgrind recognises and answers.
//! x86_64 Linux only (the sequence is per architecture); elsewhere these are empty.
//! `.ci/run` runs the slab's and the memory tier's tests under memcheck.

/// `VG_USERREQ__MALLOCLIKE_BLOCK` (valgrind.h).
const MALLOCLIKE_BLOCK: u64 = 0x1301;
/// `VG_USERREQ__FREELIKE_BLOCK` (valgrind.h).
const FREELIKE_BLOCK: u64 = 0x1302;
/// `VG_USERREQ__MAKE_MEM_NOACCESS` = `VG_USERREQ_TOOL_BASE('M','C')` (memcheck.h); the next
/// two requests follow it.
const MAKE_MEM_NOACCESS: u64 = (b'M' as u64) << 24 | (b'C' as u64) << 16;
const MAKE_MEM_UNDEFINED: u64 = MAKE_MEM_NOACCESS + 1;
const MAKE_MEM_DEFINED: u64 = MAKE_MEM_NOACCESS + 2;

/// `VALGRIND_DO_CLIENT_REQUEST_EXPR` for amd64: valgrind reads the request and its five
/// arguments from `args` and may write a result to rdx (0, the default, natively).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
fn request(args: [u64; 6]) {
    let mut result: u64 = 0;
    // SAFETY: the four rotations of rdi add up to 128 bits (rdi is unchanged) and
    // `xchg rbx, rbx` swaps a register with itself: natively the sequence changes nothing
    // but the flags (not preserved, as declared by omitting `preserves_flags`). Under
    // valgrind it is a client request: valgrind reads the six words at `args` (live for the
    // call: it is this function's argument) and writes rdx, declared as an output. The
    // requests used here only change valgrind's records of memory, never the memory.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") args.as_ptr(),
            inout("rdx") result,
            options(nostack),
        );
    }
    let _ = result;
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
#[inline(always)]
fn request(_args: [u64; 6]) {}

/// `size` bytes at `at` are now a live block (addressable, undefined until written).
#[inline(always)]
pub fn malloclike(at: *const u8, size: usize) {
    request([MALLOCLIKE_BLOCK, at as u64, size as u64, 0, 0, 0]);
}

/// The live block at `at` is freed: no longer addressable.
#[inline(always)]
pub fn freelike(at: *const u8) {
    request([FREELIKE_BLOCK, at as u64, 0, 0, 0, 0]);
}

/// `len` bytes at `at` may not be touched (the slabs' own free memory).
#[inline(always)]
pub fn noaccess(at: *const u8, len: usize) {
    request([MAKE_MEM_NOACCESS, at as u64, len as u64, 0, 0, 0]);
}

/// `len` bytes at `at` may be written (and read once written).
#[inline(always)]
pub fn undefined(at: *const u8, len: usize) {
    request([MAKE_MEM_UNDEFINED, at as u64, len as u64, 0, 0, 0]);
}

/// `len` bytes at `at` hold a value (a free slot's link, about to be read).
#[inline(always)]
pub fn defined(at: *const u8, len: usize) {
    request([MAKE_MEM_DEFINED, at as u64, len as u64, 0, 0, 0]);
}
