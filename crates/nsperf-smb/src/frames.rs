//! The data messages of the SMB2 data path: READ and WRITE requests built, their replies
//! read — checked, so a reply that does not fit its body is an error, never a panic.

use smb2::msg::read::ReadRequest;
use smb2::msg::write::{WriteRequest, WriteResponse};
use smb2::pack::{ReadCursor, Unpack};
use smb2::types::FileId;

/// SMB2 header length.
const HEADER: usize = 64;

/// A WRITE of `data` at `offset`.
pub(crate) fn write_request(
    file_id: FileId,
    offset: u64,
    data: Vec<u8>,
    write_through: bool,
) -> WriteRequest {
    WriteRequest {
        // Header (64) + the fixed part of WRITE (48).
        data_offset: 0x70,
        offset,
        file_id,
        channel: 0,
        remaining_bytes: 0,
        write_channel_info_offset: 0,
        write_channel_info_length: 0,
        // SMB2_WRITEFLAG_WRITE_THROUGH (MS-SMB2 2.2.21).
        flags: u32::from(write_through),
        data,
    }
}

/// A READ of `length` bytes at `offset`.
pub(crate) fn read_request(file_id: FileId, offset: u64, length: u32) -> ReadRequest {
    ReadRequest {
        padding: 0x50,
        flags: 0,
        length,
        offset,
        file_id,
        minimum_count: 0,
        channel: 0,
        remaining_bytes: 0,
        read_channel_info: vec![],
    }
}

/// Bytes a WRITE reply says were written.
pub(crate) fn write_count(frame: &smb2::Frame) -> smb2::Result<usize> {
    WriteResponse::unpack(&mut ReadCursor::new(&frame.body)).map(|r| r.count as usize)
}

/// Copies the data of a READ reply's body into `buf`; returns the bytes copied. Checked:
/// a structure size, offset or length that does not fit the body is an error, never a panic
/// or a read outside it.
pub fn read_reply_into(body: &[u8], buf: &mut [u8]) -> Result<usize, &'static str> {
    if body.len() < 16 {
        return Err("READ reply shorter than its fixed part");
    }
    if u16::from_le_bytes([body[0], body[1]]) != 17 {
        return Err("READ reply with a wrong structure size");
    }
    let off = body[2] as usize;
    let len = u32::from_le_bytes([body[4], body[5], body[6], body[7]]) as usize;
    if len == 0 {
        return Ok(0);
    }
    let start = off
        .checked_sub(HEADER)
        .filter(|&s| s >= 16)
        .ok_or("READ reply data offset inside the header")?;
    let data = body
        .get(start..)
        .and_then(|b| b.get(..len))
        .ok_or("READ reply data beyond the message")?;
    if len > buf.len() {
        return Err("READ reply longer than asked");
    }
    buf[..len].copy_from_slice(data);
    Ok(len)
}

pub(crate) fn read_into(frame: &smb2::Frame, buf: &mut [u8]) -> smb2::Result<usize> {
    read_reply_into(&frame.body, buf).map_err(smb2::Error::invalid_data)
}

/// Every reply parser of the data path on `data` (the body of the fuzz target).
pub fn fuzz_read_reply(data: &[u8]) {
    let mut buf = [0u8; 4096];
    let _ = read_reply_into(data, &mut buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(off: u8, len: u32, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![17, 0, off, 0];
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&[0u8; 8]);
        b.extend_from_slice(payload);
        b
    }

    #[test]
    fn read_reply_checked() {
        let mut buf = [0u8; 8];
        assert_eq!(read_reply_into(&reply(0x50, 3, b"abc"), &mut buf), Ok(3));
        assert_eq!(&buf[..3], b"abc");
        // Data at a later offset (padding after the fixed part).
        assert_eq!(read_reply_into(&reply(0x52, 2, b"..xy"), &mut buf), Ok(2));
        assert_eq!(&buf[..2], b"xy");
        assert!(read_reply_into(&reply(0x50, 4, b"abc"), &mut buf).is_err());
        assert!(read_reply_into(&reply(0x10, 1, b"a"), &mut buf).is_err());
        assert!(read_reply_into(&reply(0x50, 9, &[0; 9]), &mut buf).is_err());
        assert!(read_reply_into(&[17, 0, 0x50], &mut buf).is_err());
        assert_eq!(read_reply_into(&reply(0, 0, b""), &mut buf), Ok(0));
        let mut b = reply(0x50, 1, b"a");
        b[0] = 16;
        assert!(read_reply_into(&b, &mut buf).is_err());
        for n in 0..64 {
            fuzz_read_reply(&vec![0xff; n]);
        }
    }
}
