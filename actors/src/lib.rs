//! boxfleet's node-local actors and their supervision (DESIGN §7).
//!
//! Built on the store layer of `boxfleet-cluster`; the actor tree (Session, Seats, Runs,
//! Boxes, Waiter, Collectors, TailOwner, Board, Engines, Api) is the next piece of work and
//! lands here.
