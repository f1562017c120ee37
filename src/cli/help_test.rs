//! Every argument, flag and verb of the CLI says what it is for: a new one without help
//! text fails here (issue #15), not in a newcomer's terminal.

use clap::CommandFactory;

fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
    if cmd.get_about().is_none() && cmd.get_long_about().is_none() && path != "holon" {
        missing.push(format!("{path}: the verb has no help"));
    }
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        if arg.get_help().is_none() && arg.get_long_help().is_none() {
            missing.push(format!("{path} {id}"));
        }
    }
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        walk(sub, &format!("{path} {}", sub.get_name()), missing);
    }
}

/// Every verb that runs (no verbs below it) says its exit codes and shows examples.
#[test]
fn every_verb_has_exit_codes_and_examples() {
    fn leaves(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        let subs: Vec<_> = cmd.get_subcommands().filter(|s| s.get_name() != "help").collect();
        if subs.is_empty() {
            let after = cmd.get_after_help().map(ToString::to_string).unwrap_or_default();
            if !(after.contains("EXIT CODES:") && after.contains("EXAMPLES:\n  holon ")) {
                missing.push(path.to_owned());
            }
        }
        for sub in subs {
            leaves(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    leaves(&super::Cli::command(), "holon", &mut missing);
    assert!(missing.is_empty(), "without EXIT CODES and EXAMPLES in after_help: {missing:#?}");
}

#[test]
fn every_argument_and_verb_has_help_text() {
    let mut missing = Vec::new();
    walk(&super::Cli::command(), "holon", &mut missing);
    assert!(missing.is_empty(), "without help text (add a `///` line): {missing:#?}");
}
