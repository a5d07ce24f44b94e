//! Page-aligned I/O buffers, allocated once per job before the measured phase (O_DIRECT
//! needs the alignment; everyone gets it so engines can share buffers).

use std::alloc::{Layout, alloc_zeroed, dealloc};

/// Alignment of every buffer: one page, enough for O_DIRECT on any common device.
pub const ALIGN: usize = 4096;

/// `count` buffers of `len` bytes each, page-aligned, filled with incompressible bytes.
#[derive(Debug)]
pub struct BufferPool {
    ptr: *mut u8,
    len: usize,
    count: usize,
    layout: Layout,
}

// SAFETY: the pool owns its allocation exclusively; it is moved between threads, never shared.
unsafe impl Send for BufferPool {}

impl BufferPool {
    /// Allocates `count` buffers of `len` bytes (each rounded up to the alignment).
    pub fn new(len: usize, count: usize, seed: u64) -> Self {
        let stride = len.max(1).div_ceil(ALIGN) * ALIGN;
        let total = stride * count.max(1);
        let layout = Layout::from_size_align(total, ALIGN).expect("buffer layout");
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let mut pool = BufferPool {
            ptr,
            len: stride,
            count: count.max(1),
            layout,
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

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in new().
        unsafe { dealloc(self.ptr, self.layout) }
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
    }
}
