//! The record framing the working copy's own files share (the journal, the change feed):
//! a record is its payload's length (u32 BE), the payload's crc32 (u32 BE), then the
//! payload. A reader stops at the first record that is cut short, too long or fails its
//! checksum: only the last one can be, written when the machine went down.

/// Appends `payload` to `buf` as one framed record.
pub(crate) fn frame(payload: &[u8], buf: &mut Vec<u8>) {
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(&crc32fast::hash(payload).to_be_bytes());
    buf.extend_from_slice(payload);
}

/// The payload of the record at `pos` in `bytes`, when it is whole, at most `max` bytes
/// long and passes its checksum; the record ends at `pos + 8 + payload.len()`.
pub(crate) fn payload_at(bytes: &[u8], pos: usize, max: usize) -> Option<&[u8]> {
    let head = bytes.get(pos..pos.checked_add(8)?)?;
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
    if len > max {
        return None;
    }
    let payload = bytes.get(pos + 8..pos + 8 + len)?;
    (crc32fast::hash(payload) == crc).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_record_reads_back_and_a_cut_or_flipped_one_does_not() {
        let mut buf = Vec::new();
        frame(b"first", &mut buf);
        frame(b"second", &mut buf);
        assert_eq!(payload_at(&buf, 0, 64), Some(&b"first"[..]));
        assert_eq!(payload_at(&buf, 13, 64), Some(&b"second"[..]));
        assert_eq!(payload_at(&buf, 13, 5), None, "longer than the bound");
        assert_eq!(payload_at(&buf[..buf.len() - 1], 13, 64), None, "cut short");
        let mut flipped = buf.clone();
        flipped[10] ^= 1;
        assert_eq!(payload_at(&flipped, 0, 64), None, "checksum");
        assert_eq!(payload_at(&buf, buf.len(), 64), None, "nothing there");
    }
}
