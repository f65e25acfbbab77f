//! docs/USER_GUIDE.md, run as written (`revfs_tests::doc`): every ```sh block, in order,
//! in one shell; the outputs it shows checked.

use revfs_tests::doc;
use revfs_tests::workspace;

#[test]
fn the_user_guide_runs_as_written() {
    let guide = workspace().join("docs/USER_GUIDE.md");
    let markdown = std::fs::read_to_string(&guide).expect("docs/USER_GUIDE.md");
    let (steps, skipped) = doc::steps(&markdown);
    assert!(
        skipped >= 1,
        "the installation blocks are marked ```sh install"
    );
    assert!(steps.len() >= 10, "only {} steps", steps.len());
    let elapsed = doc::run("docs/USER_GUIDE.md", "guide", &steps, &["work", "other"]);
    assert!(
        elapsed < std::time::Duration::from_secs(60),
        "the guide took {elapsed:?}"
    );
}
