//! Whether certificate, key, CA or ticket-key files changed on disk: each file's size,
//! modification time and inode. Polling a handful of files costs a few `stat` calls and needs
//! nothing from the kernel but `stat`, whatever replaces the files (an editor, certbot's
//! symlink swap, a mounted secret's directory swap).

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// What a file looked like (None: it could not be read).
type Stamp = Option<(u64, i64, i64, u64)>;

/// The files a listener read and what each looked like then.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stamps(Vec<(PathBuf, Stamp)>);

fn stamp(path: &PathBuf) -> Stamp {
    // `metadata` follows symlinks: a swapped link target is a change.
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

impl Stamps {
    pub fn take(files: &[PathBuf]) -> Stamps {
        Stamps(files.iter().map(|f| (f.clone(), stamp(f))).collect())
    }

    /// Whether any file looks different now.
    pub fn changed(&self) -> bool {
        self.0.iter().any(|(f, s)| stamp(f) != *s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_or_removed_file_is_a_change() {
        let dir = std::env::temp_dir().join(format!("shellac-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("cert.pem");
        std::fs::write(&f, "one").unwrap();
        let s = Stamps::take(std::slice::from_ref(&f));
        assert!(!s.changed());
        std::fs::write(&f, "three").unwrap();
        assert!(s.changed());
        let s = Stamps::take(std::slice::from_ref(&f));
        std::fs::remove_file(&f).unwrap();
        assert!(s.changed());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
