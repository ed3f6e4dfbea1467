//! The e2b backend where E2B's own service behaves otherwise than a naive client expects —
//! a paused box's keepalive, bodiless POSTs, paginated listings, strict ids, a stream cut by a
//! killed box, envd 0.2's stdin, the plan's lifetime cap — each against the stand-in, which
//! answers as E2B does (its sources are named in `tests/src/e2b_standin/control.rs`).

use std::time::{Duration, Instant};

use boxfleet_actors::ports::{BoxError, Provider};
use boxfleet_sandbox::contract::spec;

use super::{E2bHarness, NO_ENV};

/// A paused box's keepalive: E2B re-times running boxes only and answers 404 for a paused one,
/// which is kept all the same — so a 404 is asked of `GET` before it reads as gone. On `main`
/// the keepalive of every parked run's box said it was gone.
#[tokio::test]
async fn a_paused_boxs_keepalive_is_refused_404_and_the_box_is_not_gone() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    sandbox.pause().await.expect("pause");
    let (before, _) = h.standin.keepalive(sandbox.id()).expect("a box");
    sandbox
        .set_timeout(Duration::from_secs(600))
        .await
        .expect("a paused box is not gone");
    let (after, _) = h.standin.keepalive(sandbox.id()).expect("still there");
    assert_eq!(before, after, "E2B did not re-time the paused box");
    h.provider.kill(sandbox.id()).await.expect("kill");
    assert!(matches!(
        sandbox.set_timeout(Duration::from_secs(600)).await,
        Err(BoxError::Gone(_))
    ));
}

/// One HTTP/1.1 request to the stand-in, written by hand: its status line.
fn raw_post(api_url: &str, path: &str, headers: &str) -> String {
    use std::io::{Read as _, Write as _};
    let addr = api_url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nX-API-Key: {}\r\n{headers}Connection: close\r\n\r\n",
        boxfleet_tests::e2b_standin::API_KEY
    )
    .expect("write");
    // the status line is all that is wanted: read until it is whole (or the bound)
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
        answer.push(byte[0]);
    }
    String::from_utf8_lossy(&answer).trim().to_owned()
}

/// E2B's load balancer answers a POST that says no length 411; every POST of ours says one
/// (pause has no body: it goes out with `Content-Length: 0`).
#[tokio::test]
async fn a_post_without_a_length_is_refused_411_and_ours_always_say_one() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let path = format!("/sandboxes/{}/pause", sandbox.id());
    // off the test's runtime, which serves the stand-in
    let api = h.standin.api_url();
    let status = tokio::task::spawn_blocking(move || raw_post(&api, &path, ""))
        .await
        .expect("the raw request");
    assert!(
        status.contains(" 411 "),
        "the stand-in refuses a bodiless POST as E2B's edge does: {status:?}"
    );
    assert_eq!(h.standin.is_paused(sandbox.id()), Some(false));
    sandbox.pause().await.expect("our pause says its length");
    assert_eq!(h.standin.is_paused(sandbox.id()), Some(true));
    let resumed = h.provider.connect(sandbox.id()).await.expect("connect");
    resumed
        .set_timeout(Duration::from_secs(60))
        .await
        .expect("keepalive");
    h.provider.kill(sandbox.id()).await.expect("kill");
}

/// `GET /v2/sandboxes` answers a page at a time (`X-Next-Token` names the next): a listing
/// reads every page. On `main` only the first 100 boxes were ever seen.
#[tokio::test]
async fn a_listing_reads_every_page() {
    let h = E2bHarness::new().await;
    h.standin.cap_pages(2);
    let of = boxfleet_actors::ports::BoxSpec {
        turn_id: "turn-p".into(),
        launch_id: "launch-p".into(),
        ..spec()
    };
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(
            h.provider
                .create(&of)
                .await
                .expect("create")
                .id()
                .to_owned(),
        );
    }
    made.sort();
    let calls = h.standin.list_calls();
    let mut found = h
        .provider
        .find_by_launch("turn-p", "launch-p")
        .await
        .expect("list");
    found.sort();
    assert_eq!(found, made, "every page's boxes");
    assert_eq!(h.standin.list_calls() - calls, 3, "five boxes, two a page");
    for id in made {
        h.provider.kill(&id).await.expect("kill");
    }
}

/// E2B's sandbox ids are lower-case letters and digits: anything else is refused by name
/// before a call (an id with `-` would route through the edge proxy to another box).
#[tokio::test]
async fn an_id_e2b_would_never_mint_is_refused_before_any_call() {
    let h = E2bHarness::new().await;
    for id in ["ABCdef123", "abc-def", "abc_def", ""] {
        match h.provider.attach(id).await {
            Err(BoxError::Failed(message)) => assert!(
                message.contains("lower-case letters and digits"),
                "{id:?}: {message}"
            ),
            Err(other) => panic!("{id:?}: {other}"),
            Ok(_) => panic!("{id:?} attached"),
        }
    }
}

/// A box killed under a running command drops envd's stream with no end event (envd dies with
/// the VM): the command's failure is asked of the control plane, and reads as the box gone.
/// On `main` it read as an unexplained failure of the command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_box_killed_under_a_command_reads_as_gone() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let id = sandbox.id().to_owned();
    let running = {
        let sandbox = sandbox.clone();
        tokio::spawn(async move {
            sandbox
                .exec("echo begun; sleep 30", NO_ENV, Duration::from_secs(60))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    h.standin.vanish(&id);
    let ended = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the command's call ends with the box")
        .expect("the task");
    assert!(
        matches!(&ended, Err(BoxError::Gone(gone)) if gone == &id),
        "{ended:?}"
    );
}

/// A box paused under a command (an auto-pause, another client's pause): the VM's snapshot
/// severs envd's stream with no end event, as a kill does; asked of the control plane, the box
/// is paused, not gone and not failed, and the handle never wakes it.
#[tokio::test]
async fn a_box_paused_under_a_command_reads_as_paused_not_gone() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let id = sandbox.id().to_owned();
    let running = {
        let sandbox = sandbox.clone();
        tokio::spawn(async move {
            sandbox
                .exec("echo begun; sleep 30", NO_ENV, Duration::from_secs(60))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    h.standin.pause_behind(&id);
    let ended = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the command's call ends with the stream")
        .expect("the task");
    assert!(
        matches!(&ended, Err(error) if error.is_paused_refusal()),
        "{ended:?}"
    );
    assert_eq!(h.standin.is_paused(&id), Some(true), "and it is not woken");
}

/// envd before 0.3.0 (the stand-in's 0.2.4) ignores `stdin: false` and leaves the process a
/// pipe nobody closes: a command that reads its input still ends, on `/dev/null`.
#[tokio::test]
async fn a_command_that_reads_its_input_ends_on_an_envd_that_ignores_stdin_false() {
    let h = E2bHarness::new().await;
    let sandbox = h.provider.create(&spec()).await.expect("create");
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        sandbox.exec("cat; echo read-to-the-end", NO_ENV, Duration::from_secs(15)),
    )
    .await
    .expect("the command did not wait on a pipe")
    .expect("exec");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "read-to-the-end"
    );
    h.provider.kill(sandbox.id()).await.expect("kill");
}

/// E2B's plan caps a box's life from its start whatever keepalives come, and refuses a
/// timeout past the cap with 400: a box timeout over the cap is held to it (the first refusal
/// read, the cap kept), keepalives succeed, and the box still ends at its cap — gone, as E2B
/// leaves it. On `main` every such keepalive (and the create) was refused.
#[tokio::test]
async fn a_box_is_timed_within_its_plans_lifetime_and_ends_at_it() {
    let h = E2bHarness::new().await;
    h.standin.cap_lifetime(Duration::from_secs(4));
    let started = Instant::now();
    let sandbox = h
        .provider
        .create(&boxfleet_actors::ports::BoxSpec {
            timeout_seconds: 900,
            ..spec()
        })
        .await
        .expect("a create past the cap is held to it");
    sandbox
        .set_timeout(Duration::from_secs(900))
        .await
        .expect("a keepalive past the cap is held to it");
    // kept alive all along, it ends at its lifetime all the same
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let _ = sandbox.set_timeout(Duration::from_secs(900)).await;
        if matches!(
            h.provider.attach(sandbox.id()).await,
            Err(BoxError::Gone(_))
        ) {
            break;
        }
        assert!(Instant::now() < deadline, "the box outlived its plan's cap");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "not before its cap: {:?}",
        started.elapsed()
    );
}
