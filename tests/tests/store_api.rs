//! The store library on the fixture repositories: sizes from the index, copy sources,
//! manifest lookups and node lookups agree with the full texts and with hg.

use revfs_store::{Node, Repo, Rev};
use revfs_tests::fixtures;
use revfs_tests::hg::HgServer;

#[test]
fn sizes_from_the_index_equal_the_content_lengths() {
    for name in ["history", "history-legacy"] {
        let repo = Repo::open(&fixtures().join(name)).unwrap();
        let mut checked = 0;
        for rev in 0..repo.changelog().len() as Rev {
            let manifest = repo.manifest_of(rev).unwrap();
            for entry in manifest.iter() {
                let entry = entry.unwrap();
                let filelog = repo.filelog(entry.path).unwrap();
                let frev = filelog.rev_of(&entry.node).unwrap();
                let size = filelog.size(frev).unwrap();
                let text = filelog.read(frev).unwrap();
                assert_eq!(
                    size,
                    text.len() as u64,
                    "{name}@{rev} {}",
                    String::from_utf8_lossy(entry.path)
                );
                checked += 1;
            }
        }
        assert!(
            checked > 10_000,
            "{name}: only {checked} file revisions checked"
        );
    }
}

#[test]
fn copy_sources_match_hg() {
    let root = fixtures().join("history");
    let repo = Repo::open(&root).unwrap();
    let mut hg = HgServer::start(&root);
    let tip = repo.changelog().tip();
    // hg's view: every file of every revision with its copy source, for revisions whose
    // filelog entry was created there.
    let out = hg.run(&[
        "log",
        "-r",
        "all()",
        "-T",
        "{rev}\\n{file_copies % '{name}\\0{source}\\n'}",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut expected = Vec::new();
    let mut current: Rev = -1;
    for line in text.lines() {
        match line.split_once('\0') {
            None => current = line.parse().unwrap(),
            Some((name, source)) => expected.push((current, name.to_owned(), source.to_owned())),
        }
    }
    assert!(
        expected.len() >= 20,
        "fixture has too few copies: {}",
        expected.len()
    );
    for (rev, name, source) in &expected {
        let manifest = repo.manifest_of(*rev).unwrap();
        let entry = manifest.find(name.as_bytes()).unwrap().unwrap();
        let filelog = repo.filelog(name.as_bytes()).unwrap();
        let copy = filelog
            .copy_source(filelog.rev_of(&entry.node).unwrap())
            .unwrap();
        let copy = copy.unwrap_or_else(|| panic!("r{rev} {name}: no copy source"));
        assert_eq!(
            String::from_utf8_lossy(&copy.path),
            *source,
            "r{rev} {name}"
        );
    }
    assert!(tip > 200);
}

#[test]
fn node_prefixes_resolve_or_report_ambiguity() {
    let repo = Repo::open(&fixtures().join("history")).unwrap();
    let cl = repo.changelog();
    for rev in [0, 17, cl.tip()] {
        let node = cl.node(rev).unwrap();
        assert_eq!(cl.rev_of(&node), Some(rev));
        assert_eq!(
            cl.rev_of_hex_prefix(&node.to_hex()[..12]).unwrap(),
            Some(rev)
        );
    }
    // With 244 changesets every one-digit prefix but 'f' is shared by several nodes.
    let err = cl.rev_of_hex_prefix("a").unwrap_err();
    assert!(err.to_string().contains("ambiguous"), "{err}");
    assert_eq!(cl.rev_of(&Node([0xab; 20])), None);
    assert_eq!(cl.rev_of_hex_prefix("zz").unwrap(), None);
}

#[test]
fn open_filelogs_stay_within_their_byte_budget_and_their_count() {
    let name = "history";
    let paths: Vec<Vec<u8>> = {
        let repo = Repo::open(&fixtures().join(name)).unwrap();
        let tip = repo.changelog().len() as Rev - 1;
        let manifest = repo.manifest_of(tip).unwrap();
        let paths = manifest.iter().map(|e| e.unwrap().path.to_vec()).collect();
        paths
    };
    assert!(paths.len() > 4, "{} files", paths.len());
    let open = |open_filelogs: usize, filelog_cache_bytes: usize| {
        let options = revfs_store::repo::RepoOptions {
            open_filelogs,
            filelog_cache_bytes,
            ..revfs_store::repo::RepoOptions::DEFAULT
        };
        let repo = Repo::open_with(&fixtures().join(name), options).unwrap();
        let mut most = 0;
        for p in &paths {
            repo.filelog(p).unwrap();
            most = most.max(repo.open_filelogs().1);
        }
        (repo.open_filelogs(), most)
    };
    // Within every limit, all stay open.
    let ((count, bytes), _) = open(1024, 16 << 20);
    assert_eq!(count, paths.len());
    let each = bytes / count;
    // A budget of about two filelogs' bytes keeps a few, and never holds more than it
    // (but for a single filelog bigger than the whole budget).
    let budget = 2 * each + each / 2;
    let ((count, bytes), most) = open(1024, budget);
    assert!(
        count < paths.len() && count >= 1,
        "{count} open, {bytes} bytes"
    );
    assert!(most <= budget.max(8 * each), "{most} bytes at most");
    assert!(bytes <= budget || count == 1, "{count} open, {bytes} bytes");
    // A count limit holds whatever the budget.
    assert_eq!(open(3, 16 << 20).0 .0, 3);
    // The one just opened stays, even past the budget.
    assert_eq!(open(1024, 0).0 .0, 1);
}
