//! placeholder until the helper lands
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathEncoding { Fncache { dotencode: bool }, Store, Plain }
pub fn encode_store_path(path: &[u8], _enc: PathEncoding) -> Vec<u8> { path.to_vec() }
pub fn encode_dir(path: &[u8]) -> Vec<u8> { path.to_vec() }
