//! The names of a node's actors, made in one place. Every actor's name is namespaced by its
//! node (`{node}/…`), so several nodes can run in one process (the tests do) and `Ops.Tree`
//! can show which node an actor belongs to.

/// The actor names of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRefs {
    node: String,
}

impl NodeRefs {
    pub fn new(node: impl Into<String>) -> Self {
        NodeRefs { node: node.into() }
    }

    /// The node's id.
    pub fn node(&self) -> &str {
        &self.node
    }

    fn named(&self, what: &str) -> String {
        format!("{}/{what}", self.node)
    }

    /// The root supervisor, `node/{id}`.
    pub fn root(&self) -> String {
        format!("node/{}", self.node)
    }
    pub fn session(&self) -> String {
        self.named("session")
    }
    pub fn engines(&self) -> String {
        self.named("engines")
    }
    /// The supervisor of the seat actors (and the placement duty).
    pub fn seats(&self) -> String {
        self.named("seats")
    }
    pub fn placement(&self) -> String {
        self.named("placement")
    }
    /// The supervisor of the box actors.
    pub fn boxes(&self) -> String {
        self.named("boxes")
    }
    /// The supervisor of the run drivers.
    pub fn runs(&self) -> String {
        self.named("runs")
    }
    pub fn collectors(&self) -> String {
        self.named("collectors")
    }
    pub fn board(&self) -> String {
        self.named("board")
    }
    pub fn tail(&self) -> String {
        self.named("tail")
    }
    pub fn api(&self) -> String {
        self.named("api")
    }
    pub fn waiter(&self) -> String {
        self.named("waiter")
    }
    /// `Seat{handle}`.
    pub fn seat(&self, handle: &str) -> String {
        self.named(&format!("seat/{handle}"))
    }
    /// `Run{turn}`.
    pub fn run(&self, turn_id: &str) -> String {
        self.named(&format!("run/{turn_id}"))
    }
    /// `Box{sandbox_id}`.
    pub fn sandbox(&self, sandbox_id: &str) -> String {
        self.named(&format!("box/{sandbox_id}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_under_its_node() {
        let refs = NodeRefs::new("n1");
        assert_eq!(refs.root(), "node/n1");
        assert_eq!(refs.waiter(), "n1/waiter");
        assert_eq!(refs.seat("eng"), "n1/seat/eng");
        assert_eq!(refs.run("turn-1"), "n1/run/turn-1");
        assert_eq!(refs.sandbox("d1"), "n1/box/d1");
    }
}
