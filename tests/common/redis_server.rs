//! A real `redis-server` for one test: its own process on a free loopback
//! port, its files in a scratch folder, stopped when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`, killed on drop.
pub struct RedisServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its working folder.
    pub dir: PathBuf,
}

impl RedisServer {
    /// Start one and wait until it answers. A machine without
    /// `redis-server` fails the test, never skips it.
    pub fn start() -> RedisServer {
        let dir = super::fresh_dir("redis");
        // A free port: bound by the system, released for the server.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): the remote-store tests need a real Redis; \
                     install it (Debian: apt-get install -y redis-server; .ci/run does)"
                )
            });
        let server = RedisServer { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.try_connection().is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not answer within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Its address.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn try_connection(&self) -> redis::RedisResult<redis::Connection> {
        let mut con = redis::Client::open(self.url())?
            .get_connection_with_timeout(Duration::from_millis(500))?;
        redis::cmd("PING").query::<String>(&mut con)?;
        Ok(con)
    }

    /// A connection for the test to look and meddle.
    pub fn connection(&self) -> redis::Connection {
        self.try_connection()
            .expect("connect to the test's redis-server")
    }

    /// Every key matching `pattern`, sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut self.connection())
            .expect("KEYS");
        keys.sort();
        keys
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        redis::cmd("GET")
            .arg(key)
            .query(&mut self.connection())
            .expect("GET")
    }

    /// Put `value` under `key`.
    pub fn set(&self, key: &str, value: &[u8]) {
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .exec(&mut self.connection())
            .expect("SET");
    }

    /// Stop the server (SIGSTOP): it accepts connections and answers
    /// nothing, as a server too busy to answer does.
    pub fn pause(&self) {
        signal(self.child.id(), "-STOP");
    }

    /// Let a paused server go on (SIGCONT).
    pub fn resume(&self) {
        signal(self.child.id(), "-CONT");
    }
}

fn signal(pid: u32, which: &str) {
    let status = Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {which} {pid}");
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        signal(self.child.id(), "-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
