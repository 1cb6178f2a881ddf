//! Credentials in the parent's environment never reach a child. A test
//! binary of its own: it sets variables on the whole test process.

use kernel_preflight::sandbox::{Cancel, ChildCommand, Limits, Sandbox, Termination, scrubbed_env};

#[test]
fn tokens_are_scrubbed_from_the_child_environment() {
    let secrets = [
        "HF_TOKEN",
        "GITHUB_TOKEN",
        "AWS_ACCESS_KEY_ID",
        "OPENAI_API_KEY",
        "MY_SECRET",
        "DB_PASSWORD",
    ];
    // SAFETY: the only test in this binary; nothing else reads the
    // environment concurrently.
    unsafe {
        for name in secrets {
            std::env::set_var(name, "do-not-leak");
        }
        std::env::set_var("PREFLIGHT_TEST_VISIBLE", "yes");
    }
    let names: Vec<_> = scrubbed_env().into_iter().map(|(n, _)| n).collect();
    assert!(names.iter().any(|n| n == "PREFLIGHT_TEST_VISIBLE"));

    let sandbox = Sandbox::new().expect("sandbox");
    let report = sandbox
        .run(
            &ChildCommand::new("env"),
            &Limits::default(),
            &Cancel::new(),
        )
        .expect("run env");
    assert_eq!(report.termination, Termination::Exited { code: 0 });
    let env = report.stdout.text();
    assert!(env.contains("PREFLIGHT_TEST_VISIBLE=yes"), "{env}");
    assert!(!env.contains("do-not-leak"), "{env}");
    for name in secrets {
        assert!(
            !env.contains(&format!("{name}=")),
            "{name} reached the child"
        );
    }
}
