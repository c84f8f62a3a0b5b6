//! The tables of docs/lifecycle-tables.md, each generated from its machine by the machine's
//! `the_published_table_is_the_machine` test, which fails when the published copy differs.
//! With `UPDATE_LIFECYCLE_TABLES` set, the test writes its table into the file instead.

use std::sync::Mutex;

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/lifecycle-tables.md");
const END: &str = "<!-- end of generated table -->";
const UPDATE: &str = "UPDATE_LIFECYCLE_TABLES";

/// Both tables live in one file: an update reads and writes it whole, one test at a time.
static WRITING: Mutex<()> = Mutex::new(());

/// Compares `table` with the one published under `<!-- generated table: {name} -->` (or
/// writes it there when [`UPDATE`] is set).
pub(crate) fn check(name: &str, table: &str) {
    let _writing = WRITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let docs = std::fs::read_to_string(FILE).expect("docs/lifecycle-tables.md is readable");
    let begin = format!("<!-- generated table: {name} -->\n");
    let start = docs
        .find(&begin)
        .unwrap_or_else(|| panic!("docs/lifecycle-tables.md has no line {begin:?}"))
        + begin.len();
    let end = start
        + docs[start..]
            .find(END)
            .unwrap_or_else(|| panic!("docs/lifecycle-tables.md does not end the {name} table"));
    if std::env::var_os(UPDATE).is_some() {
        let updated = format!("{}{table}{}", &docs[..start], &docs[end..]);
        std::fs::write(FILE, updated).expect("docs/lifecycle-tables.md is writable");
        return;
    }
    assert!(
        docs[start..end] == *table,
        "docs/lifecycle-tables.md, the {name} table, differs from the machine; rewrite it with \
         `{UPDATE}=1 cargo test --features failpoints --lib the_published_table_is_the_machine`. The machine's table:\n{table}"
    );
}
