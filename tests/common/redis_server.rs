//! A real `redis-server` for one test: its own process on a free loopback
//! port, its files in a scratch folder, stopped when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`, killed on drop.
pub struct RedisServer {
    child: Child,
    /// Its command line, to start it again ([`RedisServer::restart`]).
    args: Vec<std::ffi::OsString>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its working folder.
    pub dir: PathBuf,
    /// With TLS only ([`RedisServer::start_tls`]): the PEM of the
    /// certificate authority that signed its certificate.
    pub ca: Option<PathBuf>,
    /// The user and password its address carries (`user:password`), for a
    /// server started with `--requirepass` or ACL users.
    pub auth: Option<String>,
}

impl RedisServer {
    /// Start one and wait until it answers. A machine without
    /// `redis-server` fails the test, never skips it.
    pub fn start() -> RedisServer {
        RedisServer::started(false, &[])
    }

    /// [`RedisServer::start`] with more of redis-server's settings
    /// (`--requirepass`, `--appendonly yes`, …).
    pub fn start_with(settings: &[&str]) -> RedisServer {
        RedisServer::started(false, settings)
    }

    /// [`RedisServer::start`] speaking TLS only (`rediss://`), with a
    /// certificate for 127.0.0.1 signed by a certificate authority made
    /// for it (`openssl`), whose PEM is [`RedisServer::ca`].
    pub fn start_tls() -> RedisServer {
        RedisServer::started(true, &[])
    }

    fn started(tls: bool, settings: &[&str]) -> RedisServer {
        let dir = super::fresh_dir("redis");
        // A free port: bound by the system, released for the server.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut command = Command::new("redis-server");
        let ca = tls.then(|| {
            let ca = certificates(&dir);
            command
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .arg("--tls-cert-file")
                .arg(dir.join("server.crt"))
                .arg("--tls-key-file")
                .arg(dir.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(&ca)
                .args(["--tls-auth-clients", "no"]);
            ca
        });
        if !tls {
            command.args(["--port", &port.to_string()]);
        }
        command
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(settings);
        let args = command.get_args().map(ToOwned::to_owned).collect();
        let child = spawn(&mut command);
        let server = RedisServer {
            child,
            args,
            port,
            dir,
            ca,
            auth: None,
        };
        server.answering();
        server
    }

    /// Wait until it answers.
    fn answering(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        // A server that asks for a password is up.
        let up = |r: redis::RedisResult<redis::Connection>| match r {
            Ok(_) => true,
            Err(e) => e.code() == Some("NOAUTH"),
        };
        while !up(self.try_connection()) {
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer within 10 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill it (SIGKILL, as a crash or an OOM kill does) and start it again
    /// on the same port and folder after `down`; it keeps what it had
    /// written to its append-only file, if it was started with one.
    pub fn restart(&mut self, down: Duration) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(down);
        self.child = spawn(Command::new("redis-server").args(&self.args));
        self.answering();
    }

    /// Its address.
    pub fn url(&self) -> String {
        let scheme = if self.ca.is_some() { "rediss" } else { "redis" };
        let auth = self
            .auth
            .as_ref()
            .map_or(String::new(), |a| format!("{a}@"));
        format!("{scheme}://{auth}127.0.0.1:{}/0", self.port)
    }

    fn try_connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = match &self.ca {
            Some(ca) => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                redis::Client::build_with_tls(
                    self.url(),
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(std::fs::read(ca).expect("the test CA")),
                    },
                )?
            }
            None => redis::Client::open(self.url())?,
        };
        let mut con = client.get_connection_with_timeout(Duration::from_millis(500))?;
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

    /// Waits until some node holds a lease (a probe of its is under way),
    /// for at most `within`; `who` names the node in the panic.
    pub fn wait_for_a_lease(&self, within: Duration, who: &str) {
        let deadline = Instant::now() + within;
        while self.keys("preflight:lease-v2:*").is_empty() {
            assert!(Instant::now() < deadline, "{who} never took the lease");
            std::thread::sleep(Duration::from_millis(10));
        }
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

/// A certificate authority and a server certificate for 127.0.0.1 signed
/// by it, in `dir` (`ca.crt`, `server.crt`, `server.key`); the CA's path.
fn certificates(dir: &std::path::Path) -> PathBuf {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl makes the test's certificates");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=preflight test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("san.ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "1",
        "-extfile",
        "san.ext",
    ]);
    dir.join("ca.crt")
}

/// `command` (a redis-server) started, its output discarded.
fn spawn(command: &mut Command) -> Child {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start redis-server ({e}): the remote-store tests need a real Redis; \
                 install it (Debian: apt-get install -y redis-server; .ci/run does)"
            )
        })
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
