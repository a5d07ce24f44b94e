//! Room on the target before any file is created: a run that needs more bytes (or inodes)
//! than the file system has free fails at once with the figures, instead of filling the file
//! system and stalling its other users until ENOSPC (issue #13: `-s 4t` on a 5 MiB tmpfs).

use std::path::Path;

use nsperf_core::units::Bytes;

use crate::error::IoError;

/// What the file system of a directory has free for this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeSpace {
    /// Bytes available to unprivileged writers (`f_bavail × f_frsize`).
    pub bytes: u64,
    /// Inodes available (`f_favail`), `None` when the file system does not count them.
    pub inodes: Option<u64>,
}

/// Free space of the file system holding `dir`, or `None` when `statvfs` fails.
pub fn free_space(dir: &Path) -> Option<FreeSpace> {
    let c = crate::target::cstr(dir);
    // SAFETY: statvfs writes into a zeroed struct; c is a valid path.
    let st = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        st
    };
    let frsize = if st.f_frsize > 0 {
        st.f_frsize
    } else {
        st.f_bsize
    };
    Some(FreeSpace {
        bytes: (st.f_bavail as u64).saturating_mul(frsize as u64),
        // File systems without an inode limit (btrfs, some FUSE) report 0 files in total.
        inodes: (st.f_files > 0).then_some(st.f_favail as u64),
    })
}

/// What a run will create in its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Need {
    /// Bytes of all files at their full size.
    pub bytes: u64,
    /// Files and directories created.
    pub inodes: u64,
}

/// Fails when `need` does not fit in `free` (no figures: no check).
pub fn check(dir: &Path, need: Need, free: Option<FreeSpace>) -> Result<(), IoError> {
    let Some(free) = free else {
        return Ok(());
    };
    if need.bytes > free.bytes {
        return Err(IoError::NoSpace(format!(
            "the run needs {} in {} but its file system has {} free: lower --size or --jobs, or add --no-space-check to try anyway",
            Bytes(need.bytes),
            dir.display(),
            Bytes(free.bytes)
        )));
    }
    if let Some(inodes) = free.inodes.filter(|&i| need.inodes > i) {
        return Err(IoError::NoSpace(format!(
            "the run creates {} files in {} but its file system has {inodes} inodes free: lower --files, or add --no-space-check to try anyway",
            need.inodes,
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_or_says_why() {
        let free = Some(FreeSpace {
            bytes: 5 << 20,
            inodes: Some(100),
        });
        let d = Path::new("/x");
        assert!(
            check(
                d,
                Need {
                    bytes: 5 << 20,
                    inodes: 1
                },
                free
            )
            .is_ok()
        );
        let e = check(
            d,
            Need {
                bytes: 4 << 40,
                inodes: 1,
            },
            free,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("4 TiB") && e.contains("5 MiB") && e.contains("--no-space-check"),
            "{e}"
        );
        let e = check(
            d,
            Need {
                bytes: 1,
                inodes: 1000,
            },
            free,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("1000 files"), "{e}");
        assert!(check(d, Need::default(), None).is_ok());
        assert!(free_space(Path::new("/")).is_some_and(|f| f.bytes > 0));
    }
}

/// What the checks before a run found in its directory.
#[derive(Debug, Clone, Default)]
pub struct Preflight {
    /// Stale nsperf files of dead runs, and which were removed.
    pub stale: crate::stale::Sweep,
}

/// Before a run in `dir`: names stale nsperf files and removes the dead ones (with `clean`
/// all of them, [`crate::stale::sweep`]), then checks that `need` fits unless `check` is off.
/// A mapped engine (`mapped`) is always checked: a write through a mapping past the end of
/// the space kills the process with SIGBUS, leaving its files behind.
pub fn preflight(
    dir: &Path,
    need: Need,
    check_space: bool,
    clean: bool,
    mapped: bool,
) -> Result<Preflight, IoError> {
    let stale = crate::stale::sweep(&mut crate::stale::LocalDir(dir), clean)?;
    if check_space || mapped {
        let r = check(dir, need, free_space(dir));
        if let (Err(IoError::NoSpace(m)), false) = (&r, check_space) {
            return Err(IoError::NoSpace(format!(
                "{m} (not with --engine mmap: a mapped write past the free space is SIGBUS)"
            )));
        }
        let held = stale.left_bytes();
        if let (Err(IoError::NoSpace(m)), true) = (&r, held > 0) {
            return Err(IoError::NoSpace(format!(
                "{m}; {} of it is held by stale nsperf files (--clean removes them)",
                Bytes(held)
            )));
        }
        r?;
    }
    Ok(Preflight { stale })
}
