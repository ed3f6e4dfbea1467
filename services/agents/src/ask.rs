//! `boxfleet-ask`, the ask shim every box gets (the spec's "Mid-run clarification"): it
//! records a question, its audience and the branch the work was pushed to, one file each in
//! `{home}/.boxfleet/ask/`, posts nothing, and tells the job to stop.
//!
//! `boxfleet-ask "<question>" [--to <audience>] [--branch <branch>]` — the audience defaults
//! to `requester`; without `--branch`, where git is installed and the working directory is
//! on a branch, the branch is the name its upstream has on its remote, else the branch
//! itself (a detached HEAD, a directory outside any repository or no git: no branch). Bad
//! usage prints the usage to stderr and exits 2.

use boxfleet_actors::ports::AskedQuestion;

use crate::layout::sh_quote;

/// The shim's script (POSIX sh), recording into `ask_dir`.
pub fn shim_script(ask_dir: &str) -> String {
    SHIM.replace("__ASK_DIR__", &sh_quote(ask_dir))
}

const SHIM: &str = r#"#!/bin/sh
# boxfleet-ask: parks the job on a question for a person. It records the question, who it
# is for and the branch the work was pushed to, and posts nothing itself: the engine reads
# them when the job ends. POSIX sh only.
ask_dir=__ASK_DIR__

usage() {
  echo 'usage: boxfleet-ask "<question>" [--to <audience>] [--branch <branch>]' >&2
  echo '  --to      requester (the default), team, manager, or a teammate by handle' >&2
  echo '  --branch  the branch you pushed your work to (default: what git says here)' >&2
  exit 2
}

question=
have_question=0
to=requester
branch=
have_branch=0
while [ "$#" -gt 0 ]; do
  case $1 in
    --to)
      [ "$#" -ge 2 ] || usage
      to=$2
      shift 2
      ;;
    --to=*)
      to=${1#--to=}
      shift
      ;;
    --branch)
      [ "$#" -ge 2 ] || usage
      branch=$2
      have_branch=1
      shift 2
      ;;
    --branch=*)
      branch=${1#--branch=}
      have_branch=1
      shift
      ;;
    --)
      shift
      if [ "$#" -ne 1 ] || [ "$have_question" -ne 0 ]; then usage; fi
      question=$1
      have_question=1
      shift
      ;;
    -?*)
      usage
      ;;
    *)
      [ "$have_question" -eq 0 ] || usage
      question=$1
      have_question=1
      shift
      ;;
  esac
done
[ "$have_question" -eq 1 ] || usage
case $question in *[![:space:]]*) ;; *) usage ;; esac
case $to in *[![:space:]]*) ;; *) usage ;; esac

if [ "$have_branch" -eq 0 ] && command -v git >/dev/null 2>&1; then
  if current=$(git symbolic-ref --quiet --short HEAD 2>/dev/null) && [ -n "$current" ]; then
    upstream=$(git rev-parse --abbrev-ref --symbolic-full-name '@{u}' 2>/dev/null) || upstream=
    if [ -n "$upstream" ]; then
      remote=$(git config --get "branch.$current.remote" 2>/dev/null) || remote=
      if [ -n "$remote" ] && [ "$remote" != "." ]; then
        case $upstream in "$remote"/*) upstream=${upstream#"$remote"/} ;; esac
      fi
      branch=$upstream
    else
      branch=$current
    fi
  fi
fi

record() {
  printf '%s' "$2" >"$ask_dir/$1.tmp" && mv -f "$ask_dir/$1.tmp" "$ask_dir/$1"
}
fail() {
  echo "boxfleet-ask: could not record the question in $ask_dir" >&2
  exit 1
}
mkdir -p "$ask_dir" || fail
rm -f "$ask_dir/question" "$ask_dir/branch" || fail
record audience "$to" || fail
if [ -n "$branch" ]; then
  record branch "$branch" || fail
fi
# the question last: its presence says the record is whole
record question "$question" || fail
echo "boxfleet-ask: your question is recorded for $to. Stop now: end this job without further work; the answer will come back to you in a new run."
exit 0
"#;

/// Builds the recorded question from the shim's three files (`None` when no question).
pub fn from_files(
    question: Option<&[u8]>,
    audience: Option<&[u8]>,
    branch: Option<&[u8]>,
) -> Option<AskedQuestion> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let question = text(question?);
    let question = question.trim_end_matches(['\n', '\r']);
    if question.trim().is_empty() {
        return None;
    }
    let audience = audience
        .map(|b| text(b).trim().to_owned())
        .filter(|a| !a.is_empty());
    let branch = branch
        .map(|b| text(b).trim().to_owned())
        .filter(|b| !b.is_empty());
    Some(AskedQuestion {
        // a question is shown to people: redacted whole, before anything bounds it
        question: boxfleet_redact::redact(question),
        audience: audience.unwrap_or_else(|| "requester".to_owned()),
        branch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_bakes_its_directory_in_quoted() {
        let script = shim_script("/b/it's/ask");
        assert!(script.contains(r"ask_dir='/b/it'\''s/ask'"));
        assert!(script.starts_with("#!/bin/sh\n"));
    }

    #[test]
    fn reads_the_three_files() {
        let asked = from_files(Some(b"Which DB?\n"), Some(b"manager\n"), None).expect("asked");
        assert_eq!(asked.question, "Which DB?");
        assert_eq!(asked.audience, "manager");
        assert_eq!(asked.branch, None);
        let asked = from_files(Some(b"Q"), None, Some(b"wip/x")).expect("asked");
        assert_eq!(
            (asked.audience.as_str(), asked.branch.as_deref()),
            ("requester", Some("wip/x"))
        );
        assert_eq!(from_files(Some(b"  \n"), None, None), None);
        assert_eq!(from_files(None, Some(b"team"), None), None);
    }
}
