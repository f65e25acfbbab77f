//! The pieces of git's diff format hg writes for binary files: blob ids, the base85
//! literal of empty content, and the SHA-1 they need.

/// Git blob id (`sha1("blob <len>\0" + data)`) in hex.
pub(super) fn git_blob_id(data: &[u8]) -> String {
    let mut msg = format!("blob {}\0", data.len()).into_bytes();
    msg.extend_from_slice(data);
    sha1(&msg).iter().map(|b| format!("{:02x}", b)).collect()
}

/// `mdiff.b85diff` for an empty new side: `zlib.compress(b"")` is constant.
pub(super) fn git_binary_literal_empty() -> Vec<u8> {
    const ZLIB_EMPTY: [u8; 8] = [0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01];
    let mut out = b"GIT binary patch\nliteral 0\n".to_vec();
    for chunk in ZLIB_EMPTY.chunks(52) {
        let len = chunk.len();
        out.push(if len <= 26 {
            b'A' + len as u8 - 1
        } else {
            b'a' + (len - 26) as u8 - 1
        });
        out.extend_from_slice(&b85encode_padded(chunk));
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

/// hg's base85 (git alphabet), input padded with zeros to 4 bytes.
fn b85encode_padded(data: &[u8]) -> Vec<u8> {
    const CHARS: &[u8; 85] =
        b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";
    let mut out = Vec::with_capacity(data.len().div_ceil(4) * 5);
    for chunk in data.chunks(4) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut w = u32::from_be_bytes(word);
        let mut enc = [0u8; 5];
        for slot in enc.iter_mut().rev() {
            *slot = CHARS[(w % 85) as usize];
            w /= 85;
        }
        out.extend_from_slice(&enc);
    }
    out
}

/// SHA-1 digest (only used for git `index` lines of binary diffs).
pub(super) fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (t, word) in block.chunks_exact(4).enumerate() {
            w[t] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for t in 16..80 {
            w[t] = (w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (t, &wt) in w.iter().enumerate() {
            let (f, k) = match t {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let tmp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(wt);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = tmp;
        }
        for (hv, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *hv = hv.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (i, v) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}
