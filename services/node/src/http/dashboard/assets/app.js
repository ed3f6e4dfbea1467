// The boxfleet dashboard: renders the page the layout names from the node's JSON API.
// Every value is put on the page as text (never as markup): a task, a question or a line
// of a job's output is whatever the job wrote.
"use strict";

const body = document.body;
const app = document.getElementById("app");
const footer = document.getElementById("status");

// An element with attributes and children (strings become text nodes).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "onclick" || key === "onsubmit" || key === "onchange" || key === "oninput") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A call to the API; a refused credential sends the viewer to sign in.
async function api(path, options) {
  const reply = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  if (reply.status === 401) {
    location.href = "/login?next=" + encodeURIComponent(location.pathname + location.search);
    throw new Error("sign in first");
  }
  const data = await reply.json().catch(() => ({ error: "the node answered " + reply.status }));
  if (!reply.ok) throw new Error(data.error || ("the node answered " + reply.status));
  return data;
}

function said(text, failed) {
  footer.textContent = text;
  footer.className = failed ? "failed" : "quiet";
}

function when(text) {
  if (!text) return "";
  const at = new Date(text);
  return isNaN(at) ? text : at.toLocaleString();
}

function ago(text) {
  if (!text) return "";
  const seconds = Math.max(0, Math.round((Date.now() - new Date(text)) / 1000));
  if (seconds < 90) return seconds + " s ago";
  if (seconds < 5400) return Math.round(seconds / 60) + " min ago";
  return Math.round(seconds / 3600) + " h ago";
}

function badge(status) {
  return el("span", { class: "badge " + status.replace(/[^a-z_]/g, "") }, status);
}

// Asks `load` now and every `every` ms after the last answer (one request in flight).
function every(ms, load) {
  let stopped = false;
  const go = async () => {
    if (stopped) return;
    try { await load(); } catch (error) { said(error.message, true); }
    if (!stopped) setTimeout(go, ms);
  };
  go();
  return () => { stopped = true; };
}

// ---- the board ----------------------------------------------------------------------------

const STATUSES = ["", "launching", "running", "awaiting_clarification", "answered", "reseed", "resumed", "ending"];

function boardPage() {
  const query = new URLSearchParams(location.search);
  const seat = el("input", { id: "filter-seat", placeholder: "seat", value: query.get("seat") || "" });
  const node = el("input", { id: "filter-node", placeholder: "node", value: query.get("node") || "" });
  const status = el("select", { id: "filter-status" },
    STATUSES.map((s) => el("option", { value: s, selected: s === (query.get("status") || "") }, s || "any status")));
  const mine = el("input", { type: "checkbox", id: "filter-mine", checked: query.get("mine") === "1" });
  const count = el("span", { id: "waiting-count", class: "count" });
  const rows = el("tbody", { id: "board-rows" });
  const apply = () => {
    const next = new URLSearchParams();
    if (seat.value) next.set("seat", seat.value);
    if (node.value) next.set("node", node.value);
    if (status.value) next.set("status", status.value);
    if (mine.checked) next.set("mine", "1");
    history.replaceState(null, "", "/" + (next.toString() ? "?" + next : ""));
  };
  for (const input of [seat, node, status, mine]) input.onchange = apply;
  app.replaceChildren(
    el("h1", {}, "Runs in flight"),
    el("div", { class: "filters" },
      seat, status, node,
      el("label", {}, mine, " waiting on me ", count)),
    el("table", { id: "board" },
      el("thead", {}, el("tr", {}, ["Run", "Seat", "Role", "Agent id", "Agent", "Status", "Task", "Node", "Started", "Question"].map((h) => el("th", {}, h)))),
      rows));
  every(3000, async () => {
    const board = await api("/api/board" + location.search);
    count.textContent = "(" + board.waiting_on_me + ")";
    rows.replaceChildren(...board.runs.map((run) => el("tr", { "data-turn": run.turn_id, class: "run" },
      el("td", {}, el("a", { href: "/runs/" + encodeURIComponent(run.turn_id) }, run.turn_id)),
      el("td", {}, run.agent_handle),
      el("td", { class: "role" }, run.role),
      el("td", { class: "agent-id" }, run.agent_id),
      el("td", {}, run.coding_agent),
      el("td", { class: "status" }, badge(run.status)),
      el("td", { class: "task" }, run.task),
      el("td", {}, (run.owner || "").split("/")[0]),
      el("td", { title: when(run.started_at) }, ago(run.started_at)),
      el("td", { class: "question" }, run.question))));
    if (!board.runs.length) rows.append(el("tr", {}, el("td", { colspan: 10, class: "quiet" }, "No run in flight matches.")));
    said("Updated " + new Date().toLocaleTimeString());
  });
}

// ---- a run's page -------------------------------------------------------------------------

function number(n) { return (n || 0).toLocaleString(); }

function share(part, whole) {
  return whole ? " (" + Math.round((100 * part) / whole) + "%)" : "";
}

// The spec's card: tokens with cache shares, cost, model receipt, refs, transcript, failure.
function phaseCard(event) {
  // the event's body carries the phase record under `record`
  const p = (event.body && event.body.record) || {};
  const input = (p.input_tokens || 0) + (p.cache_read_tokens || 0) + (p.cache_write_tokens || 0);
  const model = p.model || {};
  const lines = p.activity_transcript || [];
  const elided = p.activity_transcript_elided_lines || 0;
  const kept = lines.length;
  const fold = el("details", { class: "activity" },
    el("summary", {}, "Activity — " + (elided ? kept + " of " + number(kept + elided) + " lines" : kept + (kept === 1 ? " line" : " lines"))
      + (p.activity_transcript_elided_bytes ? ", " + number(p.activity_transcript_elided_bytes) + " bytes of one line left out" : "")),
    el("pre", {}, lines.join("\n")));
  const refs = p.delivered_refs || [];
  return el("section", { class: "card phase" + (p.failed ? " failed" : ""), "data-launch": p.launch_id },
    el("h3", {}, (p.coding_agent || "run") + " · job " + (p.launch_id || "") + (p.failed ? " · failed" : " · done")),
    p.failed ? el("p", { class: "failure" }, (p.reason ? p.reason + ": " : "") + (p.error || "")) : null,
    el("dl", { class: "facts" },
      el("dt", {}, "Tokens"), el("dd", { class: "tokens" },
        number(p.input_tokens) + " in · " + number(p.output_tokens) + " out · cache read " + number(p.cache_read_tokens)
        + share(p.cache_read_tokens, input) + " · cache write " + number(p.cache_write_tokens) + share(p.cache_write_tokens, input)),
      el("dt", {}, "Cost"), el("dd", {}, p.cost_usd == null ? "not reported" : "$" + p.cost_usd.toFixed(4)),
      el("dt", {}, "Model"), el("dd", { class: "model" },
        (model.effective || model.requested || "unknown") + " (" + (model.status || "unreported") + (model.source ? ", from " + model.source : "") + ")"),
      el("dt", {}, "Ran"), el("dd", {}, p.job_runtime_ms != null ? (p.job_runtime_ms / 1000).toFixed(1) + " s, collected " + ((p.collect_lag_ms || 0) / 1000).toFixed(1) + " s after" : ((p.duration_ms || 0) / 1000).toFixed(1) + " s"),
      el("dt", {}, "Exit"), el("dd", {}, p.exit_code == null ? "—" : p.exit_code),
      el("dt", {}, "Delivered"), el("dd", { class: "refs" },
        refs.length ? refs.join(", ") : "nothing",
        p.delivered_refs_elided ? " … (+" + p.delivered_refs_elided + " more its report names)" : "")),
    p.response ? el("div", { class: "report" }, el("h4", {}, "Report"), el("pre", {}, p.response)) : null,
    fold);
}

function runPage() {
  const turn = body.dataset.turn;
  const head = el("div", { id: "run-head" });
  const question = el("div", { id: "question" });
  const tail = el("pre", { id: "tail", class: "tail" });
  const tailNote = el("p", { id: "tail-note", class: "quiet" });
  const cards = el("div", { id: "phases" });
  const events = el("ol", { id: "events", class: "events" });
  app.replaceChildren(
    el("h1", {}, "Run ", el("code", {}, turn)),
    head, question,
    el("h2", {}, "Live"), tailNote, tail,
    el("h2", {}, "What it did"), cards,
    el("h2", {}, "Events"), events);
  let following = null; // the launch id the tail follows
  let source = null;
  const follow = (launchId) => {
    if (following === launchId) return;
    if (source) source.close();
    following = launchId;
    tail.textContent = "";
    source = new EventSource("/api/runs/" + encodeURIComponent(turn) + "/tail?launch_id=" + encodeURIComponent(launchId));
    source.addEventListener("tail", (message) => {
      const t = JSON.parse(message.data);
      tail.dataset.outcome = t.outcome;
      if (t.outcome === "reset") tail.textContent = t.text;
      else if (t.outcome === "tail") tail.textContent += t.text;
      const notes = [];
      if (t.front) notes.push("the stream's start is not shown");
      if (t.held) notes.push(t.held + " bytes written are held back until what follows settles how they redact");
      if (t.detail && t.outcome !== "not_running" && t.outcome !== "owner_silent" && t.outcome !== "failure") notes.push(t.detail);
      if (t.outcome === "launching") notes.push("the job's box is still being made");
      if (t.outcome === "box_paused") notes.push("the box is paused; it is not woken to be read");
      if (t.outcome === "owner_silent") notes.push("the node driving the run (" + t.detail + ") did not answer");
      if (t.outcome === "failure") notes.push("the tail could not be read: " + t.detail);
      if (t.outcome === "not_running") { notes.push("not running: " + t.detail); source.close(); following = null; }
      tailNote.textContent = notes.join(" · ");
      tail.scrollTop = tail.scrollHeight;
    });
  };
  let answered = false;
  every(3000, async () => {
    const run = await api("/api/runs/" + encodeURIComponent(turn));
    const r = run.record;
    if (r) {
      head.replaceChildren(el("dl", { class: "facts" },
        el("dt", {}, "Status"), el("dd", { id: "run-status" }, badge(r.status)),
        el("dt", {}, "Seat"), el("dd", {}, r.seat + (r.role ? " (" + r.role + ")" : "")),
        el("dt", {}, "Agent"), el("dd", {}, r.coding_agent),
        el("dt", {}, "Job"), el("dd", {}, r.launch_id),
        el("dt", {}, "Box"), el("dd", {}, r.sandbox_id || "—"),
        el("dt", {}, "Node"), el("dd", {}, r.owner || "—"),
        el("dt", {}, "Task"), el("dd", {}, r.task),
        r.work_item ? [el("dt", {}, "Work item"), el("dd", {}, r.work_item)] : null));
      if (r.status === "launching" || r.status === "running") follow(r.launch_id);
      if (r.status === "awaiting_clarification" && r.question && !answered) {
        if (!document.getElementById("answer-form")) {
          const text = el("textarea", { id: "answer-text", rows: 3, required: true });
          const form = el("form", { id: "answer-form", onsubmit: async (e) => {
            e.preventDefault();
            try {
              const reply = await api("/api/runs/" + encodeURIComponent(turn) + "/answer", {
                method: "POST", headers: { "content-type": "application/json" },
                body: JSON.stringify({ text: text.value, launch_id: r.launch_id }) });
              answered = true;
              question.replaceChildren(el("p", { id: "answer-outcome" }, "Answer " + reply.outcome + (reply.detail ? ": " + reply.detail : "")));
            } catch (error) { said(error.message, true); }
          } }, text, el("button", { type: "submit", id: "answer-send" }, "Answer"));
          question.replaceChildren(el("section", { class: "card ask" },
            el("h3", {}, "Waiting on " + (r.question.audience || "a person")),
            el("p", { id: "question-text" }, r.question.text), form));
        }
      } else if (!answered) question.replaceChildren();
    } else {
      head.replaceChildren(el("p", { id: "run-status", class: "quiet" }, "Collected: this run's record is gone; what it did is below."));
      question.replaceChildren();
    }
    cards.replaceChildren(...run.phase_records.map(phaseCard));
    events.replaceChildren(...run.events.map((e) => el("li", {}, el("code", {}, e.type), " ", when(e.at), e.launch_id ? " · job " + e.launch_id : "")));
    said("Updated " + new Date().toLocaleTimeString());
  });
}

// ---- the fleet ----------------------------------------------------------------------------

function actorTree(actors) {
  return el("ul", { class: "tree" }, actors.map((a) => el("li", { "data-actor": a.name, class: a.state },
    el("span", { class: "name" }, a.name), " ", badge(a.state || "running"),
    a.strategy ? el("span", { class: "quiet" }, " " + a.strategy) : null,
    " restarts ", el("span", { class: "restarts" }, a.restarts || 0),
    " · mailbox ", a.mailbox_depth || 0,
    a.last_error ? el("span", { class: "error" }, " · last error: " + a.last_error) : null,
    a.children && a.children.length ? actorTree(a.children) : null)));
}

function fleetPage() {
  const nodes = el("tbody", { id: "nodes" });
  const seats = el("tbody", { id: "seats" });
  const tree = el("div", { id: "tree" });
  app.replaceChildren(
    el("h1", {}, "Fleet"),
    el("h2", {}, "Nodes"),
    el("table", {}, el("thead", {}, el("tr", {}, ["Node", "State", "Address", "Host", "Seats", "Since", "Build"].map((h) => el("th", {}, h)))), nodes),
    el("h2", {}, "Seats"),
    el("table", {}, el("thead", {}, el("tr", {}, ["Seat", "Holder", "Epoch", "Active", "Awaiting", "Inbox"].map((h) => el("th", {}, h)))), seats),
    el("h2", {}, "Supervision"), tree);
  every(2000, async () => {
    const fleet = await api("/api/fleet");
    nodes.replaceChildren(...fleet.nodes.map((n) => {
      const state = n.lost ? "lost" : n.draining ? "draining" : "live";
      return el("tr", { "data-node": n.node, class: "node " + state },
        el("td", {}, n.node), el("td", { class: "state" }, badge(state)), el("td", {}, n.addr + (n.tls ? " (TLS)" : n.insecure ? " (in the clear)" : "")),
        el("td", {}, n.host), el("td", {}, n.seats), el("td", {}, n.lost ? "lost since " + when(n.lost_since) : when(n.started_at)), el("td", {}, n.build));
    }));
    seats.replaceChildren(...fleet.seats.map((s) => el("tr", { "data-seat": s.seat },
      el("td", {}, s.seat), el("td", {}, s.holder_node || "(unheld)"), el("td", {}, s.epoch),
      el("td", {}, s.active_runs), el("td", {}, s.awaiting), el("td", {}, s.inbox))));
    tree.replaceChildren(fleet.tree.error ? el("p", { class: "quiet" }, "The tree is an operator's view: " + fleet.tree.error) : actorTree(fleet.tree.roots));
    said("Updated " + new Date().toLocaleTimeString() + " from node " + fleet.served_by);
  });
}

// ---- start --------------------------------------------------------------------------------

(async () => {
  try {
    const me = await api("/api/whoami");
    document.getElementById("who").textContent = me.subject + " (" + me.role + ") on " + me.node;
  } catch (error) { said(error.message, true); return; }
  const pages = { board: boardPage, run: runPage, fleet: fleetPage };
  (pages[body.dataset.page] || boardPage)();
})();
