//! A direct box's files: paths confined to the box, regular files only, no link followed,
//! a named pipe never waited on.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use boxfleet_actors::ports::{BoxError, MAX_FILE_BYTES, TailRead};

use super::host_io::{blocking, io_failed};

/// What a file type is, in words, for a refusal.
pub(crate) fn describe(file_type: fs::FileType) -> &'static str {
    if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a named pipe"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

fn failed(what: &str, path: &str, error: &io::Error) -> BoxError {
    BoxError::Failed(format!("{what} {path}: {error}"))
}

/// Lexically normalises `path` (no `.`, no `..`), refusing one that climbs above `/`.
pub(crate) fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::Normal(part) => out.push(part),
            Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Where a box keeps what it is asked about.
#[derive(Debug, Clone)]
pub(crate) struct BoxPaths {
    /// the box directory: `{data_dir}/boxes/{id}`
    pub root: PathBuf,
    /// the agent's home: `{root}/home`
    pub home: PathBuf,
}

impl BoxPaths {
    /// Resolves a path a caller names, lexically: relative (or `~/…`) is under the home;
    /// absolute must lie inside `within` (the box for a read, the home for a write). The box
    /// directory and the home themselves are refused. A link below the box directory is
    /// refused when the path is opened.
    pub fn resolve(&self, path: &str, write: bool) -> Result<PathBuf, BoxError> {
        let refuse = |why: &str| BoxError::Failed(format!("refused path {path:?}: {why}"));
        if path.is_empty() || path.contains('\0') {
            return Err(refuse("empty or holds a NUL"));
        }
        let joined = if let Some(rest) = path.strip_prefix("~/") {
            self.home.join(rest)
        } else if path.starts_with('~') {
            return Err(refuse("names another account's home"));
        } else if Path::new(path).is_absolute() {
            PathBuf::from(path)
        } else {
            self.home.join(path)
        };
        let resolved = normalise(&joined).ok_or_else(|| refuse("climbs out of the box"))?;
        let within = if write || !Path::new(path).is_absolute() {
            &self.home
        } else {
            &self.root
        };
        if !resolved.starts_with(within)
            || resolved == *within
            || resolved == self.root
            || resolved == self.home
        {
            return Err(refuse(if write {
                "lies outside the box's home"
            } else {
                "lies outside the box"
            }));
        }
        // links are met when the path is opened: every open walks down from the box's own
        // directory and follows none (see `dir_beneath`)
        Ok(resolved)
    }
}

/// What the orphan reaper reads of a box's record; a direct box's and a container box's
/// records both carry these fields.
#[derive(serde::Deserialize)]
struct Touched {
    paused: bool,
    keepalive_at: chrono::DateTime<chrono::Utc>,
    timeout_seconds: u64,
}

/// The boxes under `boxes` that nothing has touched for their whole timeout and that are not
/// paused (a paused box is a run parked on a person, left to its pause TTL): each id with how
/// many seconds it has been idle. Whether anything still runs in one is the backend's question.
/// A box whose record cannot be read is left alone.
pub(crate) async fn untouched_boxes(boxes: PathBuf, valid: fn(&str) -> bool) -> Vec<(String, i64)> {
    let listed = blocking("list boxes", move || {
        let entries = match fs::read_dir(&boxes) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_failed("list the boxes", &e)),
        };
        let now = chrono::Utc::now();
        Ok(entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let id = entry
                    .file_name()
                    .into_string()
                    .ok()
                    .filter(|id| valid(id))?;
                let records = entry.path().join("records");
                let path = records.join("box.json");
                let bytes = read_whole(&records, &path, &path.display().to_string()).ok()??;
                let touched: Touched = serde_json::from_slice(&bytes).ok()?;
                let idle = (now - touched.keepalive_at).num_seconds();
                (!touched.paused && idle >= touched.timeout_seconds as i64).then_some((id, idle))
            })
            .collect())
    })
    .await;
    listed.unwrap_or_else(|error| {
        tracing::warn!(%error, "local_sandbox_reap_skipped");
        Vec::new()
    })
}

/// The async operations on a box directory that a direct box and a container box (whose home
/// is bind-mounted) share: whether it is there, its record (`records/box.json`), and whole-file
/// and ranged reads and writes of paths already resolved with [`BoxPaths::resolve`].
impl BoxPaths {
    /// `{root}/records`: the engine's side of the box.
    pub fn records(&self) -> PathBuf {
        self.root.join("records")
    }

    /// Makes a new box's directories under `boxes` — the box, its `home/` and `records/`
    /// (both 0700) and the home's usual dot-directories — and writes the box's environment
    /// to `records/{env_file}` (0600). A box directory already there is an error.
    pub async fn lay_out(
        &self,
        boxes: PathBuf,
        env_file: &'static str,
        env: Vec<u8>,
    ) -> Result<(), BoxError> {
        let (root, home, records) = (self.root.clone(), self.home.clone(), self.records());
        blocking("create box", move || {
            fs::create_dir_all(&boxes).map_err(|e| io_failed("create the boxes directory", &e))?;
            fs::create_dir(&root).map_err(|e| io_failed("create the box directory", &e))?;
            for dir in [&home, &records] {
                fs::create_dir(dir).map_err(|e| io_failed("create the box directory", &e))?;
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| io_failed("set the box directory's mode", &e))?;
            }
            for sub in [".tmp", ".cache", ".config", ".local/share", ".local/state"] {
                fs::create_dir_all(home.join(sub))
                    .map_err(|e| io_failed("create the box's home", &e))?;
            }
            write_atomic(&records.join(env_file), &env, 0o600)
                .map_err(|e| io_failed(&format!("write the box's records/{env_file}"), &e))
        })
        .await
    }

    pub async fn present(&self) -> Result<bool, BoxError> {
        let root = self.root.clone();
        blocking("inspect box", move || match fs::symlink_metadata(&root) {
            Ok(meta) if meta.file_type().is_dir() => Ok(true),
            Ok(_) => Err(BoxError::Failed(format!(
                "{} is not a directory",
                root.display()
            ))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_failed("inspect the box", &e)),
        })
        .await
    }

    /// `Gone` (naming box `id`) when the box directory is not there.
    pub async fn ensure_present(&self, id: &str) -> Result<(), BoxError> {
        if self.present().await? {
            Ok(())
        } else {
            Err(BoxError::Gone(id.to_owned()))
        }
    }

    /// The box's record, `records/box.json`.
    pub async fn read_record<R: serde::de::DeserializeOwned>(
        &self,
        id: &str,
    ) -> Result<R, BoxError> {
        let Some(bytes) = self.read_records_file(id, "box.json").await? else {
            return Err(BoxError::Failed(format!(
                "box {id} has no records/box.json"
            )));
        };
        serde_json::from_slice(&bytes)
            .map_err(|e| BoxError::Failed(format!("box {id}'s records/box.json: {e}")))
    }

    /// Replaces the box's record atomically (mode 0600).
    pub async fn write_record<R: serde::Serialize>(&self, record: &R) -> Result<(), BoxError> {
        let bytes =
            serde_json::to_vec_pretty(record).map_err(|e| BoxError::Failed(e.to_string()))?;
        self.write_records_file("box.json", bytes).await
    }

    /// A file of the box's records (`records/{name}`), read only if it is a regular file where
    /// it lies; `None` when there is none.
    pub async fn read_records_file(
        &self,
        id: &str,
        name: &'static str,
    ) -> Result<Option<Vec<u8>>, BoxError> {
        self.ensure_present(id).await?;
        let records = self.records();
        let path = records.join(name);
        let shown = path.display().to_string();
        blocking("read box records", move || {
            read_whole(&records, &path, &shown)
        })
        .await
    }

    /// Replaces a file of the box's records atomically (mode 0600).
    pub async fn write_records_file(
        &self,
        name: &'static str,
        bytes: Vec<u8>,
    ) -> Result<(), BoxError> {
        let path = self.records().join(name);
        blocking("write box records", move || {
            write_atomic(&path, &bytes, 0o600)
                .map_err(|e| io_failed(&format!("write records/{name}"), &e))
        })
        .await
    }

    /// Writes a whole file at `file` (resolved for writing; `shown` is the caller's path),
    /// making its directories inside the home.
    pub async fn write_file(
        &self,
        file: PathBuf,
        shown: &str,
        bytes: &[u8],
    ) -> Result<(), BoxError> {
        let (home, shown, bytes) = (self.home.clone(), shown.to_owned(), bytes.to_vec());
        blocking("write file", move || {
            write_whole(&home, &file, &shown, &bytes, 0o644)
        })
        .await
    }

    /// Reads a whole regular file at `file` (resolved for reading).
    pub async fn read_file(
        &self,
        id: &str,
        file: PathBuf,
        shown: &str,
    ) -> Result<Option<Vec<u8>>, BoxError> {
        self.ensure_present(id).await?;
        let (root, shown) = (self.root.clone(), shown.to_owned());
        blocking("read file", move || read_whole(&root, &file, &shown)).await
    }

    /// Reads a stream at `file` (resolved for reading) from `offset`, at most `max` bytes.
    pub async fn read_tail(
        &self,
        id: &str,
        file: PathBuf,
        shown: &str,
        offset: u64,
        max: u64,
    ) -> Result<TailRead, BoxError> {
        self.ensure_present(id).await?;
        let (root, shown) = (self.root.clone(), shown.to_owned());
        blocking("read file tail", move || {
            read_tail(&root, &file, &shown, offset, max)
        })
        .await
    }
}

/// The directory below `base` that `rel` names, walked one component at a time from `base`'s
/// own descriptor: each step opens the next directory relative to the one before with
/// `O_NOFOLLOW | O_DIRECTORY`, so no link is followed anywhere below `base` and a directory
/// swapped for a link between two steps is refused, not crossed — the guarantee `openat2`'s
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` gives, on every kernel. `rel` is already lexically
/// normal (no `..`). With `create`, a missing directory is made (0755); without it, `Ok(None)`.
fn dir_beneath(
    base: &Path,
    rel: &Path,
    create: bool,
    shown: &str,
) -> Result<Option<OwnedFd>, BoxError> {
    let dir_flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let mut dir = rfs::open(base, dir_flags, Mode::empty())
        .map_err(|e| failed("cannot open", &base.display().to_string(), &e.into()))?;
    let mut at = base.to_path_buf();
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Err(BoxError::Failed(format!(
                "refused path {shown:?}: {} is not a plain name",
                part.as_os_str().to_string_lossy()
            )));
        };
        at.push(name);
        let next = match rfs::openat(&dir, name, dir_flags, Mode::empty()) {
            Err(Errno::NOENT) if create => match rfs::mkdirat(&dir, name, Mode::from(0o755)) {
                // made meanwhile by somebody else: opened, and so checked, below
                Ok(()) | Err(Errno::EXIST) => rfs::openat(&dir, name, dir_flags, Mode::empty()),
                Err(error) => {
                    return Err(failed("cannot create directory for", shown, &error.into()));
                }
            },
            other => other,
        };
        dir = match next {
            Ok(next) => next,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::NOTDIR | Errno::LOOP) => {
                return Err(BoxError::NotRegular {
                    path: shown.to_owned(),
                    what: format!("under {}, which is {}", at.display(), kind_at(&dir, name)),
                });
            }
            Err(error) => {
                return Err(failed(
                    "cannot open",
                    &at.display().to_string(),
                    &error.into(),
                ));
            }
        };
    }
    Ok(Some(dir))
}

/// What `name` in `dir` is, in words, without following it.
fn kind_at(dir: &OwnedFd, name: &OsStr) -> &'static str {
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => match rfs::FileType::from_raw_mode(stat.st_mode) {
            rfs::FileType::Symlink => "a symbolic link",
            rfs::FileType::Directory => "a directory",
            rfs::FileType::Fifo => "a named pipe",
            rfs::FileType::Socket => "a socket",
            rfs::FileType::BlockDevice => "a block device",
            rfs::FileType::CharacterDevice => "a character device",
            rfs::FileType::RegularFile => "a regular file",
            rfs::FileType::Unknown => "not a regular file",
        },
        Err(_) => "not a regular file",
    }
}

/// `file`'s directory below `base` and its own name; `file` must lie strictly below `base`.
fn split_beneath<'a>(
    base: &Path,
    file: &'a Path,
    shown: &str,
) -> Result<(&'a Path, &'a OsStr), BoxError> {
    let outside = || BoxError::Failed(format!("refused path {shown:?}: lies outside the box"));
    let rel = file.strip_prefix(base).map_err(|_| outside())?;
    let name = rel.file_name().ok_or_else(outside)?;
    Ok((rel.parent().unwrap_or(Path::new("")), name))
}

/// Opens `name` in `dir` with `flags`, never following a link and never waiting on a named
/// pipe, and checks that what it opened is a regular file. `Ok(None)` when nothing is there.
fn open_at(
    dir: &OwnedFd,
    name: &OsStr,
    flags: OFlags,
    mode: u32,
    shown: &str,
) -> Result<Option<File>, BoxError> {
    let not_regular = |what: &str| BoxError::NotRegular {
        path: shown.to_owned(),
        what: what.to_owned(),
    };
    let flags = flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let handle = match rfs::openat(dir, name, flags, Mode::from(mode)) {
        Ok(handle) => File::from(handle),
        Err(Errno::NOENT) => return Ok(None),
        // a link (ELOOP), a named pipe with no reader or a socket (ENXIO), a directory
        Err(Errno::LOOP | Errno::NXIO | Errno::ISDIR) => {
            return Err(not_regular(kind_at(dir, name)));
        }
        Err(error) => return Err(failed("cannot open", shown, &error.into())),
    };
    let meta = handle
        .metadata()
        .map_err(|error| failed("cannot inspect", shown, &error))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(describe(meta.file_type())));
    }
    Ok(Some(handle))
}

/// Opens `file` (below `base`) for reading only if it is a regular file where it lies: no link
/// followed anywhere below `base`, never blocking on a named pipe. `Ok(None)` only when nothing
/// is there.
pub(crate) fn open_regular(
    base: &Path,
    file: &Path,
    shown: &str,
) -> Result<Option<(File, u64)>, BoxError> {
    let (rel, name) = split_beneath(base, file, shown)?;
    let Some(dir) = dir_beneath(base, rel, false, shown)? else {
        return Ok(None);
    };
    let Some(handle) = open_at(&dir, name, OFlags::RDONLY, 0, shown)? else {
        return Ok(None);
    };
    let len = handle
        .metadata()
        .map_err(|error| failed("cannot inspect", shown, &error))?
        .len();
    Ok(Some((handle, len)))
}

/// Reads a whole regular file below `base`, refused past [`MAX_FILE_BYTES`] (never clipped).
pub(crate) fn read_whole(
    base: &Path,
    file: &Path,
    shown: &str,
) -> Result<Option<Vec<u8>>, BoxError> {
    let Some((handle, len)) = open_regular(base, file, shown)? else {
        return Ok(None);
    };
    let too_large = |size: u64| BoxError::TooLarge {
        path: shown.to_owned(),
        size,
        limit: MAX_FILE_BYTES,
    };
    if len > MAX_FILE_BYTES {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    handle
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| failed("cannot read", shown, &error))?;
    // it grew past the bound while being read
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(Some(bytes))
}

/// Reads a stream below `base` from `offset` to its end, at most `max` bytes (its last `max`
/// when more). Nothing at the path reads as an empty stream.
pub(crate) fn read_tail(
    base: &Path,
    file: &Path,
    shown: &str,
    offset: u64,
    max: u64,
) -> Result<TailRead, BoxError> {
    let Some((mut handle, len)) = open_regular(base, file, shown)? else {
        return Ok(TailRead {
            bytes: Vec::new(),
            offset: 0,
            len: 0,
        });
    };
    let start = offset.min(len).max(len.saturating_sub(max));
    handle
        .seek(SeekFrom::Start(start))
        .map_err(|error| failed("cannot seek", shown, &error))?;
    let mut bytes = Vec::new();
    handle
        .take((len - start).min(max))
        .read_to_end(&mut bytes)
        .map_err(|error| failed("cannot read", shown, &error))?;
    Ok(TailRead {
        bytes,
        offset: start,
        len,
    })
}

/// Writes a whole file at `file` below `base` onto a regular file or onto nothing, making its
/// directories: a link anywhere below `base` is refused, not followed, and a named pipe is
/// refused, not waited on.
pub(crate) fn write_whole(
    base: &Path,
    file: &Path,
    shown: &str,
    bytes: &[u8],
    mode: u32,
) -> Result<(), BoxError> {
    let (rel, name) = split_beneath(base, file, shown)?;
    let Some(dir) = dir_beneath(base, rel, true, shown)? else {
        return Err(BoxError::Failed(format!(
            "cannot write {shown}: its directory vanished while it was made"
        )));
    };
    let Some(mut handle) = open_at(&dir, name, OFlags::WRONLY | OFlags::CREATE, mode, shown)?
    else {
        return Err(BoxError::Failed(format!(
            "cannot write {shown}: its directory vanished while it was opened"
        )));
    };
    handle
        .set_len(0)
        .map_err(|error| failed("cannot truncate", shown, &error))?;
    handle
        .write_all(bytes)
        .map_err(|error| failed("cannot write", shown, &error))?;
    Ok(())
}

/// Writes a whole file by writing a sibling and renaming it over the path (the engine's
/// records: a reader sees the old or the new, never half).
pub(crate) fn write_atomic(file: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let name = file
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let tmp = file.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    {
        let mut handle = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        handle.write_all(bytes)?;
        handle.sync_all()?;
    }
    fs::rename(&tmp, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_refuses_climbing_above_root() {
        assert_eq!(
            normalise(Path::new("/a/./b/../c")),
            Some(PathBuf::from("/a/c"))
        );
        assert_eq!(normalise(Path::new("/..")), None);
        assert_eq!(normalise(Path::new("/a/../..")), None);
    }

    #[test]
    fn resolve_confines_paths_to_the_box() {
        let paths = BoxPaths {
            root: PathBuf::from("/nonexistent/box"),
            home: PathBuf::from("/nonexistent/box/home"),
        };
        assert_eq!(
            paths.resolve("a/b", false).ok(),
            Some(PathBuf::from("/nonexistent/box/home/a/b"))
        );
        assert_eq!(
            paths.resolve("~/a", true).ok(),
            Some(PathBuf::from("/nonexistent/box/home/a"))
        );
        assert!(paths.resolve("../records/box.json", false).is_err());
        assert!(paths.resolve("~root/x", false).is_err());
        assert!(paths.resolve("/etc/passwd", false).is_err());
        assert!(
            paths
                .resolve("/nonexistent/box/records/box.json", false)
                .is_ok()
        );
        assert!(
            paths
                .resolve("/nonexistent/box/records/box.json", true)
                .is_err()
        );
        assert!(paths.resolve("/nonexistent/box/home", false).is_err());
        assert!(paths.resolve(".", false).is_err());
        assert!(paths.resolve("a/../../x", false).is_err());
    }
}
