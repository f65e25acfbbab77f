//! One-shot zlib decompression of a whole stream held in memory (revlog chunks, pack
//! entries, blobs a server sent): the output is sized ahead from a hint and grown by
//! doubling, no reader or copy buffer sits between, and a bound on the output refuses a
//! stream that would inflate past it before it is all in memory.

/// Why a zlib stream did not decompress.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InflateError {
    #[error("zlib: {0}")]
    Corrupt(String),
    #[error("zlib: the stream is cut short")]
    Truncated,
    #[error("zlib: the stream inflates past {0} bytes")]
    TooLarge(usize),
}

/// The decompressed bytes of the zlib stream at the start of `input` (what follows its end
/// is ignored, as by a reader), expected to be about `hint` bytes and refused past `limit`.
pub fn inflate(input: &[u8], hint: usize, limit: usize) -> Result<Vec<u8>, InflateError> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    let mut out = Vec::with_capacity(hint.clamp(64, limit.saturating_add(1).max(64)));
    loop {
        let (seen, had) = (d.total_in(), out.len());
        let rest = usize::try_from(seen)
            .ok()
            .and_then(|n| input.get(n..))
            .unwrap_or(&[]);
        let status = d
            .decompress_vec(rest, &mut out, FlushDecompress::None)
            .map_err(|e| InflateError::Corrupt(e.to_string()))?;
        if out.len() > limit {
            return Err(InflateError::TooLarge(limit));
        }
        if status == Status::StreamEnd {
            return Ok(out);
        }
        if out.len() == out.capacity() {
            let more = out.len().max(4096).min(limit.saturating_add(1) - out.len());
            if more == 0 {
                return Err(InflateError::TooLarge(limit));
            }
            out.reserve_exact(more);
        } else if d.total_in() == seen && out.len() == had {
            return Err(InflateError::Truncated);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    #[test]
    fn a_stream_inflates_whatever_the_hint_and_a_cut_or_garbled_one_is_an_error() {
        for n in [0usize, 1, 100, 70_000, 1 << 20] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 % 13 + i / 1000) as u8).collect();
            let z = zlib(&data);
            for hint in [0, 10, n, 4 * n] {
                assert_eq!(
                    inflate(&z, hint, n).unwrap(),
                    data,
                    "{n} bytes, hint {hint}"
                );
            }
            let mut trailing = z.clone();
            trailing.extend_from_slice(b"after");
            assert_eq!(inflate(&trailing, 0, n).unwrap(), data);
            if n > 0 {
                assert_eq!(inflate(&z, n, n - 1), Err(InflateError::TooLarge(n - 1)));
            }
            assert_eq!(
                inflate(&z[..z.len() - 5], n, n),
                Err(InflateError::Truncated)
            );
        }
        assert!(matches!(
            inflate(b"\x78\x9c\xff\xff\xff", 10, 100),
            Err(InflateError::Corrupt(_))
        ));
        assert_eq!(inflate(b"", 10, 100), Err(InflateError::Truncated));
    }
}
