//! `init`: creates `.ai-session-handler/config.json` (an example config) and the shared
//! `.ai-session-handler/plans/` directory in the current directory. An existing config is
//! never overwritten.

use std::io::Write;
use std::path::Path;

use crate::domain::config::EXAMPLE_CONFIG;
use crate::platform::durable;
use crate::platform::locate::{HANDLER_DIR, os_message};
use crate::report::Output;

use super::EXIT_INVALID;

pub fn run() -> i32 {
    match init_here() {
        Ok(output) => {
            output.print();
            0
        }
        Err(message) => {
            Output::error(message).print();
            EXIT_INVALID
        }
    }
}

fn init_here() -> Result<Output, String> {
    let cwd = std::env::current_dir()
        .map_err(|error| format!("cannot read the current directory: {}", os_message(&error)))?;
    let handler_dir = cwd.join(HANDLER_DIR);
    let config_path = handler_dir.join("config.json");
    let plans_dir = handler_dir.join("plans");
    // Everything that can refuse is checked before anything is created. `symlink_metadata`
    // also sees a dangling symlink where the config would go.
    if config_path.symlink_metadata().is_ok() {
        return Err(format!(
            "{}: config already exists; edit it or remove it first",
            config_path.display()
        ));
    }
    for dir in [&handler_dir, &plans_dir] {
        if dir.exists() && !dir.is_dir() {
            return Err(format!(
                "{}: exists but is not a directory; move it aside first",
                dir.display()
            ));
        }
    }
    durable::create_dir_all_durably(&plans_dir).map_err(|error| error.to_string())?;
    write_config(&config_path)?;
    let mut output = Output::default();
    output
        .stdout
        .push(format!("created {}", config_path.display()));
    output
        .stdout
        .push(format!("created {}", plans_dir.display()));
    Ok(output)
}

fn write_config(path: &Path) -> Result<(), String> {
    let mut file = durable::create_new(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            format!(
                "{}: config already exists; edit it or remove it first",
                path.display()
            )
        } else {
            error.to_string()
        }
    })?;
    file.write_all(EXAMPLE_CONFIG.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("{}: {error}", path.display()))
}
