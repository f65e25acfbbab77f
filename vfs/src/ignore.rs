//! Placeholder: the .hgignore matcher arrives in its own change.
pub trait FileSource {
    fn read(&self, path: &[u8]) -> Option<Vec<u8>>;
}
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct IgnoreError(String);
pub struct Ignore;
impl Ignore {
    pub fn load(_src: &dyn FileSource) -> Result<Ignore, IgnoreError> {
        Ok(Ignore)
    }
    pub fn empty() -> Ignore {
        Ignore
    }
    pub fn is_ignored(&self, _path: &[u8]) -> bool {
        false
    }
}
