//! Page-aligned I/O buffers, allocated once per job before the measured phase (O_DIRECT
//! needs the alignment; everyone gets it so engines can share buffers).
//!
//! Pools of 512 KiB or more are mapped on a 2 MiB boundary and advised as transparent huge
//! pages, so copying a large record into the buffer does not walk hundreds of 4 KiB pages
//! (the kernel falls back to small pages silently when huge pages are off).

/// Alignment of every buffer: one page, enough for O_DIRECT on any common device.
pub const ALIGN: usize = 4096;

/// `count` buffers of `len` bytes each, page-aligned, filled with incompressible bytes.
#[derive(Debug)]
pub struct BufferPool {
    ptr: *mut u8,
    len: usize,
    count: usize,
    map_len: usize,
}

// SAFETY: the pool owns its allocation exclusively; it is moved between threads, never shared.
unsafe impl Send for BufferPool {}

impl BufferPool {
    /// Allocates `count` buffers of `len` bytes (each rounded up to the alignment).
    pub fn new(len: usize, count: usize, seed: u64) -> Self {
        let stride = len.max(1).div_ceil(ALIGN) * ALIGN;
        let total = stride * count.max(1);
        let (ptr, map_len) = map_buffers(total);
        let mut pool = BufferPool {
            ptr,
            len: stride,
            count: count.max(1),
            map_len,
        };
        let mut rng = crate::rng::SplitMix64::new(seed);
        for chunk in pool.all_mut().chunks_mut(8) {
            let v = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        pool
    }

    fn all_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len * count bytes, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len * self.count) }
    }

    /// Number of buffers.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Capacity of one buffer (the requested length rounded up to the alignment).
    pub fn capacity(&self) -> usize {
        self.len
    }

    /// Raw pointer to buffer `i` (for engines that hand buffers to the kernel).
    pub fn ptr(&mut self, i: usize) -> *mut u8 {
        assert!(i < self.count);
        // SAFETY: i < count, so the offset stays inside the allocation.
        unsafe { self.ptr.add(i * self.len) }
    }

    /// Buffer `i`, `len` bytes long (at most the capacity).
    pub fn buf(&mut self, i: usize, len: usize) -> &mut [u8] {
        let len = len.min(self.len);
        let p = self.ptr(i);
        // SAFETY: p is valid for self.len >= len bytes and exclusively borrowed through self.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }
}

const HUGE: usize = 2 << 20;

/// Maps `total` bytes of anonymous memory, huge-page aligned and advised when large enough.
fn map_buffers(total: usize) -> (*mut u8, usize) {
    let huge = total >= 512 << 10;
    let map_len = if huge {
        total.div_ceil(HUGE) * HUGE
    } else {
        total
    };
    let want = if huge { map_len + HUGE } else { map_len };
    // SAFETY: an anonymous private mapping; checked below, trimmed to an aligned window.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            want,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(want, ALIGN).expect("layout"),
            );
        }
        let base = p as usize;
        if !huge {
            return (p.cast(), map_len);
        }
        let start = base.div_ceil(HUGE) * HUGE;
        let head = start - base;
        let tail = want - head - map_len;
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((start + map_len) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, map_len, libc::MADV_HUGEPAGE);
        (start as *mut u8, map_len)
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the window map_buffers returned.
        unsafe { libc::munmap(self.ptr.cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_filled() {
        let mut p = BufferPool::new(5000, 3, 1);
        assert_eq!(p.capacity(), 8192);
        for i in 0..3 {
            assert_eq!(p.ptr(i) as usize % ALIGN, 0);
        }
        assert!(p.buf(2, 100).iter().any(|&b| b != 0));
        assert_eq!(p.buf(0, 1 << 20).len(), 8192);
        let mut big = BufferPool::new(1 << 20, 1, 2);
        assert_eq!(big.ptr(0) as usize % (2 << 20), 0);
        assert!(big.buf(0, 1 << 20).iter().any(|&b| b != 0));
    }
}
