//! The host paths a node takes (its data dir, boxes dir, a container cell's state dir, a
//! cli-agent login's directory), made absolute once, at start, against the directory the node
//! was started in.
//!
//! Why once and at start: a relative path means something only against a working directory,
//! and the node's is not the only one in play. A `direct` box's job runs in the box's home, so
//! a relative home handed to it (`HOME=.boxfleet/boxes/{id}/home`) names a directory inside
//! itself that does not exist, and every job's wrapper dies before it writes a status; a
//! container runtime reads a relative `-v` source as a volume name; a box's records name the
//! login they were seeded from for whichever node tears the box down, from whatever directory
//! that node was started in. So every path is resolved here and used absolute from then on.
//!
//! `~/` at the start of a path is the node's `$HOME`, as a shell would expand it; YAML does
//! not. The part of the path that exists is resolved by the kernel (links and `..` included,
//! as `realpath` does), and what is still to be made is appended with `.` dropped and `..`
//! taken lexically. So a resolved path holds no `.` or `..`: a box's file checks compare
//! paths lexically, and `/srv/project/../boxes` must name the one directory it means.

use std::path::{Component, Path, PathBuf};

use crate::Error;
use crate::company::Company;

/// Where relative paths are resolved: the node's working directory and its `$HOME`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Base {
    /// the directory the node was started in; `None` when it cannot be read (removed under
    /// the process), which only a relative path needs
    pub cwd: Option<PathBuf>,
    /// `$HOME`, for `~/…`; `None` when unset or empty
    pub home: Option<PathBuf>,
}

impl Base {
    /// The running process's working directory and `$HOME`.
    pub fn of_process() -> Base {
        Base {
            cwd: std::env::current_dir().ok(),
            home: std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(PathBuf::from),
        }
    }

    /// `path` made absolute and normal: `~/…` under `$HOME`, a relative path under the
    /// working directory, the part that exists resolved by the kernel. `field` names the
    /// setting in an error.
    pub fn absolute(&self, field: &str, path: &Path) -> Result<PathBuf, Error> {
        if path.as_os_str().is_empty() {
            return Err(Error::Located {
                field: field.to_owned(),
                problem: "is empty".to_owned(),
                remedy: "name a directory, or leave the field out for its default",
            });
        }
        let joined = match path.strip_prefix("~") {
            Ok(rest) => {
                let Some(home) = &self.home else {
                    return Err(Error::Located {
                        field: field.to_owned(),
                        problem: format!("{} starts with ~ but $HOME is not set", path.display()),
                        remedy: "set HOME for the node, or write the path absolute",
                    });
                };
                home.join(rest)
            }
            Err(_) if path.is_absolute() => path.to_owned(),
            Err(_) => {
                let Some(cwd) = &self.cwd else {
                    return Err(Error::Located {
                        field: field.to_owned(),
                        problem: format!(
                            "{} is relative, and the node's working directory cannot be read",
                            path.display()
                        ),
                        remedy: "start the node from an existing directory, or write the path absolute",
                    });
                };
                cwd.join(path)
            }
        };
        Ok(normal(&joined))
    }

    /// [`Base::absolute`] of a path held as text (the company document keeps its paths as
    /// strings); a path that is not UTF-8 once resolved is refused by name.
    pub fn absolute_text(&self, field: &str, path: &str) -> Result<String, Error> {
        let resolved = self.absolute(field, Path::new(path))?;
        resolved
            .into_os_string()
            .into_string()
            .map_err(|resolved| Error::Located {
                field: field.to_owned(),
                problem: format!(
                    "{path:?} resolves to {}, which is not UTF-8",
                    Path::new(&resolved).display()
                ),
                remedy: "start the node from a directory whose path is UTF-8, or write the path absolute",
            })
    }
}

/// Makes the company document's host paths absolute in place: `providers.sandbox.local.
/// state_dir` and each `providers.llm.<name>.login_dir`. Returns a problem for each path that
/// cannot be resolved.
pub(crate) fn resolve_company_paths(company: &mut Company, base: &Base) -> Vec<Error> {
    let mut problems = Vec::new();
    let mut resolve = |field: String, path: &mut String| {
        if path.is_empty() {
            return; // empty means "the default", which is resolved where it is chosen
        }
        match base.absolute_text(&field, path) {
            Ok(resolved) => *path = resolved,
            Err(problem) => problems.push(problem),
        }
    };
    if let Some(local) = company.providers.sandbox.local.as_mut()
        && let Some(dir) = local.state_dir.as_mut()
    {
        resolve("company.providers.sandbox.local.state_dir".to_owned(), dir);
    }
    for (name, entry) in &mut company.providers.llm {
        if let Some(dir) = entry.login_dir.as_mut() {
            resolve(format!("company.providers.llm.{name}.login_dir"), dir);
        }
    }
    problems
}

/// An absolute path walked from the root one component at a time: each name that exists is
/// resolved by the kernel (so a link is followed, and a `..` after it reaches the link
/// target's parent), a name that does not is appended as written, `.` is dropped, and `..`
/// takes the walked path's parent — which is the kernel's reading too, since the walked path
/// holds no link.
fn normal(absolute: &Path) -> PathBuf {
    let mut walked = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::Normal(name) => {
                let next = walked.join(name);
                walked = next.canonicalize().unwrap_or(next);
            }
            Component::CurDir => {}
            // `/..` is `/`, as the kernel reads it
            Component::ParentDir => {
                walked.pop();
            }
            Component::RootDir | Component::Prefix(_) => walked.push(component),
        }
    }
    walked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Base {
        Base {
            cwd: Some(PathBuf::from("/work/my project")),
            home: Some(PathBuf::from("/home/ada")),
        }
    }

    #[test]
    fn a_relative_path_is_under_the_working_directory() {
        let base = base();
        for (given, expected) in [
            (".boxfleet", "/work/my project/.boxfleet"),
            ("./.boxfleet", "/work/my project/.boxfleet"),
            ("reldata/./boxes", "/work/my project/reldata/boxes"),
            ("../shared/boxes", "/work/shared/boxes"),
            ("a/../../..", "/"),
            ("/srv/bf//data/.", "/srv/bf/data"),
            ("~/.claude", "/home/ada/.claude"),
            ("~", "/home/ada"),
        ] {
            let resolved = base
                .absolute("node.data_dir", Path::new(given))
                .expect(given);
            assert_eq!(resolved, PathBuf::from(expected), "{given}");
            assert!(resolved.is_absolute(), "{given}");
        }
    }

    #[test]
    fn a_tilde_without_home_and_an_empty_path_are_refused_by_name() {
        let no_home = Base {
            home: None,
            ..base()
        };
        let error = no_home
            .absolute(
                "company.providers.llm.default.login_dir",
                Path::new("~/.claude"),
            )
            .expect_err("no HOME");
        let text = error.to_string();
        assert!(
            text.contains("login_dir") && text.contains("HOME"),
            "{text}"
        );
        let no_cwd = Base {
            cwd: None,
            ..base()
        };
        let error = no_cwd
            .absolute("node.data_dir", Path::new(".boxfleet"))
            .expect_err("no cwd");
        assert!(error.to_string().contains("working directory"), "{error}");
        assert_eq!(
            no_cwd
                .absolute("node.data_dir", Path::new("/srv/bf"))
                .expect("absolute"),
            PathBuf::from("/srv/bf"),
            "an absolute path needs no working directory"
        );
        let error = base()
            .absolute("node.boxes_dir", Path::new(""))
            .expect_err("empty");
        assert!(error.to_string().contains("node.boxes_dir"), "{error}");
    }

    #[test]
    fn what_exists_is_resolved_by_the_kernel_and_the_rest_lexically() {
        let scratch = tempfile::tempdir().expect("tempdir");
        let root = scratch.path().canonicalize().expect("canonical tempdir");
        std::fs::create_dir_all(root.join("real/project")).expect("dirs");
        std::os::unix::fs::symlink(root.join("real/project"), root.join("link")).expect("link");
        let base = Base {
            cwd: Some(root.join("link")),
            home: None,
        };
        // `..` after a link is the link target's parent, as the kernel reads it
        assert_eq!(
            base.absolute("node.boxes_dir", Path::new("../shared-boxes"))
                .expect("resolves"),
            root.join("real/shared-boxes")
        );
        assert_eq!(
            base.absolute("node.data_dir", Path::new("./.boxfleet/./store/../x"))
                .expect("resolves"),
            root.join("real/project/.boxfleet/x")
        );
        let resolved = base
            .absolute("node.data_dir", Path::new("."))
            .expect("resolves");
        assert_eq!(resolved, root.join("real/project"));
    }

    #[test]
    fn a_user_named_tilde_is_an_ordinary_relative_name() {
        // `~bob/x` is a shell's user expansion, which we do not do: it stays a relative name
        let resolved = base()
            .absolute("node.data_dir", Path::new("~bob/x"))
            .expect("relative");
        assert_eq!(resolved, PathBuf::from("/work/my project/~bob/x"));
    }
}
