//! The R sandbox: agent R code runs in `Rscript` under bubblewrap with no
//! network (its own network namespace, empty but for loopback), a read-only
//! view of the system (`/usr` and the few files of `/etc` R needs), write
//! access to the run's workspace only (mounted at `/workspace`), a private
//! `/tmp`, and limits on CPU time and address space (`prlimit`) and on wall
//! time (the process is killed). The study database is mounted read-only at
//! `/data` (SQLite files) or reached through PostgreSQL's Unix socket
//! directory; the workspace holds `db_connect.R`, which opens a DBI
//! connection `con`, and the protocol's auxiliary files.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Where the workspace appears inside the sandbox.
pub const WORKSPACE_MOUNT: &str = "/workspace";
/// Where database files appear inside the sandbox.
pub const DATA_MOUNT: &str = "/data";
/// RWE-bench cuts every observation at this many characters (Table 4).
pub const MAX_OBSERVATION_CHARS: usize = 10_000;
/// The connection script every workspace holds.
pub const CONNECT_SCRIPT: &str = "db_connect.R";

/// The parts of `/etc` R and the dynamic linker read. Nothing else of
/// `/etc` is visible.
const ETC_ENTRIES: &[&str] = &[
    "/etc/R",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/fonts",
];

/// Limits and programs of the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub bwrap: PathBuf,
    pub prlimit: PathBuf,
    pub rscript: PathBuf,
    /// Killed after this long (RWE-bench allows 20 minutes per step).
    pub wall_time: Duration,
    /// RLIMIT_CPU.
    pub cpu_seconds: u64,
    /// RLIMIT_AS.
    pub memory_bytes: u64,
    /// Observations are cut to this many characters.
    pub max_observation_chars: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            prlimit: PathBuf::from("/usr/bin/prlimit"),
            rscript: PathBuf::from("/usr/bin/Rscript"),
            wall_time: Duration::from_secs(20 * 60),
            cpu_seconds: 20 * 60,
            memory_bytes: 4 << 30,
            max_observation_chars: MAX_OBSERVATION_CHARS,
        }
    }
}

/// How R reaches the study database.
#[derive(Debug, Clone, PartialEq)]
pub enum RDatabase {
    /// A SQLite main file and the schema files every connection attaches
    /// (`mimiciv_hosp`, ...), all mounted read-only.
    Sqlite { main: PathBuf, attach: Vec<(String, PathBuf)> },
    /// A PostgreSQL server, as the run's read-only role. The sandbox has
    /// no network: R connects to a Unix socket in the sandbox that Evident
    /// forwards to the server's TCP address (password authentication), and
    /// to nothing else.
    Postgres { host: String, port: u16, dbname: String, user: String, password: String },
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{program}: not found or not runnable ({source}); install it (scripts/setup installs bubblewrap and R)")]
    Missing { program: String, source: std::io::Error },
    #[error("workspace {path}: {source}")]
    Workspace { path: String, source: std::io::Error },
    #[error("{what} {path} must be an absolute path to an existing file or folder")]
    BadPath { what: &'static str, path: String },
}

/// The result of one R call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RRun {
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub elapsed_ms: u128,
}

impl RRun {
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// The observation an agent sees, cut to `max_chars` characters.
    pub fn observation(&self, max_chars: usize) -> String {
        let mut text = if self.timed_out {
            "The R code was stopped: it ran past the time limit.\n".to_string()
        } else if self.succeeded() {
            "The R code ran successfully.\n".to_string()
        } else {
            format!("The R code failed (exit status {:?}).\n", self.exit_code)
        };
        if !self.stdout.is_empty() {
            text.push_str("STDOUT:\n");
            text.push_str(&self.stdout);
        }
        if !self.stderr.is_empty() {
            text.push_str("\nSTDERR:\n");
            text.push_str(&self.stderr);
        }
        truncate_chars(&text, max_chars)
    }
}

/// Cuts `text` to at most `max_chars` characters, saying so at the end.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((cut, _)) => {
            let note = format!("\n[... cut at {max_chars} characters of {}]", text.chars().count());
            format!("{}{note}", &text[..cut])
        }
    }
}

/// A run's workspace: the only place its R code can write.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    database: RDatabase,
}

impl Workspace {
    /// Creates (or reuses) `root`, writes `db_connect.R` for `database` and
    /// copies the auxiliary files in.
    pub fn create(root: &Path, database: RDatabase, auxiliary: &[PathBuf]) -> Result<Workspace, SandboxError> {
        let io = |source| SandboxError::Workspace { path: root.display().to_string(), source };
        std::fs::create_dir_all(root).map_err(io)?;
        let root = root.canonicalize().map_err(io)?;
        let mut paths: Vec<&Path> = Vec::new();
        match &database {
            RDatabase::Sqlite { main, attach } => {
                paths.push(main);
                paths.extend(attach.iter().map(|(_, p)| p.as_path()));
            }
            RDatabase::Postgres { .. } => {}
        }
        if let Some(bad) = paths.iter().find(|p| !p.is_absolute() || !p.exists()) {
            return Err(SandboxError::BadPath { what: "database path", path: bad.display().to_string() });
        }
        std::fs::write(root.join(CONNECT_SCRIPT), connect_script(&database)).map_err(io)?;
        for file in auxiliary {
            let name = file
                .file_name()
                .ok_or(SandboxError::BadPath { what: "auxiliary file", path: file.display().to_string() })?;
            std::fs::copy(file, root.join(name)).map_err(io)?;
        }
        Ok(Workspace { root, database })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn database(&self) -> &RDatabase {
        &self.database
    }

    /// Writes `code` to `.evident/<name>.R` in the workspace and runs it.
    pub fn run_code(&self, config: &SandboxConfig, name: &str, code: &str) -> Result<RRun, SandboxError> {
        let io = |source| SandboxError::Workspace { path: self.root.display().to_string(), source };
        let dir = self.root.join(".evident");
        std::fs::create_dir_all(&dir).map_err(io)?;
        let file = dir.join(format!("{name}.R"));
        std::fs::write(&file, code).map_err(io)?;
        self.run_script(config, &format!(".evident/{name}.R"))
    }

    /// Runs a script of the workspace (a path relative to it).
    pub fn run_script(&self, config: &SandboxConfig, relative: &str) -> Result<RRun, SandboxError> {
        // For PostgreSQL, the one way out of the sandbox: a forwarded socket.
        let _forwarder = match &self.database {
            RDatabase::Postgres { host, port, .. } => {
                Some(SocketForwarder::start(&self.socket_dir(), *port, host).map_err(|source| {
                    SandboxError::Workspace { path: self.socket_dir().display().to_string(), source }
                })?)
            }
            RDatabase::Sqlite { .. } => None,
        };
        let mut cmd = self.command(config, relative);
        run_with_deadline(&mut cmd, config)
    }

    /// The folder of the forwarded PostgreSQL socket, beside the workspace.
    fn socket_dir(&self) -> PathBuf {
        let mut name = self.root.file_name().unwrap_or_default().to_os_string();
        name.push(".pg");
        self.root.with_file_name(name)
    }

    /// The full command line: prlimit, then bwrap, then Rscript.
    fn command(&self, config: &SandboxConfig, relative: &str) -> Command {
        let mut cmd = Command::new(&config.prlimit);
        cmd.arg(format!("--cpu={}", config.cpu_seconds)).arg(format!("--as={}", config.memory_bytes)).arg("--");
        cmd.arg(&config.bwrap);
        cmd.args(["--unshare-all", "--die-with-parent", "--new-session"]);
        cmd.args(["--ro-bind", "/usr", "/usr"]);
        for top in ["bin", "sbin", "lib", "lib32", "lib64"] {
            let host = Path::new("/").join(top);
            match std::fs::read_link(&host) {
                Ok(target) => {
                    cmd.arg("--symlink").arg(target).arg(&host);
                }
                Err(_) if host.is_dir() => {
                    cmd.arg("--ro-bind").arg(&host).arg(&host);
                }
                Err(_) => {}
            }
        }
        for entry in ETC_ENTRIES {
            cmd.args(["--ro-bind-try", entry, entry]);
        }
        cmd.args(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
        cmd.arg("--bind").arg(&self.root).arg(WORKSPACE_MOUNT);
        match &self.database {
            RDatabase::Sqlite { main, attach } => {
                for path in std::iter::once(main).chain(attach.iter().map(|(_, p)| p)) {
                    cmd.arg("--ro-bind").arg(path).arg(data_path(path));
                }
            }
            RDatabase::Postgres { .. } => {
                // Writable: connecting to a Unix socket needs write permission on it.
                cmd.arg("--bind").arg(self.socket_dir()).arg("/run/postgresql");
            }
        }
        // The root bwrap builds is a tmpfs: make it read-only once the mount
        // points exist, so only the workspace (and the private /tmp) take writes.
        cmd.args(["--remount-ro", "/"]);
        cmd.args(["--chdir", WORKSPACE_MOUNT, "--clearenv"]);
        for (k, v) in [
            ("HOME", WORKSPACE_MOUNT),
            ("TMPDIR", "/tmp"),
            ("PATH", "/usr/bin:/bin"),
            ("LANG", "C.UTF-8"),
            ("R_LIBS_USER", "/nonexistent"),
        ] {
            cmd.args(["--setenv", k, v]);
        }
        cmd.arg("--").arg(&config.rscript).args(["--vanilla", relative]);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }
}

/// Forwards connections on `DIR/.s.PGSQL.PORT` to `host:port` while alive.
struct SocketForwarder {
    path: PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl SocketForwarder {
    fn start(dir: &Path, port: u16, host: &str) -> std::io::Result<SocketForwarder> {
        use std::sync::atomic::{AtomicBool, Ordering};
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!(".s.PGSQL.{port}"));
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (flag, target) = (stop.clone(), format!("{host}:{port}"));
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let (Ok(inner), Ok(outer)) = (stream, std::net::TcpStream::connect(&target)) else { continue };
                let (Ok(mut inner_r), Ok(mut outer_w)) = (inner.try_clone(), outer.try_clone()) else { continue };
                let (mut outer_r, mut inner_w) = (outer, inner);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut inner_r, &mut outer_w);
                    let _ = outer_w.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut outer_r, &mut inner_w);
                    let _ = inner_w.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Ok(SocketForwarder { path, stop, accept: Some(accept) })
    }
}

impl Drop for SocketForwarder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = std::os::unix::net::UnixStream::connect(&self.path);
        if let Some(handle) = self.accept.take() {
            let _ = handle.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Where a database file appears inside the sandbox.
fn data_path(host: &Path) -> String {
    format!("{DATA_MOUNT}/{}", host.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())
}

fn r_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The R script that opens `con`, a read-only DBI connection.
pub fn connect_script(database: &RDatabase) -> String {
    let mut s = String::from(
        "# Opens `con`, a read-only DBI connection to the study database.\n\
         # Use it with: source(\"db_connect.R\"); dbGetQuery(con, \"SELECT ...\")\n\
         suppressPackageStartupMessages(library(DBI))\n",
    );
    match database {
        RDatabase::Sqlite { main, attach } => {
            s.push_str(&format!(
                "con <- dbConnect(RSQLite::SQLite(), {}, flags = RSQLite::SQLITE_RO)\n",
                r_string(&data_path(main))
            ));
            for (schema, path) in attach {
                s.push_str(&format!(
                    "invisible(dbExecute(con, {}))\n",
                    r_string(&format!("ATTACH DATABASE 'file:{}?mode=ro' AS {schema}", data_path(path)))
                ));
            }
            s.push_str("# Tables are named schema.table, e.g. mimiciv_hosp.patients.\n");
        }
        RDatabase::Postgres { port, dbname, user, password, .. } => {
            s.push_str(&format!(
                "con <- dbConnect(RPostgreSQL::PostgreSQL(), host = \"/run/postgresql\", port = {port}, dbname = {}, user = {}, password = {})\n",
                r_string(dbname),
                r_string(user),
                r_string(password)
            ));
            s.push_str("# Tables are named schema.table, e.g. mimiciv_hosp.patients.\n");
        }
    }
    s
}

/// Reads a pipe to its end on a thread, keeping at most `cap` bytes.
fn drain(mut pipe: impl Read + Send + 'static, cap: usize) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

fn run_with_deadline(cmd: &mut Command, config: &SandboxConfig) -> Result<RRun, SandboxError> {
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|source| SandboxError::Missing { program: config.prlimit.display().to_string(), source })?;
    // Keep more than an observation shows, so the cut note can say how much there was.
    let cap = config.max_observation_chars * 8 + 4096;
    let out = drain(child.stdout.take().expect("piped"), cap);
    let err = drain(child.stderr.take().expect("piped"), cap);
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() >= config.wall_time => {
                timed_out = true;
                // bwrap runs with --die-with-parent and its own PID namespace:
                // killing it takes everything inside with it.
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if let Some(status) = status {
        // prlimit or bwrap missing: prlimit reports failing to exec.
        if status.code() == Some(1) && stderr.starts_with("prlimit: failed to execute") {
            return Err(SandboxError::Missing {
                program: config.bwrap.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, stderr.trim().to_string()),
            });
        }
    }
    Ok(RRun {
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        stdout,
        stderr,
        elapsed_ms: start.elapsed().as_millis(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate_chars("abc", 3), "abc");
        let cut = truncate_chars("ééééé", 2);
        assert!(cut.starts_with("éé\n[... cut at 2 characters of 5]"), "{cut}");
    }

    #[test]
    fn connect_script_attaches_schemas_read_only() {
        let s = connect_script(&RDatabase::Sqlite {
            main: PathBuf::from("/x/mimic.sqlite"),
            attach: vec![("mimiciv_hosp".into(), PathBuf::from("/x/mimic.mimiciv_hosp.sqlite"))],
        });
        assert!(s.contains("dbConnect(RSQLite::SQLite(), \"/data/mimic.sqlite\", flags = RSQLite::SQLITE_RO)"), "{s}");
        assert!(s.contains("ATTACH DATABASE 'file:/data/mimic.mimiciv_hosp.sqlite?mode=ro' AS mimiciv_hosp"), "{s}");
        let p = connect_script(&RDatabase::Postgres {
            host: "127.0.0.1".into(),
            port: 5432,
            dbname: "mimic".into(),
            user: "rwe_run_1".into(),
            password: "p\"w".into(),
        });
        assert!(p.contains("host = \"/run/postgresql\", port = 5432, dbname = \"mimic\", user = \"rwe_run_1\", password = \"p\\\"w\""), "{p}");
    }
}
