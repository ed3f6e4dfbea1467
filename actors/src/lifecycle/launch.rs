//! run_sandbox (the spec's "Launching"; DESIGN §4): the launch is planned before anything is
//! written, the row opens `launching` (the seat is busy from that write), the box is made (or
//! reused), set up and named on the row with its job, and the conversation is committed
//! (`running`). A failure after the row opened ends the run; a box the launch made and could
//! not name on the row is killed at once. A resumed turn's relaunch starts its next job the
//! same way, in the same box.
//!
//! Decisions: `transition::launch` (open_launch, attach_box, commit_suspension, relaunch).

use std::collections::BTreeMap;
use std::sync::Arc;

use boxfleet_cluster::keys::check_id;
use boxfleet_cluster::record::{EndingReason, RunRecord};
use boxfleet_cluster::runs::RunError;
use boxfleet_cluster::transition::{EndingGuard, Fence, Transition};
use boxfleet_config::mcp::McpLeftOut;
use boxfleet_config::plan::SandboxPlan;
use boxfleet_config::providers::Wire;
use tracing::{info, warn};

use crate::crash;

use super::Coordinator;
use super::api::{LaunchOutcome, LaunchRequest, RefusalClass};
use super::error::Error;
use super::job::StoredJob;
use super::setup::{apply_setup, environment_brief};
use super::text::new_id;
use crate::boxes::BoxOp;
use crate::ports::{BoxSpec, JobIdentity, LaunchSpec, Provider, Runner, Sandbox};
use crate::spans;
use tracing::Instrument as _;

/// Where a job starts: a new box, or the box its run already names.
enum JobBox {
    /// a new box, under the id the row already names when the backend let us choose it
    New(Option<String>),
    Reuse(String),
}

impl Coordinator {
    /// run_sandbox: opens the row (the seat is busy from here), makes the box, starts the job,
    /// and commits the conversation. A failure after the row opened ends the run.
    pub async fn launch(&self, request: LaunchRequest) -> LaunchOutcome {
        // the turn is named before the span opens, so the span is a child of the turn's trace
        let fresh = request.turn_id.is_none().then(|| new_id("turn"));
        let turn_id = request
            .turn_id
            .clone()
            .or(fresh.clone())
            .unwrap_or_default();
        let trace = request.trace.clone();
        let span = spans::open(
            spans::Op::Launch,
            spans::Ids {
                node: &self.node,
                seat: &request.seat,
                turn_id: &turn_id,
                trace: trace.as_deref(),
                ..spans::Ids::default()
            },
        );
        let outcome = Box::pin(self.launch_or_refuse(request, fresh))
            .instrument(span.clone())
            .await;
        let metrics = boxfleet_cluster::metrics::metrics();
        match &outcome {
            LaunchOutcome::Refused { class, .. } => {
                span.record("outcome", class.as_str());
                metrics.launched("refused", class.as_str());
            }
            LaunchOutcome::Launched {
                launch_id,
                sandbox_id,
                ..
            } => {
                span.record("launch_id", launch_id.as_str());
                span.record("sandbox_id", sandbox_id.as_str());
                span.record("outcome", "launched");
                metrics.launched("launched", "");
            }
        }
        outcome
    }

    async fn launch_or_refuse(
        &self,
        request: LaunchRequest,
        fresh: Option<String>,
    ) -> LaunchOutcome {
        match self.try_launch(request, fresh).await {
            Ok(outcome) => outcome,
            Err(error) => {
                let class = match &error {
                    Error::BadRequest(_) | Error::NotFound(_) => RefusalClass::Refused,
                    Error::Run(RunError::Refused(_)) => RefusalClass::Refused,
                    Error::Budget(_) => RefusalClass::Budget,
                    _ => RefusalClass::Unavailable,
                };
                LaunchOutcome::Refused {
                    class,
                    reason: error.to_string(),
                }
            }
        }
    }

    async fn try_launch(
        &self,
        mut request: LaunchRequest,
        fresh: Option<String>,
    ) -> Result<LaunchOutcome, Error> {
        if !self.company().has_seat(&request.seat) {
            return Err(Error::BadRequest(format!(
                "seat {:?} is not in the company document: add it under company.seats, or launch for a seat that is",
                request.seat
            )));
        }
        // the role's gate: no catalogue, or a role that does not enable the sandbox, launches
        // nothing (refused, naming the role and what to change)
        self.company()
            .sandbox_gate(&request.seat)
            .map_err(Error::BadRequest)?;
        // the pre-flight floor: a run costs a box, a clone and an install before its first
        // token, so a seat (or company) nearly spent is refused before any of it
        self.budget_floor(&request.seat).await?;
        if !request.runner.is_empty() {
            uncapped(&request.runner, request.timeout_seconds)?;
        }
        // runner, cell, model and credentials, decided before anything is written: a model
        // the box could not route is refused here, never left to stall in a box
        // a launch that names no runner takes the role's, then the company's; with a brief
        // and no command, else Claude Code
        let last = if request.command.as_deref().is_none_or(str::is_empty) {
            "claude-code"
        } else {
            "command"
        };
        let plan = self.plan(
            &request.seat,
            Some(request.runner.as_str()).filter(|r| !r.is_empty()),
            request.model.as_deref(),
            last,
        )?;
        let runner_name = plan.runner.clone();
        request.runner = runner_name.clone();
        let runner = self.access.runner(&runner_name)?.clone();
        if runner_name == "command" && request.command.as_deref().is_none_or(str::is_empty) {
            return Err(Error::BadRequest(
                "command: the command runner needs a command to run (LaunchRequest.command, the \
                 CLI's --command), or give a brief (brief) for a coding agent"
                    .into(),
            ));
        }
        uncapped(&runner_name, request.timeout_seconds)?;
        let provider = self.access.provider(&plan.cell)?;
        // a launch is work in progress on its seat until it returns: a graceful release
        // waits for it past the seat lock, which it lets go once its row is open
        let _working = self.working_on(&request.seat);
        let fence = self.seat_fence(&request.seat).await?;
        let seat_guard = self.seats.seat.lock(&request.seat).await;
        if let Some(turn_id) = &request.turn_id
            && let Some(first) = self.earlier_launch(&request, turn_id).await?
        {
            return Ok(first);
        }
        if let Some(busy) = self.runs.list_active(&request.seat).await?.first() {
            return Ok(LaunchOutcome::Refused {
                class: RefusalClass::Busy,
                reason: format!(
                    "seat {} is busy with run {} ({}); it takes one coding job at a time",
                    request.seat, busy.record.turn_id, busy.record.status
                ),
            });
        }
        let turn_id = request
            .turn_id
            .clone()
            .or(fresh)
            .unwrap_or_else(|| new_id("turn"));
        check_id("turn_id", &turn_id)?;
        let launch_id = new_id("launch");
        // the box's id is chosen first and named on the row that opens, so reaping a launch
        // that died before the box was named kills whatever it started (I13)
        let chosen_box = provider.new_box_id();
        let mut record =
            self.launching_record(&request, &plan, (&turn_id, &launch_id), provider.as_ref());
        record.sandbox_id = chosen_box.clone();
        // known as in flight before its row opens: a recovery pass re-run under this lease
        // meanwhile (the seat's actor restarting) leaves the row to this launch
        let in_flight = self.work.start_launch(&launch_id, fence.epoch);
        crash::point(crash::LAUNCH_BEFORE_OPEN);
        let opened = self
            .runs
            .apply(
                &fence,
                &turn_id,
                Transition::OpenLaunch {
                    record: Box::new(record),
                },
            )
            .await;
        match opened {
            Ok(_) => {}
            Err(boxfleet_cluster::runs::RunError::Refused(refusal)) => {
                return Err(boxfleet_cluster::runs::RunError::Refused(refusal).into());
            }
            Err(error) => {
                // landed or not, the store did not say: a landed row with no job behind it is
                // ended by the run's driver once this call is over
                self.claim_unknown(&turn_id, &launch_id, &error).await;
                return Err(error.into());
            }
        }
        // the seat is busy from the open row: a second launch now sees it
        drop(seat_guard);
        crash::point(crash::LAUNCH_AFTER_OPEN);
        // a test failpoint: the node gives the seat up for lost while this launch is in flight
        // (a session renewal that failed past the TTL while the store kept the lease)
        if crate::workers::failpoint_once("seat-lost-mid-launch") {
            self.lose_seat(&request.seat);
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        }
        info!(seat = %request.seat, turn_id, launch_id, "sandbox_run_started");
        let started = self
            .provision_and_start(
                &fence,
                (&turn_id, &launch_id),
                (&provider, runner.as_ref()),
                &request,
                &plan,
                JobBox::New(chosen_box),
            )
            .await;
        match started {
            Ok(sandbox_id) => {
                let commit = Transition::CommitSuspension {
                    launch_id: launch_id.clone(),
                    conversation: request.conversation.clone(),
                };
                let committed = if crate::workers::failpoint_once("suspension-commit-refused") {
                    Err(boxfleet_cluster::runs::RunError::Store(
                        boxfleet_cluster::Error::Unavailable(
                            "failpoint suspension-commit-refused".into(),
                        ),
                    ))
                } else {
                    self.runs.apply(&fence, &turn_id, commit).await.map(|_| ())
                };
                if let Err(error) = committed {
                    self.suspension_unrecorded(&fence, &turn_id, &launch_id, &error)
                        .await;
                    return Err(error.into());
                }
                in_flight.committed();
                crash::point(crash::LAUNCH_AFTER_COMMIT);
                Ok(LaunchOutcome::Launched {
                    turn_id,
                    launch_id,
                    sandbox_id,
                })
            }
            Err(error) => {
                warn!(turn_id, %error, "sandbox_launch_failed");
                self.fail_launch(&fence, &turn_id, &error.to_string()).await;
                Ok(LaunchOutcome::Refused {
                    class: RefusalClass::Unavailable,
                    reason: format!("the launch failed: {error}"),
                })
            }
        }
    }

    /// A launch repeated for a (turn, iteration) that already launched gets the first launch's
    /// outcome, never a second job (DESIGN §6 I13): the run, while its row lives, or the job
    /// the completion ledger remembers (30 days), whose ending was announced. A turn that
    /// belongs to another seat is refused.
    async fn earlier_launch(
        &self,
        request: &LaunchRequest,
        turn_id: &str,
    ) -> Result<Option<LaunchOutcome>, Error> {
        if let Some(run) = self.runs.read(turn_id).await? {
            let record = run.record;
            if record.seat != request.seat {
                return Err(Error::BadRequest(format!(
                    "turn {turn_id} is seat {}'s; launch it for that seat, or under a new turn id",
                    record.seat
                )));
            }
            // the row's job is its latest iteration's: a repeat of an earlier iteration's
            // launch (its reply lost while the run asked, was answered and relaunched) gets
            // the job that launch started, which the ledger remembers (seed 47760)
            let launch_id = if record.iteration == request.iteration {
                record.launch_id
            } else {
                boxfleet_cluster::ledger::earlier_launch(
                    self.store.as_ref(),
                    &self.keys,
                    turn_id,
                    request.iteration,
                )
                .await?
                .unwrap_or(record.launch_id)
            };
            info!(turn_id, launch_id, "sandbox_launch_repeated");
            return Ok(Some(LaunchOutcome::Launched {
                turn_id: turn_id.to_owned(),
                launch_id,
                sandbox_id: record.sandbox_id.unwrap_or_default(),
            }));
        }
        let earlier = boxfleet_cluster::ledger::earlier_launch(
            self.store.as_ref(),
            &self.keys,
            turn_id,
            request.iteration,
        )
        .await?;
        Ok(earlier.map(|launch_id| {
            info!(turn_id, launch_id, "sandbox_launch_repeated");
            LaunchOutcome::Launched {
                turn_id: turn_id.to_owned(),
                launch_id,
                sandbox_id: String::new(),
            }
        }))
    }

    /// A launch that failed after its row opened ends the run (and gives the seat back).
    /// The job was started, but the conversation a resume re-enters did not reach the record
    /// (spec, Failure modes: `suspension_unrecorded`). A run still launching has its box
    /// reclaimed at once and is ended — nothing could collect it; a run no longer launching is
    /// left alone and not announced: a write reported refused can have landed, and that run is
    /// an ordinary suspended one the completion poll resumes.
    async fn suspension_unrecorded(
        &self,
        fence: &Fence,
        turn_id: &str,
        launch_id: &str,
        error: &boxfleet_cluster::runs::RunError,
    ) {
        warn!(turn_id, launch_id, %error, "sandbox_suspension_unrecorded");
        let detail = format!(
            "the turn suspended but the conversation a resume re-enters never reached the run's record: {error}"
        );
        let guard = EndingGuard::Launching {
            launch_id: launch_id.to_owned(),
        };
        self.end_run(
            fence,
            turn_id,
            EndingReason::SuspensionUnrecorded,
            &detail,
            guard,
        )
        .await;
    }

    pub(super) async fn fail_launch(&self, fence: &Fence, turn_id: &str, error: &str) {
        self.end_run(
            fence,
            turn_id,
            EndingReason::LaunchFailed,
            error,
            EndingGuard::Any,
        )
        .await;
    }

    /// The row a launch opens: `launching`, owned by this node, its box's cell (and host, for
    /// a local one) named before the box exists.
    fn launching_record(
        &self,
        request: &LaunchRequest,
        plan: &SandboxPlan,
        (turn_id, launch_id): (&str, &str),
        provider: &dyn Provider,
    ) -> RunRecord {
        let mut record = RunRecord::launching(
            turn_id,
            launch_id,
            &request.seat,
            &request.runner,
            boxfleet_cluster::clock::now(),
        );
        record.iteration = request.iteration;
        // the board's role and agent_id: the seat's, as the company document names them
        // (with no chart the seat is implicit: its id is its handle, and it has no role)
        let company = self.company();
        let seat = company.seat(&request.seat);
        record.role = seat.and_then(|seat| seat.role.clone());
        record.seat_id = Some(
            seat.and_then(|seat| seat.id.clone())
                .unwrap_or_else(|| request.seat.clone()),
        );
        record.brief = request.brief.clone();
        // the task is shown on the board and announced: a secret pasted into a command or a
        // brief is redacted there (the job itself still gets what it was given)
        record.task = boxfleet_redact::redact(if request.task.is_empty() {
            request.command.as_deref().unwrap_or(&request.brief)
        } else {
            &request.task
        });
        record.requester = request.requester.clone();
        record.work_item = request.work_item.clone();
        record.conversation_key = request.conversation_key.clone();
        record.partition = request.partition.clone();
        record.owes_answer = request.owes_answer;
        record.trace = request.trace.clone();
        // the launch's own, else the role's (or the company's) from the plan
        record.pause_ttl_seconds = request.pause_ttl_seconds.or(plan.pause_ttl_seconds);
        record.owner = Some(self.incarnation.clone());
        record.placement = Some(provider.cell().to_owned());
        record.host = self.access.host_of(provider);
        record.boxes_dir = provider.boxes_dir();
        record
    }

    /// What a launch for `seat` runs (runner, cell, model, credentials, setup), decided
    /// before any box exists; a model the box could not route is refused here, and a run
    /// environment with a required value that resolves to nothing in the node's environment
    /// (`sandbox_env_unresolved`, naming keys, files and variables, never a value).
    fn plan(
        &self,
        seat: &str,
        runner: Option<&str>,
        model: Option<&str>,
        last: &str,
    ) -> Result<SandboxPlan, Error> {
        let mut plan = self
            .company()
            .plan_sandbox_or(seat, runner, model, last)
            .map_err(|error| Error::BadRequest(error.to_string()))?;
        match plan.resolve_env(&|name| std::env::var(name).ok()) {
            Ok(notes) => {
                for note in notes {
                    info!(seat, %note, "sandbox_env_identity_left_out");
                }
                Ok(plan)
            }
            Err(missing) => {
                warn!(
                    seat,
                    keys = %missing.keys.join(","),
                    files = %missing.files.join(","),
                    variables = %missing.variables.join(","),
                    "sandbox_env_unresolved"
                );
                Err(missing.into())
            }
        }
    }

    /// A resumed turn's next job (`request`), in the box its run names (`sandbox_id`; none: a
    /// re-seed, in a new box): the extra environment joins the job's, the plan is made again,
    /// and the job is started and named on the row.
    pub(super) async fn start_relaunch(
        &self,
        fence: &Fence,
        (turn_id, new_launch): (&str, &str),
        (provider, runner): (&Arc<dyn Provider>, &dyn Runner),
        sandbox_id: Option<String>,
        mut request: LaunchRequest,
        env: BTreeMap<String, String>,
    ) -> Result<String, Error> {
        // the extra environment goes into the job's environment, never into its command: the
        // command is stored on the run's record, and the environment may carry a secret
        request.env.extend(env);
        let plan = self.plan(
            &request.seat,
            Some(runner.name()),
            request.model.as_deref(),
            "command",
        )?;
        let into = match sandbox_id {
            Some(sandbox_id) => JobBox::Reuse(sandbox_id),
            None => {
                // a re-seed's new box is named on the row before it exists, as a launch's is
                let chosen = provider.new_box_id();
                if let Some(chosen) = &chosen {
                    let name = Transition::AttachBox {
                        launch_id: new_launch.to_owned(),
                        sandbox_id: chosen.clone(),
                        placement: provider.cell().to_owned(),
                        job: None,
                        host: self.access.host_of(provider.as_ref()),
                        boxes_dir: provider.boxes_dir(),
                    };
                    self.runs.apply(fence, turn_id, name).await?;
                    crash::point(crash::RESEED_AFTER_BOX_NAMED);
                }
                JobBox::New(chosen)
            }
        };
        self.provision_and_start(
            fence,
            (turn_id, new_launch),
            (provider, runner),
            &request,
            &plan,
            into,
        )
        .await
    }

    /// Makes (or reuses) the box and starts the job, naming both on the row.
    async fn provision_and_start(
        &self,
        fence: &Fence,
        (turn_id, launch_id): (&str, &str),
        (provider, runner): (&Arc<dyn Provider>, &dyn Runner),
        request: &LaunchRequest,
        plan: &SandboxPlan,
        into: JobBox,
    ) -> Result<String, Error> {
        let (sandbox, fresh): (Arc<dyn Sandbox>, bool) = match &into {
            JobBox::Reuse(sandbox_id) => {
                let sandbox = self
                    .access
                    .box_handle(provider, sandbox_id, BoxOp::Connect)
                    .await?;
                crash::point(crash::RELAUNCH_AFTER_BOX_CONNECTED);
                (sandbox, false)
            }
            JobBox::New(chosen) => {
                let spec = BoxSpec {
                    turn_id: turn_id.to_owned(),
                    seat: request.seat.clone(),
                    env: BTreeMap::new(),
                    timeout_seconds: self.access.box_timeout().as_secs(),
                    sandbox_id: chosen.clone(),
                    launch_id: launch_id.to_owned(),
                    coding_agent: plan.runner.clone(),
                };
                let created = provider.create(&spec).await?;
                crash::point(crash::LAUNCH_AFTER_BOX_CREATED);
                (created, true)
            }
        };
        let sandbox_id = sandbox.id().to_owned();
        let started = self
            .start_job(
                fence,
                (turn_id, launch_id),
                (provider.as_ref(), runner),
                request,
                plan,
                (sandbox.as_ref(), fresh),
            )
            .await;
        if let Err(error) = started {
            // a box this launch made and could not hand to its record is named by nothing:
            // it goes now, or it would run (and bill) until the orphan reaper finds it. A
            // reused box stays: its record names it, and whoever settles the run kills it.
            if fresh {
                match provider.kill(&sandbox_id).await {
                    Ok(()) => info!(turn_id, sandbox_id, "sandbox_launch_box_killed"),
                    Err(kill) => warn!(turn_id, sandbox_id, error = %kill, "sandbox_kill_failed"),
                }
            }
            return Err(error);
        }
        Ok(sandbox_id)
    }

    /// Sets a box up (a new one: its setup steps), installs the runner, seeds a cli-agent's
    /// login, starts the job and names box and job on the row.
    async fn start_job(
        &self,
        fence: &Fence,
        (turn_id, launch_id): (&str, &str),
        (provider, runner): (&dyn Provider, &dyn Runner),
        request: &LaunchRequest,
        plan: &SandboxPlan,
        (sandbox, fresh): (&dyn Sandbox, bool),
    ) -> Result<(), Error> {
        let sandbox_id = sandbox.id().to_owned();
        let mut env = run_environment(plan, &request.seat, (turn_id, launch_id));
        env.extend(request.env.clone());
        // a reused box skips the steps: its provisioning survives with its disk
        if fresh && let Err(text) = apply_setup(sandbox, &plan.setup, &env).await {
            warn!(turn_id, sandbox_id, %text, "sandbox_setup_failed");
            // a half-provisioned box never receives a brief (it is killed by the caller)
            return Err(Error::Setup(text));
        }
        if fresh {
            crash::point(crash::LAUNCH_AFTER_SETUP);
        }
        runner.install(sandbox).await?;
        crash::point(if fresh {
            crash::LAUNCH_AFTER_INSTALL
        } else {
            crash::RELAUNCH_AFTER_INSTALL
        });
        // a cli-agent entry's login, seeded from the shared directory on every launch (a
        // reused box gets the newest) and recorded in the box's records; written back by
        // compare-and-swap at collection and at any teardown
        if let Some(dir) = &plan.login_dir {
            let (files, box_dir): (&[&str], &str) = if plan.runner == "opencode" {
                (
                    &crate::credentials::OPENCODE_FILES,
                    crate::credentials::OPENCODE_BOX_DIR,
                )
            } else {
                (
                    &crate::credentials::CLAUDE_CODE_FILES,
                    crate::credentials::CLAUDE_CODE_BOX_DIR,
                )
            };
            let seeded = crate::credentials::seed(sandbox, dir, files, box_dir).await?;
            // OpenCode imports the exported login before its server starts, and exports it
            // back over the same file while it works
            if plan.runner == "opencode"
                && let Some(login) = seeded.first()
            {
                let path = login
                    .in_box
                    .replacen('~', sandbox.home().trim_end_matches('/'), 1);
                env.insert(crate::credentials::OPENCODE_LOGIN_ENV.to_owned(), path);
            }
        }
        let mut mcp = plan.mcp.servers.clone();
        log_mcp_left_out(turn_id, &plan.mcp.left_out);
        if let Some(endpoints) = self.endpoints() {
            let given = endpoints.for_job(&JobIdentity {
                seat: request.seat.clone(),
                turn_id: turn_id.to_owned(),
                launch_id: launch_id.to_owned(),
                runner: runner.name().to_owned(),
                trace: request.trace.clone(),
            });
            env.extend(given.env);
            mcp.extend(given.mcp);
        }
        let servers: Vec<&str> = mcp.iter().map(|s| s.name.as_str()).collect();
        let spec = LaunchSpec {
            turn_id: turn_id.to_owned(),
            launch_id: launch_id.to_owned(),
            seat: request.seat.clone(),
            brief: environment_brief(&request.brief, &plan.setup, &servers),
            command: request.command.clone(),
            timeout_seconds: request.timeout_seconds,
            model: plan.model.clone(),
            max_turns: request.max_turns.filter(|&n| n > 0).or(plan.max_turns),
            env,
            mcp,
        };
        let handle = runner.start(sandbox, &spec).await?;
        crash::point(if fresh {
            crash::LAUNCH_AFTER_JOB_STARTED
        } else {
            crash::RELAUNCH_AFTER_JOB_STARTED
        });
        let watched_dir = provider.host_path(&sandbox_id, &handle.dir);
        let job = StoredJob {
            runner: runner.name().to_owned(),
            handle,
            command: request.command.clone(),
            timeout_seconds: request.timeout_seconds,
            model: plan.model.clone(),
            started_at: Some(boxfleet_cluster::clock::now()),
        };
        let attach = Transition::AttachBox {
            launch_id: launch_id.to_owned(),
            sandbox_id,
            placement: provider.cell().to_owned(),
            job: Some(job.to_json()),
            host: self.access.host_of(provider),
            boxes_dir: provider.boxes_dir(),
        };
        self.runs.apply(fence, turn_id, attach).await?;
        // the job's end is seen the moment it comes on a box on this host
        if let Some(dir) = watched_dir {
            self.completions.watch(turn_id, dir);
        }
        crash::point(if fresh {
            crash::LAUNCH_AFTER_BOX_NAMED
        } else {
            crash::RELAUNCH_AFTER_JOB_NAMED
        });
        Ok(())
    }
}

/// The run environment a job starts with: the plan's, the seat's handle, the turn, the launch, and for
/// OpenCode its endpoint (which the runner writes into its own config file and takes out of
/// the box's environment).
fn run_environment(
    plan: &SandboxPlan,
    seat: &str,
    (turn_id, launch_id): (&str, &str),
) -> BTreeMap<String, String> {
    let mut env = plan.env.clone();
    env.insert("BOXFLEET_AGENT_HANDLE".to_owned(), seat.to_owned());
    env.insert("BOXFLEET_TURN_ID".to_owned(), turn_id.to_owned());
    // marks every process the job starts, so a recovery can stop what a launch started before
    // its row named the job (Sandbox::kill_launch)
    env.insert(crate::ports::LAUNCH_MARKER.to_owned(), launch_id.to_owned());
    if let Some(url) = plan.base_url.as_ref().filter(|_| plan.runner == "opencode") {
        env.insert("BOXFLEET_OPENCODE_BASE_URL".to_owned(), url.clone());
        let wire = match plan.wire {
            Some(Wire::Anthropic) => "anthropic",
            _ => "openai",
        };
        env.insert("BOXFLEET_OPENCODE_WIRE".to_owned(), wire.to_owned());
    }
    env
}

/// Says which of the role's MCP servers a job is not given, and why: a server whose values do
/// not all resolve is withheld (`sandbox_mcp_server_withheld`, naming the variables), one the
/// company does not carry or of a transport boxfleet does not render is skipped
/// (`sandbox_mcp_server_skipped`). The rest of the role's servers are given all the same.
fn log_mcp_left_out(turn_id: &str, left_out: &[McpLeftOut]) {
    for server in left_out {
        match server {
            McpLeftOut::Withheld { name, variables } => {
                warn!(turn_id, server = %name, variables = %variables.join(","), "sandbox_mcp_server_withheld")
            }
            McpLeftOut::Skipped { name, why } => {
                warn!(turn_id, server = %name, %why, "sandbox_mcp_server_skipped")
            }
        }
    }
}

/// Refuses a wall-clock timeout on a coding run: runs are uncapped (a detached coding job is
/// never force-stopped on a timer); the in-box deadline is the `command` runner's, and the
/// engine's backstop is left only as the bound on a wedged box.
fn uncapped(runner: &str, timeout_seconds: Option<u64>) -> Result<(), Error> {
    if runner == "command" || timeout_seconds.is_none() {
        return Ok(());
    }
    Err(Error::BadRequest(format!(
        "a {runner} run takes no timeout_seconds: a coding run is never stopped on a wall-clock timer (the in-box deadline is the command runner's); leave timeout_seconds at 0 (the CLI: launch it without --timeout)"
    )))
}
