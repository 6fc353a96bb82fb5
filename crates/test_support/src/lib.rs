//! What the engines' crash tests share. A kill -9 test runs its own test
//! binary again as a child (one named test, told by an environment
//! variable where to write), reads the acknowledgements the child prints,
//! and kills it. Also incompressible test bytes ([`noise`]).

mod noise;

pub use noise::noise;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;

/// Starts this test binary again running only `test` (which must return at
/// once unless `env` is set), with `env` set to `dir`. Returns the child,
/// the lines of its standard output as they come, and the thread reading
/// them (it ends when the child's output closes).
pub fn spawn_child(test: &str, env: &str, dir: &Path) -> (Child, Receiver<String>, JoinHandle<()>) {
    let mut child = Command::new(std::env::current_exe().expect("current_exe"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(env, dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx, reader)
}
