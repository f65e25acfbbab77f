//! Resolving what users type for `-r`: revision numbers (negative too), `tip`, `null`, `.`,
//! full and abbreviated hex nodes, bookmarks, tags and branch names, and `A:B` ranges.

use crate::dirstate;
use crate::error::{Result, StoreError};
use crate::names;
use crate::node::{Node, Rev, NULL_REV};
use crate::repo::Repo;

/// The working-directory parent: `.hg/dirstate`'s first parent when there is a dirstate,
/// else tip.
pub fn working_parent(repo: &Repo) -> Result<Rev> {
    match dirstate::parents(repo)? {
        Some([p1, _]) => repo
            .changelog()
            .rev_of(&p1)
            .ok_or_else(|| StoreError::UnknownRevision(p1.to_hex())),
        None => Ok(repo.changelog().tip()),
    }
}

/// Where `.` points: the repository's dirstate, or a given node (a revfs mount's parent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope {
    pub working_parent: Option<Node>,
}

/// Resolves one revision symbol, in hg's order: special names, a revision number, a full
/// node, bookmarks, tags, branches, then a unique node prefix.
pub fn resolve_symbol(repo: &Repo, symbol: &str) -> Result<Rev> {
    resolve_symbol_in(repo, symbol, Scope::default())
}

fn resolve_symbol_in(repo: &Repo, symbol: &str, scope: Scope) -> Result<Rev> {
    let cl = repo.changelog();
    match symbol {
        "null" => return Ok(NULL_REV),
        "tip" => return Ok(cl.tip()),
        "." => {
            return match scope.working_parent {
                Some(node) => cl
                    .rev_of(&node)
                    .ok_or_else(|| StoreError::UnknownRevision(node.to_hex())),
                None => working_parent(repo),
            }
        }
        "" => return Err(StoreError::UnknownRevision(symbol.to_owned())),
        _ => {}
    }
    if let Ok(n) = symbol.parse::<i64>() {
        let canonical = n.to_string() == symbol;
        let len = cl.len() as i64;
        // hg counts negative numbers back from tip (-1 is tip); null is not one of them.
        let rev = if n < 0 { len + n } else { n };
        if canonical && (0..len).contains(&rev) {
            return Ok(rev as Rev);
        }
    }
    if symbol.len() == 40 {
        if let Some(rev) = cl.rev_of_hex_prefix(symbol)? {
            return Ok(rev);
        }
    }
    let name = symbol.as_bytes();
    if let Some(&rev) = names::bookmarks(repo)?.get(name) {
        return Ok(rev);
    }
    if let Some(&rev) = names::tags(repo)?.get(name) {
        return Ok(rev);
    }
    if let Some(rev) = names::branch_tip(repo, name)? {
        return Ok(rev);
    }
    if let Some(rev) = cl.rev_of_hex_prefix(symbol)? {
        return Ok(rev);
    }
    Err(StoreError::UnknownRevision(symbol.to_owned()))
}

/// Resolves a revision argument to the revisions it names, in order: a symbol, a range
/// `A:B` (either end may be left out: `:B` starts at 0, `A:` ends at tip; a range may go
/// down), or a difference `A-B` of those. A name that exists as written wins over operators
/// (tags may contain `:` or `-`), as in hg.
pub fn resolve(repo: &Repo, spec: &str) -> Result<Vec<Rev>> {
    resolve_in(repo, spec, Scope::default())
}

/// [`resolve`] with `.` taken from `scope`. An expression of hg's revset language beyond
/// these (functions, `::`, `^`, `~`, `and`...) is refused as such, never taken for an
/// unknown name.
pub fn resolve_in(repo: &Repo, spec: &str, scope: Scope) -> Result<Vec<Rev>> {
    match resolve_simple(repo, spec, scope) {
        Err(StoreError::UnknownRevision(_)) if is_revset_expression(spec) => {
            Err(StoreError::UnsupportedRevset(spec.to_owned()))
        }
        other => other,
    }
}

/// Whether `spec` uses revset syntax revfs does not read.
fn is_revset_expression(spec: &str) -> bool {
    spec.trim()
        .contains(|c: char| "()!&|+~^%\"',".contains(c) || c.is_whitespace())
        || spec.contains("::")
        || spec.contains("..")
}

fn resolve_simple(repo: &Repo, spec: &str, scope: Scope) -> Result<Vec<Rev>> {
    let spec = spec.trim();
    if let Ok(rev) = resolve_symbol_in(repo, spec, scope) {
        return Ok(vec![rev]);
    }
    if spec.len() > 1 && spec[1..].contains('-') {
        let mut parts = spec.split('-');
        let first = parts.next().unwrap_or_default();
        let mut revs = resolve_range(repo, first, scope)?;
        for part in parts {
            let removed = resolve_range(repo, part, scope)?;
            revs.retain(|r| !removed.contains(r));
        }
        return Ok(revs);
    }
    resolve_range(repo, spec, scope)
}

fn resolve_range(repo: &Repo, spec: &str, scope: Scope) -> Result<Vec<Rev>> {
    let spec = spec.trim();
    if let Ok(rev) = resolve_symbol_in(repo, spec, scope) {
        return Ok(vec![rev]);
    }
    if let Some((a, b)) = spec.split_once(':').filter(|(_, b)| !b.starts_with(':')) {
        let start = if a.is_empty() {
            0
        } else {
            resolve_symbol(repo, a.trim())?
        };
        let end = if b.is_empty() {
            repo.changelog().tip()
        } else {
            resolve_symbol(repo, b.trim())?
        };
        return Ok(if start <= end {
            (start..=end).collect()
        } else {
            (end..=start).rev().collect()
        });
    }
    resolve_symbol_in(repo, spec, scope).map(|r| vec![r])
}
