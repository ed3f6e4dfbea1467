//! The observable tree that `Ops.Tree` serves: [`tree`] asks a supervisor for its children and
//! walks every nested supervisor into an [`ActorTree`]; a supervisor that does not answer is
//! reported with its `inspect_error` instead of children, and the walk goes on.

use futures::FutureExt;
use futures::future::BoxFuture;
use ractor::ActorRef;
use serde::Serialize;

use super::actor::SupervisorMsg;
use super::client::{inspect, supervisor_name};
use super::report::ChildReport;

/// A supervisor and everything under it, nested supervisors expanded.
#[derive(Debug, Clone, Serialize)]
pub struct ActorTree {
    /// the supervisor's actor name (its id when unnamed)
    pub name: String,
    pub children: Vec<ActorTreeNode>,
    /// why this supervisor's children are missing: it did not answer [`SupervisorMsg::Inspect`]
    pub inspect_error: Option<String>,
}

/// One child in an [`ActorTree`].
#[derive(Debug, Clone, Serialize)]
pub struct ActorTreeNode {
    #[serde(flatten)]
    pub report: ChildReport,
    /// the child's own tree, when it is a running supervisor
    pub subtree: Option<ActorTree>,
}

impl ActorTree {
    /// The report of the child named `name`, anywhere in the tree.
    pub fn find(&self, name: &str) -> Option<&ChildReport> {
        self.children.iter().find_map(|node| {
            if node.report.name == name {
                Some(&node.report)
            } else {
                node.subtree.as_ref().and_then(|tree| tree.find(name))
            }
        })
    }

    /// The subtree of the supervisor child named `name`, anywhere in the tree.
    pub fn subtree(&self, name: &str) -> Option<&ActorTree> {
        self.children.iter().find_map(|node| {
            let subtree = node.subtree.as_ref()?;
            if node.report.name == name {
                Some(subtree)
            } else {
                subtree.subtree(name)
            }
        })
    }
}

/// with its `inspect_error` instead of children; the walk goes on.
pub async fn tree(supervisor: &ActorRef<SupervisorMsg>) -> ActorTree {
    tree_of(supervisor.clone()).await
}

// boxed: the walk recurses
fn tree_of(supervisor: ActorRef<SupervisorMsg>) -> BoxFuture<'static, ActorTree> {
    async move {
        let name = supervisor_name(&supervisor);
        let reports = match inspect(&supervisor).await {
            Ok(reports) => reports,
            Err(err) => {
                return ActorTree {
                    name,
                    children: Vec::new(),
                    inspect_error: Some(err.to_string()),
                };
            }
        };
        let mut children = Vec::with_capacity(reports.len());
        for report in reports {
            let subtree = match &report.cell {
                Some(cell) if report.supervisor => Some(tree_of(cell.clone().into()).await),
                _ => None,
            };
            children.push(ActorTreeNode { report, subtree });
        }
        ActorTree {
            name,
            children,
            inspect_error: None,
        }
    }
    .boxed()
}
