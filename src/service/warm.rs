//! A cold start (after a reboot, or with the page cache dropped) pages the executable in from
//! disk one fault at a time, each a small read the code waits for, as start-up code runs for
//! the first time. [`read_ahead_own_binary`] asks the kernel for the whole of the process's
//! mappings of its executable at once (`MADV_WILLNEED`): the device reads them in large
//! requests while start-up goes on, and a fault then finds its page read or already on its
//! way. With the page cache warm it costs a read of `/proc/self/maps` and a walk of pages that
//! are present.

/// Asks for every mapping of the running executable to be read ahead. Returns the bytes
/// asked for (0 where `/proc` is not mounted or nothing matched).
pub fn read_ahead_own_binary() -> usize {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return 0;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    let exe = exe.to_string_lossy();
    let mut bytes = 0;
    for line in maps.lines() {
        // `START-END PERMS OFFSET DEV INODE PATH`; the path is last and may hold spaces.
        if !line.ends_with(&*exe) {
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        if !perms.starts_with('r') || end <= start {
            continue;
        }
        // SAFETY: advice on a range this process has mapped (its own executable, as the
        // kernel lists it in /proc/self/maps, page-aligned): MADV_WILLNEED only schedules
        // reads of the file's pages into the page cache; it changes no mapping and no memory
        // contents, and a failure (an unmapped range) is an error code, not a fault.
        let done =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_WILLNEED) };
        if done == 0 {
            bytes += end - start;
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_running_binary_is_asked_for() {
        // The test binary is an executable of its own, mapped at least for its code.
        assert!(super::read_ahead_own_binary() > 0);
    }
}
