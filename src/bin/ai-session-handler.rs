//! The runner binary: everything lives in the library; this only sets up failpoints (test
//! builds) and turns the command's result into the process exit code.

fn main() {
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    let code = ai_session_handler::cli::main();
    std::process::exit(code);
}
