//! The dashboard's pages: one layout, a page name the script renders, and the script and
//! style they share — compiled into the binary, so no page needs the internet.

use axum::extract::Path;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");
const LAYOUT: &str = include_str!("assets/layout.html");
const LOGIN: &str = include_str!("assets/login.html");

/// Text made safe inside HTML.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The layout with `page` (and the turn a run's page shows) for the script to render.
fn page(page: &str, title: &str, turn: &str) -> Html<String> {
    Html(
        LAYOUT
            .replace("{{page}}", page)
            .replace("{{title}}", &escaped(title))
            .replace("{{turn}}", &escaped(turn)),
    )
}

pub(super) async fn board() -> Html<String> {
    page("board", "Runs in flight", "")
}

pub(super) async fn run(Path(turn): Path<String>) -> Html<String> {
    page("run", &format!("Run {turn}"), &turn)
}

pub(super) async fn fleet() -> Html<String> {
    page("fleet", "Fleet", "")
}

/// The sign-in page, with a refusal to show.
pub(super) fn login_page(refused: Option<&str>) -> Html<String> {
    let note = refused
        .map(|why| format!("<p class=\"refused\" id=\"refused\">{}</p>", escaped(why)))
        .unwrap_or_default();
    Html(LOGIN.replace("{{refused}}", &note))
}

pub(super) async fn login() -> Html<String> {
    login_page(None)
}

pub(super) async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

pub(super) async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_in_the_page_is_escaped() {
        let Html(body) = page("run", "Run <x>", "<script>\"'");
        assert!(!body.contains("<script>\"'"), "{body}");
        assert!(body.contains("&lt;script&gt;&quot;&#39;"));
    }
}
