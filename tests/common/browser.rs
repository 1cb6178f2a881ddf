//! A real headless Chromium (Debian's `chromium`) for the pictures'
//! tests: pages are laid out as a person's browser lays them out, then a
//! script the test adds measures the boxes and writes what it found into
//! the page, which `--dump-dom` prints.
//!
//! A missing `chromium` fails the test, never skips it: `.ci/run`
//! installs it, as it installs `redis-server`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `chromium` on PATH, or a failed test that says how to get it.
pub fn chromium() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("chromium"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "chromium is missing: the pictures' tests render them in a real browser \
             (apt-get install chromium; .ci/run installs it)"
        )
    })
}

/// A headless browser command with the flags that work in a sandboxless
/// container with no network, and a profile of its own.
fn command(profile: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra);
    cmd
}

/// The DOM of `url` once loaded (and its scripts run), `width` px wide.
pub fn dump_dom(url: &str, width: u32, extra: &[&str]) -> String {
    let profile = super::fresh_dir("chromium");
    let out = command(&profile, extra)
        .arg(format!("--window-size={width},900"))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium --dump-dom {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A screenshot of `url` at `width` × `height` into `png`; its size as
/// the PNG says it.
pub fn screenshot(url: &str, width: u32, height: u32, png: &Path, extra: &[&str]) -> (u32, u32) {
    let profile = super::fresh_dir("chromium");
    let out = command(&profile, extra)
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium --screenshot {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(png).expect("the screenshot");
    assert_eq!(&bytes[1..4], b"PNG", "{} is not a PNG", png.display());
    // IHDR: width and height, big-endian, after the signature and the
    // chunk's length and type.
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// The text of the element `<pre id="{id}">` in a dumped DOM, unescaped.
pub fn found(dom: &str, id: &str) -> String {
    let open = format!("<pre id=\"{id}\">");
    let start = dom
        .find(&open)
        .unwrap_or_else(|| panic!("no #{id} in the page: its script did not run\n{dom}"))
        + open.len();
    let end = start + dom[start..].find("</pre>").expect("</pre>");
    dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// A `file://` URL of `path`.
pub fn url(path: &Path) -> String {
    format!("file://{}", path.display())
}
