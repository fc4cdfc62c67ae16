//! A program's own flag falls back on its environment variable. Alone in its test binary: it
//! sets a process environment variable, which no other thread may read meanwhile.

use harmony::domain::{Inventory, RunContext, Score};
use harmony::infra::render::RenderTopology;
use harmony_cli::{Console, run_program_with};
use std::sync::{Arc, Mutex};

/// The program's own flags in this test.
#[derive(Debug, Clone, clap::Args)]
struct Own {
    /// A flag with an environment fallback.
    #[arg(long, env = "HARMONY_CLI_TEST_SHOP_REPLICAS", default_value_t = 2)]
    replicas: u32,
}

async fn replicas(args: &[&str]) -> u32 {
    let sink = Arc::new(Mutex::new(Vec::<u8>::new()));
    let console = Console {
        interactive: false,
        out: sink.clone(),
        err: sink,
    };
    let seen = Arc::new(Mutex::new(0));
    let record = seen.clone();
    let argv = std::iter::once("shop").chain(args.iter().copied());
    let code = run_program_with(
        argv,
        console,
        Inventory::empty(),
        move |own: Own, _: &RunContext| {
            *record.lock().unwrap() = own.replicas;
            Err::<(RenderTopology, Vec<Box<dyn Score<RenderTopology>>>), _>("stopped by the test")
        },
    )
    .await;
    assert_eq!(code, 2);
    *seen.lock().unwrap()
}

#[test]
fn the_environment_is_the_fallback_and_the_flag_wins() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(replicas(&[])), 2, "the default");
    // SAFETY: this test binary has this one test and a current-thread runtime: no other thread
    // reads the environment while it changes.
    unsafe { std::env::set_var("HARMONY_CLI_TEST_SHOP_REPLICAS", "7") };
    assert_eq!(rt.block_on(replicas(&[])), 7, "from the environment");
    assert_eq!(
        rt.block_on(replicas(&["--replicas", "3"])),
        3,
        "the flag wins"
    );
    // SAFETY: as above, no other thread reads the environment.
    unsafe { std::env::remove_var("HARMONY_CLI_TEST_SHOP_REPLICAS") };
}
